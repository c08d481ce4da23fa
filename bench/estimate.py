"""Validation of k-map without the population (engine/estimate/kmap.py, issue 27) on the shipped sample.

    .venv/bin/python -m bench.estimate [--k 5] [--fractions 0.01,0.03,0.09,0.35] [--seed 0]

The shipped sample (`engine.io.loaders.load_sample`): its population (every patient with events) and its
cohort groups (the phenotype cohort and the biobank: selected, NOT random samples), and random cohorts
drawn from the population without replacement at each fraction (seed `--seed`). For each cohort and
knowledge (single visit, all visits): the exact share of records unique and below k against the real
population (`risk.original_distinguishability`, scope population: the plain reference the estimate
stands in for), the cohort-scope shares (what the cohort alone shows), and each model's estimate from
the cohort and the population size only (every model x combination of a record's sets), with its 95 %
interval and its error (estimate - exact, in points). Then the error table: mean absolute error in
points per model over the random cohorts against the same over the shipped, non-random cohorts.
Times are wall seconds of one call.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

from engine import risk
from engine.adversary import KNOWLEDGES, Adversary
from engine.estimate import kmap
from engine.io.loaders import load_sample
from engine.records import Records


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def pct(x: float) -> str:
    return f"{100 * x:5.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--fractions", default="0.01,0.03,0.09,0.35")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    k = args.k
    data = load_sample()
    population = data.events
    N = population.n_patients
    print(
        f"== shipped sample: population {N:,} patients, {population.n_visits:,} visits, "
        f"{population.n_events:,} diagnoses; k = {k}"
    )
    rng = np.random.default_rng(args.seed)
    cohorts: list[tuple[str, bool, Records]] = [
        (f"shipped {name}", False, data.group_records(name)) for name in sorted(data.groups)
    ]
    for f in (float(x) for x in args.fractions.split(",")):
        ids = rng.choice(population.patient_ids, round(f * N), replace=False)
        cohorts.append((f"random f={f:g}", True, population.subset(ids)))
    combos = [(m, c) for m in kmap.MODELS for c in kmap.COMBINES]
    errors: dict[tuple[bool, str, str, str], list[float]] = defaultdict(list)
    for name, is_random, cohort in cohorts:
        n = cohort.n_patients
        print(f"\n== {name}: {n:,} patients (f = {n / N:.4f})")
        for knowledge in KNOWLEDGES:
            exact, dt = timed(
                risk.original_distinguishability, cohort, Adversary("population", knowledge), population
            )
            sample = risk.original_distinguishability(cohort, Adversary("cohort", knowledge))
            ex_u, ex_k = float(np.mean(exact <= 1)), float(np.mean(exact < k))
            print(
                f"  {knowledge:<12} exact (real population, {dt:.2f} s): unique {pct(ex_u)} %, below k "
                f"{pct(ex_k)} %;  cohort alone: unique {pct(np.mean(sample <= 1))} %, below k "
                f"{pct(np.mean(sample < k))} %"
            )
            for model, combine in combos:
                if knowledge == "all_visits" and combine == "riskiest":
                    continue  # one set per record: the same as independent
                est, dt = timed(kmap.estimate_kmap, cohort, N, knowledge, k, model=model, combine=combine)
                u, b = est.share_unique, est.share_below_k
                eu, eb = 100 * (u.estimate - ex_u), 100 * (b.estimate - ex_k)
                errors[(is_random, model, combine, knowledge)].append(abs(eb))
                errors[(is_random, model, combine, knowledge + " unique")].append(abs(eu))
                print(
                    f"    {model:<22} {combine:<11} unique {pct(u.estimate)} [{pct(u.low)},{pct(u.high)}] "
                    f"({eu:+6.1f})  below k {pct(b.estimate)} [{pct(b.low)},{pct(b.high)}] ({eb:+6.1f})  "
                    f"{dt:.2f} s"
                )
    print("\n== mean absolute error, points (estimate - exact), random cohorts | shipped non-random cohorts")
    print(
        "| model | sets | knowledge | unique: random | unique: shipped | below k: random | below k: shipped |"
    )
    print("|---|---|---|---|---|---|---|")
    for model, combine in combos:
        for knowledge in KNOWLEDGES:
            if knowledge == "all_visits" and combine == "riskiest":
                continue
            cells = []
            for what in (knowledge + " unique", knowledge):
                for is_random in (True, False):
                    vals = errors.get((is_random, model, combine, what), [])
                    cells.append(f"{np.mean(vals):.1f}" if vals else "-")
            print(f"| {model} | {combine} | {knowledge.replace('_', ' ')} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
