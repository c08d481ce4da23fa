"""Population-scale benchmark of the risk kernel (issue 15): growth, threads, shards.

    .venv/bin/python bench/scale.py [--sizes 250000,500000,1000000] [--seed 0] [--shards 8]
        [--kernels auto,index,walk,capK] [--full-up-to N] [--skip threads,sharded]
        [--big N --big-shards S --cohort-size C] [--work DIR] [--min-free-gb G]

In one run, every measurement in a fresh subprocess (so each peak memory, ru_maxrss, is its own):
1. per size, `engine.synth.generator.generate(n, seed)` written to Parquet; then single-visit distinguishability
   of the whole population against itself on every core: patients, diagnoses, wall and CPU time, peak
   memory, and where the kernel's time goes (projection and atoms, bitmap build, bitmap ANDs, pairs),
   with the number of distinct known sets counted, the bitmap length in 64-bit words and the pairs
   expanded from the sets' rarest atoms (the per-set costs that grow with the population); for the
   trie walk (`risk._SubsetCounter`), its steps, lookups and the sum of the supports it counted;
   each kernel of `--kernels` on the same data (`index`: the inverted index with bitmaps, the kernel
   before the walk; `walk`; `auto`: the choice `risk._kernel` makes; `capK`, e.g. `cap5`: counts
   only up to K, `cap=K`, by the compiled walk (`engine.scale.trie`, issue 24); `walkcapK`: the same by
   the vectorized walk, the capped kernel before issue 24, its reference: the ratio capK / walkcapK is
   printed), results compared (a capped kernel with min(the first full kernel's result, K));
2. the growth exponent of each kernel: least-squares slope of log(time) on log(patients), wall and CPU;
3. the speed-up from threads: the middle size with 1 thread against every core (results equal);
4. at the largest size, the cohort's single-visit risk against the population in process (the whole
   population in memory) and sharded (`engine.scale.shards`, the population in `--shards` Parquet shards
   read one at a time): peak memory of each, results equal; with `--big N` also the cohort and the
   whole population of N patients against the N-patient population in shards (never in memory at once).
The first kernel of `--kernels` is the one timed for threads and shards; list a full kernel too (e.g.
`--kernels cap5,auto`) for the capped results to be compared with full counts (`--full-up-to N`: full
kernels only up to N patients). Load average and CPU time are printed: on a shared machine the CPU time
is the figure to compare. `--work DIR` keeps the generated data (a rerun reuses it); `--min-free-gb`
waits for that much free memory before the largest size and the `--big` run, and any step is stopped
(and said) before the machine has less than 1.5 GB left. The `--big` population is generated in
`--big-shards` independent chunks (distinct seeds: distinct patients, never copies) written straight to
Parquet shards; the cohort is `--cohort-size` patients drawn from the chunks' phenotype-selected cohorts.

Measured (2-core, 24 GB machine shared with other jobs; commit 9eef0e3; output in
/work/bench_out/scale2_run.txt):

    .venv/bin/python bench/scale.py --sizes 1366786,2733572,4000000 --kernels cap5,auto \
        --full-up-to 1400000 --shards 8 --big 10000000 --big-shards 10 --cohort-size 6000 \
        --work /tmp/scale_cache --min-free-gb 14

| patients | diagnoses | generate | capped k=5: CPU / wall | peak | full counts: CPU / wall | peak |
|---|---|---|---|---|---|---|
| 1,366,786 | 17,585,647 | 23 s (*) | 32.4 s / 61.7 s (**) | 6.44 GB | 312.8 s / 212.0 s | 7.22 GB |
| 2,733,572 | 35,133,734 | 36 s | 60.1 s / 39.0 s | 10.19 GB | skipped | |
| 4,000,000 | 51,520,399 | 46 s | 86.2 s / 55.8 s | 13.33 GB | skipped | |

Growth exponent of the capped kernel: CPU 0.91 (wall -0.16, (**): the 1.37 M step ran beside the
test suite, load 3.0 against 1.5). The same sizes again on a quieter machine, one run
(`--kernels cap5 --skip sharded`, scale2_run_sizes_again.txt): CPU 30.4 / 63.0 / 91.9 s, wall 19.5 /
40.6 / 59.5 s, peak 6.59 / 10.46 / 13.67 GB: exponent CPU 1.03, wall 1.04. (*) cached from an earlier
run that day. Capped equals min(full, 5) at 1.37 M; full counts were skipped above it (at their
exponent of 1.5-1.7 they would take about 900-1,000 and 1,600-1,900 s CPU): the full walk takes 2.0 billion
steps at 1.37 M against 73 million capped. Every verdict needs only min(support, k), so capped counts
are the kernel for verdicts at scale. Threads (2 cores, 2,733,572 patients): 1 thread 50.4 s wall, 2
threads 39.0 s: 1.29x (1.30x in the second run), results equal. Cohort of 7,184 against 4,000,000 in
8 shards: 29.3 s, peak 1.92 GB, against 8.6 s and 7.45 GB in process; results equal.

10,000,000 patients (128,697,707 diagnoses) generated in 10 chunks straight into 10 shards: 112 s, peak
1.92 GB. Single visit, capped at 5, progress per shard printed: a 6,000-patient cohort against the
10 M in shards 68 s wall, 90 s CPU, peak 2.82 GB (3,560 unique, 4,133 below 5); the whole population
against itself (`shards.sharded_population_distinguishability`) 356 s wall, 515 s CPU, peak 8.09 GB
(195,984 unique, 315,048 below 5). Whole run 1,201 s; largest step 13.33 GB (the 4 M in-process
kernel), within 24 GB.

Issue 24 ("risk, 1.37 M patients, single visit, capped at k: 28.7 s wall, 6.6 GB peak"; target 15 s and
4 GB), `--sizes 1366786 --kernels cap5,walkcap5 --skip threads,sharded`, load 2.2-2.6: the compiled walk
5.4 s wall, 5.3 s CPU, peak 2.87 GB; the vectorized walk in the same run 24.4 s, 24.1 s, 5.38 GB (0.22x),
results equal. Before the change, the same command's cap5: 27.9 s, 24.6 s, 6.63 GB. Capped growth
exponent over 0.34-1.37 M (`--sizes 341696,683393,1366786`): wall 0.98, CPU 0.98. Full counts by the
compiled walk (`--kernels trie`), 1.37 M: 62 s wall, 67 s CPU, 2.88 GB (not the default: `_kernel` picks
the index or the vectorized walk for full counts).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # Linux: kilobytes


def run_peak_gb() -> float:
    """Peak memory of the run: the largest step (each a child process, run one at a time) or this
    process, whichever is larger."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6
    return max(kids, peak_gb())


def available_gb() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1e6
    return float("inf")


def wait_for_memory(need_gb: float, what: str) -> None:
    """Wait (printing why) until `need_gb` of memory is available: the machine is shared."""
    waited = 0
    while need_gb and available_gb() < need_gb:
        if waited % 300 == 0:
            print(
                f"    waiting for {need_gb:.0f} GB free before {what} ({available_gb():.1f} GB now)",
                flush=True,
            )
        time.sleep(30)
        waited += 30


# ---------------------------------------------------------------------------- subprocess steps
def step_generate(n: int, seed: int, work: Path, n_shards: int) -> dict:
    import pandas as pd

    from engine.scale import shards
    from engine.synth.generator import generate

    events = work / f"events_{n}.parquet"
    t0 = time.perf_counter()
    if events.exists() and (work / f"cohort_{n}.csv").exists():  # cached by an earlier run (`--work`)
        out = {"generate_s": 0.0, "diagnoses": pq.read_metadata(events).num_rows, "cached": True}
    else:
        data = generate(n, seed, labs=False)
        ev = data.events[["patient_id", "visit", "code"]]
        ev.to_parquet(events, index=False)
        pd.Series(data.cohort["patient_id"].astype(str)).to_csv(work / f"cohort_{n}.csv", index=False)
        out = {"generate_s": time.perf_counter() - t0, "diagnoses": len(ev), "cached": False}
        del data, ev
    out["peak_gb"] = peak_gb()
    if n_shards and not (work / f"shards_{n}" / "shard-00000.parquet").exists():
        t0 = time.perf_counter()  # streamed from the events file: memory of one batch
        shards.write_shards_from_events(events, work / f"shards_{n}", n_shards)
        out["write_shards_s"] = time.perf_counter() - t0
    return out


def step_generate_chunks(n: int, seed: int, work: Path, n_shards: int, cohort_size: int) -> dict:
    """`n` patients generated in `n_shards` independent chunks (distinct seeds, so distinct patients:
    never copies of the same ones), each written straight to its own Parquet shard (patient ids
    prefixed by the chunk): the population is never in memory at once. The cohort: `cohort_size`
    patients drawn (fixed seed) from the chunks' phenotype-selected cohorts."""
    import pandas as pd

    from engine.scale import shards
    from engine.synth.generator import generate

    out_dir = work / f"shards_{n}"
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    size = -(-n // n_shards)
    cohorts, diagnoses, cached = [], 0, 0
    for c in range(n_shards):
        m = min(size, n - c * size)
        path = shards.shard_path(out_dir, c)
        if path.exists() and (out_dir / f"cohort-{c:05d}.csv").exists():
            diagnoses += pq.read_metadata(path).num_rows
            cached += 1
        else:
            data = generate(m, seed * 1_000_003 + c + 1, labs=False)
            ev = data.events[["patient_id", "visit", "code"]].copy()
            prefix = f"C{c:03d}-"
            ev["patient_id"] = prefix + ev["patient_id"].astype(str)
            pd.DataFrame({"patient_id": prefix + data.cohort["patient_id"].astype(str)}).to_csv(
                out_dir / f"cohort-{c:05d}.csv", index=False
            )
            diagnoses += len(ev)
            shards._write(ev, path, m)
            del data, ev
        cohorts.append(pd.read_csv(out_dir / f"cohort-{c:05d}.csv", dtype=str)["patient_id"])
        print(
            f"    chunk {c + 1}/{n_shards}: {m:,} patients written, {time.perf_counter() - t0:.0f} s, "
            f"peak {peak_gb():.2f} GB",
            file=sys.stderr,
            flush=True,
        )
    pool = pd.concat(cohorts, ignore_index=True).to_numpy()
    pick = np.sort(np.random.default_rng(seed).choice(len(pool), min(cohort_size, len(pool)), replace=False))
    pd.Series(pool[pick], name="patient_id").to_csv(work / f"cohort_{n}.csv", index=False)
    return {
        "generate_s": time.perf_counter() - t0,
        "diagnoses": diagnoses,
        "write_shards_s": 0.0,
        "cached_chunks": cached,
        "peak_gb": peak_gb(),
    }


def _instrument(stats: dict) -> None:
    """Accumulate wall time per kernel stage, and the sizes behind it, into `stats`."""
    from engine import risk

    def wrap(owner, name, key, sizes=None):
        fn = getattr(owner, name)

        def inner(*a, **k):
            t0 = time.perf_counter()
            out = fn(*a, **k)
            stats[key] = stats.get(key, 0.0) + time.perf_counter() - t0
            if sizes is not None:
                sizes(a, out)
            return out

        setattr(owner, name, inner)

    def count_sizes(a, out):
        self, sets = a
        stats["sets"] = stats.get("sets", 0) + len(sets)
        stats["words"] = self.n_words
        stats["pairs_rarest"] = stats.get("pairs_rarest", 0) + int(self.plen[sets].min(axis=1).sum())

    wrap(risk, "_projected_candidates", "projection_s")
    wrap(risk, "_atoms", "atoms_s")
    wrap(risk._Intersector, "__init__", "bitmaps_s")
    wrap(risk._Intersector, "count", "count_s", count_sizes)
    wrap(risk._Intersector, "_count_and", "and_s")
    wrap(risk._Intersector, "_count_pairs", "pairs_s")

    def walk_sizes(a, out):
        self = a[0]
        stats["sets"] = stats.get("sets", 0) + self.n_sets
        stats["walk_steps"] = stats.get("walk_steps", 0) + self.work[0]
        stats["lookups"] = stats.get("lookups", 0) + self.work[1]
        stats["supports"] = stats.get("supports", 0) + int(out.sum())

    wrap(risk._SubsetCounter, "__init__", "trie_s")
    wrap(risk._SubsetCounter, "count", "walk_s", walk_sizes)

    from engine.scale import trie  # the compiled walk's stages (its steps: `count_rows`)

    def compiled_sizes(a, out):
        stats["rows"] = stats.get("rows", 0) + len(a[6])  # known sets of two or more atoms
        stats["walk_steps"] = stats.get("walk_steps", 0) + out[1]

    wrap(trie, "count_rows", "compiled_s", compiled_sizes)
    wrap(trie, "build_trie", "trie_s")
    wrap(trie, "breadth_first", "trie_s")
    wrap(trie, "node_table", "trie_s")
    wrap(trie, "held_ranks", "held_s")
    wrap(trie, "walk", "walk_s")


def _cohort_ids(work: Path, n: int) -> np.ndarray:
    import pandas as pd

    return pd.read_csv(work / f"cohort_{n}.csv", dtype=str)["patient_id"].to_numpy()


def _kernel_cap(kernel: str) -> tuple[str, int | None]:
    """`capK` -> ("auto", K): the compiled walk (`engine.scale.trie`); `walkcapK` -> ("walk", K): the
    vectorized walk (`risk._SubsetCounter`), the capped kernel before issue 24; any other name ->
    (name, None)."""
    if kernel.startswith("walkcap"):
        return "walk", int(kernel[7:])
    return ("auto", int(kernel[3:])) if kernel.startswith("cap") else (kernel, None)


def _reference_of(kernel: str) -> str | None:
    """The kernel `kernel` is compared with (ratio printed): `walkcapK` for `capK`."""
    return f"walk{kernel}" if kernel.startswith("cap") else None


def step_kernel(n: int, work: Path, threads: int, targets: str, kernel: str = "auto") -> dict:
    from engine import risk
    from engine.scale.shards import records_from_table, release_arrow_memory

    pop = records_from_table(pq.read_table(work / f"events_{n}.parquet"))  # Arrow: no string per event
    release_arrow_memory()  # the table's memory, kept by Arrow's allocator, back to the system
    tg = pop if targets == "population" else pop.subset(_cohort_ids(work, n))
    stats: dict = {}
    _instrument(stats)
    risk._KERNEL, cap = _kernel_cap(kernel)
    t0, c0 = time.perf_counter(), time.process_time()
    with risk.record_kernels() as ran:
        dis = risk.distinguishability(tg, pop, "single_visit", risk.Matching(threads=threads, cap=cap))
    stats["kernel_ran"] = ", ".join(ran)
    stats.update(
        wall_s=time.perf_counter() - t0,
        cpu_s=time.process_time() - c0,
        peak_gb=peak_gb(),
        patients=pop.n_patients,
        visits=pop.n_visits,
        targets=tg.n_patients,
    )
    np.save(work / f"dis_{n}_{targets}_{threads}_{kernel}.npy", dis)
    return stats


def step_sharded(n: int, work: Path, threads: int, kernel: str = "auto", targets: str = "cohort") -> dict:
    """The cohort (read from the shards: only its events) or the whole population (the population
    against itself, `shards.sharded_population_distinguishability`) against the shards."""
    import pyarrow.dataset as ds

    from engine import risk
    from engine.scale import shards

    paths = sorted((work / f"shards_{n}").glob("shard-*.parquet"))
    risk._KERNEL, cap = _kernel_cap(kernel)
    t0, c0 = time.perf_counter(), time.process_time()

    def progress(done: int, total: int, path: str) -> None:
        print(
            f"    [{targets}] shard {done}/{total} counted, {time.perf_counter() - t0:.0f} s, "
            f"cpu {time.process_time() - c0:.0f} s, peak {peak_gb():.2f} GB",
            file=sys.stderr,
            flush=True,
        )

    if targets == "cohort":
        ids = _cohort_ids(work, n)  # only the cohort's events are read in full
        table = ds.dataset([str(p) for p in paths], format="parquet").to_table(
            filter=ds.field("patient_id").isin(list(ids))
        )
        cohort = shards.records_from_table(table).subset(ids)
        n_targets = cohort.n_patients
        dis = shards.sharded_distinguishability(
            cohort, paths, "single_visit", risk.Matching(threads=threads, cap=cap), progress=progress
        )
    else:
        dis = shards.sharded_population_distinguishability(
            paths, "single_visit", risk.Matching(threads=threads, cap=cap), progress=progress
        )
        n_targets = len(dis)
    out = {
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
        "peak_gb": peak_gb(),
        "targets": n_targets,
        "below": {str(k): int((dis < k).sum()) for k in (2, 5)},
    }
    np.save(work / f"dis_{n}_sharded_{targets}.npy", dis)
    return out


RESERVE_GB = 1.5  # the machine is shared: a step is stopped before it leaves less memory than this


def sub(*args: str) -> dict | None:
    """Run one step in a fresh process (its own peak memory); None, said, when it failed or was
    stopped because the machine was running out of memory (the run goes on with the next part)."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--step", *args], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )  # stderr (shard progress, errors) goes to the terminal
    stopped = ""
    while proc.poll() is None:
        time.sleep(1)
        if available_gb() < RESERVE_GB:
            proc.kill()
            stopped = f"stopped: less than {RESERVE_GB} GB of the machine's memory left"
    out = proc.stdout.read() if proc.stdout else ""
    if proc.returncode != 0:
        why = stopped or f"failed with exit status {proc.returncode} (its error is printed above)"
        print(f"    step {' '.join(args)} {why}", flush=True)
        return None
    return json.loads(out.strip().splitlines()[-1])


def slope(x: list[float], y: list[float]) -> float:
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def _kernel_line(k: dict, g: dict, kern: str) -> str:
    return (
        f"{k['patients']:>10,} patients {g['diagnoses']:>12,} diagnoses  generate {g['generate_s']:6.1f} s "
        f"(peak {g['peak_gb']:.2f} GB)  "
        f"[{kern}] single visit wall {k['wall_s']:7.1f} s cpu {k['cpu_s']:7.1f} s  peak {k['peak_gb']:5.2f} GB"
        f"  (kernel ran: {k['kernel_ran']}; load {os.getloadavg()[0]:.1f})"
    )


def _stages_line(k: dict) -> str:
    return (
        f"    stages (s, summed over threads): projection {k.get('projection_s', 0):.1f}, atoms "
        f"{k.get('atoms_s', 0):.1f}, bitmaps {k.get('bitmaps_s', 0):.1f}, count {k.get('count_s', 0):.1f} "
        f"(AND {k.get('and_s', 0):.1f}, pairs {k.get('pairs_s', 0):.1f}), trie {k.get('trie_s', 0):.1f}, "
        f"walk {k.get('walk_s', 0):.1f}, compiled walk in all {k.get('compiled_s', 0):.1f} (held atoms "
        f"{k.get('held_s', 0):.1f}, known sets of 2+ atoms {k.get('rows', 0):,}); distinct sets "
        f"{k.get('sets', 0):,}, bitmap words "
        f"{k.get('words', 0):,}, pairs from rarest atoms {k.get('pairs_rarest', 0):,}, walk steps "
        f"{k.get('walk_steps', 0):,}, lookups {k.get('lookups', 0):,}, supports {k.get('supports', 0):,}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="250000,500000,1000000", help="three (or more) population sizes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shards", type=int, default=8, help="shards of the largest population")
    ap.add_argument(
        "--kernels", default="auto", help="kernels to time at every size: auto, index, walk, capK"
    )
    ap.add_argument(
        "--full-up-to",
        type=int,
        default=0,
        help="run full-count kernels only up to this many patients (0: all)",
    )
    ap.add_argument("--skip", default="", help="parts to leave out: threads, sharded")
    ap.add_argument(
        "--big", type=int, default=0, help="also a sharded run of this many patients (e.g. 10000000)"
    )
    ap.add_argument("--big-shards", type=int, default=10, help="shards (generated chunks) of the --big run")
    ap.add_argument("--cohort-size", type=int, default=6000, help="cohort of the --big run")
    ap.add_argument(
        "--work", default="", help="folder for the data (kept: a rerun reuses it); default: temporary"
    )
    ap.add_argument(
        "--min-free-gb",
        type=float,
        default=0.0,
        help="wait until this much memory is available before the largest size and the --big run",
    )
    ap.add_argument("--step", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.step:
        kind, rest = args.step[0], args.step[1:]
        if kind == "generate":
            out = step_generate(int(rest[0]), args.seed, Path(rest[1]), int(rest[2]))
        elif kind == "chunks":
            out = step_generate_chunks(int(rest[0]), args.seed, Path(rest[1]), int(rest[2]), int(rest[3]))
        elif kind == "kernel":
            out = step_kernel(int(rest[0]), Path(rest[1]), int(rest[2]), rest[3], rest[4])
        else:
            out = step_sharded(int(rest[0]), Path(rest[1]), int(rest[2]), rest[3], rest[4])
        print(json.dumps(out))
        return 0

    from engine.risk import thread_count

    sizes = sorted(int(s) for s in args.sizes.split(",") if s)
    cores = thread_count()
    t_run = time.perf_counter()
    print(
        f"cores (default thread count): {cores}; sizes {sizes}; seed {args.seed}; "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
        f"memory available {available_gb():.1f} GB",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="cohortshield-scale-") as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        kernels = args.kernels.split(",")
        skip = set(args.skip.split(",")) - {""}
        rows = []

        def runs(kern: str, n: int) -> bool:
            return _kernel_cap(kern)[1] is not None or not args.full_up_to or n <= args.full_up_to

        for n in sizes:
            if n == sizes[-1]:
                wait_for_memory(args.min_free_gb, f"{n:,} patients")
            g = sub(
                "generate",
                str(n),
                str(work),
                str(args.shards if n == sizes[-1] and "sharded" not in skip else 0),
            )
            if g is None:
                continue
            ks = {}
            for kern in kernels:
                if not runs(kern, n):
                    print(
                        f"    [{kern}] skipped at {n:,} patients (--full-up-to {args.full_up_to:,})",
                        flush=True,
                    )
                    continue
                k = sub("kernel", str(n), str(work), str(cores), "population", kern)
                if k is None:
                    continue
                ks[kern] = k
                print(_kernel_line(k, g, kern), flush=True)
                print(_stages_line(k), flush=True)
            if not ks:
                continue
            for kern, k in ks.items():
                ref = ks.get(_reference_of(kern) or "")
                if ref is not None:
                    print(
                        f"    [{kern}] against [{_reference_of(kern)}]: wall {k['wall_s']:.1f} / "
                        f"{ref['wall_s']:.1f} s = {k['wall_s'] / ref['wall_s']:.2f}x, cpu {k['cpu_s']:.1f} / "
                        f"{ref['cpu_s']:.1f} s = {k['cpu_s'] / ref['cpu_s']:.2f}x, peak {k['peak_gb']:.2f} / "
                        f"{ref['peak_gb']:.2f} GB",
                        flush=True,
                    )
            full = [kern for kern in ks if _kernel_cap(kern)[1] is None]
            first = np.load(work / f"dis_{n}_population_{cores}_{(full or list(ks))[0]}.npy")
            same = all(
                np.array_equal(
                    np.minimum(first, _kernel_cap(kern)[1] or first.max(initial=0)),
                    np.load(work / f"dis_{n}_population_{cores}_{kern}.npy"),
                )
                for kern in ks
            )
            print(
                f"    kernels {', '.join(ks)}: results equal: {same}"
                + ("" if full else " (no full-count kernel ran at this size: nothing to compare)"),
                flush=True,
            )
            rows.append((n, g, ks))
        for kern in kernels:
            got = [(r[2][kern]["patients"], r[2][kern]) for r in rows if kern in r[2]]
            if len(got) < 2:
                print(f"[{kern}] growth exponent: ran at {len(got)} size(s), none computed", flush=True)
                continue
            pts, ks = [p for p, _ in got], [k for _, k in got]
            print(
                f"[{kern}] growth exponent over {len(pts)} sizes: wall {slope(pts, [k['wall_s'] for k in ks]):.2f}, "
                f"cpu {slope(pts, [k['cpu_s'] for k in ks]):.2f}; of the parts: distinct sets "
                f"{slope(pts, [max(k.get('sets', 1), 1) for k in ks]):.2f}, pairs from rarest atoms "
                f"{slope(pts, [max(k.get('pairs_rarest', 1), 1) for k in ks]):.2f}, walk steps "
                f"{slope(pts, [max(k.get('walk_steps', 1), 1) for k in ks]):.2f}, supports "
                f"{slope(pts, [max(k.get('supports', 1), 1) for k in ks]):.2f}",
                flush=True,
            )
        k0 = kernels[0]
        mid = sizes[len(sizes) // 2] if sizes else 0
        many = next((r[2].get(k0) for r in rows if r[0] == mid), None)
        one = (
            sub("kernel", str(mid), str(work), "1", "population", k0)
            if "threads" not in skip and many
            else None
        )
        if one is not None and many is not None:
            same = np.array_equal(
                np.load(work / f"dis_{mid}_population_1_{k0}.npy"),
                np.load(work / f"dis_{mid}_population_{cores}_{k0}.npy"),
            )
            print(
                f"[{k0}] threads at {mid:,}: 1 thread wall {one['wall_s']:.1f} s cpu {one['cpu_s']:.1f} s, "
                f"{cores} threads wall {many['wall_s']:.1f} s cpu {many['cpu_s']:.1f} s: "
                f"speed-up {one['wall_s'] / many['wall_s']:.2f}x; results equal: {same}",
                flush=True,
            )

        big = sizes[-1] if sizes else 0
        inproc = (
            sub("kernel", str(big), str(work), str(cores), "cohort", k0)
            if "sharded" not in skip and sizes
            else None
        )
        shard = sub("sharded", str(big), str(work), str(cores), k0, "cohort") if inproc else None
        if inproc is not None and shard is not None:
            same = np.array_equal(
                np.load(work / f"dis_{big}_cohort_{cores}_{k0}.npy"),
                np.load(work / f"dis_{big}_sharded_cohort.npy"),
            )
            print(
                f"[{k0}] cohort ({inproc['targets']:,} patients) vs population of {big:,}, single visit: in process "
                f"wall {inproc['wall_s']:.1f} s peak {inproc['peak_gb']:.2f} GB; {args.shards} shards wall "
                f"{shard['wall_s']:.1f} s peak {shard['peak_gb']:.2f} GB; results equal: {same}",
                flush=True,
            )
            whole = work / f"dis_{big}_population_{cores}_{k0}.npy"
            if whole.exists():
                below = int((np.load(whole) < 5).sum())
                print(f"    (in-process whole population at {big:,}: {below:,} below 5)", flush=True)
        if args.big:
            n = args.big
            wait_for_memory(args.min_free_gb, f"the {n:,}-patient run")
            t0 = time.perf_counter()
            g = sub("chunks", str(n), str(work), str(args.big_shards), str(args.cohort_size))
            if g is None:
                return 1
            print(
                f"{n:,} patients, {g['diagnoses']:,} diagnoses: generated chunk by chunk into {args.big_shards} "
                f"shards in {g['generate_s']:.0f} s ({g['cached_chunks']} cached), peak {g['peak_gb']:.2f} GB",
                flush=True,
            )
            for targets in ("cohort", "population"):
                r = sub("sharded", str(n), str(work), str(cores), k0, targets)
                if r is None:
                    continue
                print(
                    f"[{k0}] {targets} ({r['targets']:,} patients) vs {n:,} in {args.big_shards} shards, single "
                    f"visit: wall {r['wall_s']:.0f} s cpu {r['cpu_s']:.0f} s peak {r['peak_gb']:.2f} GB "
                    f"(within 24 GB: {r['peak_gb'] < 24}); below 2: {r['below']['2']:,}, below 5: {r['below']['5']:,}",
                    flush=True,
                )
            print(f"big run in all: {time.perf_counter() - t0:.0f} s", flush=True)
    print(
        f"whole run: {time.perf_counter() - t_run:.0f} s; peak memory of any step {run_peak_gb():.2f} GB "
        f"(this process {peak_gb():.2f} GB)",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
