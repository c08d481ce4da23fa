"""Benchmark (issue 24): the app's own costs around a method run, on the shipped sample, against the
plain references they replaced, measured in the same run.

    .venv/bin/python -m bench.page_costs [--repeat 5]

- the release's construction invariant (`engine.release.check_invariant`, integer units) against the
  text-keyed check (tests/reference_release.py), on a release of each method (GCCens on every code,
  Heatherly, UGACLIP with and without visits shown, LDA; their sources);
- `Release.checked` asked twice for one run (a page and the study): the second asking against a
  second full check;
- utility constraint satisfaction (`engine.utility.queries.utility_satisfaction`, the shipped
  policy): one product for every disease, the original cohort's counts memoized, against the count
  per disease with the cohort recounted (tests/reference_queries.py); the first call (cohort counted)
  and a later one (as at a new k).

Prints sizes, the best of `--repeat` times of each path, the ratio, and whether the outputs are the
same. Not a test: figures only.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable

import pandas as pd


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def verdict(fn: Callable[[], object]) -> str:
    try:
        fn()
    except Exception as exc:  # the same error, whatever it is
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    import engine.utility.queries as queries
    from engine import memo
    from engine.io.loaders import load_sample_checked
    from engine.release import check_invariant
    from engine.study.runs import (
        CodeSelection,
        GCCensSettings,
        HeatherlySettings,
        LDASettings,
        ProfilesSettings,
        RunInputs,
    )
    from tests.reference_queries import reference_utility_satisfaction
    from tests.reference_release import reference_check_invariant

    ds = load_sample_checked().data
    cohort = ds.group_records("cohort")
    inputs = RunInputs(ds.events, cohort)
    lda = LDASettings(k=5).run_result(inputs)
    made = {
        "GCCens, all codes": (
            GCCensSettings(k=5, scope="population", codes=CodeSelection("all")).run(inputs),
            cohort,
        ),
        "Heatherly": (HeatherlySettings(k=5).run_result(inputs).release, cohort),
        "UGACLIP": (ProfilesSettings(k=5).run_result(inputs).release, cohort),
        "UGACLIP, visits shown": (ProfilesSettings(k=5, with_visits=True).run_result(inputs).release, cohort),
        "LDA": (lda.release(), lda.source_pairs()),
    }
    print(
        f"sample cohort: {cohort.n_patients:,} patients, {cohort.n_visits:,} visits, "
        f"{cohort.n_events:,} events, {cohort.n_items:,} codes; best of {args.repeat}\n"
    )
    print("check_invariant (integer units) against the text-keyed check")
    print(f"| {'release':<24} | {'events':>7} | {'new':>8} | {'reference':>9} | {'ratio':>6} | same |")
    print(f"|{'-' * 26}|{'-' * 9}|{'-' * 10}|{'-' * 11}|{'-' * 8}|------|")
    for name, (rel, source) in made.items():
        rel = dataclasses.replace(rel, source=None)
        new = best(lambda r=rel, s=source: check_invariant(r, s), args.repeat)
        ref = best(lambda r=rel, s=source: reference_check_invariant(r, s), args.repeat)
        same = verdict(lambda r=rel, s=source: check_invariant(r, s)) == verdict(
            lambda r=rel, s=source: reference_check_invariant(r, s)
        )
        print(
            f"| {name:<24} | {rel.records.n_events:>7,} | {new * 1000:5.1f} ms | {ref * 1000:6.1f} ms "
            f"| {ref / new:5.1f}x | {'yes' if same else 'NO'} |"
        )

    rel = dataclasses.replace(made["UGACLIP"][0], source=None)
    t = time.perf_counter()
    rel.checked(cohort)
    first = time.perf_counter() - t
    t = time.perf_counter()
    rel.checked(cohort)
    again = time.perf_counter() - t
    print(
        f"\nRelease.checked asked twice for one UGACLIP run: first {first * 1000:.1f} ms, "
        f"second {again * 1000:.3f} ms (before: a second full check, {first * 1000:.1f} ms)\n"
    )

    policy = queries.default_utility_policy([str(x) for x in cohort.items])
    print(f"utility_satisfaction, {len(policy.diseases)} diseases, against the count per disease")
    print(f"| {'release':<24} | {'first':>8} | {'again':>8} | {'reference':>9} | {'ratio':>6} | same |")
    print(f"|{'-' * 26}|{'-' * 10}|{'-' * 10}|{'-' * 11}|{'-' * 8}|------|")
    for name, (rel, source) in made.items():
        if source is not cohort:
            continue
        memo.clear("utility original counts")  # the first call counts the cohort
        t = time.perf_counter()
        got = queries.utility_satisfaction(cohort, rel, policy)
        first = time.perf_counter() - t
        again = best(lambda r=rel: queries.utility_satisfaction(cohort, r, policy), args.repeat)
        ref = best(lambda r=rel: reference_utility_satisfaction(cohort, r, policy), args.repeat)
        try:
            pd.testing.assert_frame_equal(got, reference_utility_satisfaction(cohort, rel, policy))
            same = "yes"
        except AssertionError:
            same = "NO"
        print(
            f"| {name:<24} | {first * 1000:5.1f} ms | {again * 1000:5.1f} ms | {ref * 1000:6.1f} ms "
            f"| {ref / again:5.0f}x | {same} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
