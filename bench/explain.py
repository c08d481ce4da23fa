"""Issue 36: the Risk page's explanation of a record below k at population scope, at the paper's scale,
against the counts it had before (measured in the same run).

    .venv/bin/python -m bench.explain [--data paper|sample] [--ks 7,8,9,10,11] [--knowledge single_visit,all_visits]
        [--records N]

Run paper-scale under the shared lock (`flock /work/paper.lock ...`: one paper-scale process at a time).
Per population-scope adversary: the k-independent preparation (`explain.prepare`) and, at each k, the
explanation of the first record below k (as the Risk page opens it), by
- "index": the support counts on the candidates' inverted index (`risk.item_postings`,
  `risk.Postings.holding`) and the arbiter's recount on the holders of the record's known sets
  (`risk.distinguishability_among_holders`);
- "plain": the counts before issue 36 (tests/reference_support.py: every code's and category's holders
  as a Python frozenset, intersected) and the recount against every candidate (`risk.distinguishability`).
Prints wall time of each, their ratio, the memory the preparation allocates (tracemalloc's peak, in a
run of its own) and whether the two explanations are equal (they must be). Not a test: figures only.

Measured (2026-11-29, paper scale: 5,795-patient cohort, 1,366,786 candidates; 2 cores shared by four
engineers; one run each; k = 7..11, the first record below k; every explanation equal to the former's):
  commit 738ae1d (masks, every further atom at once for a few candidates), load average 3.4-4.8:
    single visit: median 0.303 s (0.27-0.85) against 0.663 s (0.64-0.73), ratio 2.2; 20 records
      in one call (`--records 20`, the CLI's path) 2.78 s against 11.65 s;
    all visits: median 0.125 s (0.09-0.22) against 0.359 s (0.36-0.56), ratio 2.9; 20 records in
      one call 17.38 s against 27.75 s;
    prepare (once per adversary): 0.92 / 0.87 s and 490 MB allocated against 4.45 / 3.05 s and
      1,927 MB (the frozensets).
  commit a7627cb (packed bitmaps, atom by atom), load 1.7-2.2: single visit 0.436 s against 0.710 s,
    all visits 0.193 s against 0.390 s, prepare 335 MB; at load 4, 30 all-visits records in one call
    54.2 s against 38.8 s: slower than the frozensets where a record meets ~50 common codes (2,300
    trial sets, each filtered atom by atom in Python), hence 738ae1d.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import tracemalloc
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any
from unittest import mock

import numpy as np

from engine import risk
from engine.adversary import Adversary
from engine.estimate import explain
from engine.records import Records
from tests.reference_support import ReferenceSupport


@contextlib.contextmanager
def plain() -> Iterator[None]:
    """The counts before issue 36: frozenset supports, the recount against every candidate."""
    full = risk.distinguishability
    with (
        mock.patch.object(explain, "_Support", ReferenceSupport),
        mock.patch.object(
            risk, "distinguishability_among_holders", lambda t, c, kn, m, p=None: full(t, c, kn, m)
        ),
    ):
        yield


def measured(fn: Callable[[], Any], memory: bool = False) -> tuple[Any, float, float]:
    """(result, wall seconds, peak MB allocated while it ran when `memory`)."""
    if memory:
        tracemalloc.start()
    t = time.perf_counter()
    out = fn()
    took = time.perf_counter() - t
    peak = 0.0
    if memory:
        peak = tracemalloc.get_traced_memory()[1] / 1e6
        tracemalloc.stop()
    return out, took, peak


def load(data: str):
    if data == "paper":
        from engine.io.imports import load_sample_variant

        ds = load_sample_variant("paper").data
    else:
        from engine.io.loaders import load_sample_checked

        ds = load_sample_checked().data
    return ds.group_records("cohort"), ds.group_records("population")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", choices=("paper", "sample"), default="paper")
    ap.add_argument("--ks", default="7,8,9,10,11")
    ap.add_argument("--knowledge", default="single_visit,all_visits")
    ap.add_argument(
        "--records", type=int, default=0, help="also explain this many records at the first k in one call"
    )
    args = ap.parse_args()
    (cohort, population), took, _ = measured(lambda: load(args.data))
    print(
        f"data: {args.data}, cohort {cohort.n_patients:,}, population {population.n_patients:,} ({took:.1f} s)"
    )
    ks = [int(k) for k in args.ks.split(",")]
    for knowledge in args.knowledge.split(","):
        compare(cohort, population, Adversary("population", knowledge), ks, args.records)  # type: ignore[arg-type]


def compare(cohort: Records, population: Records, adv: Adversary, ks: list[int], many: int) -> None:
    dis, took, _ = measured(partial(risk.original_distinguishability, cohort, adv, population))
    print(f"\n== {adv.label}: original distinguishability {took:.1f} s (once per data, not compared)")
    prepare = partial(explain.prepare, cohort, adv, population, dis)
    prepare()  # warm: the hierarchies and vocabularies are read once per process
    ready, t_new, _ = measured(prepare)
    _, _, m_new = measured(prepare, memory=True)  # apart: tracemalloc slows Python's allocations
    with plain():
        ready_old, t_old, _ = measured(prepare)
        _, _, m_old = measured(prepare, memory=True)
    print(
        f"  prepare (once per adversary): index {t_new:.2f} s, {m_new:,.0f} MB; plain {t_old:.2f} s, {m_old:,.0f} MB"
    )
    rows = []
    for k in ks:
        below = np.flatnonzero(dis < k)
        if not len(below):
            continue
        at = [int(below[0])]
        new, t_new, _ = measured(
            partial(explain.explain_records, cohort, adv, k, population, at, prepared=ready)
        )
        with plain():
            old, t_old, _ = measured(
                partial(explain.explain_records, cohort, adv, k, population, at, prepared=ready_old)
            )
        rows.append((t_new, t_old))
        print(
            f"  k {k:>3} record {at[0]:>5}: index {t_new:6.3f} s, plain {t_old:6.3f} s, "
            f"ratio {t_old / t_new:5.1f}, equal {new == old}; {new[0].change_text()[:60]}"
        )
    if many:  # the CLI's `risk --explain`: every record below k in one call (here the first `many`)
        k = ks[0]
        at = np.flatnonzero(dis < k)[:many].tolist()
        new, t_new, _ = measured(
            partial(explain.explain_records, cohort, adv, k, population, at, prepared=ready)
        )
        with plain():
            old, t_old, _ = measured(
                partial(explain.explain_records, cohort, adv, k, population, at, prepared=ready_old)
            )
        print(
            f"  {len(at)} records at k {k} in one call: index {t_new:.2f} s, plain {t_old:.2f} s, equal {new == old}"
        )
    if rows:
        med_new, med_old = (statistics.median(r[i] for r in rows) for i in (0, 1))
        print(
            f"  median over {len(rows)} k: index {med_new:.3f} s, plain {med_old:.3f} s, ratio {med_old / med_new:.1f}"
        )


if __name__ == "__main__":
    main()
