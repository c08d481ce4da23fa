"""Writes the .xlsx fixture (tests/data/io/billing_export.xlsx): the billing export of
billing_export.csv as a workbook, codes as Text cells, dates as Excel dates, MRNs as numbers."""

from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path

IO_DIR = Path(__file__).resolve().parent / "data" / "io"


def build_xlsx(target: Path = IO_DIR / "billing_export.xlsx", *, codes_as_numbers: bool = False) -> Path:
    from openpyxl import Workbook

    with (IO_DIR / "billing_export.csv").open(newline="") as fh:
        rows = list(csv.reader(fh))
    wb = Workbook()
    ws = wb.active
    ws.title = "Diagnoses"
    ws.append(rows[0])
    for mrn, dx, day, seq, payer in rows[1:]:
        code: object = float(dx) if codes_as_numbers and dx.isdigit() else dx
        ws.append([int(mrn), code, datetime.fromisoformat(day), int(seq), payer])
        ws.cell(row=ws.max_row, column=2).number_format = "@"
    notes = wb.create_sheet("Notes")
    notes.append(["exported from the billing system; synthetic"])
    wb.save(target)
    return target


if __name__ == "__main__":
    build_xlsx()
