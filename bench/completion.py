"""Heatherly's completion pass against the biobank and the population (issue 36, "every method at that
scale"): the pass as it is (the others' item sets derived after each merge round,
`engine.anonymize.merged_sets`) against the pool as it was (tests/reference_completion_pool.py, swapped
in with `reference_pool`), in the same run, on the same memoized per-data work (a first run warms it),
the releases compared.

    .venv/bin/python -m bench.completion                                   # the shipped 30,000 sample
    flock /work/paper.lock .venv/bin/python -m bench.completion --data sample_data/paper

Measured 2026-11-29 (2 cores shared with other work; k = 5, "phewas" completion, records without
visits; wall time, CPU within 0.2-2 s of it):
- shipped sample (load 1.4-1.8): DEMO_B (7,800 others, 3 merge rounds) 0.44 s against 0.64 s (1.46x),
  DEMO_S (27,300 others) 0.78 s against 0.87 s (1.11x); the rebuild it saves is small there.
- paper scale, sample_data/paper (load 1.8-2.7): DEMO_B (472,580 others, 12 merge rounds) 14.8 s
  against 22.1 s (1.49x), DEMO_S (1,360,991 others) 22.2 s against 38.0 s (1.71x); releases equal;
  peak 8.5 GB (the bench holds both releases of each scope and their verifications).
What was left of a pass at the paper's scale (py-spy, DEMO_S): the risk engine's counts of the failing
visits' sets among the others (`engine.risk.count_known_sets`: its candidate index, projection and
bitmaps, built again at each of the 22 calls, 0.1-0.4 s each however few the sets), about half.

`--against counter`: the pass against itself with the others' index built again at every count (as
before `engine.risk.KnownSetCounter`, issue 36). Paper scale, 2026-11-29 14:42-14:46 UTC, load 3.4-4.2
(`uptime` after: 3.35, 3.68, 3.45): DEMO_B 15.53 s against 16.92 s wall (1.09x; CPU 13.85 against
14.45 s), DEMO_S 21.04 s against 25.45 s wall (1.21x; CPU 19.16 against 23.54 s); releases equal; peak
8.5 GB. Shipped sample, DEMO_S: 0.67 against 0.71 s (load 3.6). Left (py-spy -r 50 of `--against
counter --scopes population`, its three passes, 140 s of samples over all threads): the others' counts
41.2 s, of which the bitmaps `_Intersector` builds at each count 26.1 s and the prepared indexes
(`KnownSetCounter.__init__`, both variants) 13.9 s; the verification 9.3 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from unittest import mock

from bench.table4 import load
from engine.anonymize import population
from engine.anonymize.population import SCOPE_NAMES, anonymize
from engine.risk import KnownSetCounter
from tests.reference_completion_pool import reference_pool
from tests.test_population_fast import result_state


@contextmanager
def rebuilt_counter() -> Iterator[None]:
    """Within the block the pass counts the others as before `KnownSetCounter` (issue 36): their
    index built again at every count."""

    def fresh(pool, k: int) -> KnownSetCounter:
        pool._others_counter = None
        return original(pool, k)

    original = population._Pool.others_counter
    with mock.patch.object(population._Pool, "others_counter", fresh):
        yield


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="a written sample's folder, e.g. sample_data/paper")
    ap.add_argument("--scopes", default="biobank,population")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--completion", default="phewas", choices=["phewas", "rarest"])
    ap.add_argument("--with-visits", action="store_true")
    ap.add_argument(
        "--against",
        default="pool",
        choices=["pool", "counter"],
        help="the reference: the pool as it was, or the pass with the others' index rebuilt at every count",
    )
    args = ap.parse_args()

    groups, _, label = load(None, args.data)
    cohort = groups["cohort"]
    print(f"data: {label}; cohort {cohort.n_patients:,} records; load average {os.getloadavg()[0]:.1f}")
    for scope in args.scopes.split(","):
        group = groups[scope]

        def run(group=group, scope=scope):
            return anonymize(
                group,
                cohort.patient_ids,
                args.k,
                scope=scope,
                complete=True,
                completion=args.completion,
                with_visits=args.with_visits,
                verify_now=False,
            )

        first = run()  # warms the memoized per-data work both then share
        timed = {}
        states = {}
        for name in ("new", "reference"):
            wall, cpu = time.perf_counter(), time.process_time()
            against = reference_pool if args.against == "pool" else rebuilt_counter
            with against() if name == "reference" else nullcontext():
                res = run()
            timed[name] = (time.perf_counter() - wall, time.process_time() - cpu)
            states[name] = result_state(res)
        loss = first.release.loss
        rounds = len(loss["completion visits below k by round"]) - 1  # the last one found none failing
        merges = rounds - loss["completion suppression rounds"]
        (new_w, new_c), (ref_w, ref_c) = timed["new"], timed["reference"]
        print(
            f"{SCOPE_NAMES[scope]}: {group.n_patients:,} records ({group.n_patients - cohort.n_patients:,} "
            f"others), {merges} merge rounds, {loss['completion suppression rounds']} suppression rounds; "
            f"new {new_w:.2f} s wall {new_c:.2f} s CPU, reference {ref_w:.2f} s wall {ref_c:.2f} s CPU, "
            f"ratio {ref_w / max(new_w, 1e-9):.2f}x wall {ref_c / max(new_c, 1e-9):.2f}x CPU; releases equal "
            f"{states['new'] == states['reference']}; load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    print(f"peak memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
