"""`python -m engine risk`: distinguishability of every cohort patient under one adversary.

    python -m engine risk --events EVENTS [--population IDS] [--cohort IDS]
        --scope {cohort,population} --knowledge {single_visit,all_visits} [--k K]
        [--count-repeats] [--threads N] --out OUT.csv

Writes `patient_id,distinguishability` for every cohort patient (cohort order) and prints the summary
(records, share unique, share below k, median). EVENTS is a long-form CSV or Parquet file; IDS a file
of patient ids. The population defaults to every patient in EVENTS, the cohort to the population.
Files are read and validated by `engine.loaders` (errors name file, row and column).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from engine.adversary import KNOWLEDGES, SCOPES, Adversary
from engine.cli import UserError
from engine.commands.inputs import InputOptions, load_groups
from engine.records import Records
from engine.risk import original_distinguishability, summarize


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
    p.add_argument("--out", required=True, help="output CSV: patient_id,distinguishability")
    p.set_defaults(func=run)


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
    population, cohort = _records_and_groups(args)
    adversary = Adversary(args.scope, args.knowledge)
    dis = original_distinguishability(
        cohort, adversary, population, count_repeats=args.count_repeats, threads=args.threads
    )
    pd.DataFrame({"patient_id": cohort.patient_ids.astype(str), "distinguishability": dis}).to_csv(
        out, index=False
    )
    s = summarize(dis, args.k)
    print(f"adversary: {adversary.label}{' (repeats counted)' if args.count_repeats else ''}")
    print(f"cohort: {cohort.n_patients} patients; candidates: ", end="")
    print(f"{cohort.n_patients if args.scope == 'cohort' else population.n_patients} patients")
    print(f"share unique (distinguishability 1): {s.share_unique:.2%}")
    print(f"share below k = {args.k}: {s.share_below_k:.2%}")
    print(f"median distinguishability: {s.median:g}")
    print(f"wrote {len(dis)} rows to {out}")
    return 0
