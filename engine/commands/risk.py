"""`python -m engine risk`: distinguishability of every cohort patient under one adversary.

    python -m engine risk --events EVENTS [--population IDS] [--cohort IDS]
        --scope {cohort,population} --knowledge {single_visit,all_visits} [--k K]
        [--count-repeats] [--threads N] [--up-to-k]
        [--shards DIR [--scheduler ADDR | --dask-workers N]] --out OUT.csv

Writes `patient_id,distinguishability` for every cohort patient (cohort order) and prints the summary
(records, share unique, share below k, median). EVENTS is a long-form CSV or Parquet file; IDS a file
of patient ids. The population defaults to every patient in EVENTS, the cohort to the population.
Files are read and validated by `engine.io.loaders` (errors name file, row and column).

With `--shards DIR` (population scope), the candidates are the population in the Parquet shards of DIR
(`python -m engine shards EVENTS DIR N` writes them) and EVENTS holds the cohort's events: each shard
is read and counted on its own (engine/scale/shards.py), or on Dask with `--scheduler tcp://HOST:8786` or
`--dask-workers N` (a LocalCluster; engine/scale/distributed.py). The backend, the kernel that ran
(`engine.risk.record_kernels`) and each shard's progress are printed. Results equal the in-process run.

`--up-to-k` counts every known set only up to k (`Matching(cap=k)`, engine/risk.py `count_known_sets`): the
share unique, the share below k and every record below k are exact, values of k or more read k, and
the population-scale run grows about linearly with the population (issue 15).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from engine.adversary import KNOWLEDGES, SCOPES, Adversary
from engine.commands.inputs import InputOptions, load_groups
from engine.commands.paths import path_roles
from engine.io.errors import UserError
from engine.records import Records
from engine.risk import (
    KnownSets,
    Matching,
    original_distinguishability,
    record_kernels,
    summarize,
    thread_count,
)


def _progress(ran: list[str] | None):
    """Progress printer per shard; with the kernel log of this thread, the kernel the shard ran."""

    def show(done: int, total: int, path: str) -> None:
        kernel = f" (kernel: {ran[-1]})" if ran else ""
        print(f"  shard {done}/{total}: {Path(path).name}{kernel}", flush=True)

    return show


def _matching(args: argparse.Namespace) -> Matching:
    """The matching of `--count-repeats`, `--threads` and `--up-to-k`."""
    return Matching(
        count_repeats=args.count_repeats, threads=args.threads, cap=args.k if args.up_to_k else None
    )


def _sharded(args: argparse.Namespace, cohort: Records, adversary: Adversary):
    """Distinguishability of the cohort against the population in the shards of `--shards`, and the
    number of candidates."""
    from engine.scale.shards import sharded_known_set_distinguishability

    folder = Path(args.shards)
    paths = sorted(folder.glob("shard-*.parquet"))
    if not paths:
        raise UserError(f"--shards: no shard-*.parquet file in {str(folder)!r}")
    matching = _matching(args)
    if args.scheduler or args.dask_workers is not None:
        from engine.scale.distributed import dask_known_set_distinguishability

        where = args.scheduler or f"a local cluster of {args.dask_workers} workers"
        print(f"backend: Dask ({where}), {len(paths)} shards; kernel chosen per shard on the workers")
        ks: KnownSets = dask_known_set_distinguishability(
            cohort,
            paths,
            adversary.knowledge,
            matching,
            scheduler=args.scheduler,
            n_workers=args.dask_workers or 2,
            progress=_progress(None),
        )
    else:
        print(f"backend: {len(paths)} shards, one at a time, {thread_count(args.threads)} threads")
        with record_kernels() as ran:
            ks = sharded_known_set_distinguishability(
                cohort, paths, adversary.knowledge, matching, progress=_progress(ran)
            )
    return ks.per_record(), ks.n_candidates


def register(sub) -> None:
    p = sub.add_parser(
        "risk",
        help="distinguishability of every cohort patient under one adversary",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--events", required=True, help="long-form events, CSV or Parquet (patient_id, code, [visit])"
    )
    p.add_argument(
        "--population", help="file of patient ids: the population (default: every patient in EVENTS)"
    )
    p.add_argument("--cohort", help="file of patient ids: the cohort (default: the population)")
    p.add_argument("--scope", required=True, choices=SCOPES, help="candidates: the cohort or the population")
    p.add_argument("--knowledge", required=True, choices=KNOWLEDGES, help="one visit's codes or all codes")
    p.add_argument("--k", type=int, default=5, help="k for the share below k (default 5)")
    p.add_argument(
        "--count-repeats",
        action="store_true",
        help="all-visits knowledge includes how often each code was assigned (Tamersoy 2010)",
    )
    p.add_argument(
        "--threads",
        type=int,
        help="threads of the risk kernel (default: COHORTSHIELD_THREADS, else every core); "
        "results are the same for every count",
    )
    p.add_argument(
        "--up-to-k",
        action="store_true",
        help="count each known set only up to k: the verdict (unique, below k) stays exact, values of k "
        "or more read k, and population-scale runs are about linear in the population",
    )
    p.add_argument("--shards", help="folder of Parquet shards holding the population (population scope)")
    p.add_argument("--scheduler", help="with --shards: count the shards on this Dask scheduler (tcp://...)")
    p.add_argument(
        "--dask-workers", type=int, help="with --shards: count on a local Dask cluster of N workers"
    )
    p.add_argument("--out", required=True, help="output CSV: patient_id,distinguishability")
    p.set_defaults(func=run, **path_roles(("--events", "--population", "--cohort", "--shards"), ("--out",)))


def _records_and_groups(args: argparse.Namespace) -> tuple[Records, Records]:
    inputs = load_groups(
        args.events, population=args.population, cohort=args.cohort, options=InputOptions.of(args)
    )
    return inputs.population, inputs.cohort


def run(args: argparse.Namespace) -> int:
    if args.k < 1:
        raise UserError(f"--k must be a positive whole number, not {args.k}")
    if args.threads is not None and args.threads < 1:
        raise UserError(f"--threads must be a positive whole number, not {args.threads}")
    out = Path(args.out)
    if out.parent and not out.parent.exists():
        raise UserError(f"--out: folder {str(out.parent)!r} does not exist")
    if (args.scheduler or args.dask_workers is not None) and not args.shards:
        raise UserError("--scheduler and --dask-workers need --shards")
    if args.dask_workers is not None and args.dask_workers < 1:
        raise UserError(f"--dask-workers must be a positive whole number, not {args.dask_workers}")
    population, cohort = _records_and_groups(args)
    adversary = Adversary(args.scope, args.knowledge)
    if args.shards and args.scope == "population":
        dis, n_cand = _sharded(args, cohort, adversary)
    else:
        print(f"backend: in process, {thread_count(args.threads)} threads")
        with record_kernels() as ran:
            dis = original_distinguishability(cohort, adversary, population, _matching(args))
        print(f"kernel: {', '.join(ran)}")
        n_cand = cohort.n_patients if args.scope == "cohort" else population.n_patients
    pd.DataFrame({"patient_id": cohort.patient_ids.astype(str), "distinguishability": dis}).to_csv(
        out, index=False
    )
    s = summarize(dis, args.k)
    print(f"adversary: {adversary.label}{' (repeats counted)' if args.count_repeats else ''}")
    print(f"cohort: {cohort.n_patients} patients; candidates: ", end="")
    print(f"{n_cand} patients")
    print(f"share unique (distinguishability 1): {s.share_unique:.2%}")
    print(f"share below k = {args.k}: {s.share_below_k:.2%}")
    capped = " (counted up to k: a median of k means k or more)" if args.up_to_k else ""
    print(f"median distinguishability: {s.median:g}{capped}")
    print(f"wrote {len(dis)} rows to {out}")
    return 0
