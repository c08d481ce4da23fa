"""Load time and peak memory of OMOP CDM sources: a generated OMOP dataset as Parquet files and as a
DuckDB database, read by `engine.io.omop.read_omop` into a Dataset (Records built).

    python bench/omop.py [--patients 100000] [--dir /tmp/omop_bench] [--reuse]

The dataset tiles the shipped sample's events (sample_data/events.parquet) to the number of patients
asked: each visit gets a date (visits 60 days apart from a start between 2010 and 2016), conditions
dated from 2015-10-01 on are written in ICD-10-CM (the first ICD-10-CM code of the ICD-9-CM code's
phecode in the phecode maps v1.2), the others in ICD-9-CM; persons get a year of birth from the ages;
a concept table names each source concept's vocabulary. Each load runs in its own process so its peak
resident memory (ru_maxrss) is its own.

Each size also runs a plain reference in its own process: the same Records from the Parquet tables
by pandas joins alone (no validation, vocabulary inference or report), and prints the loaders' CPU time
as a multiple of it. `--reuse` loads tables generated before under `--dir`.

Figures (2026-11-24, this 2-core machine nearly quiet, one run each; CPU seconds in brackets):
200,000 patients (1,975,509 conditions, 519,753 in ICD-10-CM, 1,258,317 visits; generated in 5.8 s):
reference 2.5 s (3.5) / 963 MB, Parquet 5.8 s (7.0) / 1,200 MB = 2.00x, DuckDB 6.1 s (7.1) / 1,306 MB
= 2.04x. 1,370,000 patients (13,540,023 conditions, 3,556,699 in ICD-10-CM, 8,622,726 visits;
generated in 41.7 s): reference 16.2 s (17.9) / 5,568 MB, Parquet 41.5 s (42.9) / 6,338 MB = 2.40x,
DuckDB 50.9 s (53.4) / 7,002 MB = 2.98x (a first run: Parquet 48.2 s / 6,330 MB, DuckDB 51.3 s /
6,968 MB). Growth from 200 k to 1.37 M patients (6.85x the data): Parquet 6.2x the CPU time, DuckDB
7.5x. The figures of issue 14's first session (668 s / 807 s at 1.37 M) were taken at load average
16-21 and are superseded.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent


def crosswalk() -> dict[str, str]:
    """ICD-9-CM code -> an ICD-10-CM code of the same phecode (first in sorted order)."""
    from engine.vocab import phecode_map, phecode_map_icd10cm

    m10 = phecode_map_icd10cm()
    own = m10[(m10["phecode"] == m10["phecode_unrolled"]) & ~m10["icd10cm"].str.contains("-")]
    first = own.sort_values("icd10cm").drop_duplicates("phecode").set_index("phecode")["icd10cm"]
    m9 = phecode_map()
    return {c: first[p] for c, p in zip(m9["icd9"], m9["phecode"], strict=True) if p in first.index}


def generate(n_patients: int, out: Path, seed: int = 7) -> dict[str, int]:
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    ev = pd.read_parquet(ROOT / "sample_data" / "events.parquet")
    pids, inv = np.unique(ev["patient_id"].to_numpy(dtype=str), return_inverse=True)
    n_src = len(pids)
    reps = -(-n_patients // n_src)
    rng = np.random.default_rng(seed)
    parts = []
    for r in range(reps):
        keep = inv + r * n_src < n_patients
        parts.append(
            pd.DataFrame(
                {
                    "person_id": (inv[keep] + r * n_src + 1).astype(np.int64),
                    "visit": ev["visit"].to_numpy()[keep],
                    "code9": ev["code"].to_numpy(dtype=object)[keep],
                    "age": ev["age"].to_numpy()[keep],
                }
            )
        )
    df = pd.concat(parts, ignore_index=True)
    start = np.datetime64("2010-01-01") + rng.integers(0, 6 * 365, n_patients + 1).astype("timedelta64[D]")
    day = start[df["person_id"].to_numpy()] + (df["visit"].to_numpy() * 60).astype("timedelta64[D]")
    cw = crosswalk()
    late = day >= np.datetime64("2015-10-01")
    code10 = pd.Series(df["code9"]).map(cw)
    use10 = late & code10.notna().to_numpy()
    source = np.where(use10, code10.fillna("").to_numpy(dtype=object), df["code9"].to_numpy(dtype=object))
    vocab = np.where(use10, "ICD10CM", "ICD9CM")
    codes, code_idx = np.unique(np.char.add(vocab.astype(str), source.astype(str)), return_inverse=True)
    concept_id = (code_idx + 1_000_000).astype(np.int64)
    # visits: one per (person, visit)
    vkey = df["person_id"].to_numpy() * 1000 + df["visit"].to_numpy()
    vids, vfirst, vinv = np.unique(vkey, return_index=True, return_inverse=True)
    out.mkdir(parents=True, exist_ok=True)
    first_age = df.groupby("person_id", sort=True)["age"].first()
    first_day = pd.Series(day).groupby(df["person_id"].to_numpy()).first()
    yob = pd.DatetimeIndex(first_day.to_numpy()).year.to_numpy() - first_age.to_numpy()
    tables = {
        "person": pa.table(
            {
                "person_id": first_age.index.to_numpy(np.int64),
                "gender_concept_id": np.full(len(first_age), 8507, np.int64),
                "year_of_birth": yob.astype(np.int64),
                "race_concept_id": np.zeros(len(first_age), np.int64),
                "ethnicity_concept_id": np.zeros(len(first_age), np.int64),
            }
        ),
        "visit_occurrence": pa.table(
            {
                "visit_occurrence_id": np.arange(1, len(vids) + 1, dtype=np.int64),
                "person_id": df["person_id"].to_numpy()[vfirst],
                "visit_concept_id": np.full(len(vids), 9202, np.int64),
                "visit_start_date": pa.array(day[vfirst], pa.date32()),
                "visit_end_date": pa.array(day[vfirst], pa.date32()),
                "visit_type_concept_id": np.full(len(vids), 32817, np.int64),
            }
        ),
        "condition_occurrence": pa.table(
            {
                "condition_occurrence_id": np.arange(1, len(df) + 1, dtype=np.int64),
                "person_id": df["person_id"].to_numpy(),
                "condition_concept_id": np.zeros(len(df), np.int64),
                "condition_start_date": pa.array(day, pa.date32()),
                "condition_type_concept_id": np.full(len(df), 32817, np.int64),
                "visit_occurrence_id": (vinv + 1).astype(np.int64),
                "condition_source_value": pa.array(source.astype(str), pa.string()),
                "condition_source_concept_id": concept_id,
            }
        ),
        "concept": pa.table(
            {
                "concept_id": np.arange(1_000_000, 1_000_000 + len(codes), dtype=np.int64),
                "concept_name": pa.array([""] * len(codes), pa.string()),
                "domain_id": pa.array(["Condition"] * len(codes), pa.string()),
                "vocabulary_id": pa.array([c[:7] if c.startswith("ICD10CM") else c[:6] for c in codes]),
                "concept_class_id": pa.array(["billing code"] * len(codes), pa.string()),
                "concept_code": pa.array([c[7:] if c.startswith("ICD10CM") else c[6:] for c in codes]),
            }
        ),
    }
    pq_dir = out / "parquet"
    pq_dir.mkdir(exist_ok=True)
    db = out / "cdm.duckdb"
    db.unlink(missing_ok=True)
    con = duckdb.connect(str(db))
    for name, table in tables.items():
        pq.write_table(table, pq_dir / f"{name}.parquet")
        con.execute(
            f"CREATE TABLE {name} AS SELECT * FROM read_parquet(?)", [str(pq_dir / f"{name}.parquet")]
        )
    con.close()
    return {
        "persons": len(first_age),
        "conditions": len(df),
        "icd10cm_conditions": int(use10.sum()),
        "visits": len(vids),
    }


def load(path: str) -> None:
    """Child process: read, build the Dataset, print time and peak memory as JSON."""
    import resource

    from engine.io.omop import read_omop

    t0 = time.perf_counter()
    data = read_omop(path, labs=False)
    ds = data.dataset("bench")
    elapsed = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak = usage.ru_maxrss / 1024
    print(
        json.dumps(
            {
                "seconds": round(elapsed, 2),
                "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
                "peak_mb": round(peak, 1),
                "patients": ds.events.n_patients,
                "events": ds.events.n_events,
                "visits": ds.events.n_visits,
                "vocabularies": data.events.vocabularies,
                "warnings": len(data.report.warnings),
            }
        )
    )


def reference(path: str) -> None:
    """Child process, the plain reference: the same Records from the Parquet tables by pandas joins
    alone (no validation, no vocabulary checks, no report): the floor a loader cannot beat."""
    import resource

    from engine.records import Records

    t0 = time.perf_counter()
    d = Path(path)
    cond = pd.read_parquet(
        d / "condition_occurrence.parquet",
        columns=["person_id", "visit_occurrence_id", "condition_start_date", "condition_source_concept_id"],
    )
    concept = pd.read_parquet(d / "concept.parquet", columns=["concept_id", "vocabulary_id", "concept_code"])
    person = pd.read_parquet(d / "person.parquet", columns=["person_id", "year_of_birth"])
    df = cond.merge(concept, left_on="condition_source_concept_id", right_on="concept_id").merge(person)
    frame = pd.DataFrame(
        {
            "patient_id": df["person_id"].astype(str),
            "code": np.where(df["vocabulary_id"] == "ICD10CM", "ICD10CM:", "") + df["concept_code"],
            "visit": df["visit_occurrence_id"],
            "age": pd.DatetimeIndex(df["condition_start_date"]).year - df["year_of_birth"],
        }
    )
    records = Records.from_frame(frame)
    elapsed = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "seconds": round(elapsed, 2),
                "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
                "peak_mb": round(usage.ru_maxrss / 1024, 1),
                "patients": records.n_patients,
                "events": records.n_events,
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--patients", type=int, default=100_000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/omop_bench"))
    ap.add_argument("--load", help=argparse.SUPPRESS)
    ap.add_argument("--reference", help=argparse.SUPPRESS)
    ap.add_argument("--reuse", action="store_true", help="load the tables already under --dir")
    args = ap.parse_args()
    if args.load:
        load(args.load)
        return
    if args.reference:
        reference(args.reference)
        return
    if not args.reuse:
        t0 = time.perf_counter()
        sizes = generate(args.patients, args.dir)
        print(f"generated {sizes} in {time.perf_counter() - t0:.1f} s under {args.dir}")
    runs = (
        ("reference", "--reference", args.dir / "parquet"),
        ("Parquet", "--load", args.dir / "parquet"),
        ("DuckDB", "--load", args.dir / "cdm.duckdb"),
    )
    seconds = {}
    for label, flag, path in runs:
        res = subprocess.run(
            [sys.executable, __file__, flag, str(path)], capture_output=True, text=True, check=True
        )
        print(f"{label:9s} {res.stdout.strip()}")
        seconds[label] = json.loads(res.stdout)["cpu_seconds"]
    for label in ("Parquet", "DuckDB"):
        print(f"{label}: {seconds[label] / seconds['reference']:.2f}x the plain reference's CPU time")


if __name__ == "__main__":
    main()
