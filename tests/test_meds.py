"""engine/io/meds.py: MEDS Parquet checked against the meds package's DataSchema."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.io.meds import read_meds, shards
from tests.meds_support import HELD_OUT, MEDS_DIR, TRAIN, build_meds, write_shard


def test_fixture_is_valid_meds() -> None:
    import meds

    for path in shards(MEDS_DIR):
        meds.DataSchema.validate(pq.read_table(path))  # raises when not MEDS
    assert [p.relative_to(MEDS_DIR).as_posix() for p in shards(MEDS_DIR)] == [
        "data/held_out/0.parquet",
        "data/train/0.parquet",
    ]


def test_fixture_is_what_the_builder_writes(tmp_path: Path) -> None:
    rebuilt = build_meds(tmp_path / "meds")
    for a, b in zip(shards(MEDS_DIR), shards(rebuilt), strict=True):
        assert pq.read_table(a).equals(pq.read_table(b))


def test_read_with_normalization() -> None:
    data = read_meds(MEDS_DIR, normalize=True)
    assert data.report.ok
    f = data.events.frame
    # shards in path order: held_out first
    assert f["code"].tolist() == ["E11.65", "272.4", "250.00", "401.9", "E11.9", "I48.91", "V45.81", "I10"]
    assert data.events.vocabulary.tolist() == [
        "ICD10CM",
        "ICD9CM",
        "ICD9CM",
        "ICD9CM",
        "ICD10CM",
        "ICD10CM",
        "ICD9CM",
        "ICD10CM",
    ]
    assert f["visit"].tolist()[2:4] == ["2013-04-02", "2013-04-02"]
    assert f["age"].tolist() == [41, 41, 63, 63, 66, 66, 52, 53]
    assert f["patient_id"].astype(str).tolist()[:2] == ["3", "3"]
    assert data.labs["lab"].tolist() == ["LAB//50912//mg/dL", "LOINC/4548-4"]
    kinds = [w.kind for w in data.report.warnings]
    assert kinds == ["other_codes", "normalized_dot"]
    other = data.report.warnings[0]
    assert other.file == "meds/data/train/0.parquet" and other.rows == (3,)
    assert "HOSPITAL_ADMISSION" in other.message
    sp = data.events.spellings
    assert sp.loc[sp["item"] == "250.00", "original"].tolist() == ["25000"]
    ds = data.dataset("meds")
    assert ds.events.n_patients == 3 and ds.events.n_visits == 5


def test_undotted_codes_without_normalization_are_named() -> None:
    data = read_meds(MEDS_DIR)
    (err,) = data.report.errors
    assert err.kind == "code_syntax" and err.column == "code"
    assert "'25000' looks undotted: '250.00'" in err.message


def test_schema_violations_are_named(tmp_path: Path) -> None:
    root = shutil.copytree(MEDS_DIR, tmp_path / "meds")
    write_shard(HELD_OUT, root / "data" / "held_out" / "0.parquet", subject_type="int32")
    (err,) = read_meds(root).report.errors
    assert err.kind == "meds_schema" and err.file == "meds/data/held_out/0.parquet"
    assert err.column == "subject_id" and "want int64, got int32" in err.message


def test_subject_in_two_shards(tmp_path: Path) -> None:
    root = shutil.copytree(MEDS_DIR, tmp_path / "meds")
    write_shard([*HELD_OUT, (1, None, "MEDS_BIRTH", None)], root / "data" / "held_out" / "0.parquet")
    errors = read_meds(root).report.errors
    assert [e.kind for e in errors] == ["subject_in_two_shards"]
    assert errors[0].file == "meds/data/train/0.parquet" and "held_out" in errors[0].message


def test_null_codes_are_named(tmp_path: Path) -> None:
    root = tmp_path / "meds"
    write_shard([*TRAIN[:3], (1, None, None, None)], root / "data" / "0.parquet")
    (err,) = read_meds(root).report.errors
    assert err.kind == "blank_value" and err.rows == (5,) and err.column == "code"


def test_missing_birth_means_no_ages(tmp_path: Path) -> None:
    root = tmp_path / "meds"
    write_shard([r for r in TRAIN if r[2] != "MEDS_BIRTH"], root / "data" / "0.parquet")
    data = read_meds(root, normalize=True)
    assert data.report.ok and "age" not in data.events.frame
    assert "no_birth" in [w.kind for w in data.report.warnings]


@pytest.mark.parametrize("target", ["missing", "empty"])
def test_no_shards(tmp_path: Path, target: str) -> None:
    path = tmp_path / "x"
    if target == "empty":
        path.mkdir()
    (err,) = read_meds(path).report.errors
    assert err.kind == "missing_source"
