"""Inputs bounded by what they expand to (issue 40, findings 2 and 8): a Parquet file or MEDS shard
of run-length-encoded rows, a study package whose member inflates a thousandfold or that holds
100,000 members. Each is refused with a `UserError` naming the file and the limit, from metadata,
before a row group is read or a member inflated. The bombs are scaled down here (limits lowered
through their settings, or the expansion floor); bench/bombs.py measures them at the issue's size."""

from __future__ import annotations

import io

import pytest

from engine.io import limits as limits_module
from engine.io.errors import DataError
from engine.io.loaders import load_events, load_uploaded


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
