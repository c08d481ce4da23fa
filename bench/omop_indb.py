"""In-database against in-memory counting of a CDM's cohort-vs-population risk (issue #37, "Push the
counting to the database"): wall time, CPU time and peak memory of `python -m engine risk` on an OMOP
CDM DuckDB file, with and without `--in-database`, and whether both wrote the same results.

    python bench/omop_indb.py [--patients 200000] [--cohort-every 100] [--dir /tmp/omop_indb] [--reuse]
        [--knowledge single_visit] [--full] [--postgres [URL]]

The CDM is bench/omop.py's generated one (`generate`: the shipped sample's events tiled to the number
of patients, ICD-9-CM before 2015-10-01 and ICD-10-CM after, visits, a concept table; `sample
--formats omop` keeps only 5,000 patients). The cohort is every `--cohort-every`-th person. Each run
is a fresh subprocess (`--child`), so its peak resident memory (ru_maxrss) and CPU time (user +
system, DuckDB's threads included) are its own. By default counts are capped at k = 5 (`--up-to-k`,
the verdicts); `--full` counts in full.

`--postgres [URL]` copies the CDM into a new schema of PostgreSQL (the server at URL, else a throwaway
local one from Debian's binaries, tests/pg_support.py) and runs both paths on it (`--events URL
--schema S`); the copy's time is printed apart.

Figures (2026-11-29, load average 5-7 on 2 shared cores): 1,000,000 patients, 10,000 in the cohort,
single visit up to k = 5: in memory 140.3 s wall, 37.0 s CPU, 5,161 MB peak; in the database 49.3 s,
24.9 s, 1,305 MB; results equal. More in docs/architecture.md section 7 ("In-database counting").
Peaks are VmHWM since 2026-11-29 (`peak_kb`); 200,000 patients re-measured so: in memory 20.7 s,
10.1 s, 1,393 MB; in the database 7.6 s, 6.5 s, 704 MB (710 MB before, by ru_maxrss).

PostgreSQL (`--postgres`, the throwaway server, load average 7-8): 50,000 patients (492,879
conditions, copied in 2.8 s), 500 in the cohort, single visit up to k = 5: in memory (read_omop over
the URL) 7.4 s wall, 5.6 s CPU, 610 MB; in the database 10.9 s, 1.8 s, 223 MB; results equal. CPU and
peak are the client's: the server's work shows in the wall time only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# DuckDB's type names PostgreSQL spells otherwise (the CDM's others, BIGINT, INTEGER, DATE, VARCHAR,
# TIMESTAMP, DECIMAL(p,s), read the same in both)
PG_TYPES = {"DOUBLE": "DOUBLE PRECISION", "FLOAT": "REAL", "HUGEINT": "NUMERIC", "UBIGINT": "NUMERIC"}


def copy_to_postgres(cdm: Path, url: str, schema: str) -> None:
    """Every table of the DuckDB CDM `cdm` into a new `schema` of the PostgreSQL server at `url` (an
    SQLAlchemy URL), with the same column types, by COPY (also tests/test_omop_counts_pg.py's loader)."""
    import duckdb
    import sqlalchemy as sa

    src = duckdb.connect(str(cdm), read_only=True)
    engine = sa.create_engine(url)
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute(f'CREATE SCHEMA "{schema}"')
        tables = src.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_type = 'BASE TABLE' ORDER BY table_name"
        ).fetchall()
        for (table,) in tables:
            columns = src.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? "
                "AND table_schema = 'main' ORDER BY ordinal_position",
                [table],
            ).fetchall()
            ddl = ", ".join(f'"{c}" {PG_TYPES.get(t, t)}' for c, t in columns)
            cur.execute(f'CREATE TABLE "{schema}"."{table}" ({ddl})')
            rows = src.execute(f'SELECT * FROM "{table}"')
            with cur.copy(f'COPY "{schema}"."{table}" FROM STDIN') as copy:  # type: ignore[attr-defined]
                while batch := rows.fetchmany(50_000):
                    for row in batch:
                        copy.write_row(row)
        raw.commit()
    finally:
        raw.close()
        engine.dispose()
        src.close()


def child(argv: list[str]) -> None:
    """Child process: run the CLI, print CPU seconds and peak memory as JSON on the last line."""
    import contextlib
    import io
    import resource

    sys.path.insert(0, str(ROOT))
    from engine.commands.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "exit": code,
                "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
                "peak_mb": round(peak_kb(usage.ru_maxrss) / 1024, 0),
            }
        )
    )


def peak_kb(maxrss_kb: int) -> int:
    """This process's peak resident memory: Linux's VmHWM, which starts afresh at exec. ru_maxrss
    keeps the high-water mark of the parent forked from (Linux keeps it across execve): after
    `generate` the parent held the CDM's frames, and both runs read about its size (50,000
    patients: 528 MB for the in-database run, 242 MB measured alone)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return maxrss_kb


def compare(base: list[str], folder: Path) -> None:
    """Run `risk` (arguments `base`) in memory and in the database, each in a fresh process; print
    wall time, CPU time and peak memory of each and whether both wrote the same file."""
    outputs = {}
    for label, extra in (("in-memory", []), ("in-database", ["--in-database"])):
        out = folder / f"{label}.csv"
        t0 = time.perf_counter()
        res = subprocess.run(
            [sys.executable, __file__, "--child", *base, "--out", str(out), *extra],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        wall = time.perf_counter() - t0
        if res.returncode != 0:
            print(f"{label}: failed\n{res.stderr[-2000:]}")
            return
        got = json.loads(res.stdout.strip().splitlines()[-1])
        print(f"{label:12s} wall {wall:.1f} s, CPU {got['cpu_seconds']} s, peak {got['peak_mb']:.0f} MB")
        outputs[label] = out.read_text(encoding="utf-8")
    same = outputs["in-memory"] == outputs["in-database"]
    print(f"results equal: {same} ({outputs['in-memory'].count(chr(10)) - 1} cohort rows)")


@contextmanager
def postgres(url: str) -> Iterator[str]:
    """`url`, or with none a throwaway server of tests/pg_support.py (Debian's postgresql binaries)."""
    if url:
        yield url
        return
    sys.path.insert(0, str(ROOT / "tests"))
    from pg_support import postgres_server

    with postgres_server() as started:
        yield started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--patients", type=int, default=200_000)
    ap.add_argument("--cohort-every", type=int, default=100)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/omop_indb"))
    ap.add_argument("--reuse", action="store_true", help="the CDM generated before under --dir")
    ap.add_argument("--knowledge", default="single_visit", choices=("single_visit", "all_visits"))
    ap.add_argument("--full", action="store_true", help="full counts (default: capped at k = 5)")
    ap.add_argument(
        "--postgres",
        nargs="?",
        const="",
        metavar="URL",
        help="count the CDM copied into PostgreSQL (this SQLAlchemy URL, else a throwaway local server)",
    )
    ap.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return
    sys.path.insert(0, str(ROOT))
    import duckdb

    from bench.omop import generate

    cdm = args.dir / "cdm.duckdb"
    if not args.reuse:
        t0 = time.perf_counter()
        sizes = generate(args.patients, args.dir)
        print(f"generated {sizes} in {time.perf_counter() - t0:.1f} s under {args.dir}")
    con = duckdb.connect(str(cdm), read_only=True)
    n_persons, n_conditions = con.execute(
        "SELECT (SELECT COUNT(*) FROM person), (SELECT COUNT(*) FROM condition_occurrence)"
    ).fetchone()  # type: ignore[misc]
    ids = [p for (p,) in con.execute("SELECT person_id FROM person ORDER BY person_id").fetchall()]
    con.close()
    cohort = args.dir / "cohort.csv"
    cohort.write_text("patient_id\n" + "\n".join(str(p) for p in ids[:: args.cohort_every]) + "\n")
    print(
        f"CDM: {n_persons} persons, {n_conditions} conditions; cohort {len(ids[:: args.cohort_every])} "
        f"patients; {args.knowledge}, {'full counts' if args.full else 'counts up to k = 5'}"
    )
    common = ["--source", "omop", "--cohort", str(cohort), "--scope", "population"]
    common += ["--knowledge", args.knowledge, "--k", "5"] + ([] if args.full else ["--up-to-k"])
    if args.postgres is None:
        compare(["risk", "--events", str(cdm), *common], args.dir)
        return
    import sqlalchemy as sa

    with postgres(args.postgres) as url:
        schema = f"cs_bench_{uuid.uuid4().hex[:8]}"
        t0 = time.perf_counter()
        copy_to_postgres(cdm, url, schema)
        print(f"PostgreSQL: copied into schema {schema} in {time.perf_counter() - t0:.1f} s")
        try:
            compare(["risk", "--events", url, "--schema", schema, *common], args.dir)
        finally:
            engine = sa.create_engine(url)
            with engine.begin() as con:
                con.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
            engine.dispose()


if __name__ == "__main__":
    main()
