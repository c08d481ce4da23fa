"""Small inputs that would take gigabytes, and malformed study files (issue 25, "Safe to run for a
privacy office"): each is refused with one named error (a `UserError`: CLI exit 2, a message in the
app) before it is read whole. Limits are lowered through their settings (`engine.io.deployment`) so
that the bombs stay small here; bench/bombs.py measures them at full size."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from engine.io.deployment import LimitExceeded
from engine.io.errors import DataError, UserError
from engine.io.loaders import Source, load_events
from engine.study.package import read_study_file, write_package
from engine.study.study import StudyError
from tests.test_study_package import _inputs, _study


def _package() -> bytes:
    return write_package(_study(), _inputs())


def _members(pkg: bytes) -> dict[str, bytes]:
    zf = zipfile.ZipFile(io.BytesIO(pkg))
    return {n: zf.read(n) for n in zf.namelist()}


def _zip(members: list[tuple[str, bytes]], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for name, body in members:
            info = zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0))
            info.compress_type = method
            zf.writestr(info, body)
    return out.getvalue()


def _patch(pkg: bytes, at: tuple[int, int], value: int) -> bytes:
    """Every local header (field at `at[0]`) and central directory entry (`at[1]`) set to `value`."""
    out = bytearray(pkg)
    for sig, off in ((b"PK\x03\x04", at[0]), (b"PK\x01\x02", at[1])):
        pos = out.find(sig)
        while pos >= 0:
            out[pos + off : pos + off + 2] = value.to_bytes(2, "little")
            pos = out.find(sig, pos + 4)
    return bytes(out)


# --------------------------------------------------------------------------------- packages
def test_a_member_that_inflates_beyond_the_limit_is_refused_before_it_is_inflated(monkeypatch):
    monkeypatch.setenv("COHORTSHIELD_MAX_MEMBER_BYTES", str(1 << 20))
    m = _members(_package())
    bomb = [(n, b) for n, b in m.items() if n != "inputs/0"] + [("inputs/0", b"\0" * (8 << 20))]
    with pytest.raises(
        StudyError, match=r"inputs/0.*inflates to 8,388,608 bytes.*COHORTSHIELD_MAX_MEMBER_BYTES"
    ):
        read_study_file(_zip(bomb), "bomb.zip")


def test_a_member_that_differs_from_the_study_is_refused_while_streamed():
    m = _members(_package())
    changed = [(n, b) for n, b in m.items() if n != "inputs/0"] + [("inputs/0", b"\0" * (3 << 20))]
    with pytest.raises(
        StudyError, match=r"'events.csv' \(events\) differs from the file the study was made from"
    ):
        read_study_file(_zip(changed), "changed.zip")


@pytest.mark.parametrize(
    "manifest", [b"[]", b'"a string"', b'{"format": "cohortshield-study-package/1", "inputs": {}}']
)
def test_a_manifest_of_the_wrong_type_is_named(manifest):
    m = _members(_package())
    pkg = _zip([(n, manifest if n == "manifest.json" else b) for n, b in m.items()])
    with pytest.raises(StudyError, match=r"manifest\.json"):
        read_study_file(pkg, "p.zip")


def test_encrypted_members_other_compression_and_corrupt_streams_are_named():
    m = list(_members(_package()).items())
    with pytest.raises(StudyError, match="encrypted"):  # flag bit 0 (encrypted) on every member
        read_study_file(_patch(_zip(m), (6, 8), 1), "enc.zip")
    with pytest.raises(StudyError, match="compression method 9"):  # deflate64 on every member
        read_study_file(_patch(_zip(m, method=zipfile.ZIP_STORED), (8, 10), 9), "m9.zip")
    deflated = bytearray(_zip(m))
    body = deflated.find(b"PK\x03\x04") + 30 + len("study.json")
    deflated[body : body + 40] = b"\xff" * 40  # the deflate stream of study.json, broken
    with pytest.raises(StudyError, match=r"study\.json"):
        read_study_file(bytes(deflated), "corrupt.zip")


def test_a_member_named_twice_is_refused():
    m = _members(_package())
    twice = [*m.items(), ("study.json", m["study.json"])]
    with pytest.warns(UserWarning):  # zipfile warns about the duplicate name it writes
        pkg = _zip(twice)
    with pytest.raises(StudyError, match=r"'study.json' more than once"):
        read_study_file(pkg, "dup.zip")


# --------------------------------------------------------------------------------- study files
def _study_dict() -> dict:
    return json.loads(_study().to_json())


def _refused(d: object, match: str) -> None:
    text = d if isinstance(d, (str, bytes)) else json.dumps(d)
    with pytest.raises(StudyError, match=match):
        read_study_file(text.encode() if isinstance(text, str) else text, "s.json")


def test_a_study_file_beyond_the_size_or_depth_limit_is_refused(monkeypatch):
    monkeypatch.setenv("COHORTSHIELD_MAX_JSON_BYTES", str(1 << 20))
    _refused(_study().to_json() + " " * (2 << 20), "COHORTSHIELD_MAX_JSON_BYTES")
    _refused("[" * 100_000 + "]" * 100_000, r"nested 100,000 deep.*COHORTSHIELD_MAX_JSON_DEPTH")


@pytest.mark.parametrize(
    ("k", "match"),
    [
        ("1e400", "out of range"),
        ("9" * 5000, "5,000 digits"),
        ('"7"', "k must be a whole number"),
        ("5.9", "k must be a whole number"),
        ("true", "k must be a whole number"),
        ("2000000", "k must be"),
    ],
)
def test_k_is_a_whole_number_in_range_never_coerced(k, match):
    text = json.dumps({**_study_dict(), "k": "@K@"}).replace('"@K@"', k)
    _refused(text, match)


def test_verification_and_groups_of_the_wrong_type_are_named():
    from engine.study.runs import GCCensSettings, settings_to_dict

    base = _study_dict()
    release = {
        "name": "r",
        "settings": settings_to_dict(GCCensSettings(k=2)),
        "data": base["data"],
        "files": {},
        "verification": {
            "scope": "cohort",
            "knowledge": "single_visit",
            "k": 2,
            "ok": True,
            "records": 1,
            "below_k": 0,
            "unique": 0,
        },
    }
    for change, match in (
        ({"k": "5"}, "verification.k"),
        ({"scope": "x"}, "scope"),
        ({"ok": 1}, "verification.ok"),
    ):
        bad = {**release, "verification": {**release["verification"], **change}}
        _refused({**base, "releases": [bad]}, match)
    _refused({**base, "releases": [{**release, "files": ["a"]}]}, "files must be an object")
    _refused({**base, "releases": "x"}, "releases must be a list")
    _refused({**base, "data": {**base["data"], "groups": ["a"]}}, "data.groups must be an object")
    _refused({**base, "data": {**base["data"], "inputs": "x"}}, "data.inputs must be an object")
    lda = {"method": "LDA", "k": 2, "age_high": 1_000_000}
    _refused(
        {**base, "releases": [{**release, "settings": lda}]}, r"age_high must be a whole number from 0 to 150"
    )
    gcc = {**settings_to_dict(GCCensSettings(k=2)), "k": 5.9}
    _refused({**base, "releases": [{**release, "settings": gcc}]}, r"k must be a whole number")


# --------------------------------------------------------------------------------- CSV, xlsx
def test_a_long_line_is_refused_where_it_is_before_decoding(monkeypatch, tmp_path):
    monkeypatch.setenv("COHORTSHIELD_MAX_LINE_BYTES", "1000")
    # invalid UTF-8 after the long line: the limit is hit first, so nothing was decoded
    data = b"patient_id,code\np1,250.00\np2," + b"x" * 5000 + b"\n\xff\xfe" * 10
    with pytest.raises(
        DataError, match=r"row 3: a line longer than 1,000 bytes.*COHORTSHIELD_MAX_LINE_BYTES"
    ):
        load_events(("e.csv", data))
    path = tmp_path / "e.csv"
    path.write_bytes(data + b"p3,250.00\n" * 100_000)
    with pytest.raises(LimitExceeded, match="row 3"):
        Source.from_path(path)  # refused while read: the rest of the file is never read


def test_a_file_of_too_many_columns_or_rows_is_refused(monkeypatch):
    wide = (",".join(f"c{i}" for i in range(10_001)) + "\n" + ",".join("1" * 10_001) + "\n").encode()
    with pytest.raises(DataError, match=r"row 1: 10,001 columns, more than 10,000.*COHORTSHIELD_MAX_COLUMNS"):
        load_events(("wide.csv", wide))
    monkeypatch.setenv("COHORTSHIELD_MAX_ROWS", "10")
    with pytest.raises(DataError, match=r"more than 10 rows.*COHORTSHIELD_MAX_ROWS"):
        load_events(("rows.csv", b"patient_id,code\n" + b"p1,250.00\n" * 20))


def test_an_xlsx_whose_parts_inflate_beyond_the_limit_is_not_parsed(monkeypatch):
    from openpyxl import Workbook

    from engine.io.excel import read_xlsx
    from engine.io.validation import ValidationReport

    wb = Workbook()
    ws = wb.active
    ws.append(["patient_id", "code"])
    for i in range(200):
        ws.append([f"p{i}", "a" * 5000 + str(i)])  # 1 MB of cells, deflated to little
    buf = io.BytesIO()
    wb.save(buf)
    monkeypatch.setenv("COHORTSHIELD_MAX_XLSX_BYTES", str(100_000))
    report = ValidationReport()
    assert read_xlsx("bomb.xlsx", buf.getvalue(), report) is None
    assert "parts inflate to" in report.errors[0].message
    assert "COHORTSHIELD_MAX_XLSX_BYTES" in report.errors[0].message
    assert isinstance(LimitExceeded("x"), UserError)


def test_a_padded_study_file_is_refused_before_it_is_read(tmp_path, monkeypatch, capsys) -> None:
    """Issue 25, finding 3: a study.json padded with 1 GiB of spaces was read whole (2.2 GB) and
    accepted; the command line now refuses it by its size, before reading it."""
    from engine.commands.cli import main

    monkeypatch.setenv("COHORTSHIELD_MAX_JSON_BYTES", "1000")
    study = tmp_path / "study.json"
    study.write_bytes(b'{"format": "cohortshield-study/2"' + b" " * 5000 + b"}")
    read = []
    real = type(study).read_bytes
    monkeypatch.setattr(type(study), "read_bytes", lambda self: read.append(self) or real(self))
    assert main(["study", "run", str(study)]) == 2
    err = capsys.readouterr().err
    assert "more than 1,000" in err and "COHORTSHIELD_MAX_JSON_BYTES" in err
    assert study not in read  # never read whole


# --------------------------------------------------------------------------------- folder sources
def test_an_omop_csv_table_with_a_long_line_is_refused_before_pandas_reads_it(monkeypatch, tmp_path):
    """Issue 25: OMOP / i2b2 / MEDS folder tables were read with no limits; a CSV table is streamed
    through the line-length, row and column limits before it is parsed."""
    import shutil

    import pandas as pd

    from engine.io.omop import read_omop
    from tests.omop_support import OMOP_DIR

    monkeypatch.setenv("COHORTSHIELD_MAX_LINE_BYTES", "1000")
    folder = shutil.copytree(OMOP_DIR, tmp_path / "cdm")
    table = folder / "condition_occurrence.csv"
    table.write_bytes(table.read_bytes() + b"99," + b"x" * 5000 + b"\n" + b"\xff" * 10)
    real = pd.read_csv

    def read_csv(path, *a, **k):
        assert "condition_occurrence" not in str(path), "the refused table was parsed"
        return real(path, *a, **k)

    monkeypatch.setattr(pd, "read_csv", read_csv)
    with pytest.raises(
        LimitExceeded,
        match=r"cdm/condition_occurrence\.csv, row 14: a line longer than 1,000 bytes.*COHORTSHIELD_MAX_LINE_BYTES",
    ):
        read_omop(folder)
    assert isinstance(LimitExceeded("x"), UserError)


def test_an_omop_csv_table_of_too_many_rows_or_columns_is_refused(monkeypatch, tmp_path):
    import shutil

    from engine.io.i2b2 import read_i2b2
    from engine.io.omop import read_omop
    from tests.omop_support import OMOP_DIR
    from tests.test_i2b2 import I2B2_DIR

    monkeypatch.setenv("COHORTSHIELD_MAX_ROWS", "8")
    with pytest.raises(LimitExceeded, match=r"omop/condition_occurrence\.csv: more than 8 rows.*MAX_ROWS"):
        read_omop(OMOP_DIR)
    monkeypatch.setenv("COHORTSHIELD_MAX_ROWS", "1000")
    monkeypatch.setenv("COHORTSHIELD_MAX_COLUMNS", "10")
    with pytest.raises(LimitExceeded, match=r"cdm/person\.csv, row 1: 18 columns, more than 10.*MAX_COLUMNS"):
        read_omop(shutil.copytree(OMOP_DIR, tmp_path / "cdm"))
    monkeypatch.setenv("COHORTSHIELD_MAX_COLUMNS", "10000")
    monkeypatch.setenv("COHORTSHIELD_MAX_ROWS", "2")
    with pytest.raises(LimitExceeded, match=r"i2b2/\w+\.csv: more than 2 rows.*MAX_ROWS"):
        read_i2b2(I2B2_DIR)  # i2b2 folders are read by the same reader


def test_a_parquet_omop_table_over_the_row_limit_is_refused_from_its_metadata(monkeypatch, tmp_path):
    import pyarrow.parquet as pq

    from engine.io.omop import read_omop
    from tests.omop_support import build_duckdb, export_parquet

    folder = export_parquet(build_duckdb(tmp_path / "cdm.duckdb"), tmp_path / "parquet")
    assert read_omop(folder).events is not None  # within the default limits
    monkeypatch.setenv("COHORTSHIELD_MAX_ROWS", "8")
    real = pq.read_table

    def read_table(path, *a, **k):
        assert "condition_occurrence" not in str(path), "the refused table's row groups were read"
        return real(path, *a, **k)

    monkeypatch.setattr(pq, "read_table", read_table)
    with pytest.raises(
        LimitExceeded, match=r"condition_occurrence\.parquet: 12 rows, more than 8.*COHORTSHIELD_MAX_ROWS"
    ):
        read_omop(folder)
    monkeypatch.setenv("COHORTSHIELD_MAX_ROWS", "1000")
    monkeypatch.setenv("COHORTSHIELD_MAX_COLUMNS", "10")
    with pytest.raises(LimitExceeded, match=r"person\.parquet: 18 columns, more than 10.*MAX_COLUMNS"):
        read_omop(folder)
    monkeypatch.setenv("COHORTSHIELD_MAX_COLUMNS", "10000")
    monkeypatch.setenv("COHORTSHIELD_MAX_MEMBER_BYTES", "100")
    with pytest.raises(LimitExceeded, match=r"\.parquet: .*uncompressed.*COHORTSHIELD_MAX_MEMBER_BYTES"):
        read_omop(folder)


def test_a_meds_shard_over_the_row_limit_is_refused_from_its_metadata(monkeypatch):
    import pyarrow.parquet as pq

    from engine.io.meds import read_meds
    from tests.meds_support import MEDS_DIR

    monkeypatch.setenv("COHORTSHIELD_MAX_ROWS", "5")
    monkeypatch.setattr(pq, "read_table", lambda *a, **k: pytest.fail("row groups read"))
    with pytest.raises(
        LimitExceeded, match=r"meds/data/train/0\.parquet: 11 rows, more than 5.*COHORTSHIELD_MAX_ROWS"
    ):
        read_meds(MEDS_DIR)
    monkeypatch.setenv("COHORTSHIELD_MAX_ROWS", "12")  # each shard within, the dataset (14 rows) not
    with pytest.raises(LimitExceeded, match=r"meds: 14 rows in its shards, more than 12.*MAX_ROWS"):
        read_meds(MEDS_DIR)


def test_the_import_preview_of_a_folder_table_is_bounded_too(monkeypatch, tmp_path):
    import shutil

    from engine.io.imports import preview
    from tests.meds_support import MEDS_DIR
    from tests.omop_support import OMOP_DIR

    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(tmp_path))
    folder = shutil.copytree(OMOP_DIR, tmp_path / "cdm")
    name, head = preview("omop", location=str(folder), n=3)
    assert name == "condition_occurrence.csv" and len(head) == 3
    monkeypatch.setenv("COHORTSHIELD_MAX_LINE_BYTES", "100")
    with pytest.raises(LimitExceeded, match=r"condition_occurrence\.csv, row 1: a line longer than 100"):
        preview("omop", location=str(folder), n=3)
    monkeypatch.setenv("COHORTSHIELD_MAX_ROWS", "2")
    with pytest.raises(LimitExceeded, match=r"0\.parquet: 3 rows, more than 2.*MAX_ROWS"):
        preview("meds", location=str(shutil.copytree(MEDS_DIR, tmp_path / "meds")))
