"""Error of a differentially private code prevalence table at three budgets (issue 39, third bullet).

    .venv/bin/python -m bench.dp_tables [--repeats 5] [--max-codes 20]

On the shipped sample's cohort, the table of patients per code over every code of the population
(`engine.disclosure.dp_tables.dp_prevalence`, OpenDP's Laplace; and its Gaussian at delta = 1e-6), at
epsilon 0.1, 1 and 10: mean and largest absolute error against the exact table, averaged over
`--repeats` draws (the noise is fresh on every call), the part of the error the bound on codes per
patient costs (the bounded table against the exact one, no noise), OpenDP's noise scale and the
accuracy of a cell (95%), and the time of one table.

Then the PheWAS case/control tables (`engine.disclosure.dp_phewas`) at the same budgets: the
associations at uncorrected p <= 0.05 of the exact PheWAS of the cohort, and those kept, lost and
false when recomputed from the noisy tables (averaged over the repeats), beside the bound alone's.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from engine.disclosure.dp_tables import (
    DEFAULT_MAX_CODES,
    PatientSets,
    bounded_prevalence,
    dp_prevalence,
    exact_prevalence,
)
from engine.io.loaders import load_sample


def table_rows(label: str, sets, categories, max_codes: int, repeats: int) -> None:
    """Mean and largest absolute error at each budget, Laplace and Gaussian (delta 1e-6)."""
    exact = exact_prevalence(sets, categories)
    bias = np.abs(bounded_prevalence(sets, categories, max_codes) - exact)
    held = exact > 0
    print(
        f"\n== {label}: {len(categories):,} categories ({int(held.sum()):,} held); bound {max_codes} per "
        f"patient: mean absolute error of the bound alone {bias.mean():.2f}, largest {bias.max()}"
    )
    print(
        "| mechanism | epsilon | scale | accuracy (95%) | mean abs. error | largest | mean abs. error, held | s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for delta in (None, 1e-6):
        for eps in (0.1, 1.0, 10.0):
            means, largest, held_means, secs = [], [], [], []
            for _ in range(repeats):
                t0 = time.perf_counter()
                t = dp_prevalence(sets, categories, eps, delta, max_codes)
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


def phewas_rows(cohort, genotypes, max_codes: int, repeats: int) -> None:
    """Associations kept, lost and false from the DP PheWAS tables at each budget."""
    from engine.disclosure.dp_phewas import associations_kept, bounded_phenotypes, dp_phewas, phewas_of_dp
    from engine.utility.phewas import phenotype_matrix, run_phewas

    phen = phenotype_matrix(cohort)
    exact = run_phewas(phen, genotypes)
    bounded, truncated = bounded_phenotypes(phen, max_codes)
    alone = associations_kept(exact, run_phewas(bounded, genotypes))
    print(
        f"\n== PheWAS tables: {len(genotypes.columns) - 1} SNPs x {len(phen.phecodes):,} phecodes; "
        f"{len(exact):,} tests, {alone['original']} associations at p <= 0.05; bound {max_codes} phecodes where not a control "
        f"({truncated:,} patients truncated) alone: kept {alone['kept']}, lost {alone['lost']}, false {alone['false']}"
    )
    print(
        "| mechanism | epsilon | sensitivity | scale | accuracy (95%) | tests run | kept | lost | false | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for delta in (None, 1e-6):
        for eps in (0.1, 1.0, 10.0):
            found, secs, tests = [], [], []
            for _ in range(repeats):
                t0 = time.perf_counter()
                r = dp_phewas(cohort, genotypes, eps, delta, max_codes)
                secs.append(time.perf_counter() - t0)
                result = phewas_of_dp(r)
                tests.append(len(result))
                found.append(associations_kept(exact, result))
            mean = {k: np.mean([f[k] for f in found]) for k in ("kept", "lost", "false")}
            name = r.noise.mechanism + ("" if delta is None else f" (delta {delta:g})")
            print(
                f"| {name} | {eps:g} | {r.sensitivity} | {r.noise.scale:.3g} | {r.noise.accuracy:.1f} | {np.mean(tests):,.0f} | "
                f"{mean['kept']:.1f} | {mean['lost']:.1f} | {mean['false']:.1f} | {np.mean(secs):.2f} |",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-codes", type=int, default=DEFAULT_MAX_CODES)
    parser.add_argument(
        "--max-phecodes",
        type=int,
        default=DEFAULT_MAX_CODES,
        help="the PheWAS tables' bound (not-control phecodes)",
    )
    args = parser.parse_args()
    ds = load_sample()
    cohort = ds.group_records("cohort")
    print(f"sample cohort: {cohort.n_patients:,} patients")
    codes = sorted(map(str, ds.events.items))
    table_rows("codes of the population", PatientSets.of_codes(cohort), codes, args.max_codes, args.repeats)
    phe = PatientSets.of_phecodes(cohort)
    table_rows("phecodes of the v1.2 map", phe, [str(c) for c in phe.labels], args.max_codes, args.repeats)
    phewas_rows(cohort, ds.genotypes, args.max_phecodes, args.repeats)


if __name__ == "__main__":
    main()
