"""Issue 24 (part): the Lab orders page's engine steps and the GCCens page's own measures and charts
against the code as it was (tests/reference_reident.py, tests/reference_gccens_measures.py,
tests/reference_gccens_charts.py), measured in the same run on the shipped sample.

Rows: the patient-days of the sample's lab orders, their restriction at the default minimum (every lab
kept), the ranking of the page's draws (50 simulations x 100 breached days against 99 others); the
GCCens release's measures (all codes, cohort scope, k = 5) and its two charts. Prints the sizes, each
path's median time, the ratio new / reference and whether the outputs are equal.

    .venv/bin/python -m bench.labs_gccens_pages [--repeat 3]

Not a test: figures only (never part of `make test`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.membership import timed  # median of `repeat` runs and the last output


def _same_days(a, b) -> bool:
    fields = ("patient_ids", "labs", "patient_ptr", "day_labels")
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in fields) and all(
        np.array_equal(getattr(a.matrix, f), getattr(b.matrix, f)) for f in ("data", "indices", "indptr")
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the references
    import reference_gccens_charts as RC
    import reference_gccens_measures as RM
    import reference_reident as R

    from engine.io.loaders import load_sample_checked
    from engine.labs import reident as L
    from engine.study.runs import CodeSelection, GCCensSettings, LabRecallSettings, RunInputs
    from engine.utility.censoring import censoring_loss
    from ui import gccens_charts as C
    from ui.views.gccens import _statistics

    ds = load_sample_checked().data
    labs = ds.labs
    days = L.patient_days(labs)
    settings = LabRecallSettings(simulations=50)
    min_orders = settings.min_orders_for(days)
    kept = settings.restricted(days)
    draws = settings.draws(kept)
    prof = L.profiles(kept)
    print(
        f"lab orders: {len(labs):,} rows, {days.n_patients:,} patients, {days.n_days:,} patient-days, "
        f"{days.n_labs} labs; min orders {min_orders} keeps {kept.n_labs}; draws "
        f"{draws.target.shape[0]} x {draws.target.shape[1]} against {draws.n_candidates - 1} others"
    )
    inputs = RunInputs(ds.events, ds.group_records("cohort"))
    release = GCCensSettings(k=5, scope="cohort", codes=CodeSelection("all")).run(inputs)
    loss = censoring_loss(release)
    compare = _compare_rows(release, loss)
    print(f"GCCens release (all codes, cohort scope, k = 5): {release.records.n_patients:,} records\n")

    def same_measures(new, old) -> bool:
        return [s.as_dict() for s in new] == [s.as_dict() for s in old[1:]]

    def same_json(a, b) -> bool:
        return json.loads(a.to_json()) == json.loads(b.to_json())

    rows: list[tuple[str, Callable[[], Any], Callable[[], Any], Callable[[Any, Any], bool]]] = [
        ("patient-days", lambda: L.patient_days(labs), lambda: R.patient_days(labs), _same_days),
        (
            "restriction (nothing dropped)",
            lambda: days.restrict_labs(min_orders),
            lambda: R.restrict_labs(days, min_orders),
            _same_days,
        ),
        (
            "ranks (99 others)",
            lambda: L.true_patient_ranks(prof, draws),
            lambda: R.true_patient_ranks(prof, draws),
            lambda a, b: all(np.array_equal(x, y) for x, y in zip(a, b, strict=True)),
        ),
        (
            "GCCens CUL statistics",
            lambda: _statistics(release, loss),
            lambda: RM.compute(release),
            same_measures,
        ),
        ("GCCens CUL histogram", lambda: C.cul_histogram(loss), lambda: RC.cul_histogram(loss), same_json),
        (
            "GCCens variant bars",
            lambda: C.retention_figure(compare),
            lambda: RC.retention_figure(compare),
            same_json,
        ),
    ]
    print(f"| {'step':<32} | {'reference':>9} | {'new':>9} | {'ratio':>6} | equal |")
    print(f"|{'-' * 34}|{'-' * 11}|{'-' * 11}|{'-' * 8}|-------|")
    for name, new, old, equal in rows:
        t_old, out_old = timed(old, args.repeat)
        t_new, out_new = timed(new, args.repeat)
        ok = equal(out_new, out_old)
        print(
            f"| {name:<32} | {t_old:7.3f} s | {t_new:7.3f} s | {t_new / t_old:6.2f} | {ok!s:<5} |", flush=True
        )


def _compare_rows(release, loss):
    """The view's faithful-vs-targeted table for one variant (the chart's input)."""
    import pandas as pd

    from engine.utility.censoring import cul_statistics, release_cul

    st_v = cul_statistics(loss["cul"].to_numpy(), release)
    orig_v = cul_statistics(release_cul(release, "original"), release, "original")
    return pd.DataFrame(
        [
            {
                "variant": release.params["variant"],
                "share_retained_vs_original": orig_v.share_codes_retained,
                "share_codes_retained": st_v.share_codes_retained,
                "share_modified": st_v.share_modified,
            }
        ]
    )


if __name__ == "__main__":
    main()
