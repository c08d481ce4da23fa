"""Databases as sources: a DuckDB file or any SQLAlchemy URL (PostgreSQL through psycopg, SQLite, ...).

One small interface for the table readers (`engine.io.omop`, `engine.io.i2b2`): the columns a table has,
and a table read with only the columns asked for, selected in SQL (`SELECT a, b FROM t [WHERE ...]`).

Rows are numbered so that a finding can name them:
- DuckDB: row n is the n-th row in storage order (`rowid + 1`);
- SQLAlchemy: SQL tables have no storage order, so row n is the n-th row in the order of the table's
  key (`person_id`, `condition_occurrence_id`, ...; the reader names the key) and the source says so
  (`postgresql://cohort@db/cdm, table person (rows in person_id order)`).

A URL is shown with its password hidden, in findings and in the study (`sources`). A database that
cannot be reached, a missing driver or a malformed URL is a finding (kind `unreachable`), never a
traceback.

A DuckDB file is opened read-only with external access off (`DUCKDB_CONFIG`, issue #40): its views
and macros cannot read other files (`read_text`, `read_csv`, `read_parquet`, `/proc/self/environ`),
attach databases or load extensions; such a view is a `DatabaseReadError` naming the database.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from engine.io.deployment import PathRefused, is_url
from engine.io.errors import UserError
from engine.io.extras import MissingExtra, require
from engine.io.redact import redact, redact_text
from engine.io.roots import opened
from engine.io.validation import FileCheck, ValidationReport

DUCKDB_SUFFIXES = (".duckdb", ".ddb", ".db")
# A database file never reads other files (issue #40, finding 2): a view over read_text('/proc/self/
# environ'), read_csv, read_parquet, ATTACH, extensions are refused; the settings cannot be changed back.
DUCKDB_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "lock_configuration": True,
}


def redacted(url: str) -> str:
    """The URL with every password hidden (`engine.io.redact.redact`: userinfo, `password=` and the
    like in the query), also when it does not parse."""
    return redact(url)


class DatabaseReadError(UserError, ValueError):
    """A database that opened but cannot be read (not a database, a query refused): one line naming
    the database (its password hidden) and the reason."""


def _reason(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return redact_text(f"{type(exc).__name__}: {first}")[:400]


def read_only_url(url: str):
    """The SQLAlchemy URL to open: an SQLite file is opened read-only (`file:...?mode=ro&uri=true`),
    so a URL never creates or changes a file; other databases as given."""
    from urllib.parse import quote

    from sqlalchemy.engine import make_url

    u = make_url(url)
    if u.get_backend_name() != "sqlite":
        return u
    db = u.database or ""
    if db in ("", ":memory:"):
        raise UserError(f"{redact(url)}: an in-memory SQLite database holds no data; name a file")
    if db.startswith("file:"):
        db = db[len("file:") :].split("?", 1)[0]
    query = {k: v for k, v in u.query.items() if k not in ("mode", "uri", "immutable")}
    return u.set(database="file:" + quote(db, safe="/"), query={**query, "mode": "ro", "uri": "true"})


def quoted(name: str) -> str:
    """An SQL identifier in double quotes (inner quotes doubled): names are never SQL."""
    return '"' + str(name).replace('"', '""') + '"'


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _named(method):
    """A query method whose driver errors become a `DatabaseReadError` naming the database."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except UserError:
            raise
        except Exception as exc:  # every driver's errors: the user's database, named
            raise DatabaseReadError(f"{self.label}: the database cannot be read ({_reason(exc)})") from None

    return wrapper


class Database:
    """A DuckDB file (`kind='duckdb'`) or an SQLAlchemy engine (`kind='sqlalchemy'`), read only."""

    def __init__(
        self, location: str | Path, schema: str | None = None, memory_limit: str | None = None
    ) -> None:
        self.schema = schema or None
        self.sources: dict[str, str] = {}
        self._duck = None
        self._engine = None
        self._tables: dict[str, str] | None = None
        if is_url(str(location)) and not Path(str(location)).exists():
            self.kind = "sqlalchemy"
            self.label = redacted(str(location))
            require("db", "a database URL")
            import sqlalchemy as sa

            self._engine = sa.create_engine(read_only_url(str(location)))
            self._conn = self._engine.connect()  # raises when unreachable (see `connect`)
            self.dialect = str(self._engine.dialect.name)  # "postgresql", "sqlite", ...
            self.sources[self.label] = f"database ({self.dialect})"
        else:
            import duckdb

            path = opened(location)  # inside the data roots while the app reads (engine.io.roots)
            self.kind = "duckdb"
            self.dialect = "duckdb"
            self.label = Path(location).name
            # `memory_limit` (DuckDB's setting, e.g. "1GB"): the in-database counting's bound (omop_counts)
            limit = {} if memory_limit is None else {"memory_limit": memory_limit}
            self._duck = duckdb.connect(str(path), read_only=True, config={**DUCKDB_CONFIG, **limit})
            self.sources[self.label] = sha256_file(path)

    def close(self) -> None:
        if self._duck is not None:
            self._duck.close()
        if self._engine is not None:
            self._conn.close()
            self._engine.dispose()

    # ------------------------------------------------------------------ discovery
    def _table_names(self) -> dict[str, str]:
        """lower-case name -> name as the database spells it (SQLAlchemy only)."""
        if self._tables is None:
            import sqlalchemy as sa

            names = sa.inspect(self._conn).get_table_names(schema=self.schema)
            self._tables = {n.lower(): n for n in names}
        return self._tables

    @_named
    def columns(self, table: str) -> list[str] | None:
        """The table's columns in order, None when there is no such table."""
        if self._duck is not None:
            rows = self._duck.execute(
                "SELECT column_name FROM information_schema.columns WHERE lower(table_name) = ? "
                "AND (? IS NULL OR table_schema = ?) ORDER BY ordinal_position",
                [table.lower(), self.schema, self.schema],
            ).fetchall()
            return [r[0] for r in rows] or None
        import sqlalchemy as sa

        name = self._table_names().get(table.lower())
        if name is None:
            return None
        return [str(c["name"]) for c in sa.inspect(self._conn).get_columns(name, schema=self.schema)]

    @_named
    def qualified(self, table: str) -> str:
        """The table's name in SQL (with the schema; DuckDB also with its catalog)."""
        if self._duck is not None:
            if not self.schema:
                return quoted(table)
            row = self._duck.execute("SELECT current_database()").fetchone()
            assert row is not None  # a scalar SELECT returns one row
            catalog = row[0]
            return ".".join(quoted(x) for x in (catalog, self.schema, table))
        name = self._table_names().get(table.lower(), table)
        return ".".join(quoted(x) for x in ((self.schema,) if self.schema else ()) + (name,))

    def where(self, table: str, key: Sequence[str] = ()) -> str:
        """How findings name the table (and, for SQLAlchemy, the order its rows are numbered in)."""
        order = f" (rows in {', '.join(key)} order)" if self._engine is not None and key else ""
        return f"{self.label}, table {table}{order}"

    # ------------------------------------------------------------------ reading
    @_named
    def read(
        self, table: str, columns: Sequence[str], where_sql: str = "", key: Sequence[str] = ()
    ) -> tuple[pd.DataFrame, np.ndarray]:
        """Only `columns` of `table` (optionally filtered by `where_sql`, built by the reader from
        quoted names only) and the row number of each row (module docstring)."""
        cols = ", ".join(quoted(c) for c in columns)
        if self._duck is not None:
            sql = f"SELECT rowid + 1 AS __row, {cols} FROM {self.qualified(table)} {where_sql} ORDER BY rowid"
            df = self._duck.execute(sql).df()
            rownum = df.pop("__row").to_numpy(dtype=np.int64)
            return df, rownum

        present = {c.lower(): c for c in self.columns(table) or []}
        order = [present[k.lower()] for k in key if k.lower() in present] or list(columns)
        sql = (
            f"SELECT {cols} FROM {self.qualified(table)} {where_sql} "
            f"ORDER BY {', '.join(quoted(c) for c in order)}"
        )
        df = self._fetch(sql, list(columns))
        return df, np.arange(len(df), dtype=np.int64) + 1

    def _fetch(self, sql: str, columns: list[str]) -> pd.DataFrame:
        """The rows of a SELECT through the driver's own cursor (DB-API `fetchall`: about 8x faster
        than pandas.read_sql on a million rows with psycopg), as they are: whole numbers stay whole
        numbers next to NULLs, dates stay dates. Cells are checked afterwards as in a file."""
        dbapi = self._conn.connection.dbapi_connection
        assert dbapi is not None  # an open SQLAlchemy connection has its DB-API connection
        cur = dbapi.cursor()
        try:
            cur.execute(sql)
            rows = cur.fetchall()
        finally:
            cur.close()
        return pd.DataFrame.from_records(rows, columns=columns, coerce_float=False)

    @_named
    def query(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        """The rows of a statement the engine built from quoted names, values as parameters in the
        driver's style (DuckDB `?`, psycopg `%s`): the in-database counting of `engine.io.omop_counts`."""
        if self._duck is not None:
            return self._duck.execute(sql, list(params)).fetchall()
        dbapi = self._conn.connection.dbapi_connection
        assert dbapi is not None  # an open SQLAlchemy connection has its DB-API connection
        cur = dbapi.cursor()
        try:
            cur.execute(sql, list(params))
            return [tuple(r) for r in cur.fetchall()]
        finally:
            cur.close()

    @_named
    def head(self, table: str, n: int = 20) -> pd.DataFrame:
        """The first `n` rows of a table, every column, as text (the import view's preview)."""
        sql = f"SELECT * FROM {self.qualified(table)} LIMIT {int(n)}"
        if self._duck is not None:
            return self._duck.execute(sql).df().astype("string")
        import sqlalchemy as sa

        return pd.read_sql_query(sa.text(sql), self._conn).astype("string")


def _is_sqlite(path: Path) -> bool:
    """True for an SQLite database file (its header), which DuckDB would read only through its
    sqlite extension, fetched from the internet (issue #40): such a file is read through a URL."""
    try:
        with opened(path).open("rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def connect(
    location: str | Path,
    schema: str | None,
    report: ValidationReport,
    expected: str,
    memory_limit: str | None = None,
) -> Database | None:
    """A `Database`, or None after an error (kind `unreachable`) naming the source and the reason:
    no such file, a malformed URL, a missing driver, a server that does not answer."""
    label = redacted(str(location)) if is_url(str(location)) else Path(location).name
    fc = FileCheck(label, np.zeros(0, dtype=np.int64), report)
    if not is_url(str(location)) and not Path(location).exists():
        fc.note("error", None, "no such file or folder", expected, "missing_source")
        return None
    if not is_url(str(location)) and _is_sqlite(Path(location)):
        fc.note(
            "error",
            None,
            "an SQLite database: read it through a URL, sqlite:///<path> (in the app, a connection an "
            "administrator names)",
            expected,
            "unreachable",
        )
        return None
    try:
        return Database(location, schema, memory_limit)
    except (PathRefused, MissingExtra):  # out of the data roots, or no driver installed: refused by name
        raise
    except ImportError as exc:
        reason = f"the database driver is not installed ({exc})"
    except Exception as exc:  # SQLAlchemy and DuckDB raise many types: all reported
        reason = _reason(exc)
    fc.note("error", None, f"cannot open the database: {reason}", expected, "unreachable")
    return None
