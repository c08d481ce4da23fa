"""Issue 24 ("Live means live"): `risk._attacker_known_visits`, run every time a release without
visits is verified under single-visit knowledge (every method's page, after every change), on the
shipped sample's cohort. The integer-coded version against the text-keyed merge it replaced
(tests/reference_known_visits.py) in the same run, on releases of several methods; the outputs are
compared too (tests/test_known_visits_equal.py proves the equality). Target: at most 0.03 s.

Both are timed on warm caches (the cohort's and release's derived arrays made by a first call, as in
the app, where the release was just verified). Run from the repository root:

    .venv/bin/python -m bench.known_visits [--repeats 5]
"""

from __future__ import annotations

import argparse
import subprocess
import time
from collections.abc import Callable

import numpy as np

from engine import risk
from engine.io.loaders import load_sample_checked
from engine.records import Records
from engine.release import Release
from engine.study.runs import CodeSelection, GCCensSettings, HeatherlySettings, ProfilesSettings, RunInputs
from tests.reference_known_visits import reference_attacker_known_visits


def median_s(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def same(a: Records | None, b: Records | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.fingerprint == b.fingerprint and all(
        np.array_equal(getattr(a, f), getattr(b, f))
        for f in ("patient_ids", "items", "visit_ptr", "visit_ids", "event_ptr", "event_item")
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    ds = load_sample_checked().data
    cohort = ds.group_records("cohort")
    inputs = RunInputs(ds.group_records("population"), cohort)
    print(f"cohort: {cohort.n_patients:,} patients, {cohort.n_visits:,} visits, {cohort.n_events:,} events")
    settings = [
        HeatherlySettings(k=4),
        HeatherlySettings(k=10, scope="population"),
        ProfilesSettings(k=5),
        GCCensSettings(k=3, codes=CodeSelection("top", top_n=12)),
    ]
    print(
        f"{'release':<28} {'items':>6} {'known visits':>12} {'events':>7} {'old s':>8} {'new s':>8} {'ratio':>6} same"
    )
    for s in settings:
        made = s.run(inputs).with_visits(False)
        rel: Release = made if made.source is cohort else made.checked(cohort)
        old, new = reference_attacker_known_visits(rel), risk._attacker_known_visits(rel)  # warm caches
        t_old = median_s(lambda rel=rel: reference_attacker_known_visits(rel), args.repeats)
        t_new = median_s(lambda rel=rel: risk._attacker_known_visits(rel), args.repeats)
        label = f"{s.method} {getattr(s, 'scope', '')} k={s.k}"
        n_visits = 0 if new is None else new.n_visits
        n_events = 0 if new is None else new.n_events
        print(
            f"{label:<28} {rel.records.n_items:>6} {n_visits:>12,} {n_events:>7,} "
            f"{t_old:>8.4f} {t_new:>8.4f} {t_old / t_new:>6.1f} {same(old, new)}"
        )
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
