"""Validation of k-map without the population (engine/estimate/kmap.py, issue 27) on the shipped sample.

    .venv/bin/python -m bench.estimate [--k 5] [--fractions 0.01,0.03,0.09,0.35] [--seed 0] [--data DIR]

`--data sample_data/paper` (issue 36): the same on a written sample, e.g. the paper-scale one
(`python -m engine sample --scale paper --out sample_data/paper`, 1,366,786 patients).
Measured there (`--selection-only --fractions 0.004,0.01,0.03`, k = 5, load average 1.5-3; 5 min 57 s wall,
peak 3.9 GB): worst absolute error in points (share below k or unique), estimate - exact:
  | estimate        | cohorts              | single visit | all visits | spread holds the exact |
  | random assumed  | random (5-41 k)      | 3.2          | 1.5        | 2 of 9                 |
  | random assumed  | disease (12-265 k)   | 10.0         | 15.3       | 0 of 24                |
  | selection told  | random               | 3.2          | 1.5        | 2 of 9                 |
  | selection told  | disease              | 3.8          | 0.0        | 16 of 24               |
  | + code counts   | random               | 1.4          | 2.1        | 1 of 9                 |
  | + code counts   | disease              | 2.1          | 0.0        | 17 of 24               |
The eight disease cohorts (250, 401, 427, 714, 340, 555, 296, 493: 113,402, 264,951, 58,480, 18,501, 11,737,
17,324, 39,672, 79,464 patients), single visit, below k, with the code counts: -1.1, -0.9, -2.1, -0.1, +0.8,
+0.9, -0.3, -0.1 (8 of 8 within 3 points, as on the shipped sample); told only the selection: -2.5, -2.2,
-3.8, -1.2, +0.3, +0.4, -1.7, -1.2 (7 of 8; 5 of 8 on the shipped sample). Each estimate 0.1-14 s.

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

Then (issue #36, finding 4) the cohorts as selected: random cohorts and the eight disease cohorts (every
population patient with a code starting with 250, 401, 427, 714, 340, 555, 296 or 493). For each, the
default model (negative binomial; sets independent, the riskiest with code counts) told nothing (a
random sample assumed), told the selection codes (`--selected-by`), and told them with the population's code counts (`--population-code-counts`,
here counted from the sample's population), beside the model-free cohort-only upper bound; the error
table (points, estimate - exact, single visit and all visits) and how often the spread under the model
holds the exact share. `--selection-only` skips the per-model comparison above.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from engine import risk
from engine.adversary import KNOWLEDGES, Adversary
from engine.estimate import kmap
from engine.io.loaders import SAMPLE_DIR, load_sample
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
    ap.add_argument("--selection-only", action="store_true", help="only the cohorts-as-selected table")
    ap.add_argument("--data", default=None, help="a written sample's folder, e.g. sample_data/paper")
    args = ap.parse_args()
    k = args.k
    t0 = time.perf_counter()
    data = load_sample(args.data or SAMPLE_DIR)
    population = data.events
    N = population.n_patients
    where = "shipped sample" if args.data is None else f"sample in {args.data}"
    print(
        f"== {where} ({time.perf_counter() - t0:.1f} s to load): population {N:,} patients, {population.n_visits:,} visits, "
        f"{population.n_events:,} diagnoses; k = {k}"
    )
    cohorts: list[tuple[str, bool, Records]] = [
        (f"shipped {name}", False, data.group_records(name)) for name in sorted(data.groups)
    ]
    fractions = [float(x) for x in args.fractions.split(",")]
    cohorts += [(name, True, c) for name, c in random_cohorts(population, fractions, args.seed)]
    if not args.selection_only:
        compare_models(cohorts, population, k)
    selection_table(population, k, [(name, cohort) for name, is_random, cohort in cohorts if is_random])


DISEASES = ("250", "401", "427", "714", "340", "555", "296", "493")
FRACTIONS = (0.01, 0.03, 0.09, 0.35)


def random_cohorts(
    population: Records, fractions: Sequence[float] = FRACTIONS, seed: int = 0
) -> list[tuple[str, Records]]:
    """Random cohorts drawn from the population without replacement, one per fraction (in order, one
    generator seeded `seed`)."""
    rng = np.random.default_rng(seed)
    out = []
    for f in fractions:
        ids = rng.choice(population.patient_ids, round(f * population.n_patients), replace=False)
        out.append((f"random f={f:g}", population.subset(ids)))
    return out


def disease_cohort(population: Records, prefix: str) -> Records:
    """Every population patient holding a code that starts with `prefix`."""
    held = np.flatnonzero(np.char.startswith(population.items.astype(str), prefix))
    has = np.asarray(population.patient_item_sets.tocsc()[:, held].sum(axis=1)).ravel() > 0
    return population.take(np.flatnonzero(has))


def selection_table(population: Records, k: int, randoms: list[tuple[str, Records]]) -> None:
    """Errors of the estimate told how the cohort was selected (module docstring, second part)."""
    N = population.n_patients
    held = np.asarray(population.patient_item_sets.sum(axis=0)).ravel()
    code_counts = dict(zip(population.items.astype(str).tolist(), held.tolist(), strict=True))
    cases: list[tuple[str, Records, tuple[str, ...] | None]] = [(name, c, None) for name, c in randoms]
    cases += [(f"disease {code}", disease_cohort(population, code), (code,)) for code in DISEASES]
    variants = (
        ("random assumed", {}),
        ("selection told", {"selected": True}),
        ("+ code counts", {"counts": True}),
    )
    print(
        f"\n== cohorts as selected (k = {k}; negative binomial, default combination); points, estimate - exact"
    )
    head = "| cohort | n | knowledge | exact below k | cohort-only bound | " + " | ".join(
        f"{v}: below k (unique)" for v, _ in variants
    )
    print(head + " |")
    print("|---" * (5 + len(variants)) + "|")
    covered: dict[tuple[str, bool], list[bool]] = defaultdict(list)
    worst: dict[tuple[str, str, bool], float] = defaultdict(float)
    for name, cohort, selected in cases:
        for knowledge in KNOWLEDGES:
            exact = risk.original_distinguishability(cohort, Adversary("population", knowledge), population)
            ex_k, ex_u = float(np.mean(exact < k)), float(np.mean(exact <= 1))
            cells = []
            bound = 0.0
            for label, how in variants:
                t0 = time.perf_counter()
                est = kmap.estimate_kmap(
                    cohort,
                    N,
                    knowledge,
                    k,
                    selected_by=selected if how else None,
                    population_code_counts=code_counts if how.get("counts") else None,
                )
                dt = time.perf_counter() - t0
                b, u = est.share_below_k, est.share_unique
                eb, eu = 100 * (b.estimate - ex_k), 100 * (u.estimate - ex_u)
                bound = est.cohort_only.share_below_k
                cells.append(f"{eb:+.1f} ({eu:+.1f}) {dt:.2f} s")
                is_random = selected is None
                covered[(label, is_random)].append(b.low <= ex_k <= b.high)
                key = (label, knowledge, is_random)
                worst[key] = max(worst[key], abs(eb), abs(eu))
            print(
                f"| {name} | {cohort.n_patients:,} | {knowledge.replace('_', ' ')} | {pct(ex_k)} % | "
                f"{pct(bound)} % | " + " | ".join(cells) + " |"
            )
    print(
        "\n== worst absolute error, points (below k or unique), and how often the 95 % spread holds the exact"
    )
    print("| estimate | cohorts | single visit | all visits | spread holds the exact |")
    print("|---|---|---|---|---|")
    for label, _ in variants:
        for is_random in (True, False):
            hold = covered[(label, is_random)]
            print(
                f"| {label} | {'random' if is_random else 'disease'} | "
                f"{worst[(label, 'single_visit', is_random)]:.1f} | {worst[(label, 'all_visits', is_random)]:.1f} | "
                f"{sum(hold)} of {len(hold)} |"
            )


def compare_models(cohorts: list[tuple[str, bool, Records]], population: Records, k: int) -> None:
    """Every model x combination on the shipped groups and the random cohorts (module docstring)."""
    N = population.n_patients
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
