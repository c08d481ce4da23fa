"""Benchmark of the lab-order workloads (issue #9; Johnson 2018 at its scale).

    .venv/bin/python -m bench.labs [--patients 731850] [--chunks 12] [--skip-scale] [--skip-vae]

1. Uniqueness at the paper's scale: 731,850 synthetic patients (`engine.synth.generator.generate_labs`, built in
   chunks of patients so the raw order table never sits in memory whole), ~6.4 million patient-days.
   Target: at most 60 s for the uniqueness count.
2. One whole-population ranking at that scale (one breached day against every patient). Target 2 s.
3. 100 Recall@n simulations of 100 breached records each on the shipped sample, 99 others. Target 5 s.
   Speed-up against the plain pairwise implementation (`engine.labs.reident.reference_ranks`, one cosine per
   pair of day vectors) measured on a few of the same draws; uniqueness against a frozenset count.
4. VAE training on the sample (default parameters). Target 60 s.

Prints sizes, wall and CPU times and peak memory (ru_maxrss). The machine may be shared: CPU time is
the fairer figure when the load average is high.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from engine.labs import reident as L
from engine.labs.vae_config import VAEConfig
from engine.study.runs import LabRecallSettings

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "labs.parquet"


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(label: str, fn: Callable[[], object]) -> tuple[object, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(f"  {label}: {wall:.2f} s wall, {cpu:.2f} s CPU, peak {peak_mb():,.0f} MB", flush=True)
    return out, wall


# Johnson 2018 section 3.2: the figures its text gives of Figure 3 (share unique among patients with >= d days)
PAPER_UNIQUE = {1: 56.1, 2: 72.3, 9: 98.4}


def print_uniqueness_curve(
    u: L.Uniqueness, days_shown: tuple[int, ...] = (*range(1, 13), 15, 20, 30)
) -> None:
    """Figure 3 as a table: share unique among patients with >= d lab days, beside the paper's
    figures where it states them (issue #36, finding 3)."""
    table = u.by_days().set_index("days")
    print("  >= days  patients  unique   paper   off")
    for d in (d for d in days_shown if d in table.index):
        row = table.loc[d]
        paper = PAPER_UNIQUE.get(d)
        got = 100 * row.share_unique
        tail = f"  {paper:5.1f}%  {got - paper:+5.1f}" if paper is not None else ""
        print(f"  {d:7d}  {int(row.patients):8,}  {got:5.1f}%{tail}")


def scale(n_patients: int, chunks: int) -> None:
    from engine.synth.generator import generate_labs

    print(f"\n1-2. Paper scale: {n_patients:,} patients in {chunks} chunks")
    parts, gen_s, build_s, build_cpu = [], 0.0, 0.0, 0.0
    per = -(-n_patients // chunks)
    rows = 0
    for i in range(chunks):
        n = min(per, n_patients - i * per)
        t = time.perf_counter()
        frame = generate_labs(n, seed=1000 + i)
        gen_s += time.perf_counter() - t
        rows += len(frame)
        t, c = time.perf_counter(), time.process_time()
        part = L.patient_days(frame)
        build_s += time.perf_counter() - t
        build_cpu += time.process_time() - c
        del frame
        ids = np.array([f"c{i:02d}-{p}" for p in part.patient_ids], dtype=object)
        parts.append(L.PatientDays(ids, part.labs, part.patient_ptr, part.day_labels, part.matrix))
    print(
        f"  generated {rows:,} order rows in {gen_s:.1f} s; patient-day vectors built in {build_s:.1f} s wall, {build_cpu:.1f} s CPU"
    )
    days, _ = timed("concatenate chunks", lambda: L.concat_patient_days(parts))
    parts = []
    print(
        f"  {days.n_patients:,} patients, {days.n_days:,} patient-days, {days.n_labs} labs, {days.matrix.nnz:,} orders"
    )
    u, wall = timed("UNIQUENESS (bitset keys + grouping + Figure 3 table)", lambda: L.uniqueness(days))
    table = u.by_days()
    at = {d: table.loc[table.days == d, "share_unique"].iloc[0] for d in (1, 2, 9)}
    print(
        f"  unique: {100 * at[1]:.1f}% overall, {100 * at[2]:.1f}% at >= 2 days, {100 * at[9]:.1f}% at >= 9 days"
    )
    print_uniqueness_curve(u)
    print(f"  -> target 60 s: {'met' if wall <= 60 else 'MISSED'} ({wall:.1f} s)")

    n_min = L.default_min_orders(days.n_days)
    r, _ = timed(f"restrict to labs on >= {n_min} patient-days", lambda: days.restrict_labs(n_min))
    days = u = None  # free the full matrix
    prof, _ = timed("centroids (normalized day vectors, mean per patient)", lambda: L.profiles(r))
    print(f"  {r.n_labs} labs kept; centroids {'sparse' if hasattr(prof.centroid, 'nnz') else 'dense'}")
    draws = L.draw_queries(r, trials=10, simulations=1, against="population", seed=0)
    _, wall = timed("10 whole-population rankings", lambda: L.true_patient_ranks(prof, draws))
    print(
        f"  -> one ranking against {r.n_patients:,} patients: {wall / 10:.3f} s (target 2 s: {'met' if wall / 10 <= 2 else 'MISSED'})"
    )


def sample(skip_vae: bool) -> None:
    print(f"\n3-4. Shipped sample ({SAMPLE.name})")
    frame = pd.read_parquet(SAMPLE)
    days, _ = timed("patient-day vectors", lambda: L.patient_days(frame))
    print(
        f"  {len(frame):,} order rows, {days.n_patients:,} patients, {days.n_days:,} patient-days, {days.n_labs} labs"
    )
    u, t_fast = timed("uniqueness", lambda: L.uniqueness(days))

    def brute() -> dict:
        sets = frame.groupby("patient_id", sort=False)["lab"].apply(frozenset)
        counts = Counter(sets.to_list())
        return {p: counts[s] == 1 for p, s in sets.items()}

    ref, t_ref = timed("uniqueness, plain frozenset count (reference)", brute)
    same = dict(zip(u.patient_ids, u.unique, strict=True)) == ref
    print(f"  same answer: {same}; speed-up {t_ref / t_fast:.1f}x")
    print_uniqueness_curve(u)

    settings = LabRecallSettings(trials=100, simulations=100, against="99", seed=0)  # the page's steps
    r = settings.restricted(days)
    draws, t_draw = timed("draw 100 simulations x 100 breached days, 99 others", lambda: settings.draws(r))
    rec, t_rank = timed("rank the true patients (Recall@n)", lambda: settings.raw_recall(r, draws))
    total = t_draw + t_rank
    print(
        f"  -> 100 simulations: {total:.2f} s (target 5 s: {'met' if total <= 5 else 'MISSED'}); "
        f"Recall@1 {100 * rec.at(1):.2f}%, @10 {100 * rec.at(10):.2f}% (random 1%, 10%)"
    )
    few = L.Draws(
        draws.known[:1, :5],
        draws.breached_day[:1, :5],
        draws.target[:1, :5],
        draws.candidates[:1, :5],
        draws.query,
        draws.against,
        draws.n_candidates,
    )
    (ref_b, ref_t), t_ref = timed(
        "plain pairwise reference on 5 of the same draws", lambda: L.reference_ranks(r, few)
    )
    fast_b, fast_t = L.true_patient_ranks(L.profiles(r), few)
    per_ref, per_fast = t_ref / 5, t_rank / draws.target.size
    print(
        f"  same ranks: {np.array_equal(ref_b, fast_b) and np.array_equal(ref_t, fast_t)}; "
        f"per query {per_ref * 1e3:.1f} ms vs {per_fast * 1e3:.3f} ms: speed-up {per_ref / per_fast:,.0f}x"
    )
    if skip_vae:
        return
    cfg = VAEConfig()
    with_vae = dataclasses.replace(settings, vae=cfg)
    model, wall = timed(
        f"VAE training ({cfg.epochs} epochs, <= {cfg.max_train_days:,} days, {cfg.latent_dim} dims)",
        lambda: with_vae.train(r),
    )
    print(
        f"  ROC AUC {model.roc_auc:.3f}, PR AUC {model.pr_auc:.3f} (paper 0.94, 0.91); "
        f"target 60 s: {'met' if wall <= 60 else 'MISSED'}"
    )
    lat = with_vae.latent_recall(r, draws, model)
    test = L.paired_test(rec, lat)
    print(
        f"  latent Recall@1 {100 * lat.at(1):.2f}%, @10 {100 * lat.at(10):.2f}%; paired t-test p at n=1: "
        f"{test.p.iloc[0]:.2g}, n=10: {test.p.iloc[9]:.2g}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--patients", type=int, default=731_850)
    parser.add_argument("--chunks", type=int, default=12)
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--skip-vae", action="store_true")
    args = parser.parse_args()
    print(f"bench/labs.py  (cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f})")
    sample(args.skip_vae)
    if not args.skip_scale:
        scale(args.patients, args.chunks)
    print(f"\npeak memory {peak_mb():,.0f} MB")


if __name__ == "__main__":
    main()
