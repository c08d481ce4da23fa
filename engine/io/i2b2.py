"""The i2b2 star schema as a source: files (CSV or Parquet, one per table) or a database (a DuckDB file
or any SQLAlchemy URL, `engine.io.sql`), only the columns below, selected in SQL for a database.

| table | columns | |
|---|---|---|
| `observation_fact` | `patient_num`, `concept_cd`, `start_date`, `encounter_num`, `modifier_cd` | required (the last two optional) |
| `patient_dimension` | `patient_num`, `birth_date` | required (`birth_date` optional) |
| `visit_dimension` | `encounter_num`, `start_date` | optional |
| `concept_dimension` | `concept_cd` | optional: facts whose concept it lacks are counted in a warning |

Column names are those of the i2b2 1.7 data repository (CRC) tables. The long form (ARCHITECTURE
section 2):
- `patient_id` = `patient_num`;
- `code` = `concept_cd` of the diagnosis facts: i2b2 writes `SCHEME:code`, and the schemes `ICD9:`
  and `ICD10:` (also `ICD9CM:`, `ICD10CM:`, `ICD-10-CM:`) name the vocabulary; the rest is the code as
  written (undotted codes need normalization, `engine.io.normalize`). `LOINC:` facts are lab orders;
  facts of any other scheme (`NDC:`, `DEM|SEX:`, ...) are counted in a warning and not used; a
  `concept_cd` with no scheme at all is an error naming its rows (its vocabulary cannot be known);
- only facts with `modifier_cd` `@` (the fact itself, not one of its modifiers) are read; modifier
  rows are counted in a warning;
- `visit` = the encounter's day (`visit_dimension.start_date` through `encounter_num`, else the fact's
  `start_date`), written ISO (`2014-03-01`);
- `age` = whole years from `patient_dimension.birth_date` to the fact's `start_date` (no ages, with a
  warning, when a patient with diagnoses has no birth date).

Rows are named as in `engine.io.omop`: a file's header is row 1; a DuckDB table's rows are in storage
order; an SQL table's rows in the order of its key (named in the finding).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from engine.io.events import Action, SourceData, check_events
from engine.io.normalize import split_prefix
from engine.io.omop import _dates, _ids, _iso, _Reader, open_reader
from engine.io.sql import DatabaseReadError
from engine.io.validation import (
    MAX_ROWS,
    FileCheck,
    NaIds,
    ValidationReport,
    check_patient_table,
    patients_of,
)

STANDARD = "i2b2 1.7 (CRC)"
TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "observation_fact": (("patient_num", "concept_cd", "start_date"), ("encounter_num", "modifier_cd")),
    "patient_dimension": (("patient_num",), ("birth_date",)),
    "visit_dimension": (("encounter_num", "start_date"), ()),
    "concept_dimension": (("concept_cd",), ()),
}
KEYS: dict[str, tuple[str, ...]] = {
    "observation_fact": (
        "patient_num",
        "encounter_num",
        "concept_cd",
        "start_date",
        "modifier_cd",
        "instance_num",
    ),
    "patient_dimension": ("patient_num",),
    "visit_dimension": ("encounter_num",),
    "concept_dimension": ("concept_path",),
}
_SCHEME = re.compile(r"^([^:]+):")
_LAB = re.compile(r"^LOINC:", re.IGNORECASE)


def _scheme_vocabulary(concept: str) -> tuple[str | None, str]:
    """(vocabulary or None, code) for an i2b2 concept code (`ICD9:250.00` -> ('ICD9CM', '250.00'))."""
    vocab, rest = split_prefix(concept)
    return vocab, rest


def read_i2b2(
    location: str | Path,
    *,
    schema: str | None = None,
    labs: bool = True,
    normalize: bool = False,
    unknown_codes: Action = "keep",
    drop_duplicates: bool = False,
    na_ids: NaIds = "error",
) -> SourceData:
    """Events (and lab orders) from an i2b2 star schema (module docstring): a folder of CSV/Parquet
    files, a DuckDB file or an SQLAlchemy URL. Never raises on bad data: findings in the report."""
    report = ValidationReport()
    expected = (
        "an i2b2 folder (observation_fact.csv, patient_dimension.csv, ...), a DuckDB file or a database URL"
    )
    reader = open_reader(location, schema, report, expected, tables=TABLES, keys=KEYS, standard=STANDARD)
    if reader is None:
        return SourceData(None, report)
    try:
        return _read(reader, report, labs, normalize, unknown_codes, drop_duplicates, na_ids)
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
    with_labs: bool,
    normalize: bool,
    unknown_codes: Action,
    drop_duplicates: bool,
    na_ids: NaIds,
) -> SourceData:
    patients = reader.read("patient_dimension", report)
    facts = reader.read("observation_fact", report)
    if patients is None or facts is None:
        return SourceData(None, report, sources=reader.sources)
    n_err = len(report.errors)
    # ------------------------------------------------------------------ patients
    pf = FileCheck(patients.where, patients.rownum, report)
    pids = _ids(patients, pf, "patient_num")
    check_patient_table(pids, pf, "patient_num", "patient")
    birth = (
        _dates(patients, pf, "birth_date", required=False)
        if "birth_date" in patients.frame
        else np.full(len(patients.frame), np.datetime64("NaT", "D"))
    )
    # ------------------------------------------------------------------ facts
    ff = FileCheck(facts.where, facts.rownum, report)
    keep = np.ones(len(facts.frame), dtype=bool)
    if "modifier_cd" in facts.frame:
        mod = facts.frame["modifier_cd"].astype("string").fillna("@").str.strip()
        modifier = ~mod.isin(["@", ""]).to_numpy()
        if modifier.any():
            ff.flag(
                "warning",
                "modifier_cd",
                modifier,
                f"{int(modifier.sum())} modifier row(s) (modifier_cd other than '@') not used",
                "the facts themselves (modifier_cd '@')",
                "modifier_rows",
            )
            keep &= ~modifier
    f_pid = _ids(facts, ff, "patient_num")
    concept = facts.frame["concept_cd"].astype("string").fillna("").to_numpy(dtype=object)
    u_concept, u_index = np.unique(concept.astype(str), return_inverse=True)
    split = [_scheme_vocabulary(c.strip()) for c in u_concept]
    no_scheme_u = np.array([_SCHEME.match(c.strip()) is None for c in u_concept], dtype=bool)
    no_scheme = no_scheme_u[u_index] & keep
    if no_scheme.any():
        examples = ", ".join(repr(str(c)) for c in pd.unique(concept[no_scheme])[:MAX_ROWS])
        ff.flag(
            "error",
            "concept_cd",
            no_scheme,
            f"concept code(s) without a scheme prefix: {examples}; the vocabulary cannot be known",
            "i2b2 concept codes as SCHEME:code (ICD9:250.00, ICD10:E11.9, LOINC:4548-4)",
            "concept_no_prefix",
        )
    is_dx = np.array([v is not None for v, _ in split], dtype=bool)[u_index] & keep
    is_lab = np.array([bool(_LAB.match(c.strip())) for c in u_concept], dtype=bool)[u_index] & keep
    other = keep & ~is_dx & ~is_lab & ~no_scheme
    if not with_labs:
        other |= is_lab
    if other.any():
        heads = pd.Series(concept[other]).str.extract(r"^([^:]+):", expand=False).value_counts()
        listed = ", ".join(f"{k}: ({v} rows)" for k, v in list(heads.items())[:MAX_ROWS])
        ff.flag(
            "warning",
            "concept_cd",
            other,
            f"{int(other.sum())} fact(s) of other schemes not used: {listed}",
            "ICD9: / ICD10: diagnoses and LOINC: lab orders",
            "other_codes",
        )
    start = _dates(facts, ff, "start_date")
    f_person = patients_of(
        f_pid,
        pids,
        ff,
        "patient_num",
        "patient_dimension",
        "every fact's patient in table patient_dimension",
        keep,
    )
    if "concept_dimension" in reader.tables and reader.has("concept_dimension"):
        _check_concepts(reader, report, ff, concept, is_dx | is_lab)
    if len(report.errors) > n_err:
        return SourceData(None, report, sources=reader.sources)
    # ------------------------------------------------------------------ visits
    visit_day = start
    if "encounter_num" in facts.frame and reader.has("visit_dimension"):
        vis = reader.read("visit_dimension", report)
        if vis is not None:
            vf = FileCheck(vis.where, vis.rownum, report)
            v_ids = _ids(vis, vf, "encounter_num")
            v_start = _dates(vis, vf, "start_date")
            f_enc = _ids(facts, FileCheck(facts.where, facts.rownum, ValidationReport()), "encounter_num")
            first = pd.Series(np.arange(len(v_ids.codes))).groupby(v_ids.codes).first()
            pos = pd.Index(v_ids.uniques).get_indexer(f_enc.uniques)
            row_u = np.where(pos >= 0, first.reindex(np.maximum(pos, 0)).to_numpy(), -1)
            row_of = np.append(row_u, -1)[f_enc.codes]
            visit_day = np.where(row_of >= 0, v_start[np.maximum(row_of, 0)], start)
    dx = np.flatnonzero(is_dx)
    vocab = np.array([split[i][0] for i in u_index[dx]], dtype=object)
    code_part = np.array([split[i][1] for i in u_index[dx]], dtype=object)
    p_of_row = np.append(f_person, -1)[f_pid.codes][dx]
    raw = pd.DataFrame(
        {
            "patient_num": f_pid.array()[dx],
            "concept_cd (code)": code_part,
            "vocabulary (from the concept scheme)": vocab,
            "visit": _iso(visit_day[dx]),
            "start_date": start[dx],
        }
    )
    columns = {"patient_id": "patient_num", "code": "concept_cd (code)", "visit": "visit"}
    dfc = FileCheck(facts.where, facts.rownum[dx], report)
    b = birth[np.maximum(p_of_row, 0)]
    if len(dx) and not np.isnat(b).any():
        from engine.io.meds import _whole_years

        raw["age (from birth_date)"] = _whole_years(b, start[dx])
        columns["age"] = "age (from birth_date)"
    elif len(dx):
        missing = pd.unique(raw["patient_num"][np.isnat(b)])
        dfc.flag(
            "warning",
            "patient_num",
            np.isnat(b),
            f"{len(missing)} patient(s) without a birth_date (e.g. {', '.join(map(str, missing[:MAX_ROWS]))}): no ages",
            "patient_dimension.birth_date for every patient, for the longitudinal methods",
            "no_birth",
        )
    events = check_events(
        raw,
        dfc,
        columns,
        vocabulary="vocabulary (from the concept scheme)",
        date="start_date",
        normalize=normalize,
        unknown_codes=unknown_codes,
        drop_duplicates=drop_duplicates,
        na_ids=na_ids,
    )
    lab_frame = None
    if with_labs and is_lab.any():
        lab_frame = pd.DataFrame(
            {
                "patient_id": f_pid.array()[is_lab],
                "day": start[is_lab].astype("datetime64[ns]"),
                "lab": concept[is_lab].astype(str),
            }
        )
    return SourceData(events, report, lab_frame, reader.sources)


def _check_concepts(
    reader: _Reader, report: ValidationReport, ff: FileCheck, concept: np.ndarray, used: np.ndarray
) -> None:
    """A warning for used facts whose concept_cd is not in table concept_dimension."""
    where_sql = ""
    if reader.db is not None:  # only the concepts used, in SQL (concept_dimension is large)
        where_sql = (
            f"WHERE concept_cd IN (SELECT DISTINCT concept_cd FROM {reader.qualified('observation_fact')})"
        )
    table = reader.read("concept_dimension", report, where_sql)
    if table is None:
        return
    known = set(table.frame["concept_cd"].astype("string").fillna("").str.strip())
    absent = used & ~pd.Series(concept).astype(str).str.strip().isin(known).to_numpy()
    if absent.any():
        listed = ", ".join(repr(str(c)) for c in pd.unique(concept[absent])[:MAX_ROWS])
        ff.flag(
            "warning",
            "concept_cd",
            absent,
            f"{int(absent.sum())} fact(s) whose concept is not in table concept_dimension (used as written): {listed}",
            "every concept_cd in table concept_dimension",
            "absent_concept",
        )


__all__ = ["KEYS", "TABLES", "read_i2b2"]
