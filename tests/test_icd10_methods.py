"""Every method (engine.study.runs settings .run) on ICD-10-CM and on mixed ICD-9-CM / ICD-10-CM data,
each release verified by engine.risk under the method's adversary (issue 14)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.records import Records
from engine.risk import verify
from engine.study.runs import (
    PAPER_CODES,
    PAPER_CODES_ICD10CM,
    CodeSelection,
    GCCensSettings,
    HeatherlySettings,
    LDASettings,
    ProfilesSettings,
    RunInputs,
    paper_codes_for,
)

# ICD-10-CM codes, and for the mixed fixture the ICD-9-CM code of the same condition
ICD10_TO_9 = {
    "E11.9": "250.00",
    "E78.5": "272.4",
    "I10": "401.9",
    "M54.2": "723.1",
    "J45.909": "493.90",
    "I48.91": "427.31",
    "F32.9": "311",
    "K21.9": "530.81",
    "E11.65": "250.02",
    "C50.911": "174.9",
}
CODES = list(ICD10_TO_9)


def _events(n: int, mixed: bool, seed: int = 7) -> pd.DataFrame:
    """n patients, 1-3 visits of 1-3 codes each, ages 40-79; in the mixed fixture visits before
    2015-10 (the first visit of every other patient) are coded in ICD-9-CM."""
    rng = np.random.default_rng(seed)
    weights = np.linspace(3, 1, len(CODES))
    weights /= weights.sum()
    rows = []
    for i in range(n):
        pid = f"P{i:03d}"
        age = int(rng.integers(40, 80))
        for v in range(int(rng.integers(1, 4))):
            for c in rng.choice(CODES, size=int(rng.integers(1, 4)), replace=False, p=weights):
                code = ICD10_TO_9[c] if mixed and v == 0 and i % 2 == 0 else str(c)
                rows.append((pid, v + 1, code, age + v))
    return pd.DataFrame(rows, columns=["patient_id", "visit", "code", "age"])


@pytest.fixture(scope="module", params=["icd10cm", "mixed"])
def inputs(request) -> RunInputs:
    events = _events(90, request.param == "mixed")
    population = Records.from_frame(events)
    cohort_ids = population.patient_ids[:60]
    cohort = Records.from_frame(events[events["patient_id"].isin(cohort_ids)])
    return RunInputs(population=population, cohort=cohort)


def _verified(settings, inputs: RunInputs) -> None:
    release = settings.run(inputs)
    assert release.records.n_patients > 0
    population = inputs.population if settings.adversary.scope == "population" else None
    v = verify(release, settings.adversary, settings.k, population)
    assert v.ok, v.message


@pytest.mark.parametrize("mode", ["paper", "top"])
def test_gccens_runs_and_verifies(inputs: RunInputs, mode: str) -> None:
    settings = GCCensSettings(k=3, codes=CodeSelection(mode, top_n=4))
    _verified(settings, inputs)


def test_gccens_paper_codes_are_the_icd10cm_categories_on_icd10cm_data(inputs: RunInputs) -> None:
    release = GCCensSettings(k=3).run(inputs)
    released = set(map(str, release.records.items))
    mixed = any(c[0].isdigit() for c in map(str, inputs.cohort.items))
    expected = set(PAPER_CODES_ICD10CM) | (set(PAPER_CODES) if mixed else set())
    assert released and released <= expected
    assert "E11" in released
    assert release.item_codes["E11"] == frozenset({"E11.9", "E11.65"})


def test_paper_codes_follow_the_vocabularies() -> None:
    assert paper_codes_for(["250.00", "401.1"]) == PAPER_CODES
    assert paper_codes_for(["E11.9", "I10"]) == PAPER_CODES_ICD10CM
    assert paper_codes_for(["E11.9", "401.1"]) == PAPER_CODES + PAPER_CODES_ICD10CM
    assert PAPER_CODES_ICD10CM == ("E11", "E78", "I10", "M54")


@pytest.mark.parametrize("constraints", ["phecode", "icd9:3-digit", "icd9:chapter", "none"])
def test_heatherly_runs_and_verifies(inputs: RunInputs, constraints: str) -> None:
    _verified(HeatherlySettings(k=3, constraints=constraints), inputs)


@pytest.mark.parametrize("algorithm", ["UGACLIP", "ACLIP"])
def test_profiles_run_and_verify(inputs: RunInputs, algorithm: str) -> None:
    _verified(ProfilesSettings(algorithm=algorithm, k=3), inputs)


@pytest.mark.parametrize("hierarchy", ["icd9-thesis", "icd9-4digit", "phecode"])
def test_lda_runs_and_verifies(inputs: RunInputs, hierarchy: str) -> None:
    settings = LDASettings(k=3, codes=CodeSelection("top", top_n=4), icd_hierarchy=hierarchy, age_high=128)
    _verified(settings, inputs)


def test_lda_paper_codes_roll_up_to_icd10cm_categories(inputs: RunInputs) -> None:
    settings = LDASettings(k=3)
    traj = settings.trajectories(inputs.cohort)
    assert {"E11", "I10"} <= set(map(str, traj.codes))
    _verified(settings, inputs)


def test_heatherly_groups_icd10cm_codes_by_phecode_and_category() -> None:
    from engine.anonymize.population import utility_groups

    codes = ["E11.9", "E11.65", "250.00", "I10", "401.9", "A07.8", "008.5", "136.9"]
    g = dict(zip(codes, utility_groups(codes, "phecode").tolist(), strict=True))
    assert g["E11.9"] == g["E11.65"] == g["250.00"]  # phecode 250.2 in both vocabularies
    assert g["I10"] == g["401.9"]  # phecode 401.1
    # A07.8 maps to 008, 136 and 008.7: it counts under the lowest, 008 (not 136)
    assert g["A07.8"] != g["136.9"]
    c = dict(zip(codes, utility_groups(codes, "icd9:3-digit").tolist(), strict=True))
    assert c["E11.9"] == c["E11.65"] != c["250.00"]  # category E11; vocabularies kept apart
    s = dict(zip(codes, utility_groups(codes, "icd9:section").tolist(), strict=True))
    assert s["E11.9"] == s["E11.65"] and s["I10"] != s["E11.9"]


def test_primary_phecode_rule() -> None:
    from engine.vocab import phecodes_of_item, primary_phecode_of_item

    assert set(phecodes_of_item("A07.8")) == {"008", "136", "008.7"}
    assert primary_phecode_of_item("A07.8") == "008"
    assert primary_phecode_of_item("E11.9") == "250.2"
    assert primary_phecode_of_item("Z99.ZZ") is None


def test_lda_hierarchy_follows_the_vocabulary() -> None:
    from engine.hierarchy import Hierarchy

    icd, _ = LDASettings().hierarchies(["E11", "I10", "E78"])
    assert icd.parent("E11") == "E08-E13" and icd.parent("E11.65") == "E11"  # thesis: no 4-digit level
    mixed, _ = LDASettings(icd_hierarchy="icd9-4digit").hierarchies(["E11.9", "250.00"])
    assert mixed.lca("E11.9", "250.00") == "Any"
    phe, _ = LDASettings(icd_hierarchy="phecode").hierarchies(["E11.9", "250.00"])
    assert phe.parent("E11.9") == phe.parent("250.00") == "phe:250.2"
    assert "E11.9" not in Hierarchy.phecodes()  # the ICD-9 phecode tree is unchanged


def test_default_utility_policy_in_icd10cm_and_mixed() -> None:
    from engine.utility.queries import default_utility_policy, read_utility_policy

    icd9 = read_utility_policy()
    icd10 = default_utility_policy(["E11.9", "I10"])
    assert list(icd10.diseases) == list(icd9.diseases)  # the same 18 diseases, same order
    assert len(icd10.diseases) == 18
    assert {"E11.9", "E11.65"} <= icd10.diseases["Diabetes mellitus type 2"]
    assert "E10.9" in icd10.diseases["Diabetes mellitus type 1"]
    assert "D57.3" not in icd10.diseases["Sickle-cell disease"]  # trait excluded, as 282.5
    assert "F31.81" not in icd10.diseases["Bipolar I disorder"]  # bipolar II excluded
    all_codes = [c for cs in icd10.diseases.values() for c in cs]
    assert len(all_codes) == len(set(all_codes))  # diseases disjoint
    mixed = default_utility_policy(["E11.9", "250.00"])
    assert {"250.00", "E11.9"} <= mixed.diseases["Diabetes mellitus type 2"]
    assert default_utility_policy(["250.00"]).diseases == icd9.diseases


def test_icd10cm_policy_reader_names_bad_codes() -> None:
    import io

    from engine.io.errors import DataError
    from engine.utility.queries import read_utility_policy

    text = "disease,icd10cm_codes\nDiabetes,E11.9 E11.65\nBad,250.00 E11.9X\n"
    with pytest.raises(DataError) as err:
        read_utility_policy(io.StringIO(text), name="p.csv")
    msg = str(err.value)
    assert "p.csv" in msg and "250.00" in msg and "icd10cm_codes" in msg
    ok = read_utility_policy(io.StringIO("disease,icd10cm_codes\nDiabetes,E11.9 E11.65\n"), name="p.csv")
    assert ok.diseases["Diabetes"] == frozenset({"E11.9", "E11.65"})


def test_ugaclip_keeps_diabetes_on_icd10cm(inputs: RunInputs) -> None:
    from engine.utility.queries import utility_satisfaction

    settings = ProfilesSettings(k=3)
    release = settings.run(inputs)
    table = utility_satisfaction(inputs.cohort, release, settings.utility_policy(inputs.cohort.items))
    before = dict(zip(table["disease"], table["original_records"], strict=True))
    # the default policy sees the ICD-10-CM codes (the ICD-9-CM policy alone would count none)
    for disease in ("Diabetes mellitus type 2", "Asthma", "Breast cancer"):
        assert before[disease] > 0


@pytest.mark.parametrize(
    "settings",
    [GCCensSettings(k=3), HeatherlySettings(k=3), ProfilesSettings(k=3), LDASettings(k=3)],
    ids=lambda s: s.method,
)
def test_every_run_carries_its_source(inputs: RunInputs, settings) -> None:
    """The one way to run a method gives the release with the input it was made from (`source`), as
    the download helper requires (issue 17); LDA's source is the cohort's (code, age) pairs."""
    release = settings.run(inputs)
    assert release.source is not None
    assert set(map(str, release.source.patient_ids)) == set(map(str, inputs.cohort.patient_ids))
