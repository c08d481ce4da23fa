"""Inputs bounded by what they expand to (issue 40, findings 2 and 8): a Parquet file or MEDS shard
of run-length-encoded rows, a study package whose member inflates a thousandfold or that holds
100,000 members. Each is refused with a `UserError` naming the file and the limit, from metadata,
before a row group is read or a member inflated. The bombs are scaled down here (limits lowered
through their settings, or the expansion floor); bench/bombs.py measures them at the issue's size."""

from __future__ import annotations

import hashlib
import io
import json
import time
import zipfile

import pandas as pd
import pytest

from engine.io import limits as limits_module
from engine.io.deployment import LimitExceeded
from engine.io.errors import DataError
from engine.io.loaders import load_events, load_uploaded
from engine.study.package import read_study_file, write_package
from engine.study.study import StudyError
from tests.test_study_package import _inputs, _study


def _rle_parquet(rows: int, **columns: object) -> bytes:
    """`rows` rows repeating one value per column: a few KB however many rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = columns or {"patient_id": "p1", "visit": 1, "code": "250.00"}
    buf = io.BytesIO()
    pq.write_table(pa.table({k: pa.array([v] * rows) for k, v in columns.items()}), buf, compression="zstd")
    return buf.getvalue()


@pytest.fixture
def no_row_group_read(monkeypatch):
    """pyarrow's readers of row groups fail the test: a refusal must come from the footer."""
    import pyarrow.parquet as pq

    def read(*_a, **_k):
        pytest.fail("a row group was read")

    monkeypatch.setattr(pq, "read_table", read)
    monkeypatch.setattr(pq.ParquetFile, "read", read)


# ------------------------------------------------------------------------------------- Parquet
def test_a_parquet_of_run_length_encoded_rows_is_refused_from_its_footer_on_upload(
    monkeypatch, no_row_group_read
):
    monkeypatch.setattr(limits_module, "EXPANSION_FLOOR", 1 << 20)  # the 20 M rows, scaled down
    bomb = _rle_parquet(200_000)  # 4.8 MB decoded from a few KB
    with pytest.raises(
        DataError,
        match=r"events\.parquet: 4,\d{3},\d{3} bytes decoded from [\d,]+ stored, [\d,]+ times, more than 250 "
        r"\(the limit COHORTSHIELD_MAX_EXPANSION\); no row was read",
    ):
        load_uploaded(("events.parquet", bomb))


@pytest.mark.parametrize(
    ("setting", "value", "figure"),
    [
        ("COHORTSHIELD_MAX_ROWS", 10_000, r"20,000 rows, more than 10,000"),
        ("COHORTSHIELD_MAX_CELLS", 50_000, r"60,000 cells \(rows x columns read\), more than 50,000"),
        ("COHORTSHIELD_MAX_DECODED_BYTES", 100_000, r"4\d\d,\d{3} bytes decoded, more than 100,000"),
    ],
)
def test_a_parquet_over_the_row_cell_or_decoded_limit_is_refused_by_name_on_the_command_line(
    monkeypatch, tmp_path, no_row_group_read, setting, value, figure
):
    path = tmp_path / "events.parquet"
    path.write_bytes(_rle_parquet(20_000))
    monkeypatch.setenv(setting, str(value))
    with pytest.raises(DataError, match=rf"events\.parquet: {figure} \(the limit {setting}\)"):
        load_events(path)


def test_the_command_line_names_a_parquet_bomb_and_exits_2(monkeypatch, tmp_path, capsys):
    from engine.commands.cli import main

    path = tmp_path / "events.parquet"
    path.write_bytes(_rle_parquet(20_000))
    monkeypatch.setenv("COHORTSHIELD_MAX_CELLS", "1000")
    args = ["risk", "--events", str(path), "--scope", "cohort", "--knowledge", "single_visit"]
    assert main([*args, "--out", str(tmp_path / "risk.csv")]) == 2
    err = capsys.readouterr().err
    assert "events.parquet: 60,000 cells" in err and "COHORTSHIELD_MAX_CELLS" in err
    assert "Traceback" not in err


# ---------------------------------------------------------------------------------- packages
def _members(pkg: bytes) -> dict[str, bytes]:
    zf = zipfile.ZipFile(io.BytesIO(pkg))
    return {n: zf.read(n) for n in zf.namelist()}


def _zip(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, body in members:
            zf.writestr(zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0)), body, zipfile.ZIP_DEFLATED)
    return out.getvalue()


def _recording(events: bytes) -> list[tuple[str, bytes]]:
    """A package's members whose study.json records the real sha256 of `events` as inputs/0: the
    issue's bomb, which no sha256 mismatch stops."""
    m = _members(write_package(_study(), _inputs()))
    study = json.loads(m["study.json"])
    study["data"]["inputs"]["events.csv"] = hashlib.sha256(events).hexdigest()
    m["study.json"], m["inputs/0"] = json.dumps(study).encode(), events
    return list(m.items())


def _declare(pkg: bytes, member: str, size: int) -> bytes:
    """`member`'s uncompressed size in its local header and central directory entry set to `size`."""
    out, name = bytearray(pkg), member.encode()
    for sig, off in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        pos = out.find(sig)
        while pos >= 0:
            start = pos + (30 if sig == b"PK\x03\x04" else 46)
            if out[start : start + len(name)] == name:
                out[pos + off : pos + off + 4] = size.to_bytes(4, "little")
            pos = out.find(sig, pos + 4)
    return bytes(out)


def test_a_member_declaring_600_mib_is_refused_by_the_default_limit_before_it_is_inflated():
    pkg = _declare(_zip(_recording(b"patient_id,code\np1,250.00\n")), "inputs/0", 600 << 20)
    with pytest.raises(
        StudyError,
        match=r"big\.zip: the member 'inputs/0' inflates to 629,145,600 bytes, more than 536,870,912 "
        r"\(the limit COHORTSHIELD_MAX_MEMBER_BYTES\); not read",
    ):
        read_study_file(pkg, "big.zip")


def test_a_member_of_zeros_whose_sha256_the_study_records_is_refused_by_its_expansion(monkeypatch):
    monkeypatch.setattr(limits_module, "EXPANSION_FLOOR", 1 << 20)  # the 1.9 GiB, scaled down
    pkg = _zip(_recording(b"\0" * (4 << 20)))
    with pytest.raises(
        StudyError,
        match=r"zeros\.zip: the member 'inputs/0' inflates [\d,]+ bytes to 4,194,304, [\d,]+ times, more "
        r"than 250 \(the limit COHORTSHIELD_MAX_EXPANSION\); not read",
    ):
        read_study_file(pkg, "zeros.zip")


def _many(n: int) -> bytes:
    """A package of `n` members besides its own, the last one's name given twice."""
    members = [*_members(write_package(_study(), _inputs())).items()]
    members += [(f"extra/{i}", b"x") for i in range(n - 1)] + [(f"extra/{n - 2}", b"x")]
    with pytest.warns(UserWarning):  # zipfile warns about the duplicate name it writes
        return _zip(members)


def test_a_package_of_too_many_members_is_refused_before_its_directory_is_parsed(monkeypatch):
    pkg = _many(1_200)
    monkeypatch.setattr(zipfile, "ZipFile", lambda *a, **k: pytest.fail("the directory was parsed"))
    with pytest.raises(
        StudyError,
        match=r"many\.zip: 1,204 zip members, more than 1,000 \(the limit COHORTSHIELD_MAX_ZIP_MEMBERS\)",
    ):
        read_study_file(pkg, "many.zip")


def test_a_duplicate_among_66000_members_is_found_in_linear_time(monkeypatch):
    """The issue's 100,000 members took 214 s of CPU (a count per name); 40,000 took 18 s here. Past
    65,535 members the zip records its count in the zip64 end record, read as well."""
    pkg = _many(66_000)  # 66,004 members with the package's own
    monkeypatch.setenv("COHORTSHIELD_MAX_ZIP_MEMBERS", "66003")
    with pytest.raises(StudyError, match=r"dup\.zip: 66,004 zip members, more than 66,003"):
        read_study_file(pkg, "dup.zip")
    monkeypatch.setenv("COHORTSHIELD_MAX_ZIP_MEMBERS", "1000000")
    start = time.process_time()
    with pytest.raises(StudyError, match=r"dup\.zip: the package holds 'extra/65998' more than once"):
        read_study_file(pkg, "dup.zip")
    assert time.process_time() - start < 3


# ---------------------------------------------------------------------------------------- MEDS
def test_a_meds_shard_of_run_length_encoded_rows_is_refused_from_its_footer(
    monkeypatch, tmp_path, no_row_group_read
):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from engine.io.meds import read_meds

    monkeypatch.setattr(limits_module, "EXPANSION_FLOOR", 1 << 20)  # the 0.62 MB shard, scaled down
    n = 200_000
    table = pa.table(
        {
            "subject_id": pa.array([1] * n, pa.int64()),
            "time": pa.array([0] * n, pa.timestamp("us")),
            "code": pa.array(["ICD//9//25000"] * n),
        }
    )
    (tmp_path / "data").mkdir()
    pq.write_table(table, tmp_path / "data" / "0.parquet", compression="zstd")
    with pytest.raises(
        LimitExceeded,
        match=r"data/0\.parquet: 4,\d{3},\d{3} bytes decoded from [\d,]+ stored, [\d,]+ times, more than 250 "
        r"\(the limit COHORTSHIELD_MAX_EXPANSION\)",
    ):
        read_meds(tmp_path)


def test_meds_shards_each_within_the_cell_limit_are_refused_together(monkeypatch, no_row_group_read):
    from engine.io.meds import read_meds
    from tests.meds_support import MEDS_DIR

    monkeypatch.setenv("COHORTSHIELD_MAX_CELLS", "40")  # shards of 33 and 9 cells (3 columns read)
    with pytest.raises(
        LimitExceeded,
        match=r"meds: 42 cells \(rows x columns read\) in its shards, more than 40 \(the limit "
        r"COHORTSHIELD_MAX_CELLS\); no row was read",
    ):
        read_meds(MEDS_DIR)


# ---------------------------------------------------------------------------------------- xlsx
def _workbook(rows: int, extra: dict[str, bytes] | None = None, dimension: str | None = "keep") -> bytes:
    """An xlsx of a header and `rows` rows of (patient_id, code), with `extra` parts; its sheet's
    `<dimension>` kept, replaced by `dimension` or (None) removed."""
    import re

    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.append(["patient_id", "code"])
    for i in range(rows):
        ws.append([f"p{i}", "250.00"])
    buf = io.BytesIO()
    wb.save(buf)
    out = io.BytesIO()
    with zipfile.ZipFile(buf) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            body = src.read(info)
            if info.filename == "xl/worksheets/sheet1.xml" and dimension != "keep":
                tag = b"" if dimension is None else f'<dimension ref="{dimension}"/>'.encode()
                body = re.sub(rb"<dimension [^>]*/>", tag, body)
            dst.writestr(info.filename, body)
        for name, body in (extra or {}).items():
            dst.writestr(name, body)
    return out.getvalue()


@pytest.fixture
def no_workbook_parsed(monkeypatch):
    import openpyxl

    monkeypatch.setattr(openpyxl, "load_workbook", lambda *a, **k: pytest.fail("the workbook was parsed"))


def test_an_xlsx_part_that_inflates_a_thousandfold_is_refused_before_the_workbook_is_parsed(
    monkeypatch, no_workbook_parsed
):
    monkeypatch.setattr(limits_module, "EXPANSION_FLOOR", 1 << 20)  # within max_xlsx_bytes, scaled down
    bomb = _workbook(2, {"xl/media/pad.bin": b"\0" * (4 << 20)})
    with pytest.raises(
        DataError,
        match=r"pad\.xlsx: the member 'xl/media/pad\.bin' inflates [\d,]+ bytes to 4,194,304, [\d,]+ times, "
        r"more than 250 \(the limit COHORTSHIELD_MAX_EXPANSION\)",
    ):
        load_events(("pad.xlsx", bomb))


def test_an_xlsx_of_too_many_parts_is_refused_before_the_workbook_is_parsed(monkeypatch, no_workbook_parsed):
    monkeypatch.setenv("COHORTSHIELD_MAX_ZIP_MEMBERS", "20")
    bomb = _workbook(2, {f"xl/media/{i}.bin": b"x" for i in range(20)})
    with pytest.raises(DataError, match=r"parts\.xlsx: 2\d zip members, more than 20 .*MAX_ZIP_MEMBERS"):
        load_events(("parts.xlsx", bomb))


def test_an_xlsx_declaring_10000_columns_is_read_as_its_cells_not_padded_to_them():
    """openpyxl pads every row of a read-only sheet to the last column its `<dimension>` declares: two
    cells a row declaring A1:NTP2 (10,000 columns, within max_columns) became 10,000 values a row,
    80 KB, whatever the rows' real width; and it stops at the last row declared (299 of 300 rows were
    dropped, silently). The dimension is ignored; the cells read are counted."""
    import tracemalloc

    honest = load_events(("ok.xlsx", _workbook(300))).data
    tracemalloc.start()
    try:
        padded = load_events(("padded.xlsx", _workbook(300, dimension="A1:NTP2"))).data
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    pd.testing.assert_frame_equal(padded, honest)
    assert peak < 8 << 20, f"{peak:,} bytes at the peak"


def test_an_xlsx_without_a_dimension_is_counted_while_its_rows_are_read(monkeypatch):
    monkeypatch.setenv("COHORTSHIELD_MAX_CELLS", "100")
    assert load_events(("ok.xlsx", _workbook(49, dimension=None))).data.shape[0] == 49  # 100 cells
    with pytest.raises(DataError, match=r"row 51: more than 100 cells \(the limit COHORTSHIELD_MAX_CELLS\)"):
        load_events(("wide.xlsx", _workbook(50, dimension=None)))


def test_the_import_preview_of_an_uploaded_parquet_bomb_is_refused_from_its_footer(monkeypatch):
    from engine.io.imports import preview

    monkeypatch.setenv("COHORTSHIELD_MAX_CELLS", "1000")
    with pytest.raises(LimitExceeded, match=r"events\.parquet: 60,000 cells .*COHORTSHIELD_MAX_CELLS"):
        preview("long", name="events.parquet", data=_rle_parquet(20_000))
