"""The shipped sample's planted associations are found by the original-data PheWAS (issue #6), and
a Heatherly release inside PheWAS codes keeps them."""

from __future__ import annotations

import pytest

from engine.anonymize.population import anonymize
from engine.utility import phewas

# SNP -> the phecode of its planted phenotype (sample_data/README.md)
PLANTED = {
    "rs1333049": "411.4",  # 9p21: coronary atherosclerosis
    "rs2200733": "427.2",  # 4q25: atrial fibrillation and flutter
    "rs2476601": "714.1",  # PTPN22: rheumatoid arthritis
    "rs3135388": "335",  # HLA-DRB1*1501 tag: multiple sclerosis
    "rs6457620": "714.1",  # HLA region: rheumatoid arthritis
    "rs17234657": "555.1",  # 5p13.1: Crohn's disease (regional enteritis)
}


@pytest.fixture(scope="module")
def biobank_results(sample_dataset):
    return phewas.phewas_of_records(sample_dataset.group_records("biobank"), sample_dataset.genotypes)


@pytest.mark.parametrize("snp", sorted(PLANTED))
def test_planted_association_found_in_biobank(biobank_results, snp):
    row = biobank_results[(biobank_results.snp == snp) & (biobank_results.phecode == PLANTED[snp])]
    assert len(row) == 1, f"{snp} x {PLANTED[snp]} was not tested"
    row = row.iloc[0]
    assert row.p_bonferroni < 0.01 and row.odds_ratio > 1.2


def test_planted_associations_in_cohort_and_after_generalization(sample_dataset):
    cohort = sample_dataset.group_records("cohort")
    original = phewas.phewas_of_records(cohort, sample_dataset.genotypes)
    release = anonymize(cohort, cohort.patient_ids, 5, scope="cohort").release
    released = phewas.phewas_of_release(release, sample_dataset.genotypes)
    for snp, pc in PLANTED.items():
        o = original[(original.snp == snp) & (original.phecode == pc)]
        r = released[(released.snp == snp) & (released.phecode == pc)]
        assert o.iloc[0].p < 0.01, (snp, pc)
        # generalization stays inside PheWAS codes, so the planted phenotype's cases can only shrink
        # by suppression; the association survives at k = 5
        assert r.iloc[0].n_cases <= o.iloc[0].n_cases and r.iloc[0].p < 0.05, (snp, pc)
