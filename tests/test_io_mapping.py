"""engine/io/mapping.py and engine/io/excel.py: a billing export with its own header, through a column
mapping, from CSV and from .xlsx; ICD-10-CM and mixed long-form files."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.io.mapping import ColumnMapping, read_long, suggest_mapping
from tests.xlsx_support import IO_DIR, build_xlsx

BILLING_MAP = ColumnMapping.parse("patient_id=MRN,code=DX_CODE,visit=ENC_DATE")
BILLING_CODES = ["250.00", "401.9", "E11.9", "I48.91", "V45.81", "I10", "E849.0", "J45.909"]


def _read(name: str, mapping=None, **kw):
    path = IO_DIR / name
    return read_long(path.name, path.read_bytes(), mapping, **kw)


def test_parse_and_print() -> None:
    m = ColumnMapping.parse(" patient_id = MRN , code=DX CODE,visit=ENC_DATE")
    assert m.as_dict() == {"patient_id": "MRN", "code": "DX CODE", "visit": "ENC_DATE"}
    assert str(m) == "patient_id=MRN,code=DX CODE,visit=ENC_DATE"
    assert ColumnMapping.parse(str(m)) == m


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("patient_id=MRN", "code must be mapped"),
        ("patient_id=MRN,code=DX,icd=DX2", "'icd' is not one of"),
        ("patient_id=MRN,code", "expected model=column"),
        ("patient_id=MRN,code=MRN", "mapped to more than one"),
        ("patient_id=A,patient_id=B,code=C", "mapped twice"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ColumnMapping.parse(text)


def test_suggestions_for_a_billing_header() -> None:
    s = suggest_mapping(["MRN", "DX_CODE", "ENC_DATE", "DX_SEQ", "PAYER", "CODE_SYSTEM"])
    assert s["patient_id"] == "MRN" and s["code"] == "DX_CODE" and s["vocabulary"] == "CODE_SYSTEM"
    assert s["visit"] == "ENC_DATE"


def test_billing_csv_through_the_mapping() -> None:
    refused = _read("billing_export.csv", BILLING_MAP)
    assert refused.report.errors[0].kind == "code_syntax"  # undotted: normalization is opt-in
    data = _read("billing_export.csv", BILLING_MAP, normalize=True)
    assert data.report.ok, data.report.to_frame()
    f = data.events.frame
    assert f["code"].tolist() == BILLING_CODES
    assert f["patient_id"].tolist()[:1] == ["100234"] and f["visit"].tolist()[0] == "2014-03-02"
    # E8490 reads as ICD-9-CM E849.0 and ICD-10-CM E84.90; only the first is a code
    assert data.events.vocabulary.tolist()[6] == "ICD9CM"
    extra = next(w for w in data.report.warnings if w.kind == "extra_columns")
    assert extra.column == "DX_SEQ, PAYER"
    assert data.dataset("billing").events.n_patients == 3


def test_mapping_names_a_column_the_file_lacks() -> None:
    data = _read("billing_export.csv", ColumnMapping.parse("patient_id=MRN,code=DX CODE"))
    (err,) = data.report.errors
    assert err.kind == "missing_column" and err.rows == (1,) and "did you mean 'DX_CODE'" in err.message
    assert err.file == "billing_export.csv"


def test_xlsx_fixture_reads_like_the_csv(tmp_path: Path) -> None:
    data = _read("billing_export.xlsx", BILLING_MAP, normalize=True)
    assert data.report.ok, data.report.to_frame()
    assert data.events.frame["code"].tolist() == BILLING_CODES
    assert data.events.frame["visit"].tolist()[0] == "2014-03-02"  # an Excel date, written ISO
    assert data.events.frame["patient_id"].tolist()[0] == "100234"  # a number cell, no '.0'
    # the committed workbook is what the builder writes (contents; the zip bytes carry timestamps)
    rebuilt = build_xlsx(tmp_path / "b.xlsx")
    again = read_long("b.xlsx", rebuilt.read_bytes(), BILLING_MAP, normalize=True)
    assert again.events.frame.equals(data.events.frame)


def test_xlsx_codes_stored_as_numbers_are_refused(tmp_path: Path) -> None:
    path = build_xlsx(tmp_path / "numbers.xlsx", codes_as_numbers=True)
    data = read_long(path.name, path.read_bytes(), BILLING_MAP, normalize=True)
    (err,) = data.report.errors
    assert err.kind == "code_numeric" and err.rows == (2, 3) and err.file == "numbers.xlsx, sheet Diagnoses"


def test_xlsx_sheet_by_name_and_missing_sheet() -> None:
    path = IO_DIR / "billing_export.xlsx"
    (err,) = read_long(path.name, path.read_bytes(), BILLING_MAP, sheet="Claims").report.errors
    assert err.kind == "missing_sheet" and "Diagnoses, Notes" in err.message
    notes = read_long(path.name, path.read_bytes(), BILLING_MAP, sheet="Notes").report.errors
    assert notes[0].kind == "empty_file"  # a header line and no data


def test_not_a_workbook() -> None:
    (err,) = read_long("broken.xlsx", b"PK\x03\x04not really a zip").report.errors
    assert err.kind == "bad_xlsx" and err.file == "broken.xlsx"


def test_icd10_events_file() -> None:
    data = _read("events_icd10.csv")
    assert data.report.ok, data.report.to_frame()
    assert set(data.events.vocabulary) == {"ICD10CM"}
    assert data.events.frame["code"].tolist()[-1] == "ICD10CM:V45.5"
    assert data.events.frame["visit"].tolist()[:3] == [1, 1, 2]  # whole-number visits as numbers


def test_mixed_events_file_uses_visit_dates() -> None:
    data = _read("events_mixed.csv")
    assert data.report.ok, data.report.to_frame()
    assert data.events.vocabulary.tolist() == [
        "ICD9CM",
        "ICD9CM",
        "ICD10CM",
        "ICD10CM",
        "ICD9CM",
        "ICD10CM",
        "ICD9CM",  # V45.5 on 2015-06-01: before the switch
        "ICD9CM",
        "ICD10CM",
    ]
    assert data.events.normalization.rules["date"] == 1
