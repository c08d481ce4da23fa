"""Benchmark: six SNPs against every phecode for a 6,000-patient cohort, original and one release.

Target (issue #6): at most 2 s for original + release on this 2-core machine. The reference is a plain
implementation measured in the same run: per phecode, cases and controls from Python sets, then
scipy's chi2_contingency per test (on one SNP, to keep its run short; the per-SNP time is compared).

    .venv/bin/python bench/phewas.py [--patients 6000] [--seed 0]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import pandas as pd
from scipy.stats import chi2_contingency

from engine.records import Records
from engine.study.runs import HeatherlySettings, RunInputs
from engine.synth import generator as synth
from engine.utility import phewas


def reference_one_snp(
    records: Records, genotypes: pd.DataFrame, snp: str, min_cases: int = 20
) -> dict[str, float]:
    """Plain PheWAS of one SNP: Python sets per patient, scipy per test (same definitions)."""
    table = phewas.phecode_table()
    gmap = dict(zip(genotypes["patient_id"].astype(str), genotypes[snp], strict=True))
    per_patient: list[tuple[set[int], set[int], float]] = []
    for p, pid in enumerate(records.patient_ids):
        g = gmap.get(str(pid))
        if g is None or pd.isna(g):
            continue
        codes = set(records.patient_codes(p))
        has = set().union(*(table.code_phecodes.get(c, frozenset()) for c in codes)) if codes else set()
        leaves = set().union(*(table.code_leaves.get(c, frozenset()) for c in codes))
        per_patient.append((has, leaves, float(g)))
    rows, cols = table.exclusion.nonzero()
    in_range = set(zip(rows.tolist(), cols.tolist(), strict=True))  # (q, j): q lies in j's exclusion range
    out = {}
    for j in range(len(table.phecodes)):
        cases = [g for has, _, g in per_patient if j in has]
        if len(cases) < min_cases:
            continue
        ctrl = [
            g
            for has, leaves, g in per_patient
            if j not in has and not any((q, j) in in_range for q in leaves)
        ]
        if not ctrl:
            continue
        a, c = sum(cases), sum(ctrl)
        t = np.array([[a, 2 * len(cases) - a], [c, 2 * len(ctrl) - c]])
        out[table.phecodes[j]] = chi2_contingency(t, correction=False).pvalue
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--patients", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    t0 = time.perf_counter()
    data = synth.generate(max(30_000, 3 * args.patients), args.seed, labs=False)
    ids = data.genotypes["patient_id"].astype(str).to_numpy()[: args.patients]
    records = Records.from_frame(data.events).subset(ids)
    genotypes = data.genotypes[data.genotypes["patient_id"].astype(str).isin(set(ids))]
    print(f"data: {records!r}, {genotypes.shape[1] - 1} SNPs, generated in {time.perf_counter() - t0:.1f} s")
    release = HeatherlySettings(k=5, scope="cohort", complete=False).run(RunInputs(records, records))
    phewas.phecode_table()  # the map is parsed once per process; not part of the per-run time

    t = time.perf_counter()
    original = phewas.phewas_of_records(records, genotypes)
    t_orig = time.perf_counter() - t
    t = time.perf_counter()
    released = phewas.phewas_of_release(release, genotypes)
    t_rel = time.perf_counter() - t
    print(
        f"original: {len(original):,} tests in {t_orig:.2f} s; released: {len(released):,} tests in {t_rel:.2f} s"
    )
    print(f"original + release: {t_orig + t_rel:.2f} s (target <= 2 s)")

    snp = genotypes.columns[1]
    t = time.perf_counter()
    ref = reference_one_snp(records, genotypes, snp)
    t_ref = time.perf_counter() - t
    mine = original[original["snp"] == snp].set_index("phecode")["p"]
    agree = max(abs(mine[p] - ref[p]) for p in ref) if ref else float("nan")
    per_snp = t_orig / max(original["snp"].nunique(), 1)
    print(
        f"reference, one SNP ({snp}): {len(ref):,} tests in {t_ref:.2f} s; engine per SNP {per_snp:.3f} s; "
        f"speed-up {t_ref / per_snp:.0f}x; max |p difference| {agree:.2e}"
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory: {rss:.0f} MB")


if __name__ == "__main__":
    main()
