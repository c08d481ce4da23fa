"""Benchmark: PPE's k-independent part (`engine.anonymize.policy._protection`, issue 24) on the shipped
sample, against the per-item version it replaced (tests/reference_policy.py), measured in the same run.

    .venv/bin/python -m bench.policy

For each filtering condition (and within visits, for a release that shows them) it prints the number
of constraints, the median of 3 wall times of each version (not memoized), the ratio and whether the
outputs are identical (constraints in order, supports, least superset supports).
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np

from engine.anonymize import policy
from engine.io.loaders import load_sample_checked
from engine.records import Records
from tests.reference_policy import reference_protection


def new_protection(records: Records, condition: str, within: bool):
    """`_protection`'s `make` (the memo bypassed)."""
    collected, rows, group = policy._condition_constraints(records, condition)  # type: ignore[arg-type]
    pairs = policy._superset_pairs(rows)
    if within and condition == "single_visit":
        sup = policy._visit_set_supports(rows, group, records, pairs)
    else:
        sup = policy._support_rows(rows, records, within)
    return collected, sup, policy._least_superset(rows, sup, pairs)


def median_time(fn, *args, repeat: int = 3):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    cohort = load_sample_checked().data.group_records("cohort")
    _ = (cohort.visit_item_sets, cohort.patient_item_sets, cohort.visit_patient)  # built once, as in the app
    print(
        f"shipped sample cohort: {cohort.n_patients:,} patients, {cohort.n_visits:,} visits, "
        f"{cohort.n_events:,} events, {cohort.n_items:,} codes; load average {os.getloadavg()[0]:.2f}"
    )
    for condition, within in (("single_visit", False), ("single_visit", True), ("all_visits", False)):
        t_old, old = median_time(reference_protection, cohort, condition, None, within)
        t_new, new = median_time(new_protection, cohort, condition, within)
        same = (
            new[0] == old[0]
            and [list(s) for s in new[0]] == [list(s) for s in old[0]]
            and all(np.array_equal(a, b) for a, b in zip(new[1:], old[1:], strict=True))
        )
        print(
            f"{condition:12s} within visits {within!s:5s}: {len(new[0]):,} constraints; "
            f"reference {t_old * 1000:.0f} ms, new {t_new * 1000:.1f} ms, new/reference {t_new / t_old:.3f} "
            f"(x{t_old / t_new:.1f}); same output: {same}"
        )


if __name__ == "__main__":
    main()
