"""Issue 24 (part): the membership attack of the report build (engine/utility/membership.py `assess`)
against the attack as it was (tests/reference_membership.py), measured in the same run.

The tables are the report's (bench/report.py's study: the sample's cohort / single visit at k = 5, the
original cohort's PheWAS table and those of the GCCens, Heatherly and LDA releases), each under every
option of the officer with the study's small-cell policy, and once more with the All of Us policy.
Prints the sizes, each path's median time, the ratio and whether every `AttackResult` is equal.

    .venv/bin/python -m bench.membership [--repeat 3]

Not a test: figures only (never part of `make test`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import astuple
from typing import Any


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from bench.report import sample_study, session_memos
    from engine.disclosure.cells import SmallCellPolicy
    from engine.utility import membership
    from engine.utility.phewas import phecode_table
    from tests import reference_membership as reference

    phecode_table()
    s = sample_study()
    ph = session_memos(s)["phewas"]
    tables = {"original": ph.original, **{f"release: {n}": t for n, t in ph.released.items()}}
    inputs, genotypes = s["inputs"], s["ds"].genotypes
    members, non, panel, _ = membership.targets_of(inputs.cohort, inputs.population, genotypes)
    print(
        f"membership attack, sample: {members.n_patients:,} members, {non.n_patients:,} non-members, "
        f"panel {panel.n_patients:,}; tables (rows): "
        + ", ".join(f"{n} ({len(t):,})" for n, t in tables.items())
    )
    print(f"median of {args.repeat} (seconds)")
    print(f"{'small-cell policy':<20}{'options':>8}{'reference':>11}{'new':>8}{'ratio':>8}  equal")
    for label, policy in (
        (
            "the study's (none)" if not s["study"].small_cells.active else "the study's",
            s["study"].small_cells,
        ),
        ("All of Us", SmallCellPolicy.preset("aou")),
    ):

        def run(module: Any, p: Any = policy) -> dict[str, list[tuple]]:
            got = module.assess(tables, inputs.cohort, inputs.population, genotypes, p)
            return {n: [astuple(r) for r in rs] for n, rs in got.items()}

        t_ref, ref = timed(lambda: run(reference), args.repeat)
        t_new, new = timed(lambda: run(membership), args.repeat)
        options = sum(len(rs) for rs in new.values())
        print(f"{label:<20}{options:>8}{t_ref:>11.3f}{t_new:>8.3f}{t_ref / t_new:>7.1f}x  {new == ref}")


if __name__ == "__main__":
    main()
