"""The patient groups a source defines, to choose an imported source's cohort from
(`engine.dataset.CohortSpec`, kind `group`; `engine.io.imports.cohort_ids`).

| source | groups read | a group's name |
|---|---|---|
| OMOP CDM v5.4 | table `cohort` (`cohort_definition_id`, `subject_id`); names from `cohort_definition` (`cohort_definition_name`) when that table is there | `cohort 3` or `cohort 3: Type 2 diabetes` |
| i2b2 1.7 (CRC) | table `qt_patient_set_collection` (`result_instance_id`, `patient_num`); `qt_query_result_instance.description` when there | `patient set 12` or `patient set 12: ...` |
| MEDS | `metadata/subject_splits.parquet` (`subject_id`, `split`) | `split train` |
| long form (CSV, Parquet, Excel) | a column of the file the user names: one group per distinct value | the value |

A source without such a table has no groups, and no finding says so (the import view states which
table it looks for). Ids are read as the events readers read them (`Text.of`: text, stripped), so a
group's ids compare with the events' patients. Every finding names the source, table, rows, column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from engine.io.roots import opened
from engine.io.validation import FileCheck, Text, ValidationReport, check_blank

MAX_GROUPS = 200  # distinct values of a long-form group column (more is no grouping: refused, named)
# kind -> (table, group id column, patient column, names table, name column, how a group is called)
TABLE_GROUPS: dict[str, tuple[str, str, str, str, str, str]] = {
    "omop": (
        "cohort",
        "cohort_definition_id",
        "subject_id",
        "cohort_definition",
        "cohort_definition_name",
        "cohort",
    ),
    "i2b2": (
        "qt_patient_set_collection",
        "result_instance_id",
        "patient_num",
        "qt_query_result_instance",
        "description",
        "patient set",
    ),
}
MEDS_SPLITS = Path("metadata") / "subject_splits.parquet"  # meds.subject_splits_filepath
WHERE = {
    "omop": "table cohort (cohort_definition_id, subject_id)",
    "i2b2": "table qt_patient_set_collection (result_instance_id, patient_num)",
    "meds": "metadata/subject_splits.parquet (subject_id, split)",
    "long": "a column of the file, one group per value",
    "excel": "a column of the sheet, one group per value",
}


@dataclass(frozen=True, eq=False)
class SourceGroups:
    """Groups of a source: name -> distinct patient ids (text, in order of first appearance), the
    findings of reading them, and where they were read from ("" when the source has none)."""

    groups: dict[str, np.ndarray] = field(default_factory=dict)
    report: ValidationReport = field(default_factory=ValidationReport)
    where: str = ""


def read_groups(
    kind: str,
    location: str | Path = "",
    *,
    schema: str | None = None,
    name: str = "",
    data: bytes | None = None,
    mapping: str = "",
    sheet: str | None = None,
    column: str = "",
) -> SourceGroups:
    """The groups of a source of `kind` (module docstring): a folder, DuckDB file or URL for OMOP
    and i2b2, a MEDS root, or a long-form file (`name` and `data`, read through `mapping`, grouped
    by `column`). Never raises on bad data: the findings are in the report."""
    report = ValidationReport()
    if kind in TABLE_GROUPS:
        return _table_groups(kind, location, schema, report)
    if kind == "meds":
        return _meds_groups(Path(location), report)
    if data is None:
        from engine.io.loaders import Source

        src = Source.from_path(location)  # text checked against the input limits while read
        name, data = src.name, src.data
    return _column_groups(name, data, mapping, sheet, column, report)


def _grouped(group: Text, patient: Text, rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """{group value: distinct patients of its rows}, groups and patients in order of first
    appearance; blank cells are left out (the caller reports them); `rows` limits the rows used."""
    g, p = group.codes, patient.codes
    keep = (g >= 0) & (p >= 0)
    keep &= (group.uniques != "")[np.maximum(g, 0)] & (patient.uniques != "")[np.maximum(p, 0)]
    if rows is not None:
        keep &= rows
    pairs = pd.DataFrame({"g": g[keep], "p": p[keep]}).drop_duplicates()
    return {
        str(group.uniques[k]): patient.uniques[v.to_numpy()] for k, v in pairs.groupby("g", sort=False)["p"]
    }


def _table_groups(
    kind: str, location: str | Path, schema: str | None, report: ValidationReport
) -> SourceGroups:
    """OMOP's cohort table or i2b2's patient sets, from a folder, a DuckDB file or a URL."""
    from engine.io import i2b2, omop
    from engine.io.sql import DatabaseReadError

    table, id_col, patient_col, names_table, name_col, called = TABLE_GROUPS[kind]
    tables = {table: ((id_col, patient_col), ()), names_table: ((id_col,), (name_col,))}
    keys = {table: (id_col, patient_col), names_table: (id_col,)}
    standard = "OMOP CDM v5.4" if kind == "omop" else i2b2.STANDARD
    expected = f"an {standard} folder, DuckDB file or database"
    reader = omop.open_reader(location, schema, report, expected, tables=tables, keys=keys, standard=standard)
    if reader is None:
        return SourceGroups(report=report)
    try:
        if not reader.has(table):
            return SourceGroups(report=report)
        t = reader.read(table, report)
        if t is None:
            return SourceGroups(report=report)
        fc = FileCheck(t.where, t.rownum, report)
        ids = Text.of(t.frame[id_col], fc, id_col)
        patients = Text.of(t.frame[patient_col], fc, patient_col)
        check_blank(ids, fc, id_col, f"a {id_col} in every row")
        check_blank(patients, fc, patient_col, f"a {patient_col} in every row")
        titles: dict[str, str] = {}
        if reader.has(names_table):
            nt = reader.read(names_table, report)
            if nt is not None and name_col in nt.frame:
                n_ids = Text.of(nt.frame[id_col]).values()
                n_names = Text.of(nt.frame[name_col]).values()
                titles = {str(i): str(n) for i, n in zip(n_ids, n_names, strict=True) if n}
        groups = {
            f"{called} {gid}" + (f": {titles[gid]}" if gid in titles else ""): members
            for gid, members in _grouped(ids, patients).items()
        }
        return SourceGroups(groups, report, t.where)
    except DatabaseReadError as exc:  # a file that is no database, a query the server refused
        FileCheck(reader.label, np.zeros(0, dtype=np.int64), report).note(
            "error", None, str(exc), expected, "unreadable"
        )
        return SourceGroups(report=report)
    finally:
        reader.close()


def _meds_groups(location: Path, report: ValidationReport) -> SourceGroups:
    """MEDS subject splits (`metadata/subject_splits.parquet` beside `data/`)."""
    import pyarrow.parquet as pq

    from engine.io.omop import check_parquet_file

    root = location if (location / "data").is_dir() else location.parent
    if not (root / MEDS_SPLITS).is_file():
        return SourceGroups(report=report)
    path = opened(root / MEDS_SPLITS)  # inside the data roots (engine.io.roots)
    where = f"{root.name}/{MEDS_SPLITS.as_posix()}"
    fc = FileCheck(where, np.zeros(0, dtype=np.int64), report)
    try:
        present = pq.read_schema(path).names
    except Exception as exc:  # pyarrow raises several types for a corrupt or non-Parquet file
        fc.note(
            "error",
            None,
            f"not a readable Parquet file ({type(exc).__name__})",
            "MEDS subject splits",
            "bad_parquet",
        )
        return SourceGroups(report=report)
    missing = [c for c in ("subject_id", "split") if c not in present]
    if missing:
        fc.note(
            "error",
            ", ".join(missing),
            f"required column(s) missing: {', '.join(missing)} (columns present: {', '.join(present)})",
            "the MEDS subject splits columns subject_id, split",
            "missing_column",
            (1,),
        )
        return SourceGroups(report=report)
    check_parquet_file(path, where, ["subject_id", "split"])  # limits from the metadata (LimitExceeded)
    df = pq.read_table(path, columns=["subject_id", "split"]).to_pandas()
    fc.rownum = np.arange(len(df), dtype=np.int64) + 2
    split, subject = Text.of(df["split"], fc, "split"), Text.of(df["subject_id"], fc, "subject_id")
    check_blank(subject, fc, "subject_id", "a subject_id in every row")
    groups = {f"split {s}": members for s, members in _grouped(split, subject).items()}
    return SourceGroups(groups, report, where)


def _column_groups(
    name: str, data: bytes, mapping: str, sheet: str | None, column: str, report: ValidationReport
) -> SourceGroups:
    """One group per distinct value of `column` of a long-form file (its patients are the mapping's
    `patient_id` column)."""
    from engine.io.excel import is_xlsx, read_xlsx
    from engine.io.loaders import Source, read_table
    from engine.io.mapping import ColumnMapping, resolve

    if is_xlsx(name, data):
        got = read_xlsx(name, data, report, sheet)
        if got is None:
            return SourceGroups(report=report)
        frame, fc, _ = got
    else:
        read = read_table(Source(name, data), report)
        if read is None:
            return SourceGroups(report=report)
        frame, fc = read
    scratch = ValidationReport()  # the load reports the mapping's findings; here only its patient column
    columns = resolve(
        frame, FileCheck(fc.file, fc.rownum, scratch), ColumnMapping.parse(mapping) if mapping else None
    )
    if columns is None or "patient_id" not in columns:
        fc.note(
            "error",
            None,
            "the patient column cannot be found: map it first",
            "a patient_id column",
            "missing_column",
            (1,),
        )
        return SourceGroups(report=report)
    patient = columns["patient_id"]
    present = [str(c) for c in frame.columns]
    if column not in present or column == patient:
        fc.note(
            "error",
            column or None,
            f"no group column {column!r} (columns present: {', '.join(present)})"
            if column != patient
            else f"the group column {column!r} is the patient column",
            "a column of the file other than the patient's, one group per value",
            "missing_column",
            (1,),
        )
        return SourceGroups(report=report)
    values = Text.of(frame[column])
    n = int((values.uniques != "").sum())
    if n > MAX_GROUPS:
        fc.note(
            "error",
            column,
            f"column {column!r} has {n:,} distinct values: a group column names at most {MAX_GROUPS} groups",
            f"a column naming groups (at most {MAX_GROUPS} distinct values)",
            "too_many_groups",
            (1,),
        )
        return SourceGroups(report=report)
    return SourceGroups(_grouped(values, Text.of(frame[patient])), report, f"{fc.file}, column {column}")
