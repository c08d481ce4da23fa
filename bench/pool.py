"""Issue 38, finding 4: the worker pool's costs (`engine.scale.pool`) against the forked worker's.

    .venv/bin/python -m bench.pool [--data sample_data/paper] [--jobs 20] [--heatherly 2]
    (paper scale under the shared lock: flock /work/paper.lock .venv/bin/python -m bench.pool --data ...)

Prints: the pool's start (fork server with `pool.KERNELS` preloaded, one worker) and its first job;
the per-job overhead of a job that returns at once, through the pool, through a forked worker
(`engine.scale.forked.call`, the reference: today's path) and called here; the hand-off of the
population's records: the first job that mentions them (their segment made here, mapped and their text
unpickled in the worker), a second job (the worker's held records), against pickling them whole and
back (what a pool without the shared segment would pay per job), and the worker's private and shared
resident memory after a job that reads every array. `--heatherly R`: bench/ui.py's engine-alone rows
"heatherly" (`compare_scopes(complete=True, parallel=True)`) and "phewas" (the paper's procedure and the
"phewas" completion) at a fresh k, R times each, the engine's memo emptied before each run: the scopes one
after the other here (the plain reference), fanned out by the pool here, and in a pool job as the app
runs them (ui/views/heatherly.py's compute), one after the other in its worker (what a job did before it
could fan out) or fanned out from it (its own pool). (`forked.fan_out`, the fork reference of the rows
below, is gone since nothing calls it; commit f8f71da measures it.)

Since the app's runs moved to the pool (issue 38), the per-job reference is a fresh process of the fork
server per job (`forked.call`, which forked this process, is gone). Shipped sample, 20 jobs, load 1.1
(2026-11-29 18:21): pool start 1.43 s; per job with nothing to do: pool 0.2 ms, a fresh process 41.6 ms;
the records' segment 5 MB made in 0.01 s, then 0.8 ms per job naming them.

Measured on commit d07021e's pool (2 cores shared by four engineers):
  Shipped sample (30,000 patients, 296,526 events; load average 2.0-2.5): pool start 1.14 s, first job
  0.06 s; per job with nothing to do: pool 0.1 ms, forked worker 5.3 ms (pool / forked 0.03); segment
  5 MB made in 0.05 s, first job with the records 0.04 s, next 1.0 ms (the job pickled: 2,429 bytes),
  against 0.03 s to pickle and unpickle the records whole, per job.
  Paper scale (`--data sample_data/paper`: 1,366,786 patients, 8,478,474 visits, 17,594,928 events, arrays
  298 MB; load average 1.4-1.5; under flock /work/paper.lock; peak 3.44 GB, 19.2 s wall): pool start
  0.96 s; per job with nothing to do: pool 0.2 ms, forked worker 5.3 ms; the fingerprint 1.85 s (once per
  dataset, which the app computes anyway); the segment 252 MB (32 MB of it the text pickled) made in
  0.62 s; the first job with the records 0.29 s (mapped, text unpickled), the next 18.3 ms (summing
  every array: the job's own work; the job pickled 2,431 bytes in 0.3 ms), against 0.92 s to pickle and
  unpickle the 252 MB whole, per job. The worker after reading every array: 169 MB resident shared (the
  mapping), 280 MB private (the unpickled ids and visit labels, and the interpreter with the kernels'
  modules).
  `--heatherly 3` on the shipped sample (load average 1.9-2.3): "heatherly" forked fan-out 1.36 s, pool
  1.13 s (pool / forked 0.83); "phewas" 2.02 s against 1.60 s (0.79); the same Tables 2 both ways. One run
  each before (load 1.8-2.0): 0.96 s against 1.04 s (1.08), 3.32 s against 2.37 s, the pool's first run
  making the groups' segments. Not run at paper scale (the phewas row is minutes per fan-out).
  `--heatherly 3` after `compare_scopes` moved onto the pool and a job could fan out (commit f8f71da,
  which still had the fork row; load average 3.9-4.6 on the 2 cores, the other engineers' runs, so a
  fan-out has hardly an idle core to gain on): "heatherly" here one after the other 1.69 s; forked
  fan-out 2.17 s (1.29); pool fan-out 1.62 s (0.96); in a pool job one after the other 1.38 s (0.81),
  fanned out 1.73 s (1.02). "phewas" 3.29 s; forked 3.80 s (1.15); pool 2.55 s (0.77); in a pool job
  3.11 s (0.94) either way (each comparison then a job of its own: the second did not find what the
  first memoized). Again (load 4.4-4.6): "heatherly" 1.54 s; forked 1.61 s (1.05); pool 1.42 s (0.92);
  "phewas" 3.39 s; forked 3.36 s (0.99); pool 2.67 s (0.79). The same Tables 2 in all.
  Without the fork row, a row's comparisons in one job, the jobs started while the first call runs
  (load 2.0-3.1): a job's first fan-out of nothing 2.03 s (its own fork server, with the kernels'
  modules, and worker started), the next 1.7 ms; a fresh job worker's first fanned-out comparison 3.60 s
  (the start, and the new worker loading the kernels' machine code), the next 1.72 s. "heatherly" here
  1.38 s; pool fan-out 1.48 s (1.07); in a pool job one after the other 1.64 s (1.18), fanned out 1.13 s
  (0.82). "phewas" 2.26 s; pool 2.17 s (0.96); in a pool job 2.42 s (1.07), fanned out 1.94 s (0.86).
  Paper scale, once each (not this script: `_compared_in_a_job` with "heatherly"'s settings at k=5 in a
  fresh `Pool(size=1)`, then `compare_scopes(complete=True, parallel=True)` here; under flock
  /work/paper.lock, load average 1.2-3.5; cohort 5,795 patients): in a pool job, fanned out from it 69.4 s
  (its own pool started, kernels loaded, the three groups' segments made: 3), here on the default pool
  55.0 s (its own start and segments too); the same Tables 2; this process's peak 3.43 GB.
"""

from __future__ import annotations

import argparse
import os
import pickle
import resource
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.io.loaders import SAMPLE_DIR, load_sample_checked
from engine.records import Records
from engine.scale import pool


def _timed(f: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    value = f()
    return time.perf_counter() - t, value


def _nothing(progress: Any) -> int:
    return 0


def _in_a_fresh_process(work: Callable[[Any], Any]) -> None:
    """The reference for a kept worker: one process of the fork server per job, started and joined
    (`engine.scale.forked.call`, the former reference, forked this process and is gone, issue 38)."""
    import multiprocessing

    process = multiprocessing.get_context("forkserver").Process(target=work, args=(None,))
    process.start()
    process.join()


def _median(f: Callable[[], Any], n: int) -> float:
    return statistics.median(_timed(f)[0] for _ in range(n))


def _memory(progress: Any) -> dict[str, int]:
    """In the worker: its resident memory, private (RssAnon) and shared (RssShmem + RssFile), in kB."""
    out = {}
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile", "RssShmem"):
                out[key] = int(value.split()[0])
    return out


def _reads_all(records: Records) -> Callable[[Any], dict[str, int]]:
    def work(progress: Any) -> dict[str, int]:
        total = int(records.event_item.sum()) + int(records.event_ptr[-1]) + int(records.visit_ptr[-1])
        if records.event_age is not None:
            total += int(records.event_age.sum())
        return {"checksum": total, **_memory(progress)}

    return work


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(SAMPLE_DIR), help="a sample's folder, e.g. sample_data/paper")
    ap.add_argument("--jobs", type=int, default=20, help="jobs per overhead measurement")
    ap.add_argument("--heatherly", type=int, default=0, help="times each fan-out runs the Heatherly rows")
    args = ap.parse_args()
    if args.heatherly:
        return heatherly(args.data, args.heatherly)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())

    workers = pool.Pool(size=1)
    t_start, _ = _timed(lambda: workers.start(1))
    t_first, _ = _timed(lambda: workers.call(lambda progress: 0))
    print(
        f"pool start (fork server, kernels' modules, one worker) {t_start:.2f} s; first job {t_first:.2f} s"
    )

    via_pool = _median(lambda: workers.call(_nothing), args.jobs)
    via_fresh = _median(lambda: _in_a_fresh_process(_nothing), args.jobs)
    here = _median(lambda: _nothing(None), args.jobs)
    print(
        f"per job, nothing to do: pool {via_pool * 1000:.1f} ms, a fresh process per job (reference) "
        f"{via_fresh * 1000:.1f} ms, here {here * 1e6:.1f} us; pool / fresh {via_pool / via_fresh:.2f}"
    )

    t_load, data = _timed(lambda: load_sample_checked(args.data).data)
    records = data.events
    t_fp, _ = _timed(lambda: records.fingerprint)
    nbytes = sum(a.nbytes for a in vars(records).values() if isinstance(a, np.ndarray))
    print(
        f"data: {records!r}, loaded in {t_load:.1f} s, fingerprint {t_fp:.2f} s, arrays {nbytes / 1e6:.0f} MB"
    )

    t_export, handle = _timed(lambda: workers.exports.handle(records))
    print(
        f"segment made here: {handle.size / 1e6:.0f} MB ({handle.text[1] / 1e6:.0f} MB of it the text pickled) in {t_export:.2f} s"
    )
    t_attach, first = _timed(lambda: workers.call(_reads_all(records)))
    t_again, second = _timed(lambda: workers.call(_reads_all(records)))
    t_job, sent = _timed(lambda: len(pool.dumps(_reads_all(records), workers.exports)))
    t_pickle, size = _timed(lambda: len(pickle.loads(pickle.dumps(records, protocol=5)).event_item))
    pickled = len(pickle.dumps(records, protocol=5))
    print(
        f"hand-off: first job {t_attach:.2f} s (mapped, text unpickled in the worker), next job "
        f"{t_again * 1000:.1f} ms (the job pickled: {sent} bytes in {t_job * 1000:.1f} ms); reference: "
        f"the records pickled and unpickled whole {t_pickle:.2f} s ({pickled / 1e6:.0f} MB), per job"
    )
    assert size == records.n_events and first["checksum"] == second["checksum"]
    print(
        f"worker resident after reading every array: private {second['RssAnon'] / 1e3:.0f} MB, shared "
        f"{second['RssShmem'] / 1e3:.0f} MB, files {second['RssFile'] / 1e3:.0f} MB; this process's peak "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB"
    )
    workers.close()
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


def _nothing(progress: Any = None) -> int:
    return 0


def _fans_out_nothing(progress: Any) -> list:
    return pool.fan_out([_nothing, _nothing])


def _compared_in_a_job(groups: dict, k: int, settings: list, fan: bool, progress: Any) -> list:
    """In one pool job (as the app's Heatherly view computes it): the comparisons of `settings`
    ((completion, complete) each; one job, so the second finds what the first memoized, as here), their
    scopes fanned out from the job's worker (`fan`), else one after the other there (the worker before
    a job could fan out)."""
    from engine.anonymize import population as pop

    before = os.environ.get("COHORTSHIELD_WORKERS")
    if not fan:
        os.environ["COHORTSHIELD_WORKERS"] = "0"
    try:
        ids = groups["cohort"].patient_ids
        return [
            pop.compare_scopes(groups, ids, k, complete=c, parallel=True, completion=w).table2().to_dict()
            for w, c in settings
        ]
    finally:
        if before is None:
            os.environ.pop("COHORTSHIELD_WORKERS", None)
        else:
            os.environ["COHORTSHIELD_WORKERS"] = before


def heatherly(directory: str, repeat: int) -> int:
    """bench/ui.py's engine-alone "heatherly" and "phewas" rows: the scopes one after the other here
    (the plain reference), fanned out by the pool here, and in a pool job (as the app runs them) one
    after the other in its worker or fanned out from it."""
    from functools import partial

    from engine import memo
    from engine.anonymize import population as pop
    from engine.study.runs import biobank_between

    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    ds = load_sample_checked(directory).data
    population, cohort = ds.events, ds.group_records("cohort")
    groups = {"cohort": cohort, "population": population}
    bio = biobank_between(ds, "population", "cohort", cohort, population)
    if bio is not None:
        groups["biobank"] = bio
    ids = cohort.patient_ids
    settings = {"heatherly": [("rarest", True)], "phewas": [("phewas", False), ("phewas", True)]}
    jobs = pool.Pool(size=1)
    jobs.start(1)
    jobs.call(_nothing)
    first, again = (_timed(lambda: jobs.call(_fans_out_nothing))[0] for _ in range(2))
    print(
        f"a job's first fan-out of nothing (its own fork server and worker started) {first:.2f} s, "
        f"the next {again * 1000:.1f} ms"
    )
    fresh = pool.Pool(size=1)
    fresh.start(1)
    fresh.call(partial(_compared_in_a_job, groups, 2, settings["heatherly"], False))  # kernels loaded
    first, again = (
        _timed(lambda: fresh.call(partial(_compared_in_a_job, groups, 2, settings["heatherly"], True)))[0]
        for _ in range(2)
    )
    fresh.close()
    print(
        f"a fresh job worker's first fanned-out comparison (its own pool started meanwhile) {first:.2f} s, "
        f"the next {again:.2f} s"
    )

    def here(row: str, k: int, parallel: bool) -> list:
        return [
            pop.compare_scopes(groups, ids, k, complete=c, parallel=parallel, completion=w).table2().to_dict()
            for w, c in settings[row]
        ]

    def in_job(row: str, k: int, fan: bool) -> list:
        return jobs.call(partial(_compared_in_a_job, groups, k, settings[row], fan))

    variants: dict[str, Callable[[str, int], list]] = {
        "here, one after the other": lambda row, k: here(row, k, False),
        "pool fan-out": lambda row, k: here(row, k, True),
        "pool job, one after the other": lambda row, k: in_job(row, k, False),
        "pool job, fanned out": lambda row, k: in_job(row, k, True),
    }
    for run in variants.values():  # kernels, tables, segments and the job's own pool made: not timed
        run("heatherly", 2)
    times: dict[tuple[str, str], list[float]] = {}
    tables: dict[tuple[str, str], list] = {}
    k = 3
    for _ in range(repeat):
        k += 1
        for row in settings:
            for name, run in variants.items():
                memo.clear()
                t, out = _timed(lambda run=run, row=row, k=k: run(row, k))
                times.setdefault((row, name), []).append(t)
                tables.setdefault((row, name), []).append(out)
    jobs.close()
    reference = "here, one after the other"
    for row in settings:
        base = statistics.median(times[(row, reference)])
        print(f"{row}: {reference} {base:.2f} s (the reference; median of {repeat})")
        for name in list(variants)[1:]:
            t = statistics.median(times[(row, name)])
            same = tables[(row, name)] == tables[(row, reference)]
            print(f"  {name} {t:.2f} s ({t / base:.2f} of the reference); the same tables: {same}")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
