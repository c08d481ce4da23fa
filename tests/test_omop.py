"""engine/io/omop.py: OMOP CDM v5.4 from CSV files, Parquet files and a DuckDB database."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.io.errors import DataError
from engine.io.omop import read_omop
from tests.omop_support import OMOP_DIR, build_duckdb, export_parquet

EXPECTED = pd.DataFrame(
    {
        "patient_id": ["1", "1", "1", "1", "2", "2", "3", "4", "4", "5"],
        "code": [
            "250.00",
            "401.9",
            "E11.9",
            "I48.91",
            "V45.81",
            "I10",
            "E11.65",
            "427.31",
            "272.4",
            "J45.909",
        ],
        "visit": ["2013-04-02"] * 2
        + ["2016-06-20"] * 2
        + ["2014-09-30", "2015-10-01", "2017-02-11"]
        + ["2012-01-05"] * 2
        + ["2019-08-08"],
        # born 1950-03-14, 1962 (1 July assumed), 1975-11-02, 1948-07-30, 1990-01-01
        "age": [63, 63, 66, 66, 52, 53, 41, 63, 63, 29],
    }
)
VOCAB = [
    "ICD9CM",
    "ICD9CM",
    "ICD10CM",
    "ICD10CM",
    "ICD9CM",
    "ICD10CM",
    "ICD10CM",
    "ICD9CM",
    "ICD9CM",
    "ICD10CM",
]


@pytest.fixture(scope="module")
def duckdb_file(tmp_path_factory) -> Path:
    return build_duckdb(tmp_path_factory.mktemp("omop") / "cdm.duckdb")


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory, duckdb_file) -> Path:
    return export_parquet(duckdb_file, tmp_path_factory.mktemp("omop_parquet"))


def _check(data) -> None:
    assert data.report.ok, data.report.to_frame()
    frame = data.events.frame.assign(patient_id=lambda d: d["patient_id"].astype(str))
    pd.testing.assert_frame_equal(
        frame.astype({"code": object, "patient_id": object, "visit": object}),
        EXPECTED.astype({"code": object, "patient_id": object, "visit": object}),
        check_dtype=False,
    )
    assert data.events.vocabulary.tolist() == VOCAB
    kinds = [(f.kind, f.rows) for f in data.report.warnings]
    # the condition without a source value and the SNOMED one are left out, each said
    assert [k for k, _ in kinds] == ["no_source_code", "other_vocabulary"]
    assert data.labs["lab"].tolist() == ["HbA1c", "ALT", "HbA1c", "3019550"]
    assert data.labs["day"].dt.strftime("%Y-%m-%d").tolist()[0] == "2016-06-20"


def test_csv_folder() -> None:
    data = read_omop(OMOP_DIR)
    _check(data)
    assert {f.file for f in data.report.warnings} == {"omop/condition_occurrence.csv"}
    assert [f.rows for f in data.report.warnings] == [(8,), (10,)]  # header is row 1
    assert set(data.sources) >= {"omop/person.csv", "omop/condition_occurrence.csv"}


def test_parquet_folder(parquet_dir: Path) -> None:
    _check(read_omop(parquet_dir))


def test_duckdb_file(duckdb_file: Path) -> None:
    data = read_omop(duckdb_file)
    _check(data)
    assert data.report.warnings[0].file == "cdm.duckdb, table condition_occurrence"
    assert data.report.warnings[0].rows == (7,)  # the 7th row of the table
    assert list(data.sources) == ["cdm.duckdb"]


def test_duckdb_schema(tmp_path: Path) -> None:
    db = build_duckdb(tmp_path / "cdm.duckdb", schema="cdm")
    _check(read_omop(db, schema="cdm"))
    assert read_omop(db, schema="other").report.errors[0].kind == "missing_table"


def test_dataset_and_phewas_on_mixed_codes() -> None:
    from engine.utility.phewas import phenotype_matrix

    ds = read_omop(OMOP_DIR).dataset("omop")
    assert ds.events.n_patients == 5 and ds.labs is not None
    pm = phenotype_matrix(ds.events)
    col = {p: j for j, p in enumerate(pm.phecodes)}
    cases = pm.cases(1).toarray()
    # person 1 has 250.00 (ICD-9) and E11.9 (ICD-10): one type 2 diabetes phenotype, two visits
    assert pm.counts.toarray()[0, col["250.2"]] == 2 and cases[2, col["250.2"]] == 1
    assert cases[0, col["427.21"]] == 1 and cases[3, col["427.21"]] == 1


def test_without_concept_table_the_vocabulary_is_inferred(tmp_path: Path) -> None:
    folder = shutil.copytree(OMOP_DIR, tmp_path / "cdm")
    (folder / "concept.csv").unlink()
    data = read_omop(folder)
    # the SNOMED code 73211008 is now read as a code: no vocabulary reads it
    (err,) = data.report.errors
    assert err.kind == "code_syntax" and err.rows == (10,) and "'73211008'" in err.message


def _edit(tmp_path: Path, table: str, edit) -> Path:
    folder = shutil.copytree(OMOP_DIR, tmp_path / "cdm")
    path = folder / f"{table}.csv"
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    edit(df)
    df.to_csv(path, index=False)
    return folder


def test_bad_cells_are_named(tmp_path: Path) -> None:
    def edit(df):
        df.loc[2, "condition_start_date"] = "20/06/2016"
        df.loc[4, "person_id"] = "99"

    data = read_omop(_edit(tmp_path, "condition_occurrence", edit))
    errors = {e.kind: e for e in data.report.errors}
    assert errors["date_invalid"].rows == (4,) and errors["date_invalid"].column == "condition_start_date"
    assert "'20/06/2016'" in errors["date_invalid"].message
    assert errors["absent_person"].rows == (6,) and "'99'" in errors["absent_person"].message
    assert all(e.file == "cdm/condition_occurrence.csv" for e in data.report.errors)
    with pytest.raises(
        DataError, match=r"cdm/condition_occurrence\.csv, row 4, column 'condition_start_date'"
    ):
        data.dataset("x")


def test_person_table_errors(tmp_path: Path) -> None:
    def edit(df):
        df.loc[1, "person_id"] = "1"
        df.loc[3, "year_of_birth"] = "19x8"

    errors = {e.kind: e for e in read_omop(_edit(tmp_path, "person", edit)).report.errors}
    assert errors["duplicate_person"].rows == (3,)
    assert (
        errors["year_of_birth_invalid"].rows == (5,)
        and errors["year_of_birth_invalid"].file == "cdm/person.csv"
    )


def test_missing_table_and_column(tmp_path: Path) -> None:
    folder = shutil.copytree(OMOP_DIR, tmp_path / "cdm")
    (folder / "person.csv").unlink()
    (err,) = read_omop(folder).report.errors
    assert err.kind == "missing_table" and "person" in err.message
    folder2 = _edit(tmp_path / "b", "condition_occurrence", lambda df: df.pop("condition_start_date"))
    (err,) = read_omop(folder2).report.errors
    assert err.kind == "missing_column" and err.column == "condition_start_date" and err.rows == (1,)


def test_event_before_birth_is_an_error(duckdb_file: Path, tmp_path: Path) -> None:
    folder = _edit(tmp_path, "person", lambda df: df.__setitem__("year_of_birth", ["2020"] * len(df)))
    errors = read_omop(folder).report.errors
    assert errors[0].column == "age (from year_of_birth)" and errors[0].kind.endswith("_range")


def test_undotted_source_values_need_normalization(tmp_path: Path) -> None:
    def edit(df):
        df["condition_source_value"] = df["condition_source_value"].str.replace(".", "", regex=False)

    folder = _edit(tmp_path, "condition_occurrence", edit)
    refused = read_omop(folder)
    assert refused.report.errors[0].kind == "code_syntax"
    assert "'25000' looks undotted: '250.00'" in refused.report.errors[0].message
    assert "'E1165' looks like an undotted ICD-10-CM code" in refused.report.errors[0].message
    data = read_omop(folder, normalize=True)
    assert data.report.ok and data.events.frame["code"].tolist() == EXPECTED["code"].tolist()
    dot = next(f for f in data.report.warnings if f.kind == "normalized_dot")
    assert "'25000' -> '250.00'" in dot.message
    sp = data.events.spellings
    assert sp.loc[sp["item"] == "E11.9", "original"].tolist() == ["E119"]


def test_visit_occurrence_ids_as_visits() -> None:
    data = read_omop(OMOP_DIR, visits="occurrence")
    assert data.events.frame["visit"].tolist()[:5] == ["101", "101", "102", "102", "103"]
    assert data.events.frame["visit"].tolist()[8] == "2012-01-05"  # no visit: its date
    assert np.array_equal(data.events.vocabulary, VOCAB)


def test_year_of_birth_alone_never_gives_a_negative_age(tmp_path: Path) -> None:
    # person 2 has only year_of_birth (1962); an event on 1962-02-01 is age 0, not -1 (1 July rule)
    def edit(df):
        df.loc[df["condition_occurrence_id"] == "1005", "condition_start_date"] = "1962-02-01"

    folder = _edit(tmp_path, "condition_occurrence", edit)
    data = read_omop(folder, visits="occurrence")
    assert data.report.ok, data.report.to_frame()
    assert data.events.frame["age"].tolist()[4] == 0


# ------------------------------------------------------------------ SQLAlchemy URLs
def test_sqlite_url(tmp_path: Path) -> None:
    from tests.omop_support import build_sql

    url = build_sql(f"sqlite:///{tmp_path / 'cdm.sqlite'}")
    data = read_omop(url)
    _check(data)
    # SQL tables have no storage order: rows are numbered in the order of the table's key
    warning = data.report.warnings[0]
    assert warning.file == f"{url}, table condition_occurrence (rows in condition_occurrence_id order)"
    assert warning.rows == (7,)
    assert list(data.sources) == [url]


def test_sql_reads_only_the_columns_needed(tmp_path: Path, monkeypatch) -> None:
    from engine.io.sql import Database
    from tests.omop_support import build_sql

    url = build_sql(f"sqlite:///{tmp_path / 'cdm.sqlite'}")
    seen: list[str] = []
    fetch = Database._fetch

    def spy(self, sql, columns):
        seen.append(sql)
        return fetch(self, sql, columns)

    monkeypatch.setattr(Database, "_fetch", spy)
    _check(read_omop(url))
    person = next(s for s in seen if 'FROM "person"' in s)
    assert "gender_concept_id" not in person and '"year_of_birth"' in person
    concept = next(s for s in seen if 'FROM "concept"' in s)
    assert "WHERE concept_id IN" in concept and "concept_name" not in concept
    assert len(seen) == 5 and not any("SELECT *" in s for s in seen)


def test_sql_missing_column_is_named(tmp_path: Path) -> None:
    import sqlalchemy as sa

    from tests.omop_support import build_sql

    url = build_sql(f"sqlite:///{tmp_path / 'cdm.sqlite'}")
    engine = sa.create_engine(url)
    with engine.begin() as con:
        con.execute(sa.text("ALTER TABLE condition_occurrence DROP COLUMN condition_start_date"))
    engine.dispose()
    (err,) = read_omop(url).report.errors
    assert err.kind == "missing_column" and err.column == "condition_start_date" and err.rows == (1,)
    assert err.file.endswith("table condition_occurrence (rows in condition_occurrence_id order)")


def test_unreachable_url_is_a_named_error() -> None:
    # nothing listens on port 1; the password never appears in the finding
    data = read_omop("postgresql+psycopg://officer:s3cret@127.0.0.1:1/cdm")
    (err,) = data.report.errors
    assert err.kind == "unreachable" and "cannot open the database" in err.message
    assert err.file == "postgresql+psycopg://officer:***@127.0.0.1:1/cdm" and "s3cret" not in err.message
    (bad,) = read_omop("nosuchdialect://x/y").report.errors
    assert bad.kind == "unreachable" and bad.file == "nosuchdialect://x/y"


def test_postgresql_url(postgres_url: str) -> None:
    # a real server: tests/pg_support.py (or COHORTSHIELD_TEST_POSTGRES_URL), fixture in tests/conftest.py
    import uuid

    import sqlalchemy as sa

    from tests.omop_support import build_sql

    schema = f"cs_test_{uuid.uuid4().hex[:8]}"
    build_sql(postgres_url, schema=schema)
    try:
        data = read_omop(postgres_url, schema=schema)
        _check(data)
        assert data.report.warnings[0].rows == (7,)
    finally:
        engine = sa.create_engine(postgres_url)
        with engine.begin() as con:
            con.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


# ---------------------------------------------------------------- issue 25: safe on a shared server
def test_a_condition_table_with_a_header_only_is_a_warning_naming_it(tmp_path: Path) -> None:
    folder = shutil.copytree(OMOP_DIR, tmp_path / "cdm")
    header = (folder / "condition_occurrence.csv").read_text().splitlines()[0]
    (folder / "condition_occurrence.csv").write_text(header + "\n")
    data = read_omop(folder)
    warned = [w for w in data.report.warnings if w.kind == "empty_table"]
    assert warned and "condition_occurrence" in warned[0].file and "0 patients" in warned[0].message


def test_an_sqlite_url_never_creates_a_file_and_a_non_database_is_named(tmp_path: Path) -> None:
    target = tmp_path / "NEWPATH.sqlite"
    data = read_omop(f"sqlite:///{target}")
    assert data.events is None and not target.exists()
    assert data.report.errors[0].kind == "unreachable"
    not_db = tmp_path / "passwd"
    not_db.write_text("root:x:0:0:root:/root:/bin/bash\n")
    data = read_omop(f"sqlite:///{not_db}")  # a file that is no database: a finding, not a traceback
    assert data.events is None and "the database cannot be read" in data.report.errors[0].message
    assert not_db.read_text().startswith("root:")


@pytest.mark.parametrize("visits", ["date", "occurrence"])
def test_an_empty_visit_table_dates_every_condition_by_its_start_date(tmp_path: Path, visits: str) -> None:
    """Bug report (found this session): an empty visit_occurrence ended in an IndexError traceback; every
    condition's visit is then absent, so it is named and dated by its condition_start_date."""
    folder = _edit(tmp_path, "visit_occurrence", lambda df: df.drop(df.index, inplace=True))
    data = read_omop(folder, visits=visits)
    assert data.events is not None and len(data.events.frame) > 0
    assert any(f.kind == "absent_visit" for f in data.report.warnings)
