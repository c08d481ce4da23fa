"""Inputs bounded by what they expand to (issue 40): the one place a compressed input's rows, cells
and decoded bytes are counted, from its metadata, and refused by name before anything is materialized.

A Parquet file of 0.1 MB can hold 20 M run-length-encoded rows, and a zip member of zeros inflates a
thousandfold: the stored size says nothing of the memory a read takes. So each input is measured by
what it decodes to (the limits are declared and set in `engine.io.deployment.Limits`):

- a Parquet file (`check_parquet`, from its footer, before any row group is read): rows
  (`max_rows`), columns (`max_columns`), cells, rows x columns read (`max_cells`), the uncompressed
  pages of the columns read (`max_member_bytes`), and their decoded size (`VALUE_BYTES` a
  value, what a pandas cell takes, plus the pages) against `max_decoded_bytes` and, once past
  `EXPANSION_FLOOR`, against `max_expansion` times the file's size;
- a zip (`check_zip_entries`: the entry count of its end record, before the directory is parsed,
  against `max_zip_members`; `check_member`: a member's recorded size and its ratio to the compressed
  size, before it is inflated. zipfile never inflates more than the recorded size: a stream that
  would is cut there and fails its CRC check).

Each refusal is a `LimitExceeded` naming the file (and member), the figure, the limit and its setting.
"""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.io.deployment import LimitExceeded, Limits, limits

EXPANSION_FLOOR = 64 << 20  # decoded bytes below which no ratio is checked: a small file is harmless
VALUE_BYTES = 8  # a pandas cell: an int64, a float64, or an object column's pointer


def refuse(where: str, what: str, most: int, field: str, tail: str = "") -> LimitExceeded:
    """The one wording of every refusal: `where: what, more than most (the limit SETTING)tail`."""
    return LimitExceeded(f"{where}: {what}, more than {most:,} (the limit {Limits.setting(field)}){tail}")


@dataclass(frozen=True)
class Footprint:
    """What a Parquet file's columns read decode to (`check_parquet`); shards add up (`add`)."""

    rows: int = 0
    cells: int = 0
    decoded: int = 0
    stored: int = 0

    def add(self, other: Footprint) -> Footprint:
        return Footprint(
            self.rows + other.rows,
            self.cells + other.cells,
            self.decoded + other.decoded,
            self.stored + other.stored,
        )


def check_footprint(where: str, fp: Footprint, lim: Limits | None = None, of: str = "") -> None:
    """Rows, cells, decoded bytes and expansion of `fp` against the limits (module docstring); `of`
    follows each figure (" in its shards")."""
    lim = lim or limits()
    tail = "; no row was read"
    if fp.rows > lim.max_rows:
        raise refuse(where, f"{fp.rows:,} rows{of}", lim.max_rows, "max_rows", tail)
    if fp.cells > lim.max_cells:
        raise refuse(where, f"{fp.cells:,} cells (rows x columns read){of}", lim.max_cells, "max_cells", tail)
    if fp.decoded > lim.max_decoded_bytes:
        what = f"{fp.decoded:,} bytes decoded{of}"
        raise refuse(where, what, lim.max_decoded_bytes, "max_decoded_bytes", tail)
    what = f"{fp.decoded:,} bytes decoded from {fp.stored:,} stored{of}"
    _check_expansion(fp.decoded, fp.stored, where, what, lim, tail)


def check_parquet(
    source: Path | bytes, where: str, columns: Sequence[str] | None = None, lim: Limits | None = None
) -> Footprint:
    """The limits of a Parquet file (a path or its bytes) from its footer, before a row group is read:
    rows, columns and the columns read (all when `columns` is None; matched case-insensitively on
    their top-level name): their cells, uncompressed pages and decoded bytes (module docstring).
    Returns the footprint, for a caller that also bounds several files together (MEDS shards)."""
    import pyarrow.parquet as pq

    lim = lim or limits()
    stored = len(source) if isinstance(source, bytes) else source.stat().st_size
    meta = pq.read_metadata(io.BytesIO(source) if isinstance(source, bytes) else source)
    if meta.num_columns > lim.max_columns:
        raise refuse(where, f"{meta.num_columns:,} columns", lim.max_columns, "max_columns")
    wanted = None if columns is None else {c.lower() for c in columns}
    schema = meta.schema
    read = [
        i
        for i in range(meta.num_columns)
        if wanted is None or schema.column(i).path.split(".")[0].lower() in wanted
    ]
    pages = values = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in read:
            chunk = group.column(c)
            pages += chunk.total_uncompressed_size
            values += chunk.num_values
    if pages > lim.max_member_bytes:
        raise refuse(
            where,
            f"the columns read are {pages:,} bytes uncompressed",
            lim.max_member_bytes,
            "max_member_bytes",
            "; no row was read",
        )
    tops = {schema.column(i).path.split(".")[0] for i in read}
    fp = Footprint(meta.num_rows, meta.num_rows * len(tops), values * VALUE_BYTES + pages, stored)
    check_footprint(where, fp, lim)
    return fp


def check_zip_entries(data: bytes, where: str, lim: Limits | None = None) -> None:
    """A zip's entry count from its end-of-central-directory record (zip64 too), before zipfile parses
    the directory, against `max_zip_members`. A zip without a readable end record is left to zipfile,
    whose error the caller names."""
    lim = lim or limits()
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - (1 << 16) - 22))
    if end < 0 or end + 22 > len(data):
        return
    count = struct.unpack_from("<H", data, end + 10)[0]
    if count == 0xFFFF and end >= 20 and data[end - 20 : end - 16] == b"PK\x06\x07":
        at = struct.unpack_from("<Q", data, end - 12)[0]
        if data[at : at + 4] == b"PK\x06\x06" and at + 40 <= len(data):
            count = struct.unpack_from("<Q", data, at + 32)[0]
    if count > lim.max_zip_members:
        raise refuse(where, f"{count:,} zip members", lim.max_zip_members, "max_zip_members", "; not read")


def check_member(info: zipfile.ZipInfo, where: str, most: int, field: str, lim: Limits | None = None) -> None:
    """A zip member's recorded size within `most` (the limit `field`) and, once past
    `EXPANSION_FLOOR`, its inflation within `max_expansion` times its compressed size; before it is
    inflated."""
    lim = lim or limits()
    name = f"the member {info.filename!r}"
    if info.file_size > most:
        raise refuse(where, f"{name} inflates to {info.file_size:,} bytes", most, field, "; not read")
    what = f"{name} inflates {info.compress_size:,} bytes to {info.file_size:,}"
    _check_expansion(info.file_size, info.compress_size, where, what, lim, "; not read")


def _check_expansion(decoded: int, stored: int, where: str, what: str, lim: Limits, tail: str) -> None:
    """Refuse `decoded` bytes from `stored` once past `EXPANSION_FLOOR` and over `max_expansion` times
    (a Parquet file's pages, a zip member), saying '<what>, <ratio> times'."""
    if decoded > EXPANSION_FLOOR and decoded > lim.max_expansion * max(stored, 1):
        ratio = f"{decoded // max(stored, 1):,} times"
        raise refuse(where, f"{what}, {ratio}", lim.max_expansion, "max_expansion", tail)


__all__ = [
    "EXPANSION_FLOOR",
    "Footprint",
    "check_footprint",
    "check_member",
    "check_parquet",
    "check_zip_entries",
    "refuse",
]
