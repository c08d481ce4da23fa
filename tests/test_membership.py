"""Membership inference on released PheWAS statistics (issue 28, engine/utility/membership.py).

The construction: 800 people, 400 independent SNPs (minor-allele frequencies 0.1-0.5, no
association), each person with one of five diagnoses (phecodes 250.2, 401.1, 714.1, 427.2, 340);
the first 400 are the cohort, the rest the population outside it. The cohort's PheWAS (at least 5
cases per test) is released; pools of ~80 cases against 400 SNPs let the presence test find members
far above chance (0.48 at 5% false positives; 0.335 before the attack left out the control pools).
Each option of the officer then lowers the detection rate: coarser frequencies (slightly: a member
moves a pool of 80 by ~0.006, rounding to 0.01 keeps most of it), fewer rows, and bigger cells (no
pool under 100 people: here no row is left, and the attack is a coin, flagging 5%)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.disclosure.cells import SmallCellPolicy
from engine.records import Records
from engine.utility import membership
from engine.utility.phewas import PhewasSettings, phewas_of_records

CODES = ["250.00", "401.1", "714.0", "427.31", "340"]


@pytest.fixture(scope="module")
def world():
    rng = np.random.default_rng(7)
    n, m = 800, 400
    ids = [f"P{i:04d}" for i in range(n)]
    rows = []
    for pid in ids:
        for c in rng.choice(CODES, size=1):
            rows.append({"patient_id": pid, "code": c})
    events = Records.from_frame(pd.DataFrame(rows))
    maf = rng.uniform(0.1, 0.5, m)
    geno = pd.DataFrame(rng.binomial(2, maf, size=(n, m)).astype(float), columns=[f"rs{j}" for j in range(m)])
    geno.insert(0, "patient_id", ids)
    cohort = events.subset(np.array(ids[:400]))
    table = phewas_of_records(cohort, geno, PhewasSettings(min_cases=5))
    return events, cohort, geno, table


def test_power_falls_as_the_options_are_applied(world):
    events, cohort, geno, table = world
    results = membership.assess({"original": table}, cohort, events, geno, SmallCellPolicy.preset("aou"))
    power = {r.option.split(":")[0].split(" (")[0]: r.power for r in results["original"]}
    assert results["original"][0].members == 400 and results["original"][0].non_members > 150
    assert "outside the cohort" in results["original"][0].reference
    base = power["as computed"]
    assert base > 0.3  # six times the 5% a blind guess achieves
    assert power["coarser statistics"] < base
    assert power["fewer rows"] < base
    # no pool of >= 100 cases and controls: nothing left to test, every target flagged with chance 5%
    assert power["bigger cells"] == pytest.approx(membership.FPR)
    assert power["all options together"] == pytest.approx(membership.FPR)
    frame = membership.results_frame(results)
    assert list(frame.columns[:3]) == ["table", "option", "rows"]


def test_non_members_alone_set_the_threshold(world):
    events, cohort, geno, table = world
    members, non, panel, _ = membership.targets_of(cohort, events, geno)
    assert not set(non.patient_ids) & set(cohort.patient_ids)
    assert not set(panel.patient_ids) & set(non.patient_ids)
    r = membership.attack(table.iloc[:0], members, non, geno, panel)
    # nothing released: the test is a coin, flagging members and non-members alike at the 5% level
    assert r.rows == 0 and r.power == pytest.approx(membership.FPR)
    assert r.non_member_rate == pytest.approx(membership.FPR)


def test_each_target_is_tested_against_the_null_genotypes_in_its_place():
    """`flag_rates` by hand: one SNP, null genotypes (centred) -1, 0, 1, 2, so a target with weight 1
    scores its own centred genotype and each null genotype its own. At level 0.3: a score of 2 is above
    the other three (flagged), 1 has 0.25 above and 0.25 tied (flagged with chance (0.3 - 0.25) / 0.25
    = 0.2), 0 has half above (never). A target no row concerns (weight 0) ties with every null genotype:
    a coin at the level. Left out of their own null, the null genotypes as targets: 2 has none of three
    above (flagged), 1 one of three (1/3 > 0.3: never)."""
    null = np.array([[-1.0], [0.0], [1.0], [2.0]])
    w = np.array([[1.0], [1.0], [1.0], [0.0]])
    y = np.array([[2.0], [1.0], [0.0], [1.0]])
    assert membership.flag_rates(w, y, null, 0.3, leave_out=False) == pytest.approx([1.0, 0.2, 0.0, 0.3])
    out = membership.flag_rates(np.ones((4, 1)), null, null, 0.3, leave_out=True)
    assert out == pytest.approx([0.0, 0.0, 0.0, 1.0])


def test_without_patients_outside_the_cohort_power_is_understated(world):
    """With genotypes of the cohort alone, a held-out half of it stands in for the panel and the
    non-members, and the words say the power is understated: they are in the table's pools. They must
    not be the panel and the null at once: the panel's frequencies hold their own alleles, which
    depressed their statistics as a null and overstated the power (0.92 here, against 0.48 with patients
    outside the cohort)."""
    events, cohort, geno, table = world
    outside = membership.assess({"t": table}, cohort, events, geno)["t"][0]
    inside = membership.assess({"t": table}, cohort, cohort, geno)["t"][0]
    assert "understated" in inside.reference and inside.members + inside.non_members < 400
    members, non, panel, _ = membership.targets_of(cohort, cohort, geno)
    assert not set(panel.patient_ids) & set(non.patient_ids)
    assert not (set(panel.patient_ids) | set(non.patient_ids)) & set(members.patient_ids)
    assert membership.FPR < inside.power < outside.power
