"""engine/io/omop_counts.py on PostgreSQL (issue #37, "Push the counting to the database where the
events live in DuckDB or PostgreSQL"): the same counts as in DuckDB and as the in-memory path, on the
synthetic CDM (`sample --formats omop`) and on random CDMs copied into a throwaway server
(tests/pg_support.py, the `postgres_url` fixture of tests/conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bench.omop_indb import copy_to_postgres
from engine.adversary import Adversary
from engine.commands.cli import main
from engine.io.errors import UserError
from engine.io.omop import read_omop
from engine.io.omop_counts import database_distinguishability, load_cohort, open_cdm
from engine.records import Records
from engine.risk import Matching, original_distinguishability
from tests.test_omop_indb import TWO_VISITS_OF_ONE_DAY, conditions, write_cdm, write_cdm_with_visits

ADVERSARIES = [(s, k) for s in ("cohort", "population") for k in ("single_visit", "all_visits")]


def in_memory(source: str, schema: str, cohort_ids: list[str], adversary: Adversary, cap: int | None = None):
    """patient id -> distinguishability by the in-memory path (read_omop, engine.risk)."""
    data = read_omop(source, schema=schema, labs=False)
    data.report.raise_if_errors()
    assert data.events is not None
    population = Records.from_frame(data.events.frame)
    cohort = population.subset(np.array(cohort_ids, dtype=object))
    dis = original_distinguishability(cohort, adversary, population, Matching(cap=cap))
    return dict(zip(cohort.patient_ids.astype(str), dis.tolist(), strict=True))


def in_database(
    source: str, schema: str, cohort_ids: list[str], adversary: Adversary, cap: int | None = None
):
    db = open_cdm(source, schema)
    try:
        assert db.dialect == "postgresql"
        cohort = load_cohort(db, cohort_ids)
        got = database_distinguishability(db, cohort, adversary.knowledge, cap, adversary.scope)
    finally:
        db.close()
    return dict(zip(cohort.patient_ids.astype(str), got.distinguishability.tolist(), strict=True))


def drop(url: str, schema: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as con:
        con.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


@pytest.fixture(scope="module")
def sample_cdm(tmp_path_factory) -> Path:
    """`sample --formats omop`: a CDM of 400 generated patients (mixed ICD-9-CM / ICD-10-CM, visits)."""
    out = tmp_path_factory.mktemp("sample")
    assert main(["sample", "--out", str(out), "--patients", "400", "--labs", "no", "--formats", "omop"]) == 0
    return out / "omop" / "cdm.duckdb"


@pytest.fixture(scope="module")
def pg_cdm(postgres_url: str, sample_cdm: Path) -> Iterator[str]:
    """The sample CDM copied into a schema of the PostgreSQL server; yields the schema."""
    schema = f"cs_indb_{uuid.uuid4().hex[:8]}"
    copy_to_postgres(sample_cdm, postgres_url, schema)
    yield schema
    drop(postgres_url, schema)


def persons(url: str, schema: str) -> list[str]:
    engine = sa.create_engine(url)
    with engine.connect() as con:
        rows = con.execute(sa.text(f'SELECT person_id FROM "{schema}".person ORDER BY person_id')).fetchall()
    engine.dispose()
    return [str(p) for (p,) in rows]


@pytest.mark.parametrize(("scope", "knowledge"), ADVERSARIES)
def test_postgresql_counts_equal_the_in_memory_counts_under_every_adversary(
    postgres_url, pg_cdm, scope, knowledge
) -> None:
    cohort = persons(postgres_url, pg_cdm)[::3]
    adversary = Adversary(scope, knowledge)  # type: ignore[arg-type]
    expected = in_memory(postgres_url, pg_cdm, cohort, adversary)
    assert in_database(postgres_url, pg_cdm, cohort, adversary) == expected
    assert len(set(expected.values())) > 3  # counts of many sizes, not all unique


def test_postgresql_counts_up_to_k_equal_the_in_memory_counts(postgres_url, pg_cdm) -> None:
    cohort = persons(postgres_url, pg_cdm)[1::4]
    adversary = Adversary("population", "single_visit")
    expected = in_memory(postgres_url, pg_cdm, cohort, adversary, cap=5)
    assert in_database(postgres_url, pg_cdm, cohort, adversary, cap=5) == expected


@settings(max_examples=15, deadline=None)
@given(
    rows=conditions,
    adversary=st.sampled_from([Adversary(s, k) for s, k in ADVERSARIES]),  # type: ignore[arg-type]
    cap=st.sampled_from([None, 2]),
)
def test_postgresql_counts_equal_the_in_memory_counts_on_random_cdms(
    postgres_url, tmp_path_factory, rows, adversary, cap
) -> None:
    """tests/test_omop_indb.py's random CDMs (DuckDB), copied into PostgreSQL."""
    cdm = write_cdm(tmp_path_factory.mktemp("random") / "cdm.duckdb", rows)
    schema = f"cs_rand_{uuid.uuid4().hex[:8]}"
    copy_to_postgres(cdm, postgres_url, schema)
    try:
        ids = sorted({str(p) for p, _, _ in rows}, key=int)
        cohort = ids[::2]
        got = in_database(postgres_url, schema, cohort, adversary, cap)
        assert got == in_memory(postgres_url, schema, cohort, adversary, cap)
    finally:
        drop(postgres_url, schema)


@settings(max_examples=10, deadline=None)
@example(**TWO_VISITS_OF_ONE_DAY)  # tests/test_omop_indb.py's counterexample
@given(
    rows=conditions,
    visit_of=st.lists(st.integers(0, 3), min_size=40, max_size=40),
    knowledge=st.sampled_from(["single_visit", "all_visits"]),
)
def test_postgresql_visits_through_visit_occurrence_are_the_in_memory_visits(
    postgres_url, tmp_path_factory, rows, visit_of, knowledge
) -> None:
    """tests/test_omop_indb.py's random CDMs with visits (ids absent from visit_occurrence included),
    copied into PostgreSQL."""
    cdm = write_cdm_with_visits(tmp_path_factory.mktemp("visits") / "cdm.duckdb", rows, visit_of)
    schema = f"cs_visits_{uuid.uuid4().hex[:8]}"
    copy_to_postgres(cdm, postgres_url, schema)
    try:
        ids = sorted({str(p) for p, _, _ in rows}, key=int)
        cohort = ids[1::2] or ids
        adversary = Adversary("population", knowledge)
        assert in_database(postgres_url, schema, cohort, adversary) == in_memory(
            postgres_url, schema, cohort, adversary
        )
    finally:
        drop(postgres_url, schema)


def run_risk(events: str, schema: str, cohort_file: Path, out: Path, *extra: str) -> int:
    args = ["risk", "--events", events, "--schema", schema, "--source", "omop", "--cohort", str(cohort_file)]
    args += ["--scope", "population", "--knowledge", "single_visit", "--out", str(out), *extra]
    return main(args)


def test_risk_in_database_on_postgresql_writes_what_the_in_process_run_writes(
    postgres_url, pg_cdm, tmp_path, capsys
) -> None:
    """Refused before ("is not a DuckDB file"); the password is never printed."""
    cohort_file = tmp_path / "cohort.csv"
    cohort_file.write_text("patient_id\n" + "\n".join(persons(postgres_url, pg_cdm)[::-7]) + "\n")
    assert run_risk(postgres_url, pg_cdm, cohort_file, tmp_path / "memory.csv", "--up-to-k") == 0
    capsys.readouterr()
    code = run_risk(postgres_url, pg_cdm, cohort_file, tmp_path / "db.csv", "--up-to-k", "--in-database")
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert (tmp_path / "db.csv").read_text() == (tmp_path / "memory.csv").read_text()
    password = sa.engine.make_url(postgres_url).password
    assert password and password not in printed.out + printed.err
    assert "backend: in the database (postgresql+psycopg://cs:***@" in printed.out


@pytest.mark.parametrize("knowledge", ["single_visit", "all_visits"])
def test_risk_in_database_under_cohort_scope_writes_what_the_in_process_run_writes(
    postgres_url, pg_cdm, tmp_path, knowledge
) -> None:
    """Refused before ("give --scope population and --cohort"): the candidates are the cohort's patients."""
    cohort_file = tmp_path / "cohort.csv"
    cohort_file.write_text("patient_id\n" + "\n".join(persons(postgres_url, pg_cdm)[::2]) + "\n")
    outs = []
    for extra in ([], ["--in-database"]):
        out = tmp_path / f"out{len(outs)}.csv"
        args = ["risk", "--events", postgres_url, "--schema", pg_cdm, "--cohort", str(cohort_file)]
        assert main([*args, "--scope", "cohort", "--knowledge", knowledge, "--out", str(out), *extra]) == 0
        outs.append(out.read_text())
    assert outs[0] == outs[1]


def test_risk_in_database_needs_a_cohort(postgres_url, pg_cdm, tmp_path, capsys) -> None:
    args = ["risk", "--events", postgres_url, "--schema", pg_cdm, "--scope", "cohort"]
    assert main([*args, "--knowledge", "all_visits", "--out", str(tmp_path / "o.csv"), "--in-database"]) == 2
    assert "give --cohort IDS" in capsys.readouterr().err


def test_bad_postgresql_sources_are_named_errors(postgres_url, pg_cdm, tmp_path, capsys) -> None:
    """A schema that does not exist, a CDM without condition_occurrence, a cohort without any ICD
    condition (issue 37: no verdict, exit 2) and a non-PostgreSQL URL: one line each, no password."""
    cohort_file = tmp_path / "cohort.csv"
    cohort_file.write_text("patient_id\n1\n2\n")
    empty = f"cs_empty_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(postgres_url)
    with engine.begin() as con:
        con.execute(sa.text(f'CREATE SCHEMA "{empty}"'))
        con.execute(sa.text(f'CREATE TABLE "{empty}".person (person_id BIGINT, year_of_birth INTEGER)'))
        con.execute(
            sa.text(
                f'CREATE TABLE "{empty}".condition_occurrence (condition_occurrence_id BIGINT, '
                "person_id BIGINT, condition_start_date DATE, condition_source_value VARCHAR)"
            )
        )
        con.execute(sa.text(f'INSERT INTO "{empty}".person VALUES (1, 1950), (2, 1960)'))
    engine.dispose()
    nocond = f"cs_nocond_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(postgres_url)
    with engine.begin() as con:
        con.execute(sa.text(f'CREATE SCHEMA "{nocond}"'))
        con.execute(sa.text(f'CREATE TABLE "{nocond}".person (person_id BIGINT)'))
    engine.dispose()
    password = sa.engine.make_url(postgres_url).password
    try:
        for events, schema, message in (
            (postgres_url, "no_such_schema", "no schema 'no_such_schema'"),
            (postgres_url, nocond, f"no table condition_occurrence in schema '{nocond}'"),
            (postgres_url, empty, "2 patient(s) with no condition"),
            ("sqlite:////tmp/x.db", "main", "sqlite:////tmp/x.db is not a PostgreSQL URL"),
        ):
            capsys.readouterr()
            assert run_risk(events, schema, cohort_file, tmp_path / "o.csv", "--in-database") == 2
            err = capsys.readouterr().err
            assert message in err and password not in err
            assert "Traceback" not in err
    finally:
        drop(postgres_url, empty)
        drop(postgres_url, nocond)


def test_an_empty_cohort_is_refused(postgres_url, pg_cdm) -> None:
    db = open_cdm(postgres_url, pg_cdm)
    try:
        with pytest.raises(UserError, match="the cohort holds no patient"):
            load_cohort(db, [])
    finally:
        db.close()


def test_a_schema_named_with_a_percent_sign_is_counted(postgres_url, tmp_path) -> None:
    """psycopg reads `%` in a statement with parameters as a marker: table names double it
    (`omop_counts._table`)."""
    rows = [(1, 0, "250.00"), (1, 0, "401.9"), (2, 0, "250.00"), (3, 1, "401.9"), (3, 1, "250.00")]
    cdm = write_cdm(tmp_path / "cdm.duckdb", rows)
    schema = f"cs_50%_{uuid.uuid4().hex[:6]}"
    copy_to_postgres(cdm, postgres_url, schema)
    try:
        adversary = Adversary("population", "all_visits")
        got = in_database(postgres_url, schema, ["1", "3"], adversary)
        assert got == in_memory(postgres_url, schema, ["1", "3"], adversary) == {"1": 2, "3": 2}
    finally:
        drop(postgres_url, schema)


def test_an_unreachable_server_is_named_without_its_password() -> None:
    with pytest.raises(UserError, match="cannot open the database") as caught:
        open_cdm("postgresql+psycopg://officer:s3cret@127.0.0.1:1/cdm", "cdm")
    assert "officer:***@127.0.0.1:1/cdm" in str(caught.value) and "s3cret" not in str(caught.value)
