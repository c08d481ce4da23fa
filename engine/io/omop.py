"""OMOP CDM v5.4 as a source: files (CSV or Parquet, one per table) or a DuckDB database.

Tables and columns read (names and types of the OMOP CDM v5.4 DDL, OHDSI/CommonDataModel), only
these columns, selected in SQL for a database:

| table | columns | |
|---|---|---|
| `person` | `person_id`, `year_of_birth`, `month_of_birth`, `day_of_birth` | required (month, day optional) |
| `condition_occurrence` | `condition_occurrence_id`, `person_id`, `condition_start_date`, `visit_occurrence_id`, `condition_source_value`, `condition_source_concept_id` | required (the last three optional) |
| `visit_occurrence` | `visit_occurrence_id`, `person_id`, `visit_start_date` | optional |
| `measurement` | `person_id`, `measurement_date`, `measurement_source_value`, `measurement_concept_id`, `visit_occurrence_id` | optional: lab orders; standard concepts, domain `measurement` |
| `observation` | `person_id`, `observation_date`, `observation_concept_id`, `visit_occurrence_id` | standard concepts, domain `observation` |
| `concept` | `concept_id`, `vocabulary_id` (standard: `concept_code`, `concept_class_id`) | optional: the vocabulary of each source concept; required for standard concepts |
| `procedure_occurrence` | `person_id`, `procedure_date`, `procedure_concept_id`, `visit_occurrence_id` | standard concepts, domain `procedure` |
| `drug_exposure` | `person_id`, `drug_exposure_start_date`, `drug_concept_id`, `visit_occurrence_id` | standard concepts, domain `drug` |
| `concept_ancestor` | `ancestor_concept_id`, `descendant_concept_id`, `min_levels_of_separation` | drugs' ingredients or clinical drugs |

The long form (ARCHITECTURE section 2):
- `patient_id` = `person_id`;
- `code` = `condition_source_value`, the diagnosis code as the source system wrote it (`250.00`, `E11.9`;
  undotted codes need normalization), its vocabulary from the source concept's `vocabulary_id`
  (`ICD9CM`, `ICD10CM`) when the `concept` table is there, else decided by `engine.io.normalize`
  (event date against 2015-10-01 for codes both vocabularies read); rows whose source concept is of
  another vocabulary (SNOMED, ...) or that have no source value are left out, counted in a warning;
- with `codes="standard"` (issue 37; `--omop-codes standard`): `code` = the item label of each row's
  standard concept (`condition_concept_id`, and, as `domains` chooses, `procedure_concept_id`,
  `drug_concept_id` at RxNorm ingredient level, or clinical-drug level with `drug_level="clinical"`,
  through `concept_ancestor`, `measurement_concept_id` and `observation_concept_id`),
  `SNOMED:<concept_code>`, `CPT4:99213`, `RxNorm:<code>`, `LOINC:2345-7` (`engine.vocab.concept_item`;
  ICD concepts as today), its vocabulary the concept's `vocabulary_id`; a measurement is one item per
  measured concept: its value (`value_as_number`, ...) is not part of the known set; the rows of all
  domains are one long form, so a visit's conditions, procedures, drugs, measurements and
  observations are one known set; rows whose concept is 0 or unknown are left out, warned;
  when the CDM has concept and concept_ancestor, its own hierarchy and concept names come with the
  events (`SourceData.concepts`, `read_concept_parents`): the methods' `cdm` hierarchy;
- with `codes="icd"` (`--omop-codes icd`, conditions only): the standard concepts mapped back to ICD
  codes through `concept_relationship` (`_to_icd`), for PheWAS; the share mapped is stated;
- `visit` = the visit's start date (`visit_start_date` through `visit_occurrence_id`), else
  `condition_start_date`, written ISO (`2014-03-01`): the visits are service days, in time order
  (`visits="occurrence"` uses `visit_occurrence_id` instead, falling back to the date);
- `age` = whole years from the birth date (`year_of_birth`, with `month_of_birth` and `day_of_birth`
  when given, else 1 July; HIPAA-style CDMs often hold the year alone, and then an event in the year
  of birth is age 0) to `condition_start_date`;
- lab orders: `patient_id`, `day` = `measurement_date`, `lab` = `measurement_source_value` (else the
  `measurement_concept_id`); with standard concepts (`codes="standard"`) and a `concept` table, `lab` =
  the item label of the measured concept (`LOINC:2345-7`, Johnson 2018's lab orders by LOINC concept;
  the source value where the concept is 0 or unknown).

Rows are named like file rows: for a CSV or Parquet file the header is row 1 and the first data row
row 2; for a database table, row n is the n-th row in storage order (`rowid` + 1). Every finding names
the source, the table, the rows and the column.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from engine.io.concepts import ConceptParents
from engine.io.events import Action, SourceData, check_events
from engine.io.roots import opened
from engine.io.sql import Database, DatabaseReadError, connect, is_url, sha256_file
from engine.io.validation import (
    MAX_ROWS,
    FileCheck,
    NaIds,
    Text,
    ValidationReport,
    check_blank,
    check_patient_table,
    parse_integers,
    patients_of,
    per_row,
)
from engine.vocab import VOCABULARY_NAMES, Vocabulary

Visits = Literal["date", "occurrence"]
# table -> (required columns, optional columns), OMOP CDM v5.4 names
TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "person": (("person_id", "year_of_birth"), ("month_of_birth", "day_of_birth")),
    "condition_occurrence": (
        ("person_id", "condition_start_date"),
        (
            "condition_occurrence_id",
            "visit_occurrence_id",
            "condition_source_value",
            "condition_source_concept_id",
            "condition_concept_id",
        ),
    ),
    "procedure_occurrence": (
        ("person_id", "procedure_date", "procedure_concept_id"),
        ("procedure_occurrence_id", "visit_occurrence_id"),
    ),
    "drug_exposure": (
        ("person_id", "drug_exposure_start_date", "drug_concept_id"),
        ("drug_exposure_id", "visit_occurrence_id"),
    ),
    "visit_occurrence": (("visit_occurrence_id", "person_id", "visit_start_date"), ()),
    "measurement": (
        ("person_id", "measurement_date"),
        ("measurement_source_value", "measurement_concept_id", "measurement_id", "visit_occurrence_id"),
    ),
    "observation": (
        ("person_id", "observation_date", "observation_concept_id"),
        ("observation_id", "visit_occurrence_id"),
    ),
    "concept": (("concept_id", "vocabulary_id"), ()),
    "concept_ancestor": (("ancestor_concept_id", "descendant_concept_id", "min_levels_of_separation"), ()),
    "concept_relationship": (("concept_id_1", "concept_id_2", "relationship_id"), ()),
}
REQUIRED_TABLES = ("person", "condition_occurrence")
_FILE_SUFFIXES = (".parquet", ".pq", ".csv")


@dataclass(frozen=True)
class Table:
    """One table read: its columns (as a frame), the row number of each row, where it came from."""

    name: str
    frame: pd.DataFrame
    rownum: np.ndarray
    where: str  # `cdm/person.csv` or `cdm.duckdb, table person`


# the key each table's rows are numbered by in an SQL database (engine.io.sql)
KEYS: dict[str, tuple[str, ...]] = {
    "person": ("person_id",),
    "condition_occurrence": ("condition_occurrence_id",),
    "visit_occurrence": ("visit_occurrence_id",),
    "measurement": ("measurement_id",),
    "concept": ("concept_id",),
    "procedure_occurrence": ("procedure_occurrence_id",),
    "drug_exposure": ("drug_exposure_id",),
    "observation": ("observation_id",),
    "concept_ancestor": ("ancestor_concept_id", "descendant_concept_id"),
    "concept_relationship": ("concept_id_1", "concept_id_2", "relationship_id"),
}
Codes = Literal["source", "standard", "icd"]
DrugLevel = Literal["ingredient", "clinical"]
# the RxNorm concept class a drug exposure is counted at (`--drug-level`)
DRUG_LEVELS: dict[str, str] = {"ingredient": "Ingredient", "clinical": "Clinical Drug"}


@dataclass(frozen=True)
class Domain:
    """A clinical table read in standard concepts (issue 37): its date and concept columns."""

    table: str
    date: str
    concept: str


DOMAINS: dict[str, Domain] = {
    "condition": Domain("condition_occurrence", "condition_start_date", "condition_concept_id"),
    "procedure": Domain("procedure_occurrence", "procedure_date", "procedure_concept_id"),
    "drug": Domain("drug_exposure", "drug_exposure_start_date", "drug_concept_id"),
    # one item per measured concept (LOINC): the values are not part of the attacker's known set
    "measurement": Domain("measurement", "measurement_date", "measurement_concept_id"),
    "observation": Domain("observation", "observation_date", "observation_concept_id"),
}


def open_reader(
    location: str | Path,
    schema: str | None,
    report: ValidationReport,
    expected: str,
    *,
    tables: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None,
    keys: dict[str, tuple[str, ...]] | None = None,
    standard: str = "OMOP CDM v5.4",
) -> _Reader | None:
    """A reader of tables from a database URL, a DuckDB file or a folder of CSV/Parquet files (OMOP's,
    i2b2's and the groups they define: `engine.io.groups`); None, with the reason in `report`, when the
    location is neither or the database cannot be opened. The caller closes it."""
    opts = {"tables": tables or TABLES, "keys": keys or KEYS, "standard": standard}
    if is_url(str(location)) or Path(location).is_file():
        db = connect(location, schema, report, expected)
        return None if db is None else _Reader(location, schema, db, **opts)  # type: ignore[arg-type]
    if not Path(location).exists():
        FileCheck(Path(location).name, np.zeros(0, dtype=np.int64), report).note(
            "error", None, "no such file or folder", expected, "missing_source"
        )
        return None
    return _Reader(Path(location), schema, **opts)  # type: ignore[arg-type]


class _Reader:
    """Reads tables from a folder of files or a database (DuckDB file or SQLAlchemy URL), only the
    columns asked for (`engine.io.sql`)."""

    def __init__(
        self,
        location: Path | str,
        schema: str | None,
        db: Database | None = None,
        *,
        tables: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = TABLES,
        keys: dict[str, tuple[str, ...]] = KEYS,
        standard: str = "OMOP CDM v5.4",
    ) -> None:
        self.location = Path(location) if db is None else None
        self.label = db.label if db is not None else Path(location).name  # how messages name the source
        self.schema = schema
        self.db = db
        self.tables, self.keys, self.standard = tables, keys, standard
        self.sources: dict[str, str] = dict(db.sources) if db is not None else {}

    def close(self) -> None:
        if self.db is not None:
            self.db.close()

    # ------------------------------------------------------------------ discovery
    def file_of(self, table: str) -> Path | None:
        assert self.location is not None
        by_name = {p.name.lower(): p for p in self.location.iterdir() if p.is_file()}
        for suffix in _FILE_SUFFIXES:
            hit = by_name.get(table + suffix)
            if hit is not None:
                return hit
        return None

    def has(self, table: str) -> bool:
        return (self.db.columns(table) if self.db is not None else self.file_of(table)) is not None

    def describe(self) -> str:
        return self.label

    # ------------------------------------------------------------------ reading
    def read(
        self, table: str, report: ValidationReport, where_sql: str = "", extra: tuple[str, ...] = ()
    ) -> Table | None:
        """The table's required and present optional columns (and the `extra` ones when present);
        None after reporting a problem."""
        required, optional = self.tables[table]
        optional = (*optional, *extra)
        path = real = None
        if self.db is not None:
            columns = self.db.columns(table)
            where = self.db.where(table, self.keys.get(table, ()))
        else:
            assert self.location is not None
            path = self.file_of(table)
            real = None if path is None else opened(path)  # inside the data roots (engine.io.roots)
            where = f"{self.location.name}/{path.name}" if path else f"{self.location.name}/{table}"
            columns = None if real is None else _file_columns(real, where)
        fc = FileCheck(where, np.zeros(0, dtype=np.int64), report)
        if columns is None:
            fc.note(
                "error",
                None,
                f"table {table} not found",
                f"{table}.csv or {table}.parquet in the folder, or a table {table} in the database",
                "missing_table",
            )
            return None
        lower = {c.lower(): c for c in columns}
        missing = [c for c in required if c not in lower]
        if missing:
            fc.note(
                "error",
                ", ".join(missing),
                f"required column(s) missing: {', '.join(missing)} (columns present: {', '.join(columns)})",
                f"the {self.standard} columns {', '.join(required)} in table {table}",
                "missing_column",
                (1,),
            )
            return None
        wanted = [lower[c] for c in (*required, *optional) if c in lower]
        if self.db is not None:
            frame, rownum = self.db.read(table, wanted, where_sql, self.keys.get(table, ()))
        else:
            assert path is not None and real is not None and self.location is not None
            self.sources[f"{self.location.name}/{path.name}"] = sha256_file(real)
            frame, rownum = _read_file(real, wanted, where)
        frame.columns = [c.lower() for c in frame.columns]
        return Table(table, frame, rownum, where)

    def qualified(self, table: str) -> str:
        """The table's name in SQL (`engine.io.sql.Database.qualified`)."""
        assert self.db is not None
        return self.db.qualified(table)


def check_csv_file(path: Path, where: str) -> None:
    """The input limits of a CSV table on disk (`engine.io.deployment.limits`), before it is parsed:
    the file is streamed through the line-length and row limits (`engine.io.loaders.TextLimits`,
    refused at the line that breaks one, never read further) and its header's columns counted.
    A `LimitExceeded` names `where` and the limit."""
    import csv

    from engine.io.loaders import TextLimits, check_columns

    check = TextLimits(where)
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(8 << 20), b""):
            check.feed(block)
        check.done()
        fh.seek(0)
        first = fh.readline(check.max_line + 2).decode("utf-8-sig", errors="replace")
    check_columns(where, next(csv.reader([first]), []))


def check_parquet_file(path: Path, where: str, columns: Sequence[str] | None = None) -> None:
    """The input limits of a Parquet file from its metadata (the footer), before a row group is read:
    rows, columns, and the cells, uncompressed and decoded size of the columns to be read (all when
    `columns` is None): `engine.io.limits.check_parquet`. A `LimitExceeded` names `where` and the
    limit."""
    from engine.io.limits import check_parquet

    check_parquet(path, where, columns)


def _file_columns(path: Path, where: str) -> list[str]:
    """The table's column names, after its limits (`check_csv_file`, `check_parquet_file`)."""
    if path.suffix.lower() == ".csv":
        check_csv_file(path, where)
        header = pd.read_csv(path, nrows=0, dtype=str)
        return [str(c) for c in header.columns]
    import pyarrow.parquet as pq

    check_parquet_file(path, where, columns=())  # rows and columns; the size of the columns read later
    return list(pq.read_schema(path).names)


def _read_file(path: Path, columns: Sequence[str], where: str) -> tuple[pd.DataFrame, np.ndarray]:
    """Only the named columns; CSV cells as text (types are checked afterwards). The limits were
    checked by `_file_columns` (a Parquet file's size here, for the columns read)."""
    if path.suffix.lower() == ".csv":
        df = pd.read_csv(path, usecols=list(columns), dtype=str, keep_default_na=False)
    else:
        import pyarrow.parquet as pq

        check_parquet_file(path, where, columns)
        df = pq.read_table(path, columns=list(columns)).to_pandas(date_as_object=False)
    return df, np.arange(len(df), dtype=np.int64) + 2


# ---------------------------------------------------------------------------- column checks
def _ids(t: Table, fc: FileCheck, column: str) -> Text:
    ids = Text.of(t.frame[column], fc, column)
    check_blank(ids, fc, column, f"a {column} in every row (NOT NULL in OMOP CDM v5.4)")
    return ids


def _dates(t: Table, fc: FileCheck, column: str, required: bool = True) -> np.ndarray:
    """datetime64[D] per row (NaT for an empty optional cell); an error names unparseable cells."""
    values = t.frame[column]
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        d = values.to_numpy(dtype="datetime64[D]")
        bad = np.isnat(d) if required else np.zeros(len(d), dtype=bool)
        if bad.any():
            fc.flag("error", column, bad, "empty date", "a date in every row (NOT NULL)", "date_invalid")
        return d
    text = Text.of(values)
    u = pd.Series(text.uniques, dtype=object).astype(str)
    parsed = pd.to_datetime(u, format="ISO8601", errors="coerce")
    bad_u = parsed.isna().to_numpy() & (u != "").to_numpy()
    blank = text.blank
    bad = per_row(bad_u, text.codes) | (blank if required else np.zeros(len(blank), dtype=bool))
    if bad.any():
        fc.flag(
            "error",
            column,
            bad,
            f"not a date: {text.examples(bad_u) or 'empty cell'}",
            "an ISO date (2014-03-01) in every row" if required else "an ISO date (2014-03-01) or nothing",
            "date_invalid",
        )
    days = np.append(parsed.to_numpy(dtype="datetime64[D]"), np.datetime64("NaT", "D"))
    return days[np.where(text.codes < 0, len(u), text.codes)]


def _int_or_none(t: Table, fc: FileCheck, column: str, lo: int, hi: int) -> np.ndarray | None:
    """Optional whole numbers in [lo, hi] with -1 for empty cells; None after reporting bad cells."""
    values = t.frame[column]
    blank = values.isna().to_numpy() | (values.astype("string").fillna("").str.strip() == "").to_numpy()
    if blank.all():
        return np.full(len(values), -1, dtype=np.int64)
    filled = values.where(~blank, str(lo) if not pd.api.types.is_numeric_dtype(values.dtype) else lo)
    parsed = parse_integers(filled, fc, column, lo, hi)
    return None if parsed is None else np.where(blank, -1, parsed)


# ---------------------------------------------------------------------------- the reader
def read_omop(
    location: str | Path,
    *,
    schema: str | None = None,
    visits: Visits = "date",
    labs: bool = True,
    normalize: bool = False,
    unknown_codes: Action = "keep",
    drop_duplicates: bool = False,
    na_ids: NaIds = "error",
    codes: Codes = "source",
    domains: Sequence[str] = ("condition",),
    drug_level: DrugLevel = "ingredient",
) -> SourceData:
    """Events (and lab orders) from an OMOP CDM v5.4 folder of CSV/Parquet files or a DuckDB file
    (module docstring). `codes`: the conditions' ICD source values (`source`) or the standard
    concepts of the `domains` (`standard`: `DOMAINS`, read by `_standard_rows`; drugs at the RxNorm
    `drug_level`). Never raises on bad data: the findings are in `SourceData.report`; a domain other
    than condition with source codes, or an unknown drug level, is a `UserError`."""
    check_domains(codes, domains, drug_level)
    report = ValidationReport()
    expected = "an OMOP CDM folder (CSV/Parquet), a DuckDB file or a database URL"
    reader = open_reader(location, schema, report, expected)
    if reader is None:
        return SourceData(None, report)
    try:
        data = _read(
            reader,
            report,
            visits,
            labs,
            normalize,
            unknown_codes,
            drop_duplicates,
            na_ids,
            codes,
            domains,
            drug_level,
        )
        if codes == "standard" and data.events is not None and _has_vocabulary(reader):
            # the CDM's own hierarchy and concept names travel with its events (`Dataset.concepts`)
            data = dataclasses.replace(data, concepts=_concept_parents(reader, report))
        return data
    except DatabaseReadError as exc:  # a file that is no database, a query the server refused
        FileCheck(reader.label, np.zeros(0, dtype=np.int64), report).note(
            "error", None, str(exc), expected, "unreadable"
        )
        return SourceData(None, report, sources=reader.sources)
    finally:
        reader.close()


def _read(
    reader: _Reader,
    report: ValidationReport,
    visits: Visits,
    with_labs: bool,
    normalize: bool,
    unknown_codes: Action,
    drop_duplicates: bool,
    na_ids: NaIds = "error",
    codes: Codes = "source",
    domains: Sequence[str] = ("condition",),
    drug_level: DrugLevel = "ingredient",
) -> SourceData:
    person = reader.read("person", report)
    cond = reader.read("condition_occurrence", report)
    if person is None or cond is None:
        return SourceData(None, report, sources=reader.sources)
    n_err = len(report.errors)
    if len(cond.frame) == 0:  # a header only: say so, never a silent empty cohort
        FileCheck(cond.where, cond.rownum, report).note(
            "warning",
            None,
            "table condition_occurrence has no rows: 0 conditions, 0 patients with events",
            "the conditions of the CDM's patients",
            "empty_table",
            (1,),
        )
    # ------------------------------------------------------------------ person
    pf = FileCheck(person.where, person.rownum, report)
    pids = _ids(person, pf, "person_id")
    check_patient_table(pids, pf, "person_id", "person")
    yob = parse_integers(person.frame["year_of_birth"], pf, "year_of_birth", 1800, 2200)
    mob = _int_or_none(person, pf, "month_of_birth", 1, 12) if "month_of_birth" in person.frame else None
    dob = _int_or_none(person, pf, "day_of_birth", 1, 31) if "day_of_birth" in person.frame else None
    if codes != "source":  # the chosen domains' standard concepts, as one table (`_standard_rows`)
        if len(report.errors) > n_err:
            return SourceData(None, report, sources=reader.sources)
        union = _standard_rows(reader, report, cond, domains, pids, drug_level)
        if union is not None and codes == "icd":
            union = _to_icd(reader, report, union)
        if union is None:
            return SourceData(None, report, sources=reader.sources)
        cond = union
    # ------------------------------------------------------------------ conditions
    cf = FileCheck(cond.where, cond.rownum, report)
    c_pid = _ids(cond, cf, "person_id")
    start = _dates(cond, cf, "condition_start_date")
    c_person = patients_of(c_pid, pids, cf, "person_id", "person", "every condition's person in table person")
    if len(report.errors) > n_err or yob is None:
        return SourceData(None, report, sources=reader.sources)
    keep = np.ones(len(cond.frame), dtype=bool)
    # the code: source value; rows without one are left out, said in a warning
    if "condition_source_value" not in cond.frame:
        cf.note(
            "error",
            "condition_source_value",
            "no condition_source_value column: the ICD codes as the source wrote them are needed",
            "condition_source_value holding ICD-9-CM / ICD-10-CM codes",
            "missing_column",
            (1,),
        )
        return SourceData(None, report, sources=reader.sources)
    code_values = cond.frame["condition_source_value"].astype("string").fillna("")
    no_code = (code_values.str.strip() == "").to_numpy()
    if no_code.any():
        cf.flag(
            "warning",
            "condition_source_value",
            no_code,
            f"{int(no_code.sum())} condition(s) without a source value left out",
            "a source ICD code in every condition to be analysed",
            "no_source_code",
        )
        keep &= ~no_code
    vocabulary = np.full(len(cond.frame), "", dtype=object)
    if codes != "source":
        vocabulary = cond.frame["vocabulary_id"].to_numpy(dtype=object)
    elif "condition_source_concept_id" in cond.frame and reader.has("concept"):
        vocabulary = _concept_vocabularies(reader, cond, cf, report, keep)
        other = vocabulary == "other"
        if other.any():
            keep &= ~other
            vocabulary = np.where(other, "", vocabulary)
    # ------------------------------------------------------------------ visits
    visit_day: np.ndarray | None = start  # None when visits are labelled by occurrence
    if "visit_occurrence_id" in cond.frame and reader.has("visit_occurrence"):
        vis = reader.read("visit_occurrence", report)
        if vis is not None:
            vf = FileCheck(vis.where, vis.rownum, report)
            v_ids = _ids(vis, vf, "visit_occurrence_id")
            v_start = _dates(vis, vf, "visit_start_date")
            v_col, c_col = vis.frame["visit_occurrence_id"], cond.frame["visit_occurrence_id"]
            if pd.api.types.is_integer_dtype(v_col.dtype) and pd.api.types.is_integer_dtype(c_col.dtype):
                # integer ids (the DDL's type): join on the numbers, no text per row
                c_codes, c_uniques = pd.factorize(c_col, use_na_sentinel=True)
                c_vis = Text(c_codes.astype(np.int64), np.asarray(c_uniques, dtype=object))
                v_unique, first = np.unique(
                    v_col.to_numpy(dtype=np.int64), return_index=True
                )  # first row of each id
                pos = pd.Index(v_unique).get_indexer(np.asarray(c_uniques, dtype=np.int64))
                missing_u = pos < 0
            else:
                c_vis = Text.of(c_col)
                pos = pd.Index(v_ids.uniques).get_indexer(c_vis.uniques)
                first = np.full(len(v_ids.uniques), -1, dtype=np.int64)
                first[v_ids.codes[::-1]] = np.arange(len(v_ids.codes))[::-1]  # first row of each visit id
                missing_u = (pos < 0) & (c_vis.uniques != "")
            if missing_u.any():
                cf.flag(
                    "warning",
                    "visit_occurrence_id",
                    per_row(missing_u, c_vis.codes),
                    f"visit_occurrence_id not in table visit_occurrence ({c_vis.examples(missing_u)}); "
                    "the condition_start_date is the visit",
                    "visits of table visit_occurrence",
                    "absent_visit",
                )
            first = np.append(first, -1)  # an empty visit table: no position is found, none indexed
            row_of = np.append(np.where(pos >= 0, first[np.maximum(pos, 0)], -1), -1)[c_vis.codes]
            has_visit = row_of >= 0
            if visits == "occurrence":
                vid = np.append(np.asarray(c_vis.uniques).astype(str).astype(object), "")[c_vis.codes]
                visit_label = pd.array(
                    np.where(has_visit, vid, _iso(start).to_numpy(dtype=object)), dtype="str"
                )
                visit_day = None
            else:
                visit_day = (
                    np.where(has_visit, v_start[np.maximum(row_of, 0)], start) if len(v_start) else start
                )
    if visit_day is not None:
        visit_label = _iso(visit_day)
    # ------------------------------------------------------------------ ages
    p_of_row = np.append(c_person, -1)[c_pid.codes]
    age = _ages(start, p_of_row, yob, mob, dob)
    raw = pd.DataFrame(
        {
            "person_id": c_pid.array(),
            "condition_source_value": code_values.array,
            "visit": visit_label,
            "age (from year_of_birth)": age,
            "condition_start_date": start,
            "vocabulary_id": vocabulary,
        }
    )
    if not keep.all():
        raw = raw.loc[keep].reset_index(drop=True)
        cf = FileCheck(cond.where, cond.rownum[keep], report)
    events = check_events(
        raw,
        cf,
        {
            "patient_id": "person_id",
            "code": "condition_source_value",
            "visit": "visit",
            "age": "age (from year_of_birth)",
        },
        vocabulary="vocabulary_id",
        date="condition_start_date",
        normalize=normalize,
        unknown_codes=unknown_codes,
        drop_duplicates=drop_duplicates,
        na_ids=na_ids,
        concepts=codes != "source",
    )
    by_concept = codes == "standard" and reader.has("concept")
    lab_frame = _labs(reader, report, by_concept) if with_labs and reader.has("measurement") else None
    return SourceData(events, report, lab_frame, reader.sources)


def _iso(days: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """ISO text of datetime64[D] values, formatted once per distinct day (arrow strings)."""
    u, inv = np.unique(days, return_inverse=True)
    return pd.array(np.datetime_as_string(u, unit="D").astype(object), dtype="str").take(inv.ravel())


def _ages(
    day: np.ndarray, person: np.ndarray, yob: np.ndarray, mob: np.ndarray | None, dob: np.ndarray | None
) -> np.ndarray:
    """Whole years from birth (month and day when known, else 1 July) to each event day. With the
    year alone, an event in the year of birth is age 0 (the person was born by then)."""
    y = yob[person]
    month_known = np.zeros(len(person), dtype=bool) if mob is None else mob[person] > 0
    m = np.where(month_known, 7 if mob is None else mob[person], 7)
    d = np.ones(len(person), dtype=np.int64) if dob is None else np.where(dob[person] > 0, dob[person], 1)
    ev = pd.DatetimeIndex(day)
    before_birthday = (ev.month.to_numpy() < m) | ((ev.month.to_numpy() == m) & (ev.day.to_numpy() < d))
    age = ev.year.to_numpy().astype(np.int64) - y - before_birthday.astype(np.int64)
    return np.where(~month_known & (age == -1) & (ev.year.to_numpy() == y), 0, age)


def _concept_vocabularies(
    reader: _Reader, cond: Table, cf: FileCheck, report: ValidationReport, keep: np.ndarray
) -> np.ndarray:
    """Per condition row: `ICD9CM`/`ICD10CM` from its source concept, 'other' for other vocabularies
    (a warning lists them; those rows are left out), '' when the concept is 0, empty or unknown."""
    ids = Text.of(cond.frame["condition_source_concept_id"])
    where_sql = ""
    if reader.db is not None:  # only the concepts used, in SQL (the concept table is large)
        where_sql = (
            "WHERE concept_id IN (SELECT DISTINCT condition_source_concept_id FROM "
            f"{reader.qualified('condition_occurrence')})"
        )
    concept = reader.read("concept", report, where_sql)
    if concept is None:
        return np.full(len(cond.frame), "", dtype=object)
    c_ids = Text.of(concept.frame["concept_id"])
    vocab_of_id = dict(
        zip(
            np.append(c_ids.uniques, "")[c_ids.codes], concept.frame["vocabulary_id"].astype(str), strict=True
        )
    )
    from engine.io.normalize import vocabulary_value

    u_vocab = []
    for cid in ids.uniques:
        raw = vocab_of_id.get(str(cid))
        if raw is None or str(cid) in ("", "0"):
            u_vocab.append("")
        else:
            u_vocab.append(vocabulary_value(raw) or "other")
    u_vocab_arr = np.array(u_vocab, dtype=object)
    per = np.append(u_vocab_arr, "")[ids.codes]
    other = (per == "other") & keep
    if other.any():
        names = pd.Series([vocab_of_id.get(str(c), "") for c in np.append(ids.uniques, "")[ids.codes][other]])
        counts = names.value_counts()
        listed = ", ".join(f"{k} ({v} rows)" for k, v in list(counts.items())[:MAX_ROWS])
        cf.flag(
            "warning",
            "condition_source_concept_id",
            other,
            f"{int(other.sum())} condition(s) whose source concept is not ICD-9-CM or ICD-10-CM left out: {listed}",
            f"source concepts of vocabulary {' or '.join(VOCABULARY_NAMES.values())}",
            "other_vocabulary",
            {str(k): int(v) for k, v in counts.items()},
        )
    return per


def check_domains(codes: str, domains: Sequence[str], drug_level: str = "ingredient") -> None:
    """The domain list of `read_omop`: known names, at least one, and beyond `condition` only with
    standard concepts (source values of procedures, drugs, measurements and observations are no ICD
    codes); a known drug level (`DRUG_LEVELS`). UserError otherwise."""
    from engine.io.errors import UserError

    if drug_level not in DRUG_LEVELS:
        raise UserError(f"--drug-level {drug_level}: use {' or '.join(DRUG_LEVELS)}")
    bad = [d for d in domains if d not in DOMAINS]
    if bad or not domains:
        raise UserError(
            f"--domains: unknown domain(s) {', '.join(bad) or '(none given)'}; use any of {', '.join(DOMAINS)}"
        )
    if codes == "icd" and list(domains) != ["condition"]:
        raise UserError(
            f"--domains {','.join(domains)}: --omop-codes icd maps conditions only (to ICD codes, for PheWAS)"
        )
    if codes == "source" and list(domains) != ["condition"]:
        raise UserError(
            f"--domains {','.join(domains)}: domains other than condition are read in standard concepts; "
            "add --omop-codes standard"
        )


def _standard_rows(
    reader: _Reader,
    report: ValidationReport,
    cond: Table,
    domains: Sequence[str],
    pids: Text,
    drug_level: DrugLevel = "ingredient",
) -> Table | None:
    """The rows of the chosen domains (`DOMAINS`) in standard concepts, as one table of
    condition_occurrence's shape (issue 37): `person_id`, `condition_start_date` (the domain's date),
    `visit_occurrence_id` (as text, '' when absent), `condition_source_value` the concept's item label
    (`engine.vocab.concept_item`), `vocabulary_id`. Drugs at `drug_level`: each exposure counts once
    per RxNorm ingredient (or its clinical drug) among its concept and its ancestors
    (`concept_ancestor`). A measurement is its concept (LOINC), its value left out. Rows whose concept
    is 0, unknown to `concept` or (drugs) has nothing at that level are left out, counted per table in a
    warning. Each table's ids, dates and persons are checked first, naming its own rows; None after
    an error. With several tables, later findings name them all (their row numbers are each table's)."""
    n_err = len(report.errors)
    parts: list[tuple[Domain, Table, FileCheck, Text, np.ndarray]] = []
    for name in domains:
        d = DOMAINS[name]
        t = cond if d.table == cond.name else reader.read(d.table, report)
        if t is None:
            continue
        fc = FileCheck(t.where, t.rownum, report)
        if d.concept not in t.frame:
            fc.note(
                "error",
                d.concept,
                f"no {d.concept} column: standard concepts were asked for (--omop-codes standard)",
                f"the standard concept of every row in {d.concept}",
                "missing_column",
                (1,),
            )
            continue
        pid = _ids(t, fc, "person_id")
        day = _dates(t, fc, d.date)
        patients_of(pid, pids, fc, "person_id", "person", f"every {d.table} row's person in table person")
        parts.append((d, t, fc, pid, day))
    if len(report.errors) > n_err or not reader.has("concept"):
        if not reader.has("concept"):
            FileCheck(reader.label, np.zeros(0, dtype=np.int64), report).note(
                "error",
                None,
                "table concept not found: standard concepts are named through it",
                "the CDM's vocabulary table concept (concept_id, vocabulary_id, concept_code)",
                "missing_table",
            )
        return None
    concept = _concept_table(reader, report, [(d.table, d.concept) for d, *_ in parts])
    if concept is None:
        return None
    level = DRUG_LEVELS[drug_level]
    ingredient = (
        _drug_levels(reader, report, concept, level)
        if any(d.table == "drug_exposure" for d, *_ in parts)
        else {}
    )
    frames, rownums, wheres = [], [], []
    for d, t, fc, pid, day in parts:
        cid = Text.of(t.frame[d.concept]).values()
        row = np.arange(len(cid))
        if d.table == "drug_exposure":  # one row per ingredient of the drug
            u, inv = np.unique(cid.astype(str), return_inverse=True)
            inv = inv.ravel()
            found = [ingredient.get(c) or ("",) for c in u]  # '' (none at the level): left out below
            flat = np.array([i for f in found for i in f], dtype=object)
            lens = np.array([len(f) for f in found], dtype=np.int64)
            starts = np.cumsum(lens) - lens
            row_lens = lens[inv] if len(inv) else np.zeros(0, dtype=np.int64)
            row = np.repeat(row, row_lens)
            offset = np.arange(len(row)) - np.repeat(np.cumsum(row_lens) - row_lens, row_lens)
            cid = flat[starts[inv][row] + offset] if len(row) else np.zeros(0, dtype=object)
        label, vocab = concept.label(cid)
        missing = label == ""
        if missing.any():
            shown = ", ".join(sorted({str(c) or "(empty)" for c in cid[missing]})[:MAX_ROWS])
            what = (
                f"no RxNorm {level.lower()}, 0 or unknown to table concept"
                if d.table == "drug_exposure"
                else "0 or unknown to table concept"
            )
            fc.flag(
                "warning",
                d.concept,
                np.bincount(row[missing], minlength=len(t.frame)) > 0,
                f"{int(missing.sum())} row(s) whose standard concept is {what} left out: {shown}",
                "a standard concept of the CDM's concept table in every row",
                "no_standard_concept",
            )
        keep = row[~missing]
        visit = (
            Text.of(t.frame["visit_occurrence_id"]).values()[keep] if "visit_occurrence_id" in t.frame else ""
        )
        frames.append(
            pd.DataFrame(
                {
                    "person_id": pid.values()[keep],
                    "condition_start_date": day[keep],
                    "visit_occurrence_id": visit,
                    "condition_source_value": label[~missing],
                    "vocabulary_id": vocab[~missing],
                    "concept_id": cid[~missing],
                }
            )
        )
        rownums.append(t.rownum[keep])
        wheres.append(t.where)
    frame = pd.concat(frames, ignore_index=True)
    return Table(cond.name, frame, np.concatenate(rownums), ", ".join(wheres))


def _to_icd(reader: _Reader, report: ValidationReport, union: Table) -> Table | None:
    """Conditions in standard concepts mapped back to ICD-9-CM / ICD-10-CM codes through the CDM's
    `concept_relationship` (`Maps to` from an ICD concept to the standard one, or `Mapped from` back;
    issue 37), for PheWAS through the phecode maps: a row becomes one row per ICD code its concept
    maps to (sorted); a row whose concept maps to none keeps its concept label, so the PheWAS never
    makes its patient a control (`engine.utility.phewas`). A warning states the share of rows mapped."""
    fc = FileCheck(union.where, union.rownum, report)
    if not reader.has("concept_relationship"):
        fc.note(
            "error",
            None,
            "table concept_relationship not found: standard concepts are mapped to ICD codes through it",
            "the CDM's vocabulary table concept_relationship (concept_id_1, concept_id_2, relationship_id)",
            "missing_table",
        )
        return None
    where_sql = ""
    if reader.db is not None:
        where_sql = "WHERE relationship_id IN ('Maps to', 'Mapped from')"
    rel = reader.read("concept_relationship", report, where_sql)
    if rel is None:
        return None
    one = Text.of(rel.frame["concept_id_1"]).values()
    two = Text.of(rel.frame["concept_id_2"]).values()
    kind = Text.of(rel.frame["relationship_id"]).values()
    std = np.concatenate([two[kind == "Maps to"], one[kind == "Mapped from"]])
    src = np.concatenate([one[kind == "Maps to"], two[kind == "Mapped from"]])
    concept_sql = ""
    if reader.db is not None:
        concept_sql = (
            f"WHERE vocabulary_id IN ('ICD9CM', 'ICD10CM') AND concept_id IN (SELECT concept_id_1 FROM "
            f"{reader.qualified('concept_relationship')} UNION SELECT concept_id_2 FROM "
            f"{reader.qualified('concept_relationship')})"
        )
    concept = _concept_table_where(reader, report, concept_sql)
    if concept is None:
        return None
    label, vocab = concept.label(src.astype(object))
    icd = np.isin(vocab, ["ICD9CM", "ICD10CM"])
    pairs = pd.DataFrame({"std": std[icd], "label": label[icd], "vocab": vocab[icd]})
    pairs = pairs.drop_duplicates().sort_values(["std", "label"], kind="stable")
    frame = union.frame.reset_index(drop=True)
    merged = frame.reset_index().merge(pairs, left_on="concept_id", right_on="std", how="left", sort=False)
    merged = merged.sort_values(["index", "label"], kind="stable", na_position="last")
    mapped = merged["label"].notna().to_numpy()
    merged["condition_source_value"] = merged["label"].where(mapped, merged["condition_source_value"])
    merged["vocabulary_id"] = merged["vocab"].where(mapped, merged["vocabulary_id"])
    row_mapped = np.zeros(len(frame), dtype=bool)
    row_mapped[merged["index"].to_numpy()[mapped]] = True
    n = len(frame)
    share = row_mapped.mean() if n else 0.0
    fc.flag(
        "warning",
        "condition_concept_id",
        ~row_mapped,
        f"{int(row_mapped.sum())} of {n} condition(s) ({share:.1%}) map to ICD-9-CM / ICD-10-CM codes through "
        f"concept_relationship; the {n - int(row_mapped.sum())} others keep their standard concept (their "
        "patients are never PheWAS controls)",
        "a 'Maps to' link from an ICD source concept for every standard concept",
        "icd_mapping",
        {"mapped": int(row_mapped.sum()), "unmapped": n - int(row_mapped.sum())},
    )
    out = merged[list(frame.columns)]
    return Table(
        union.name, out.reset_index(drop=True), union.rownum[merged["index"].to_numpy()], union.where
    )


@dataclass(frozen=True)
class Concepts:
    """The concept table's rows read (ids as text): vocabulary, code and class of each."""

    frame: pd.DataFrame  # index: concept_id as text; columns vocabulary_id, concept_code, concept_class_id

    def label(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(item label, vocabulary id) per concept id (text), '' for 0, blank or unknown ids."""
        from engine.vocab import concept_item

        u, inv = np.unique(ids.astype(str), return_inverse=True)  # each distinct id named once
        known = self.frame.reindex(pd.Index(u))
        vocab = known["vocabulary_id"].fillna("").to_numpy(dtype=object)
        code = known["concept_code"].fillna("").to_numpy(dtype=object)
        label = np.array(
            [
                concept_item(v, c) if v and c and i != "0" else ""
                for i, v, c in zip(u, vocab, code, strict=True)
            ],
            dtype=object,
        )
        vocab = np.where(label == "", "", vocab)
        return label[inv.ravel()], vocab[inv.ravel()]


def _concept_table(reader: _Reader, report: ValidationReport, used: list[tuple[str, str]]) -> Concepts | None:
    """The concepts of the (table, column) pairs `used` and, for drugs, their ancestors (in SQL for a
    database, only those rows; a folder's concept file is read whole)."""
    where_sql = ""
    if reader.db is not None:
        subqueries = [f"SELECT {col} FROM {reader.qualified(table)}" for table, col in used]
        if any(table == "drug_exposure" for table, _ in used) and reader.has("concept_ancestor"):
            subqueries.append(
                f"SELECT ancestor_concept_id FROM {reader.qualified('concept_ancestor')} WHERE "
                f"descendant_concept_id IN (SELECT drug_concept_id FROM {reader.qualified('drug_exposure')})"
            )
        where_sql = f"WHERE concept_id IN ({' UNION '.join(subqueries)})"
    return _concept_table_where(reader, report, where_sql)


def _concept_table_where(reader: _Reader, report: ValidationReport, where_sql: str) -> Concepts | None:
    """The concept table's rows `where_sql` selects (a database; a folder's file is read whole)."""
    t = reader.read("concept", report, where_sql, extra=("concept_code", "concept_class_id"))
    if t is None:
        return None
    if "concept_code" not in t.frame:
        FileCheck(t.where, t.rownum, report).note(
            "error",
            "concept_code",
            "no concept_code column: the standard concepts are named by their code",
            "the OMOP CDM v5.4 column concept_code in table concept",
            "missing_column",
            (1,),
        )
        return None
    ids = Text.of(t.frame["concept_id"]).values()
    frame = pd.DataFrame(
        {
            "vocabulary_id": Text.of(t.frame["vocabulary_id"]).values(),
            "concept_code": Text.of(t.frame["concept_code"]).values(),
            "concept_class_id": Text.of(t.frame["concept_class_id"]).values()
            if "concept_class_id" in t.frame
            else "",
        },
        index=pd.Index(ids),
    )
    return Concepts(frame[~frame.index.duplicated()])


def _drug_levels(
    reader: _Reader, report: ValidationReport, concept: Concepts, level: str
) -> dict[str, tuple[str, ...]]:
    """Drug concept id -> the ids of its RxNorm concepts of class `level` (`Ingredient`, `Clinical
    Drug`) among its ancestors in concept_ancestor and itself (when it is one, with or without the self
    row), sorted; empty when the CDM has no concept_ancestor (every drug row is then left out)."""
    if not reader.has("concept_ancestor"):
        return {}
    where_sql = ""
    if reader.db is not None:
        where_sql = f"WHERE descendant_concept_id IN (SELECT drug_concept_id FROM {reader.qualified('drug_exposure')})"
    t = reader.read("concept_ancestor", report, where_sql)
    if t is None:
        return {}
    at_level = (concept.frame["concept_class_id"] == level) & (concept.frame["vocabulary_id"] == "RxNorm")
    own = concept.frame.index[at_level.to_numpy()].to_numpy(dtype=object)  # its own (level 0) ancestor
    anc = np.concatenate([Text.of(t.frame["ancestor_concept_id"]).values(), own])
    desc = np.concatenate([Text.of(t.frame["descendant_concept_id"]).values(), own])
    klass = concept.frame["concept_class_id"].reindex(pd.Index(anc.astype(str))).fillna("").to_numpy()
    vocab = concept.frame["vocabulary_id"].reindex(pd.Index(anc.astype(str))).fillna("").to_numpy()
    hit = (klass == level) & (vocab == "RxNorm")
    pairs = pd.DataFrame({"d": desc[hit], "a": anc[hit]}).drop_duplicates().sort_values(["d", "a"])
    return {str(d): tuple(map(str, g["a"])) for d, g in pairs.groupby("d", sort=False)}


def person_source_ids(location: str | Path, *, schema: str | None = None) -> dict[str, str]:
    """person_id -> person_source_value (the source system's patient id; issue 37, finding d: the
    genotypes of a biobank are named by it) of the CDM's persons that have one. A `DataError` names
    what is missing."""
    report = ValidationReport()
    reader = open_reader(location, schema, report, "an OMOP CDM with its person table")
    if reader is None:
        report.raise_if_errors()
        raise AssertionError("open_reader gave no reader and no error")
    try:
        person = reader.read("person", report, extra=("person_source_value",))
    except DatabaseReadError as exc:
        FileCheck(reader.label, np.zeros(0, dtype=np.int64), report).note(
            "error", None, str(exc), "a readable person table", "unreadable"
        )
        person = None
    finally:
        reader.close()
    report.raise_if_errors()
    assert person is not None
    if "person_source_value" not in person.frame:
        return {}
    ids = Text.of(person.frame["person_id"]).values()
    source = person.frame["person_source_value"].astype("string").fillna("").str.strip().to_numpy()
    return {str(i): str(v) for i, v in zip(ids, source, strict=True) if v}


def read_concept_parents(location: str | Path, *, schema: str | None = None) -> ConceptParents:
    """The hierarchy of the concepts a CDM uses (`ConceptParents`): the ancestors, through
    `concept_ancestor`, of every standard concept of its condition, procedure and drug tables, and the
    parent links among them. In SQL for a database (only those rows); a folder's tables are read whole.
    A `DataError` names what is missing (no concept or concept_ancestor table, a column)."""
    report = ValidationReport()
    reader = open_reader(location, schema, report, _VOCABULARY_EXPECTED)
    if reader is None:
        report.raise_if_errors()
        raise AssertionError("open_reader gave no reader and no error")
    try:
        got = _concept_parents(reader, report)
        report.raise_if_errors()
        assert got is not None
        return got
    finally:
        reader.close()


_VOCABULARY_EXPECTED = "an OMOP CDM with its vocabulary tables concept and concept_ancestor"


def _has_vocabulary(reader: _Reader) -> bool:
    """Whether the CDM has the tables of its own hierarchy (concept and concept_ancestor)."""
    return reader.has("concept") and reader.has("concept_ancestor")


def _concept_parents(reader: _Reader, report: ValidationReport) -> ConceptParents | None:
    """`read_concept_parents` on an open reader; None (the findings in `report`) when unreadable."""
    try:
        ancestor_sql = concept_sql = ""
        if reader.db is not None:
            used = " UNION ".join(
                f"SELECT {d.concept} FROM {reader.qualified(d.table)}"
                for d in DOMAINS.values()
                if reader.has(d.table)
            )
            nodes = f"SELECT ancestor_concept_id FROM {reader.qualified('concept_ancestor')} WHERE descendant_concept_id IN ({used})"
            ancestor_sql = f"WHERE min_levels_of_separation = 1 AND descendant_concept_id IN ({nodes})"
            concept_sql = f"WHERE concept_id IN ({nodes})"
        anc = reader.read("concept_ancestor", report, ancestor_sql)
        concept = reader.read("concept", report, concept_sql, extra=("concept_code", "concept_name"))
    except DatabaseReadError as exc:
        FileCheck(reader.label, np.zeros(0, dtype=np.int64), report).note(
            "error", None, str(exc), _VOCABULARY_EXPECTED, "unreadable"
        )
        return None
    if anc is None or concept is None:
        return None
    ids = Text.of(concept.frame["concept_id"]).values()
    vocab = Text.of(concept.frame["vocabulary_id"]).values()
    code = Text.of(concept.frame["concept_code"]).values() if "concept_code" in concept.frame else ids
    from engine.vocab import concept_item

    label_of = {i: concept_item(v, c) for i, v, c in zip(ids, vocab, code, strict=True)}
    names = (
        concept.frame["concept_name"].astype(str).tolist()
        if "concept_name" in concept.frame
        else [""] * len(ids)
    )
    one = pd.to_numeric(anc.frame["min_levels_of_separation"], errors="coerce").to_numpy() == 1
    a = Text.of(anc.frame["ancestor_concept_id"]).values()[one]
    d = Text.of(anc.frame["descendant_concept_id"]).values()[one]
    parents: dict[str, list[str]] = {}
    for child, parent in zip(d, a, strict=True):
        if child in label_of and parent in label_of:
            parents.setdefault(label_of[child], []).append(label_of[parent])
    numeric = pd.to_numeric(pd.Series(ids), errors="coerce").fillna(0).astype(np.int64)
    return ConceptParents(
        parents,
        {label_of[i]: int(n) for i, n in zip(ids, numeric, strict=True)},
        {label_of[i]: n for i, n in zip(ids, names, strict=True)},
    )


def _labs(reader: _Reader, report: ValidationReport, by_concept: bool = False) -> pd.DataFrame | None:
    """Lab orders (`patient_id`, `day`, `lab`) of the measurement table (module docstring): by source
    value, or (`by_concept`) by the measured standard concept's item label, the source value where
    the concept is 0 or unknown to `concept`."""
    meas = reader.read("measurement", report)
    if meas is None:
        return None
    mf = FileCheck(meas.where, meas.rownum, report)
    n_err = len(report.errors)
    pid = _ids(meas, mf, "person_id")
    day = _dates(meas, mf, "measurement_date")
    if "measurement_source_value" in meas.frame:
        lab = meas.frame["measurement_source_value"].astype("string").fillna("").str.strip()
    else:
        lab = pd.Series([""] * len(meas.frame), dtype="string")
    if "measurement_concept_id" in meas.frame:
        concept = Text.of(meas.frame["measurement_concept_id"]).values()
        if by_concept:
            known = _concept_table(reader, report, [("measurement", "measurement_concept_id")])
            if known is not None:
                label = pd.Series(known.label(concept)[0], dtype="string")
                lab = label.where(label != "", lab)
        lab = lab.where(lab != "", pd.Series(concept, dtype="string"))
    blank = (lab == "").to_numpy()
    if blank.any():
        mf.flag(
            "error",
            "measurement_source_value",
            blank,
            "a measurement with neither a source value nor a concept id",
            "measurement_source_value (the lab test as ordered) or measurement_concept_id",
            "blank_value",
        )
    if len(report.errors) > n_err:
        return None
    return pd.DataFrame({"patient_id": pid.array(), "day": day.astype("datetime64[ns]"), "lab": lab.array})


def vocabulary_counts(data: SourceData) -> dict[str, int]:
    """Rows per vocabulary name of a read source (empty when it failed)."""
    if data.events is None:
        return {}
    return {VOCABULARY_NAMES.get(k, k or "undecided"): v for k, v in data.events.vocabularies.items()}


__all__ = [
    "TABLES",
    "ConceptParents",
    "Vocabulary",
    "person_source_ids",
    "read_concept_parents",
    "read_omop",
    "vocabulary_counts",
]
