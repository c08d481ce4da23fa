"""The synthetic sample in ICD-10-CM and mixed ICD-9-CM / ICD-10-CM (engine/synth/icd10.py, issue 14)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from engine.synth.generator import generate
from engine.synth.icd10 import crosswalk, icd10cm_variants
from engine.vocab import ICD9CM, ICD10CM, phecodes_of_item, vocabulary_of_item

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"


@pytest.fixture(scope="module")
def small():
    events = generate(400, seed=3).events
    return events, *icd10cm_variants(events)


def test_crosswalk_keeps_the_phecode_and_takes_the_first_listed_code() -> None:
    cw = crosswalk(["250.00", "401.9", "427.31", "714.0"]).set_index("icd9")
    assert cw.loc["401.9", "icd10cm"] == "I10"
    assert cw.loc["250.00", "icd10cm"] == "E11.00"  # first billable code of phecode 250.2 in the map
    for icd9, row in cw.iterrows():
        assert row["phecode"] in phecodes_of_item(row["icd10cm"]), icd9
        assert row["rule"] == "first billable FY2026 code"


def test_crosswalk_states_its_fallbacks() -> None:
    cw = crosswalk(["349.31", "564.00"]).set_index("icd9")
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
