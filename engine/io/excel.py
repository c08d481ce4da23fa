"""Excel `.xlsx` workbooks as long-form tables (openpyxl 3.1.5, read-only, values only).

The first sheet (or the one named) is read; row 1 is the header, as in a CSV file, and row numbers
are the sheet's own (what Excel shows). Empty rows are skipped. Cells become text: text as written,
whole numbers without `.0`, dates as ISO (`2014-03-01`, with the time when it is not midnight),
formulas as their cached value (a formula never computed in Excel reads as an empty cell). A cell
Excel stores as a number cannot keep a code's form (`250.00` is stored as 250), so the frame's
`attrs["numeric_cells"]` says which cells of each column were numbers, and the code check refuses
them in the code column.
"""

from __future__ import annotations

import io
from datetime import date, datetime, time

import numpy as np
import pandas as pd

from engine.io.validation import FileCheck, ValidationReport

XLSX_SIGNATURE = b"PK\x03\x04"
NUMERIC_CELLS = "numeric_cells"  # frame.attrs key: {column: mask of cells Excel stored as numbers}


def is_xlsx(name: str, data: bytes) -> bool:
    """A zip file named .xlsx / .xlsm (Excel 2007+ workbooks are zip archives)."""
    return data[:4] == XLSX_SIGNATURE and name.lower().endswith((".xlsx", ".xlsm"))


def check_xlsx(name: str, data: bytes) -> None:
    """The workbook's parts are read from the zip's directory before anything is parsed: their count
    within `max_zip_members` (from the zip's end record), each part's inflation within
    `max_expansion` (`engine.io.limits`, issue 40), and their uncompressed sizes together (shared
    strings, sheets, ...) within `max_xlsx_bytes` (`LimitExceeded` naming the largest part). zipfile
    never inflates a part beyond its recorded size, so the recorded sizes bound what openpyxl reads."""
    import zipfile

    from engine.io.deployment import LimitExceeded, Limits, limits
    from engine.io.limits import check_member, check_zip_entries

    lim = limits()
    most = lim.max_xlsx_bytes
    check_zip_entries(data, name, lim)
    try:
        infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, ValueError, OSError):
        return  # not a readable zip: openpyxl reports it
    total = sum(i.file_size for i in infos)
    if total > most:
        big = max(infos, key=lambda i: i.file_size)
        raise LimitExceeded(
            f"{name}: the workbook's parts inflate to {total:,} bytes ({big.filename}: {big.file_size:,}), "
            f"more than {most:,} (the limit {Limits.setting('max_xlsx_bytes')}); it was not read"
        )
    for info in infos:  # each within the total by now: its expansion
        check_member(info, name, most, "max_xlsx_bytes", lim)


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == time(0) else value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def read_xlsx(
    name: str, data: bytes, report: ValidationReport, sheet: str | None = None
) -> tuple[pd.DataFrame, FileCheck, dict[str, np.ndarray]] | None:
    """(text frame, FileCheck with the sheet's row numbers, {column: mask of numeric cells}); None
    after reporting an unreadable workbook, a missing sheet, an empty sheet or a bad header."""
    from openpyxl import load_workbook

    where = name if sheet is None else f"{name}, sheet {sheet}"
    fc = FileCheck(where, np.zeros(0, dtype=np.int64), report)
    from engine.io.deployment import LimitExceeded, Limits, limits

    try:
        check_xlsx(name, data)
    except LimitExceeded as exc:
        fc.note("error", None, str(exc), "a workbook within the input limits", "limit")
        return None
    lim = limits()
    try:
        wb = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises several types for a corrupt or non-xlsx file
        fc.note(
            "error",
            None,
            f"not a readable .xlsx workbook ({type(exc).__name__})",
            "an Excel .xlsx file",
            "bad_xlsx",
        )
        return None
    try:
        if sheet is not None and sheet not in wb.sheetnames:
            fc.note(
                "error",
                None,
                f"no sheet named {sheet!r} (sheets: {', '.join(wb.sheetnames)})",
                "the name of a sheet of the workbook",
                "missing_sheet",
            )
            return None
        ws = wb[sheet] if sheet is not None else wb.worksheets[0]
        fc.file = f"{name}, sheet {ws.title}"
        # the sheet's <dimension> is only what the file claims: openpyxl pads every row to its last
        # column (A1:NTP2: 10,000 values a row) and stops at its last row (rows after it dropped)
        ws.reset_dimensions()
        rows: list[tuple] = []
        numbers: list[int] = []
        seen = 0  # cells yielded, empty ones too
        for r, values in enumerate(ws.iter_rows(values_only=True), start=1):
            seen += len(values or ())
            if (values and len(values) > lim.max_columns) or r > lim.max_rows + 1 or seen > lim.max_cells:
                over = (
                    f"{len(values or ()):,} columns, more than {lim.max_columns:,} (the limit "
                    f"{Limits.setting('max_columns')})"
                    if len(values or ()) > lim.max_columns
                    else f"more than {lim.max_rows:,} rows (the limit {Limits.setting('max_rows')})"
                    if r > lim.max_rows + 1
                    else f"more than {lim.max_cells:,} cells (the limit {Limits.setting('max_cells')})"
                )
                fc.note("error", None, over, "a sheet within the input limits", "limit", (r,))
                return None
            if values and any(v is not None and str(v).strip() != "" for v in values):
                rows.append(values)
                numbers.append(r)
    finally:
        wb.close()
    if not rows:
        fc.note("error", None, "the sheet is empty", "a header row and at least one data row", "empty_file")
        return None
    header = [_text(v).strip() for v in rows[0]]
    width = max(len(r) for r in rows)
    header += [""] * (width - len(header))
    if numbers[0] != 1:
        fc.note("warning", None, f"the header is on row {numbers[0]}", "the header on row 1", "header_row")
    used = [i for i, h in enumerate(header) if h or any(len(r) > i and r[i] is not None for r in rows[1:])]
    names = [header[i] for i in used]
    blank_names = [i + 1 for i, h in zip(used, names, strict=True) if not h]
    repeated = sorted({h for h in names if h and names.count(h) > 1})
    if blank_names or repeated:
        what = []
        if blank_names:
            what.append(f"column(s) {', '.join(map(str, blank_names))} have data but no name")
        if repeated:
            what.append(f"column name(s) repeated: {', '.join(repr(h) for h in repeated)}")
        fc.note(
            "error",
            None,
            "; ".join(what),
            "one distinct name per column in the header",
            "bad_header",
            (numbers[0],),
        )
        return None
    body = rows[1:]
    if not body:
        fc.note(
            "error",
            None,
            "the sheet has a header but no data rows",
            "at least one data row",
            "empty_file",
            (1,),
        )
        return None
    cells = {n: [r[i] if len(r) > i else None for r in body] for n, i in zip(names, used, strict=True)}
    frame = pd.DataFrame({n: pd.array([_text(v) for v in col], dtype="str") for n, col in cells.items()})
    numeric = {
        n: np.array([isinstance(v, (int, float)) and not isinstance(v, bool) for v in col], dtype=bool)
        for n, col in cells.items()
    }
    fc.rownum = np.array(numbers[1:], dtype=np.int64)
    frame.attrs[NUMERIC_CELLS] = numeric  # for the code check (`engine.io.events.check_code_column`)
    return frame, fc, numeric
