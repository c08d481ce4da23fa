"""Error of a differentially private code prevalence table at three budgets (issue 39, third bullet).

    .venv/bin/python -m bench.dp_tables [--repeats 5] [--max-codes 20]

On the shipped sample's cohort, the table of patients per code over every code of the population
(`engine.disclosure.dp_tables.dp_prevalence`, OpenDP's Laplace; and its Gaussian at delta = 1e-6), at
epsilon 0.1, 1 and 10: mean and largest absolute error against the exact table, averaged over
`--repeats` draws (the noise is fresh on every call), the part of the error the bound on codes per
patient costs (the bounded table against the exact one, no noise), OpenDP's noise scale and the
accuracy of a cell (95%), and the time of one table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from engine.disclosure.dp_tables import (
    DEFAULT_MAX_CODES,
    bounded_prevalence,
    dp_prevalence,
    exact_prevalence,
)
from engine.io.loaders import load_sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-codes", type=int, default=DEFAULT_MAX_CODES)
    args = parser.parse_args()
    ds = load_sample()
    cohort = ds.group_records("cohort")
    categories = sorted(map(str, ds.events.items))
    exact = exact_prevalence(cohort, categories)
    bias = np.abs(bounded_prevalence(cohort, categories, args.max_codes) - exact)
    held = exact > 0
    print(
        f"== sample cohort: {cohort.n_patients:,} patients, {len(categories):,} codes ({int(held.sum()):,} held); "
        f"bound {args.max_codes} codes per patient: mean absolute error of the bound alone {bias.mean():.2f}, "
        f"largest {bias.max()}"
    )
    print("| mechanism | epsilon | scale | accuracy (95%) | mean abs. error | largest | mean abs. error, held codes | s |")
    print("|---|---|---|---|---|---|---|---|")
    for delta in (None, 1e-6):
        for eps in (0.1, 1.0, 10.0):
            means, largest, held_means, secs = [], [], [], []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                t = dp_prevalence(cohort, categories, eps, delta, args.max_codes)
                secs.append(time.perf_counter() - t0)
                diff = np.abs(t.table["patients"].to_numpy() - exact)
                means.append(diff.mean())
                largest.append(diff.max())
                held_means.append(diff[held].mean())
            name = t.mechanism + ("" if delta is None else f" (delta {delta:g})")
            print(
                f"| {name} | {eps:g} | {t.scale:.3g} | {t.accuracy:.1f} | {np.mean(means):.2f} | "
                f"{np.mean(largest):.0f} | {np.mean(held_means):.2f} | {np.mean(secs):.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
