"""The CLI reads every source kind: `--events` an OMOP folder or DuckDB file, a MEDS folder, an .xlsx or
CSV billing export through `--map`, ICD-10-CM and mixed files; `--normalize-codes` reports its rewrites."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from engine.commands.cli import main
from tests.meds_support import MEDS_DIR
from tests.omop_support import OMOP_DIR, build_duckdb
from tests.xlsx_support import IO_DIR

BILLING_MAP = "patient_id=MRN,code=DX_CODE,visit=ENC_DATE"


def _risk(tmp_path: Path, *args: str) -> tuple[int, pd.DataFrame | None]:
    out = tmp_path / "risk.csv"
    rc = main(["risk", *args, "--knowledge", "all_visits", "--scope", "cohort", "--out", str(out)])
    return rc, (pd.read_csv(out, dtype={"patient_id": str}) if rc == 0 else None)


@pytest.mark.parametrize(
    ("events", "extra", "patients"),
    [
        (str(OMOP_DIR), [], 5),
        ("duckdb", [], 5),
        (str(MEDS_DIR), ["--normalize-codes"], 3),
        (str(IO_DIR / "billing_export.xlsx"), ["--map", BILLING_MAP, "--normalize-codes"], 3),
        (str(IO_DIR / "billing_export.csv"), ["--map", BILLING_MAP, "--normalize-codes"], 3),
        (str(IO_DIR / "events_icd10.csv"), [], 3),
        (str(IO_DIR / "events_mixed.csv"), [], 3),
        (str(Path(__file__).parent / "data" / "i2b2"), [], 4),
        ("sqlite", [], 5),
    ],
)
def test_every_source_kind_loads(
    tmp_path: Path, capsys, events: str, extra: list[str], patients: int
) -> None:
    if events == "duckdb":
        events = str(build_duckdb(tmp_path / "cdm.duckdb"))
    if events == "sqlite":  # an SQLAlchemy URL as --events
        from tests.omop_support import build_sql

        events = build_sql(f"sqlite:///{tmp_path / 'cdm.sqlite'}")
    rc, risk = _risk(tmp_path, "--events", events, *extra)
    err = capsys.readouterr().err
    assert rc == 0, err
    assert len(risk) == patients
    if "--normalize-codes" in extra:
        assert "normalized (dot" in err and "'25000' -> '250.00'" in err


def test_undotted_codes_without_the_option_name_the_rows(tmp_path: Path, capsys) -> None:
    rc, _ = _risk(tmp_path, "--events", str(IO_DIR / "billing_export.csv"), "--map", BILLING_MAP)
    err = capsys.readouterr().err
    assert rc == 2
    assert "file billing_export.csv, rows 2, 3, 5, 6, 8 (and 1 more), column 'DX_CODE'" in err
    # E119 without its dot is syntactically the ICD-9-CM E code E119: kept, and reported as unknown
    from engine.io.mapping import ColumnMapping, read_long

    path = IO_DIR / "billing_export.csv"
    report = read_long(path.name, path.read_bytes(), ColumnMapping.parse(BILLING_MAP)).report
    unknown = next(w for w in report.warnings if w.kind == "unknown_code")
    assert unknown.rows == (4,) and "unknown to the ICD-9-CM vocabulary" in unknown.message
    assert "'25000' looks undotted: '250.00'" in err


def test_bad_mapping_is_one_line(tmp_path: Path, capsys) -> None:
    rc, _ = _risk(tmp_path, "--events", str(IO_DIR / "billing_export.csv"), "--map", "patient_id=MRN")
    assert rc == 2 and "--map: mapping: code must be mapped" in capsys.readouterr().err
    rc, _ = _risk(tmp_path, "--events", str(OMOP_DIR), "--map", BILLING_MAP)
    assert rc == 2 and "applies to long-form files" in capsys.readouterr().err


def test_omop_errors_name_table_row_column(tmp_path: Path, capsys) -> None:
    import shutil

    folder = shutil.copytree(OMOP_DIR, tmp_path / "cdm")
    cond = pd.read_csv(folder / "condition_occurrence.csv", dtype=str, keep_default_na=False)
    cond.loc[3, "condition_start_date"] = "2016-02-30"
    cond.to_csv(folder / "condition_occurrence.csv", index=False)
    rc, _ = _risk(tmp_path, "--events", str(folder))
    err = capsys.readouterr().err
    assert rc == 2
    assert (
        "file cdm/condition_occurrence.csv, row 5, column 'condition_start_date': not a date: '2016-02-30'"
        in err
    )


def test_long_file_loader_accepts_icd10_and_xlsx(tmp_path: Path) -> None:
    """The events loader of every command (not only engine/io) reads ICD-10-CM and .xlsx files."""
    from engine.io.loaders import load_dataset, load_events

    icd10 = load_events(IO_DIR / "events_icd10.csv")
    assert icd10.report.ok and icd10.data["code"].tolist()[-1] == "ICD10CM:V45.5"
    mixed = load_events(IO_DIR / "events_mixed.csv")
    assert mixed.data["code"].tolist()[6] == "V45.5"  # dated before 2015-10-01: ICD-9-CM
    book = tmp_path / "events.xlsx"
    from openpyxl import Workbook

    wb = Workbook()
    wb.active.append(["patient_id", "code", "visit"])
    for row in (["P1", "250.00", 1], ["P1", "E11.9", 2], ["P2", "401.1", 1]):
        wb.active.append(row)
    wb.save(book)
    loaded = load_dataset(book)
    assert loaded.data.events.n_patients == 2 and loaded.report.ok
    from engine.io.errors import DataError

    with pytest.raises(DataError, match=r"required column 'patient_id' is missing.*did you mean 'MRN'"):
        load_events(IO_DIR / "billing_export.csv")  # its own header: the mapping is the way in


def test_events_loader_normalizes_when_asked(tmp_path: Path) -> None:
    from engine.io.loaders import load_events

    path = tmp_path / "ev.csv"
    path.write_text(
        "patient_id,code,visit\nP1,25000,2014-01-01\nP1,ICD10CM:E11.9,2016-01-01\nP2,I500,2017-01-01\n"
    )
    loaded = load_events(path, normalize=True)
    assert loaded.data["code"].tolist() == ["250.00", "E11.9", "I50.0"]
    kinds = {f.kind: f.rows for f in loaded.report.warnings}
    assert kinds["normalized_dot"] == (2, 4) and kinds["normalized_prefix"] == (3,)
