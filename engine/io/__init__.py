"""Data in and out: every source of patient data, the export gate, the errors a user can fix (ARCHITECTURE 2).

- `normalize`: vocabulary of each event (ICD-9-CM or ICD-10-CM) and the opt-in, reported
  normalization of code spellings (undotted codes, prefixes, case, spaces).
- `mapping`: a column mapping (`patient_id=MRN,code=DX_CODE,visit=ENC_DATE`) for any long-form file.
- `excel`: `.xlsx` workbooks (openpyxl).
- `omop`: OMOP CDM v5.4 tables from CSV/Parquet files or a DuckDB database.
- `meds`: MEDS Parquet (`subject_id`, `time`, `code`), checked against the MEDS schema.
- `i2b2`: the i2b2 star schema (`observation_fact`, `patient_dimension`, ...; `ICD9:250.00`).
- `sql`: databases: a DuckDB file or any SQLAlchemy URL (PostgreSQL), for OMOP and i2b2.
- `export`: the export gate, the one way a release leaves the tool (files written only when verified).
- `errors`: `UserError` (a problem the user can fix; the CLI prints it in one line) and the readers' errors.

Every reader returns the long form of ARCHITECTURE section 2 (`patient_id`, `code`, optional `visit`,
`age`) plus the vocabulary per row, and names source, table, row and column in every error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

SourceKind = Literal["auto", "long", "omop", "meds", "i2b2"]
SOURCE_KINDS: tuple[str, ...] = ("auto", "long", "omop", "meds", "i2b2")


def detect_source(path: str | Path) -> Literal["long", "omop", "meds", "i2b2"]:
    """`omop` for a DuckDB file, a database URL or a folder holding person.csv/.parquet, `i2b2` for a
    folder holding observation_fact.csv/.parquet, `meds` for a folder with a `data` folder or Parquet
    shards, `long` for anything else (CSV, Parquet, .xlsx; other folders)."""
    from engine.io.sql import is_url

    if is_url(str(path)):
        return "omop"
    p = Path(path)
    if p.is_file():
        return "omop" if p.suffix.lower() in (".duckdb", ".ddb", ".db") else "long"
    if p.is_dir():
        names = {c.name.lower() for c in p.iterdir()}
        if names & {"person.csv", "person.parquet", "person.pq"}:
            return "omop"
        if names & {"observation_fact.csv", "observation_fact.parquet", "observation_fact.pq"}:
            return "i2b2"
        if (p / "data").is_dir() or any(n.endswith(".parquet") for n in names):
            return "meds"
    return "long"  # any other folder: the events loader refuses it in one line


def read_source(
    path: str | Path,
    *,
    source: SourceKind = "auto",
    mapping: str | None = None,
    normalize: bool = False,
    unknown_codes: Literal["keep", "drop"] = "keep",
    drop_duplicates: bool = False,
    sheet: str | None = None,
    schema: str | None = None,
    na_ids: Literal["error", "accept"] = "error",
    codes: Literal["source", "standard", "icd"] = "source",
    domains: tuple[str, ...] = ("condition",),
    drug_level: Literal["ingredient", "clinical"] = "ingredient",
):
    """Events from any source kind (`detect_source` when `auto`); returns `events.SourceData`.
    `mapping` (`patient_id=MRN,code=DX_CODE,...`) applies to long-form files; ValueError for a
    malformed mapping or a mapping given for OMOP/MEDS (their columns are fixed by the standard).
    `codes`, `domains` and `drug_level` (issue 37) apply to an OMOP CDM (`omop.read_omop`); UserError elsewhere."""
    from engine.io.mapping import ColumnMapping, read_long

    kind = detect_source(path) if source == "auto" else source
    if mapping and kind != "long":
        raise ValueError(f"--map applies to long-form files; {_name(path)} is read as {kind}")
    if (
        codes != "source" or tuple(domains) != ("condition",) or drug_level != "ingredient"
    ) and kind != "omop":
        from engine.io.errors import UserError

        raise UserError(f"--omop-codes / --domains apply to an OMOP CDM; {_name(path)} is read as {kind}")
    if kind == "omop":
        from engine.io.omop import read_omop

        return read_omop(
            path,
            schema=schema,
            normalize=normalize,
            unknown_codes=unknown_codes,
            drop_duplicates=drop_duplicates,
            na_ids=na_ids,
            codes=codes,
            domains=domains,
            drug_level=drug_level,
        )
    if kind == "i2b2":
        from engine.io.i2b2 import read_i2b2

        return read_i2b2(
            path,
            schema=schema,
            normalize=normalize,
            unknown_codes=unknown_codes,
            drop_duplicates=drop_duplicates,
            na_ids=na_ids,
        )
    if kind == "meds":
        from engine.io.meds import read_meds

        return read_meds(
            path, normalize=normalize, unknown_codes=unknown_codes, drop_duplicates=drop_duplicates
        )
    from engine.io.loaders import Source

    src = Source.from_path(path)  # text files checked against the input limits while read
    return read_long(
        src.name,
        src.data,
        ColumnMapping.parse(mapping) if mapping else None,
        sheet=sheet,
        normalize=normalize,
        unknown_codes=unknown_codes,
        drop_duplicates=drop_duplicates,
        na_ids=na_ids,
    )


def _name(path: str | Path) -> str:
    from engine.io.sql import is_url, redacted

    return redacted(str(path)) if is_url(str(path)) else Path(path).name
