"""The synthetic sample in ICD-10-CM and mixed ICD-9-CM / ICD-10-CM (engine/synth/icd10.py, issue 14; its
crosswalk follows CMS' GEMs since issue 26, tests/test_icd10_sample_gems.py checks the shipped sample)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from engine.synth.generator import generate
from engine.synth.icd10 import crosswalk, icd10cm_variants, phecode_crosswalk
from engine.vocab import ICD9CM, ICD10CM, phecodes_of_item, vocabulary_of_item

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"


@pytest.fixture(scope="module")
def small():
    events = generate(400, seed=3).events
    return events, *icd10cm_variants(events)


def test_crosswalk_follows_gems() -> None:
    """GEMs' targets in file order; a combination entry by scenario 1's choice list 1; codes GEMs does
    not map (no-map row, absent, targets all outside FY2026) through the phecode fallback, saying why."""
    cw = crosswalk(["401.9", "250.50", "806.10", "365.72", "428.00", "919.1"])
    targets = cw.groupby("icd9", sort=False)["icd10cm"].agg(list).to_dict()
    rule = cw.groupby("icd9", sort=False)["rule"].first().to_dict()
    assert targets["401.9"] == ["I10"] and rule["401.9"] == "GEMs: the one target"
    assert targets["250.50"] == ["E11.311", "E11.319", "E11.36", "E11.39"]
    assert rule["250.50"] == "GEMs: one of 4 targets per patient"
    assert targets["806.10"] == ["S14.101A"] and rule["806.10"].startswith("GEMs combination, scenario 1")
    assert rule["365.72"].startswith("GEMs: no-map; phecode fallback: ")
    assert rule["428.00"].startswith("not in GEMs; phecode fallback: ")
    assert rule["919.1"].startswith(
        "GEMs combination, scenario 1 choice list 1: no target in the FY2026 list;"
    )
    assert (cw["icd10cm"] != "").all()
    fb = phecode_crosswalk(["365.72", "428.00", "919.1"]).set_index("icd9")["icd10cm"].to_dict()
    assert all(targets[c] == [fb[c]] for c in fb)


def test_patients_of_a_code_spread_over_its_gems_targets() -> None:
    """Each patient's 250.50 becomes one of its four targets, the same in every visit; patients split."""
    events = pd.DataFrame(
        {
            "patient_id": [f"P{i:03d}" for i in range(200) for _ in range(2)],
            "visit": [v for _ in range(200) for v in (1, 2)],
            "code": "250.50",
            "age": 50,
        }
    )
    icd10 = icd10cm_variants(events)[0]
    per_patient = icd10.groupby("patient_id")["code"].nunique()
    assert (per_patient == 1).all()
    shares = icd10.drop_duplicates("patient_id")["code"].value_counts(normalize=True)
    assert set(shares.index) == {"E11.311", "E11.319", "E11.36", "E11.39"}
    assert shares.max() < 0.4  # about 1/4 each; the earlier rule sent everyone to one code


def test_phecode_fallback_keeps_the_phecode_and_takes_the_first_listed_code() -> None:
    cw = phecode_crosswalk(["250.00", "401.9", "427.31", "714.0"]).set_index("icd9")
    assert cw.loc["401.9", "icd10cm"] == "I10"
    assert cw.loc["250.00", "icd10cm"] == "E11.00"  # first billable code of phecode 250.2 in the map
    for icd9, row in cw.iterrows():
        assert row["phecode"] in phecodes_of_item(row["icd10cm"]), icd9
        assert row["rule"] == "first billable FY2026 code"


def test_phecode_fallback_states_its_fallbacks() -> None:
    cw = phecode_crosswalk(["349.31", "564.00"]).set_index("icd9")
    assert cw.loc["564.00", "rule"].endswith("nearest phecode of the same category")
    assert cw.loc["349.31", "rule"].endswith("(any category)")
    assert (cw["icd10cm"] != "").all()


def test_variants_keep_patients_visits_and_ages(small) -> None:
    events, icd10, mixed, cw = small
    for variant in (icd10, mixed):
        assert list(variant.columns) == list(events.columns)
        pd.testing.assert_frame_equal(
            variant.drop(columns="code"), events.drop(columns="code"), check_dtype=False
        )
    assert {vocabulary_of_item(c) for c in icd10["code"]} == {ICD10CM}
    assert {vocabulary_of_item(c) for c in mixed["code"]} == {ICD9CM, ICD10CM}
    # mixed: a patient's later half of visits is ICD-10-CM
    last = mixed.groupby("patient_id")["visit"].transform("max")
    late = mixed[mixed["visit"] > last // 2]
    assert {vocabulary_of_item(c) for c in late["code"]} == {ICD10CM}
    assert set(cw["icd9"]) == set(events["code"])


def test_variants_are_deterministic() -> None:
    events = generate(200, seed=5).events
    a, b = icd10cm_variants(events), icd10cm_variants(events)
    for x, y in zip(a, b, strict=True):
        pd.testing.assert_frame_equal(x, y)


def test_shipped_variants_match_the_sample_and_load() -> None:
    from engine.io.loaders import load_events

    events = pd.read_parquet(SAMPLE / "events.parquet")
    for name, vocabularies in (("icd10cm", {ICD10CM}), ("mixed", {ICD9CM, ICD10CM})):
        loaded = load_events(SAMPLE / name / "events.parquet")
        assert not loaded.report.errors
        frame = loaded.data
        assert len(frame) == len(events)
        assert set(frame["patient_id"]) == set(events["patient_id"])
        assert {vocabulary_of_item(c) for c in frame["code"].unique()} == vocabularies
    cw = pd.read_csv(SAMPLE / "icd10cm" / "crosswalk.csv", dtype=str, keep_default_na=False)
    assert set(cw["icd9"]) == set(events["code"]) and (cw["icd10cm"] != "").all()


def test_sample_command_refuses_unknown_formats(tmp_path) -> None:
    from engine.commands.cli import main

    assert main(["sample", "--out", str(tmp_path), "--patients", "5", "--formats", "icd10cm,xml"]) == 2
