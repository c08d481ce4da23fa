"""engine/io/i2b2.py: the i2b2 star schema from CSV files, Parquet files, DuckDB and an SQLAlchemy URL."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from engine.io import detect_source, read_source
from engine.io.i2b2 import read_i2b2

I2B2_DIR = Path(__file__).resolve().parent / "data" / "i2b2"
TABLES = ("observation_fact", "patient_dimension", "visit_dimension", "concept_dimension")

EXPECTED = pd.DataFrame(
    {
        "patient_id": ["1", "1", "1", "1", "2", "2", "3", "4", "4"],
        "code": ["250.00", "401.9", "E11.9", "I48.91", "V45.81", "I10", "E11.65", "427.31", "272.4"],
        # the encounter's day (visit_dimension.start_date), ISO
        "visit": ["2013-04-02"] * 2
        + ["2016-06-20"] * 2
        + ["2014-09-30", "2015-10-01", "2017-02-11"]
        + ["2012-01-05"] * 2,
        # born 1950-03-14, 1962-07-01, 1975-11-02, 1948-07-30
        "age": [63, 63, 66, 66, 52, 53, 41, 63, 63],
    }
)
VOCAB = ["ICD9CM", "ICD9CM", "ICD10CM", "ICD10CM", "ICD9CM", "ICD10CM", "ICD10CM", "ICD9CM", "ICD9CM"]


def _check(data, rows: tuple[int, int] = (5, 11), in_file_order: bool = True) -> None:
    assert data.report.ok, data.report.to_frame()
    frame = data.events.frame.astype({"patient_id": str, "code": str, "visit": str})
    expected = EXPECTED.assign(vocabulary=VOCAB)
    frame = frame.assign(vocabulary=data.events.vocabulary.tolist())
    if not in_file_order:  # an SQL table has no order of its own: compare as sets of rows
        frame, expected = (
            f.sort_values(["patient_id", "code"], ignore_index=True) for f in (frame, expected)
        )
    pd.testing.assert_frame_equal(frame, expected, check_dtype=False)
    # the modifier row and the NDC fact are left out, each said with its row
    assert [(f.kind, f.rows) for f in data.report.warnings] == [
        ("modifier_rows", (rows[0],)),
        ("other_codes", (rows[1],)),
    ]
    assert data.labs["lab"].tolist() == ["LOINC:4548-4"]
    assert data.labs["day"].dt.strftime("%Y-%m-%d").tolist() == ["2016-06-20"]


def _duckdb(target: Path, source: Path = I2B2_DIR) -> Path:
    import duckdb

    con = duckdb.connect(str(target))
    for t in TABLES:
        con.execute(
            f"CREATE TABLE {t} AS SELECT * FROM read_csv(?, header = true)", [str(source / f"{t}.csv")]
        )
    con.close()
    return target


def _sqlite(target: Path, source: Path = I2B2_DIR) -> str:
    import sqlalchemy as sa

    url = f"sqlite:///{target}"
    engine = sa.create_engine(url)
    for t in TABLES:
        pd.read_csv(source / f"{t}.csv", dtype=str, keep_default_na=False).replace("", None).to_sql(
            t, engine, index=False
        )
    engine.dispose()
    return url


def test_csv_folder() -> None:
    data = read_i2b2(I2B2_DIR)
    _check(data)
    assert {f.file for f in data.report.warnings} == {"i2b2/observation_fact.csv"}
    assert detect_source(I2B2_DIR) == "i2b2"
    _check(read_source(I2B2_DIR))


def test_parquet_folder(tmp_path: Path) -> None:
    for t in TABLES:
        pd.read_csv(I2B2_DIR / f"{t}.csv", dtype=str, keep_default_na=False).to_parquet(
            tmp_path / f"{t}.parquet"
        )
    _check(read_i2b2(tmp_path))


def test_duckdb_file(tmp_path: Path) -> None:
    data = read_i2b2(_duckdb(tmp_path / "crc.duckdb"))
    _check(data, rows=(4, 10))  # storage order: the n-th row of the table
    assert data.report.warnings[0].file == "crc.duckdb, table observation_fact"
    _check(read_source(tmp_path / "crc.duckdb", source="i2b2"), rows=(4, 10))


def test_sqlite_url(tmp_path: Path) -> None:
    url = _sqlite(tmp_path / "crc.sqlite")
    data = read_i2b2(url)
    # rows in key order (patient_num, encounter_num, concept_cd, ...): the modifier row sorts 4th, the NDC fact 10th
    _check(data, rows=(4, 10), in_file_order=False)
    assert data.report.warnings[0].file.endswith(
        "table observation_fact (rows in patient_num, encounter_num, concept_cd, start_date, modifier_cd, "
        "instance_num order)"
    )


def _edit(tmp_path: Path, table: str, edit) -> Path:
    folder = shutil.copytree(I2B2_DIR, tmp_path / "crc")
    path = folder / f"{table}.csv"
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    edit(df)
    df.to_csv(path, index=False)
    return folder


def test_concept_without_a_prefix_is_a_named_error(tmp_path: Path) -> None:
    def edit(df):
        df.loc[1, "concept_cd"] = "401.9"

    data = read_i2b2(_edit(tmp_path, "observation_fact", edit))
    (err,) = data.report.errors
    assert err.kind == "concept_no_prefix" and err.column == "concept_cd" and err.rows == (3,)
    assert err.file == "crc/observation_fact.csv" and "'401.9'" in err.message


def test_missing_column_and_absent_patient(tmp_path: Path) -> None:
    folder = _edit(tmp_path / "a", "observation_fact", lambda df: df.pop("start_date"))
    (err,) = read_i2b2(folder).report.errors
    assert err.kind == "missing_column" and err.column == "start_date" and err.rows == (1,)
    assert "i2b2 1.7" in err.expected

    def edit(df):
        df.loc[6, "patient_num"] = "9"

    errors = read_i2b2(_edit(tmp_path / "b", "observation_fact", edit)).report.errors
    assert [(e.kind, e.rows, e.column) for e in errors] == [("absent_person", (8,), "patient_num")]


def test_a_modifier_row_of_an_absent_patient_is_not_an_error(tmp_path: Path) -> None:
    """Modifier rows are left out (a warning): their patient is not checked against patient_dimension,
    so an unknown patient there stops nothing (it raised an error naming no row)."""

    def edit(df):
        assert df.loc[3, "modifier_cd"] == "DX|PRINCIPAL"
        df.loc[3, "patient_num"] = "9"

    data = read_i2b2(_edit(tmp_path, "observation_fact", edit))
    _check(data)


def test_undotted_codes_need_normalization_and_keep_their_spelling(tmp_path: Path) -> None:
    def edit(df):
        df["concept_cd"] = df["concept_cd"].str.replace(".", "", regex=False)

    folder = _edit(tmp_path, "observation_fact", edit)
    assert read_i2b2(folder).report.errors[0].kind == "code_syntax"
    data = read_i2b2(folder, normalize=True)
    assert data.report.ok and data.events.frame["code"].tolist() == EXPECTED["code"].tolist()
    sp = data.events.spellings
    assert sp.loc[sp["item"] == "250.00", "original"].tolist() == ["25000"]


def test_without_birth_dates_there_are_no_ages(tmp_path: Path) -> None:
    folder = _edit(tmp_path, "patient_dimension", lambda df: df.__setitem__("birth_date", [""] * len(df)))
    data = read_i2b2(folder)
    assert "age" not in data.events.frame and data.report.of_kind("no_birth")


def test_unreachable_database() -> None:
    (err,) = read_i2b2("postgresql+psycopg://i2b2:pw@127.0.0.1:1/crc").report.errors
    assert err.kind == "unreachable" and err.file == "postgresql+psycopg://i2b2:***@127.0.0.1:1/crc"


@pytest.mark.parametrize("table", ["observation_fact", "patient_dimension"])
def test_missing_table(tmp_path: Path, table: str) -> None:
    folder = shutil.copytree(I2B2_DIR, tmp_path / "crc")
    (folder / f"{table}.csv").unlink()
    errors = read_i2b2(folder).report.errors
    assert [e.kind for e in errors] == ["missing_table"] and table in errors[0].message


def test_postgresql_url(postgres_url: str) -> None:
    # a real server: tests/pg_support.py (or COHORTSHIELD_TEST_POSTGRES_URL), fixture in tests/conftest.py
    import uuid

    import sqlalchemy as sa

    schema = f"cs_i2b2_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(postgres_url)
    try:
        with engine.begin() as con:
            con.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        for t in TABLES:
            pd.read_csv(I2B2_DIR / f"{t}.csv", dtype=str, keep_default_na=False).replace("", None).to_sql(
                t, engine, schema=schema, index=False
            )
        data = read_i2b2(postgres_url, schema=schema)
        _check(data, rows=(4, 10), in_file_order=False)  # as SQLite: rows in the key's order
        assert "***" in data.report.warnings[0].file and postgres_url.split(":")[2].split("@")[0] not in str(
            data.report.warnings[0].file
        )
    finally:
        with engine.begin() as con:
            con.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()
