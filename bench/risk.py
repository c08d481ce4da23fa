"""Benchmark of the risk kernel (engine/risk.py) at Heatherly's scale, and on the shipped sample.

    .venv/bin/python -m bench.risk [--patients 1366786] [--seed 0] [--reference-targets 100]

1. `engine.synth.generator.generate(1_366_786, seed)`: a population of 1.37 million patients (Heatherly's SD,
   about 13.4 million diagnoses) with its research cohort; times single-visit distinguishability of
   every patient against the whole population, the cohort against the population, and all-visits for
   both; prints sizes, wall and CPU time and peak memory (ru_maxrss) after each step. Speed-ups are
   ratios of CPU time, which other processes on a shared machine do not inflate.
2. The plain reference (tests/reference_risk.py, Python sets and multisets) on a 20,000-patient subset
   in the same run: it compares every target with every candidate, so it runs on the first
   `--reference-targets` targets of the subset (its results are checked equal to the kernel's) and the
   speed-up is reported both as measured on those targets and extrapolated to the whole subset.
3. The shipped sample (`engine.io.loaders.load_sample`): the full four-adversary recomputation the Risk
   page does on every change (target: under 1 s).
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np

from engine import risk
from engine.adversary import ALL_ADVERSARIES, Adversary
from engine.records import Records
from tests.reference_risk import reference_distinguishability


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # Linux: kilobytes


def timed(label: str, fn, *args, **kwargs):
    """Run fn; print wall time, this process's CPU time (the fair figure on a shared, loaded
    machine) and peak memory. Returns (result, CPU seconds)."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    dt, ct = time.perf_counter() - t0, time.process_time() - c0
    print(f"  {label:<56} wall {dt:8.2f} s  cpu {ct:8.2f} s  peak {peak_gb():5.2f} GB", flush=True)
    return out, ct


def describe(name: str, dis: np.ndarray, k: int = 5) -> None:
    s = risk.summarize(dis, k)
    print(
        f"    {name}: {s.n_records:,} records, unique {s.share_unique:.1%}, below k={k} "
        f"{s.share_below_k:.1%}, median {s.median:g}"
    )


def population_scale(n_patients: int, seed: int, reference_targets: int) -> None:
    from engine.synth.generator import generate

    print(f"== population scale: engine.synth.generator.generate({n_patients:,}, seed={seed})")
    data, _ = timed("generate events", generate, n_patients, seed, labs=False)
    population, _ = timed("Records.from_frame", Records.from_frame, data.events)
    cohort_ids = np.asarray(data.cohort["patient_id"] if hasattr(data.cohort, "columns") else data.cohort)
    cohort = population.subset(cohort_ids.astype(str))
    print(
        f"  population: {population.n_patients:,} patients, {population.n_visits:,} visits, "
        f"{population.n_events:,} diagnoses, {population.n_items:,} distinct codes; "
        f"cohort: {cohort.n_patients:,} patients"
    )
    del data
    _, _ = timed("index build (per-record item sets, cached)", lambda: population.patient_item_sets)
    results = {}
    for name, targets, knowledge in (
        ("whole population, single visit, vs population", population, "single_visit"),
        ("cohort, single visit, vs population", cohort, "single_visit"),
        ("cohort, all visits, vs population", cohort, "all_visits"),
        ("whole population, all visits, vs population", population, "all_visits"),
    ):
        dis, dt = timed(name, risk.distinguishability, targets, population, knowledge)
        describe(name, dis)
        results[name] = dt

    print("== speed-up over the plain reference, 20,000-patient subset (candidates = the subset)")
    subset = population.take(np.arange(min(20_000, population.n_patients)))
    m = min(reference_targets, subset.n_patients)
    targets = subset.take(np.arange(m))
    for knowledge in ("single_visit", "all_visits"):
        fast_all, t_fast_all = timed(
            f"kernel, all {subset.n_patients:,} targets, {knowledge}",
            risk.distinguishability,
            subset,
            subset,
            knowledge,
        )
        fast, t_fast = timed(
            f"kernel, {m} targets, {knowledge}", risk.distinguishability, targets, subset, knowledge
        )
        ref, t_ref = timed(
            f"reference, {m} targets, {knowledge}", reference_distinguishability, targets, subset, knowledge
        )
        assert fast.tolist() == ref == fast_all[:m].tolist(), "kernel and reference disagree"
        per_target = t_ref / m
        print(
            f"    equal on {m} targets; measured speed-up {t_ref / t_fast:,.0f}x; reference extrapolated "
            f"to {subset.n_patients:,} targets {per_target * subset.n_patients:,.0f} s vs kernel "
            f"{t_fast_all:.2f} s: {per_target * subset.n_patients / t_fast_all:,.0f}x"
        )


def sample_data() -> None:
    from engine.io.loaders import load_sample

    print("== shipped sample: four-adversary recomputation (the Risk page)")
    try:
        ds, _ = timed("load_sample", load_sample)
    except FileNotFoundError as exc:
        print(f"  skipped: {exc}")
        return
    population = ds.group_records("population")
    cohort = ds.group_records("cohort")
    print(f"  population {population!r}; cohort {cohort!r}")
    for _ in range(2):  # the second run is what the page sees once Records' indexes are built
        together, _ = timed("all four adversaries (original)", risk.all_adversaries, cohort, population)
    for adv in ALL_ADVERSARIES:
        describe(adv.label, together[adv])
    timed(
        "riskiest patterns (cohort, single visit)",
        risk.riskiest_patterns,
        cohort,
        cohort,
        Adversary("cohort", "single_visit").knowledge,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--patients", type=int, default=1_366_786)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reference-targets", type=int, default=100)
    parser.add_argument("--skip-population", action="store_true", help="only the shipped sample")
    args = parser.parse_args()
    sample_data()
    if not args.skip_population:
        population_scale(args.patients, args.seed, args.reference_targets)
    print(
        f"peak memory (ru_maxrss): {peak_gb():.2f} GB; load average {os.getloadavg()} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
