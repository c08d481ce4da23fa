"""Builds OMOP CDM v5.4 test databases: the fixture folder tests/data/omop/ loaded into DuckDB with
the types of the v5.4 DDL (OHDSI/CommonDataModel, inst/ddl/5.4/duckdb), tables we read only."""

from __future__ import annotations

from pathlib import Path

from engine.io.omop_ddl import DDL

OMOP_DIR = Path(__file__).resolve().parent / "data" / "omop"


def build_duckdb(target: Path, source: Path = OMOP_DIR, schema: str | None = None) -> Path:
    """A DuckDB file with the v5.4 types, filled from the CSV files of `source`."""
    import duckdb

    con = duckdb.connect(str(target))
    try:
        prefix = ""
        if schema:
            catalog = con.execute("SELECT current_database()").fetchone()[0]
            con.execute(f'CREATE SCHEMA "{catalog}"."{schema}"')
            prefix = f'"{catalog}"."{schema}".'
        for table, columns in DDL.items():
            csv = source / f"{table}.csv"
            if not csv.exists():
                continue
            con.execute(f"CREATE TABLE {prefix}{table} ({columns})")
            con.execute(
                f"INSERT INTO {prefix}{table} SELECT * FROM read_csv(?, header = true, all_varchar = true)",
                [str(csv)],
            )
    finally:
        con.close()
    return target


def export_parquet(database: Path, target: Path) -> Path:
    """Every table of a DuckDB file as `<table>.parquet` in `target` (types kept: integer, date)."""
    import duckdb

    target.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(database), read_only=True)
    try:
        for (table,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall():
            con.execute(f"COPY (SELECT * FROM {table}) TO '{target / (table + '.parquet')}' (FORMAT parquet)")
    finally:
        con.close()
    return target


def _ddl_types(columns: str) -> dict[str, str]:
    """column -> its DDL type word, from a `DDL` entry."""
    out = {}
    for part in columns.split(","):
        words = part.split()
        if len(words) >= 2 and not words[1].startswith("("):
            out[words[0]] = words[1].split("(")[0].lower()
    return out


def build_sql(url: str, source: Path = OMOP_DIR, schema: str | None = None) -> str:
    """The fixture tables in any SQLAlchemy database (SQLite, PostgreSQL) with the v5.4 DDL types,
    values typed per column (integers, dates, numbers; empty cells NULL). Returns the URL."""
    import datetime

    import pandas as pd
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    prefix = f'"{schema}".' if schema else ""
    with engine.begin() as con:
        if schema:
            con.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        for table, columns in DDL.items():
            csv = source / f"{table}.csv"
            if not csv.exists():
                continue
            con.execute(sa.text(f"CREATE TABLE {prefix}{table} ({columns})"))
            df = pd.read_csv(csv, dtype=str, keep_default_na=False)
            types = _ddl_types(columns)
            rows = []
            for rec in df.to_dict("records"):
                row = {}
                for col, v in rec.items():
                    t = types.get(col, "varchar")
                    if v == "":
                        row[col] = None
                    elif t == "integer":
                        row[col] = int(v)
                    elif t == "date":
                        row[col] = datetime.date.fromisoformat(v)
                    elif t == "numeric":
                        row[col] = float(v)
                    else:
                        row[col] = v
                rows.append(row)
            names = ", ".join(df.columns)
            params = ", ".join(f":{c}" for c in df.columns)
            if rows:
                con.execute(sa.text(f"INSERT INTO {prefix}{table} ({names}) VALUES ({params})"), rows)
    engine.dispose()
    return url
