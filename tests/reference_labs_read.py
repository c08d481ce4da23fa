"""The lab-order read as it was before issue 24's faster read (engine/io/loaders.py and
engine/io/validation.py at 5bcd6a8): Parquet strings decoded in full and factorized by pandas, the
first-occurrence duplicate mask by a stable sort of freshly packed keys. Copied verbatim (only the
functions' module prefix differs: `_read_parquet`, `read_table`, `check_duplicates` are this file's).
Kept as the plain reference the new read is compared with (tests/test_labs_read_fast.py,
bench/labs_read.py). Not used by the engine."""

from __future__ import annotations

import csv
import io
import re
import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from engine.io.loaders import (
    Source,
    _days,
    _exact_integers,
    _extra_columns,
    _longer_rows,
    _repeated_names,
    check_text,
)
from engine.io.validation import (
    FileCheck,
    NaIds,
    Text,
    ValidationReport,
    check_blank,
    check_ids,
    match_columns,
)
from engine.records import PATIENT


def first_occurrence_duplicates(keys: Sequence[np.ndarray]) -> np.ndarray:
    """True for rows equal on every key array to an earlier row (the first occurrence is kept).

    Integer keys are packed into one int64 (mixed radix) when their ranges allow, then one stable
    sort finds the repeats; otherwise a stable lexsort over the keys.
    """
    arrays = [np.asarray(k, dtype=np.int64) for k in keys]
    n = len(arrays[0])
    if n < 2:
        return np.zeros(n, dtype=bool)
    packed = np.zeros(n, dtype=np.int64)
    fits, span = True, 1  # fits: the keys pack into 62 bits
    for k in arrays:
        lo, hi = int(k.min()), int(k.max())
        width = hi - lo + 1
        if span * width >= 2**62:
            fits = False
            break
        packed = packed * width + (k - lo)
        span *= width
    if fits:
        order = np.argsort(packed, kind="stable")
        ks = packed[order]
        same = ks[1:] == ks[:-1]
    else:
        order = np.lexsort(tuple(reversed(arrays)))
        same = np.ones(n - 1, dtype=bool)
        for k in arrays:
            ks = k[order]
            same &= ks[1:] == ks[:-1]
    dup = np.zeros(n, dtype=bool)
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


def read_table(
    src: Source, report: ValidationReport, header: bool = True
) -> tuple[pd.DataFrame, FileCheck] | None:
    """Parse a CSV (as text cells) or Parquet file; None after reporting an unreadable file."""
    fc = FileCheck(src.name, np.zeros(0, dtype=np.int64), report)
    if len(src.data) == 0:
        fc.note(
            "error",
            None,
            "the file is empty (0 bytes)",
            "a header row and at least one data row",
            "empty_file",
        )
        return None
    if src.is_parquet:
        return _read_parquet(src, fc)
    if src.data[:2] == b"PK":
        from engine.io.excel import is_xlsx, read_xlsx

        if is_xlsx(src.name, src.data):  # Excel workbooks: the first sheet, engine/io/excel.py
            got = read_xlsx(src.name, src.data, report)
            return None if got is None else got[:2]
        fc.note(
            "error",
            None,
            "this is a zip/spreadsheet file, not CSV",
            "CSV text (export as CSV UTF-8) or Parquet",
            "not_text",
        )
        return None
    from engine.io.deployment import LimitExceeded

    try:
        check_text(src.name, src.data)  # before decoding or parsing: line length, rows, columns
    except LimitExceeded as exc:
        fc.note("error", None, str(exc), "a file within the input limits", "limit")
        return None
    try:
        text = src.data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        off = exc.start
        line = src.data.count(b"\n", 0, off) + 1
        char = off - (src.data.rfind(b"\n", 0, off) + 1) + 1
        fc.note(
            "error",
            None,
            f"not UTF-8 text: byte 0x{src.data[off]:02x} at byte offset {off} (line {line}, character {char})",
            "UTF-8 encoded text (re-save the file as UTF-8)",
            "not_utf8",
            rows=(line,),
        )
        return None
    if "\x00" in text:
        fc.note("error", None, "binary content (NUL bytes)", "CSV text or Parquet", "not_text")
        return None
    lines = text.splitlines()
    nonblank = np.array([i + 1 for i, ln in enumerate(lines) if ln.strip()], dtype=np.int64)
    if len(nonblank) == 0:
        fc.note(
            "error",
            None,
            "the file is empty (no text)",
            "a header row and at least one data row",
            "empty_file",
        )
        return None
    first = lines[nonblank[0] - 1]
    sep = "," if "," in first else "\t" if "\t" in first else ";" if ";" in first else ","
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pd.errors.ParserWarning)
            df = pd.read_csv(
                io.StringIO(text),
                sep=sep,
                dtype=str,
                keep_default_na=False,
                header=0 if header else None,
                index_col=False,  # never turn extra fields into an index (that reshapes the rows)
            )
        warned = any(issubclass(w.category, pd.errors.ParserWarning) for w in caught)
        if warned and _longer_rows(text, sep, nonblank, fc):
            return None
    except pd.errors.ParserError as exc:
        m = re.search(r"line (\d+), saw (\d+)", str(exc))
        rows = (int(m.group(1)),) if m else ()
        what = f"this row has {m.group(2)} fields, more than the header" if m else f"cannot parse: {exc}"
        fc.note(
            "error",
            None,
            what,
            "the same number of fields on every row as in the header",
            "parse_error",
            rows,
        )
        return None
    except pd.errors.EmptyDataError:
        fc.note("error", None, "the file is empty", "a header row and at least one data row", "empty_file")
        return None
    if header and _repeated_names(next(csv.reader([first], delimiter=sep), []), fc):
        return None
    data_lines = nonblank[1:] if header else nonblank
    fc.rownum = data_lines if len(data_lines) == len(df) else np.arange(len(df)) + (2 if header else 1)
    if len(df) == 0:
        fc.note(
            "error",
            None,
            "the file has a header but no data rows",
            "at least one data row",
            "empty_file",
            (1,),
        )
        return None
    df.columns = [str(c) for c in df.columns]
    return df, fc


def _read_parquet(src: Source, fc: FileCheck) -> tuple[pd.DataFrame, FileCheck] | None:
    try:
        import pyarrow.parquet as pq

        df = pq.read_table(io.BytesIO(src.data)).to_pandas(types_mapper=_exact_integers)
    except Exception as exc:  # pyarrow raises several types for a corrupt or non-Parquet file
        fc.note(
            "error",
            None,
            f"not a readable Parquet file ({type(exc).__name__}: {exc})",
            "a Parquet file",
            "bad_parquet",
        )
        return None
    if len(df) == 0:
        fc.note("error", None, "the file has columns but no data rows", "at least one data row", "empty_file")
        return None
    df = df.reset_index(drop=True)
    df.columns = [str(c) for c in df.columns]
    fc.rownum = np.arange(len(df), dtype=np.int64) + 2
    return df, fc


def _labs(src: Source, report: ValidationReport, drop_duplicates: bool, na_ids: NaIds) -> pd.DataFrame | None:
    read = read_table(src, report)
    if read is None:
        return None
    df, fc = read
    n_err = len(report.errors)
    cols = match_columns(df, fc, (PATIENT, "day", "lab"))
    if len(report.errors) > n_err:
        return None
    _extra_columns(df, fc, cols)
    pid = Text.of(df[cols[PATIENT]], fc, cols[PATIENT])
    check_ids(pid, fc, cols[PATIENT], na_ids, df[cols[PATIENT]])
    lab = Text.of(df[cols["lab"]], fc, cols["lab"])
    check_blank(lab, fc, cols["lab"], "a lab test name or LOINC code in every row")
    day = _days(df[cols["day"]], fc, cols["day"])
    if len(report.errors) > n_err or day is None:
        return None
    day_key = day.view(np.int64) if day.dtype.kind == "M" else day
    dup = check_duplicates(
        [pid.codes, day_key, lab.codes],
        fc,
        [cols[PATIENT], cols["day"], cols["lab"]],
        "drop" if drop_duplicates else "keep",
    )
    frame = pd.DataFrame({PATIENT: pid.array(), "day": day, "lab": lab.array()})
    if drop_duplicates and dup.any():
        frame = frame.loc[~dup].reset_index(drop=True)
    return frame
