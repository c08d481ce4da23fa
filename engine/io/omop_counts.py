"""Cohort-vs-population distinguishability counted inside an OMOP CDM database (issue #37, "Push the
counting to the database").

The population's events never enter the Python process: for a CDM in a DuckDB file
(`engine.io.sql.Database`, read-only, external access off) or in PostgreSQL (a URL, its password never
shown) the population side runs as SQL over the events view `_events_sql` (`person_id`, item, day) and
only the cohort's events are loaded (`--cohort`, small). Under cohort scope the candidates are the
cohort's patients, the same SQL restricted to them:

1. per-code population supports: `COUNT(DISTINCT person_id) ... GROUP BY item`, over the items of the
   cohort's known sets only (a set of one item is its support: Tamersoy 2010 "Risk Measure");
2. candidate filter: for each known set of two or more items, the candidates are the population's
   patients holding its rarest item (the least supported, from step 1, the filter of
   `engine.risk` step 4); a join on a temporary table of the known sets keeps those holding every
   item of the set (relational division: `HAVING COUNT(*) = size`), counted per set;
3. the record's distinguishability is the minimum over its known sets (`engine.risk.KnownSets`).

Matching is on the whole record (a candidate holds every known item somewhere in its record), the
papers' released form and `engine.risk`'s default; repeats are not counted. With `cap` (`--up-to-k`)
every count reads min(count, cap) as in `engine.risk.count_known_sets`; the SQL itself counts in full.

An item is the condition's source value (trimmed) with the vocabulary of its source concept when the
CDM's `concept` table names one (`ICD9CM` / `ICD10CM`, `engine.io.normalize.vocabulary_value`), as
`engine.io.omop.read_omop` reads it with `--omop-codes source`: rows without a source value, or whose
source concept is of another vocabulary, are left out; the day is the visit's start date through
`visit_occurrence_id`, else `condition_start_date`. Not done in the database (the in-memory path does
them): cell validation and its findings (run `check` on the CDM first), `--normalize-codes`, the
2015-10-01 rule for codes without a concept that both vocabularies read (such codes are one item
here), standard concepts (`--omop-codes standard`).

Both dialects run the same statements; they differ in the parameter marker (`_marker`: DuckDB `?`,
psycopg `%s`), in psycopg reading a `%` of a table name as a marker (`_table`) and in PostgreSQL's
join order, held by a materialized CTE (`_materialized`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from engine.adversary import Knowledge, Scope
from engine.io.deployment import is_url
from engine.io.errors import UserError
from engine.io.loaders import require_patients
from engine.io.normalize import vocabulary_value
from engine.io.redact import redact
from engine.io.sql import DUCKDB_SUFFIXES, Database, connect
from engine.io.validation import ValidationReport
from engine.records import Records
from engine.risk import KnownSets, known_sets

_EXPECTED = "an OMOP CDM v5.4 in a DuckDB file or PostgreSQL (person, condition_occurrence)"
DIALECTS = ("duckdb", "postgresql")
# DuckDB's memory limit while counting: its joins and aggregates spill beyond it (1,000,000 patients:
# peak 1,215 MB with it, 4,672 MB without; bench/omop_indb.py)
MEMORY_LIMIT = "1GB"


@dataclass(frozen=True)
class DatabaseRisk:
    """The cohort (loaded from the database) and each cohort record's distinguishability against the
    population counted in the database."""

    cohort: Records
    known: KnownSets
    supports: dict[str, int]  # per item of a known set: population patients holding it

    @property
    def distinguishability(self) -> np.ndarray:
        return self.known.per_record()

    @property
    def n_candidates(self) -> int:
        return self.known.n_candidates


def open_cdm(location: str | Path, schema: str | None = None) -> Database:
    """The CDM's database, a DuckDB file or a PostgreSQL URL; a `UserError` (`DataError`) names what
    is wrong (passwords hidden): another kind of source, an unreachable server, a schema that does not
    exist, no `condition_occurrence` table."""
    text = str(location)
    if is_url(text):
        if not text.lower().startswith(("postgresql:", "postgresql+", "postgres:")):
            raise UserError(
                f"--in-database: {redact(text)} is not a PostgreSQL URL (counts in DuckDB or PostgreSQL)"
            )
    elif not text.lower().endswith(DUCKDB_SUFFIXES) or not Path(text).is_file():
        raise UserError(
            f"--in-database: {Path(text).name} is not a DuckDB file or PostgreSQL URL "
            "(counts in DuckDB or PostgreSQL only)"
        )
    report = ValidationReport()
    db = connect(location, schema, report, _EXPECTED, MEMORY_LIMIT)
    report.raise_if_errors()
    assert db is not None and db.dialect in DIALECTS  # connect reports every failure; checked above
    try:
        _check_tables(db)
    except BaseException:
        db.close()
        raise
    return db


def _marker(db: Database) -> str:
    """The driver's parameter marker: DuckDB `?`, psycopg `%s`."""
    return "?" if db.dialect == "duckdb" else "%s"


def _table(db: Database, name: str) -> str:
    """The table's qualified name in a statement with parameters (psycopg reads `%` as a marker)."""
    qualified = db.qualified(name)
    return qualified if db.dialect == "duckdb" else qualified.replace("%", "%%")


def _materialized(db: Database) -> str:
    """`MATERIALIZED ` for PostgreSQL, which inlines a CTE used once and then joined the known sets
    with every patient-item pair before the candidates (50,000 patients: 4.8 M rows, 11 s; 6.6 s so);
    DuckDB plans the candidates first by itself."""
    return "" if db.dialect == "duckdb" else "MATERIALIZED "


def _check_tables(db: Database) -> None:
    """A named `UserError` for a schema that does not exist or a CDM without `condition_occurrence`."""
    if db.schema is not None:
        found = db.query(
            f"SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = {_marker(db)}", [db.schema]
        )
        if not found[0][0]:
            raise UserError(f"{db.label}: no schema {db.schema!r} (--schema names the CDM's schema)")
    if db.columns("condition_occurrence") is None:
        where = f" in schema {db.schema!r}" if db.schema else ""
        raise UserError(f"{db.label}: no table condition_occurrence{where}; {_EXPECTED} is expected")


def _events_sql(
    db: Database, with_day: bool = True, persons: list[str] | None = None
) -> tuple[str, list[object]]:
    """SELECT person_id AS pid, item[, day] over the CDM's conditions (module docstring), of `persons`
    only when given, and its parameters in the order of their markers (`_marker`). The population's side matches
    whole records: it needs no day, so no join on the visits (a visit id is the table's key; should
    one repeat, its earliest start date is the visit's)."""
    cond_cols = {c.lower() for c in db.columns("condition_occurrence") or []}
    for column in ("person_id", "condition_start_date", "condition_source_value"):
        if column not in cond_cols:
            raise UserError(f"{db.label}, table condition_occurrence: no column {column}")
    cond, p = _table(db, "condition_occurrence"), _marker(db)
    code = "trim(CAST(c.condition_source_value AS VARCHAR))"
    in_persons = f"CAST({{}} AS VARCHAR) IN (SELECT unnest({p}::VARCHAR[]))"
    joins, where, vocab = "", [f"{code} <> ''"], "''"
    select_params: list[object] = []
    join_params: list[object] = []
    where_params: list[object] = []
    if "condition_source_concept_id" in cond_cols and db.columns("concept") is not None:
        used = db.query(
            f"SELECT DISTINCT CAST(vocabulary_id AS VARCHAR) FROM {_table(db, 'concept')} WHERE concept_id IN "
            f"(SELECT condition_source_concept_id FROM {cond})"
        )
        spellings: dict[str, list[str]] = {"ICD9CM": [], "ICD10CM": []}
        for (raw,) in used:
            got = vocabulary_value(str(raw))
            if got is not None:
                spellings[got].append(str(raw))
        joins += (
            f" LEFT JOIN {_table(db, 'concept')} co ON co.concept_id = c.condition_source_concept_id"
            " AND c.condition_source_concept_id <> 0"
        )
        vocab = (
            f"CASE WHEN co.vocabulary_id IN (SELECT unnest({p}::VARCHAR[])) THEN 'ICD9CM' "
            f"WHEN co.vocabulary_id IN (SELECT unnest({p}::VARCHAR[])) THEN 'ICD10CM' ELSE '' END"
        )
        select_params += [spellings["ICD9CM"], spellings["ICD10CM"]]
        # another vocabulary's source concept (SNOMED, ...): left out, as read_omop does
        where.append(f"(co.concept_id IS NULL OR co.vocabulary_id IN (SELECT unnest({p}::VARCHAR[])))")
        where_params.append(spellings["ICD9CM"] + spellings["ICD10CM"])
    day = "c.condition_start_date"
    if with_day and "visit_occurrence_id" in cond_cols and db.columns("visit_occurrence") is not None:
        only = ""
        if persons is not None:  # only the visits the persons' conditions name
            only = (
                f" WHERE visit_occurrence_id IN (SELECT visit_occurrence_id FROM {cond} WHERE "
                f"{in_persons.format('person_id')})"
            )
            join_params.append(persons)
        joins += (
            f" LEFT JOIN (SELECT visit_occurrence_id, min(visit_start_date) AS visit_start_date FROM "
            f"{_table(db, 'visit_occurrence')}{only} GROUP BY visit_occurrence_id) v "
            "ON v.visit_occurrence_id = c.visit_occurrence_id"
        )
        day = "coalesce(v.visit_start_date, c.condition_start_date)"
    if persons is not None:
        where.append(in_persons.format("c.person_id"))
        where_params.append(persons)
    columns = f"c.person_id AS pid, {vocab} || '|' || {code} AS item" + (
        f", {day} AS day" if with_day else ""
    )
    sql = f"SELECT {columns} FROM {cond} c{joins} WHERE {' AND '.join(where)}"
    return sql, select_params + join_params + where_params


def load_cohort(db: Database, cohort_ids: Sequence[str] | np.ndarray, where: str = "--cohort") -> Records:
    """The cohort's events (`patient_id`, `visit` = ISO day, `code` = item key), patients in the order
    of `cohort_ids`; a `UserError` names the ids that have no condition in the CDM, or an empty cohort
    (issue 37: no verdict on an empty cohort)."""
    ids = [str(i) for i in cohort_ids]
    require_patients(where, {"cohort": len(ids)}, "no patient id was given")
    events, params = _events_sql(db, persons=ids)
    rows = db.query(f"SELECT CAST(pid AS VARCHAR), CAST(day AS VARCHAR), item FROM ({events}) e", params)
    frame = pd.DataFrame(rows, columns=["patient_id", "visit", "code"])
    missing = sorted(set(ids) - set(frame["patient_id"]))
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise UserError(f"{where}: {len(missing)} patient(s) with no condition in {db.label}: {shown}")
    frame["order"] = frame["patient_id"].map({p: i for i, p in enumerate(ids)})
    frame = frame.sort_values(["order", "visit", "code"], kind="stable").drop(columns="order")
    return Records.from_frame(frame.reset_index(drop=True))


def database_distinguishability(
    db: Database,
    cohort: Records,
    knowledge: Knowledge,
    cap: int | None = None,
    scope: Scope = "population",
) -> DatabaseRisk:
    """Each cohort record's distinguishability against the CDM's population (every patient with a
    condition read), or under cohort scope against the cohort's patients, counted in the database
    (module docstring); `cap` as `Matching.cap`."""
    if knowledge not in ("single_visit", "all_visits"):
        raise UserError(f"--in-database counts single-visit and all-visits knowledge, not {knowledge}")
    persons = None if scope == "population" else [str(i) for i in cohort.patient_ids]
    events, params = _events_sql(db, with_day=False, persons=persons)
    p = _marker(db)
    known, owner = known_sets(cohort, knowledge)
    items = np.asarray(cohort.items, dtype=object).astype(str)
    # distinct known sets, each once (as `engine.risk` step 3)
    keys = [known.indices[known.indptr[r] : known.indptr[r + 1]].tobytes() for r in range(known.shape[0])]
    set_of_key: dict[bytes, int] = {}
    row_set = np.array([set_of_key.setdefault(k, len(set_of_key)) for k in keys], dtype=np.int64)
    sets = [items[np.frombuffer(k, dtype=known.indices.dtype)] for k in set_of_key]
    used = sorted({str(i) for s in sets for i in s})
    n_cand_row = db.query(f"SELECT COUNT(DISTINCT pid) FROM ({events}) e", params)
    n_cand = int(n_cand_row[0][0])
    require_patients(db.label, {scope: n_cand})
    got = db.query(
        f"SELECT item, COUNT(DISTINCT pid) FROM ({events}) e "
        f"WHERE item IN (SELECT unnest({p}::VARCHAR[])) GROUP BY item",
        [*params, used],
    )
    supports = {str(i): int(n) for i, n in got}
    values = np.empty(len(sets), dtype=np.int64)
    multi_sid, multi_item, rare_sid, rare_item, rare_size = [], [], [], [], []
    for sid, s in enumerate(sets):
        counts = [supports.get(str(i), 0) for i in s]
        if len(s) == 0:
            values[sid] = n_cand
        elif len(s) == 1 or min(counts) == 0:
            values[sid] = min(counts)
        else:
            multi_sid += [sid] * len(s)
            multi_item += [str(i) for i in s]
            rare_sid.append(sid)
            rare_item.append(str(s[int(np.argmin(counts))]))
            rare_size.append(len(s))
    if rare_sid:
        values[rare_sid] = 0
        # candidates: the patients holding the set's rarest item, kept when they hold every item
        rows = db.query(
            f"WITH e AS ({events}), "
            f"ks AS (SELECT unnest({p}::BIGINT[]) AS sid, unnest({p}::VARCHAR[]) AS item), "
            f"rare AS (SELECT unnest({p}::BIGINT[]) AS sid, unnest({p}::VARCHAR[]) AS item, "
            f"unnest({p}::BIGINT[]) AS n), "
            "pc AS (SELECT DISTINCT pid, item FROM e WHERE item IN (SELECT item FROM ks)), "
            "cand AS (SELECT r.sid, p.pid, r.n FROM rare r JOIN pc p ON p.item = r.item), "
            f"wanted AS {_materialized(db)}(SELECT c.sid, c.pid, c.n, k.item FROM cand c "
            "JOIN ks k ON k.sid = c.sid), "
            "held AS (SELECT w.sid, w.pid, w.n, COUNT(*) AS m FROM wanted w "
            "JOIN pc p ON p.pid = w.pid AND p.item = w.item GROUP BY w.sid, w.pid, w.n) "
            "SELECT sid, COUNT(*) FROM held WHERE m = n GROUP BY sid",
            [*params, multi_sid, multi_item, rare_sid, rare_item, rare_size],
        )
        for sid, n in rows:
            values[int(sid)] = int(n)
    if cap is not None:
        np.minimum(values, cap, out=values)
    ks = KnownSets(known, owner, values[row_set], cohort.n_patients, n_cand, cap)
    return DatabaseRisk(cohort, ks, supports)
