"""Heatherly 2013 at the paper's scale: the whole population (SD: 1,366,786 records, ~13.4 million
diagnoses) anonymized with k = 5 under PheWAS-code constraints, the research cohort extracted
(DEMO_S) and verified by the risk engine under single-visit knowledge; target: at most 60 s and 8 GB.

Prints sizes, the time of each step (generation and Records building are reported apart: they are
loading, not anonymization), peak memory, DC / CC figures, and the speed-up of the vectorized
procedure (frequency bins + release building) over a plain reference implementation (Python sets of
holders per code, dictionaries per bin, a loop over events) measured in the same run on a subsample;
both must give the same generalized items.

    .venv/bin/python bench/population.py [--patients N] [--reference-patients M] [--complete]

`--sample` (issue 24, "Live means live"): the completion pass on the shipped sample instead, as the app
and bench/ui.py's engine row run it (`compare_scopes(..., complete=True)` at a k not computed before,
over the cohort, the biobank and the population), timed against the pass as it was
(tests/reference_population.py, swapped in with `reference_pass`) in the same run, with the outputs
compared. Run from the repository root:

    .venv/bin/python -m bench.population --sample [--ks 8,9,10,11,12]
"""

from __future__ import annotations

import argparse
import resource
import time
from collections import defaultdict
from itertools import pairwise

import numpy as np

from engine.anonymize.population import (
    _released,
    _State,
    frequency_bin_generalization,
    utility_groups,
)
from engine.records import Records
from engine.study.runs import HeatherlySettings, RunInputs
from engine.synth.generator import generate
from engine.utility.retention import figures

SD_PATIENTS = 1_366_786


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_s() -> float:
    """CPU seconds of this process (user + system): wall time on a shared machine includes waiting."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def vectorized(group: Records, k: int, utility: np.ndarray) -> set[frozenset[str]]:
    """The engine's procedure and release building; returns the generalized items."""
    item_of_code, _ = frequency_bin_generalization(group, k, utility)
    state = _State(group, item_of_code, utility, np.ones(group.n_events, dtype=bool))
    _, item_codes, _ = _released(state)
    return set(item_codes.values())


def reference(group: Records, k: int, utility: np.ndarray) -> set[frozenset[str]]:
    """Plain reference: holder sets per code, bins as dictionaries, the release built event by event."""
    codes = [str(c) for c in group.items]
    holders: dict[str, set[int]] = defaultdict(set)
    for p in range(group.n_patients):
        for c in group.patient_codes(p):
            holders[c].add(p)
    util = dict(zip(codes, utility.tolist(), strict=True))
    items: dict[frozenset[str], set[int]] = {frozenset([c]): h for c, h in holders.items()}
    width = 1
    while True:
        bins: dict[tuple[int, int], list[frozenset[str]]] = defaultdict(list)
        for it, h in items.items():
            if len(h) < k:
                bins[((len(h) - 1) // width, util[min(it)])].append(it)
        for members in bins.values():
            if len(members) >= 2:
                merged = frozenset().union(*members)
                items[merged] = set().union(*(items.pop(m) for m in members))
        if width >= k - 1:
            break
        width *= 2
    item_of: dict[str, frozenset[str]] = {}
    for it, h in items.items():
        if len(h) >= k:
            for c in it:
                item_of[c] = it
    released = []  # the release, one row per kept event (a generalized item once per visit)
    for p in range(group.n_patients):
        for v, visit in enumerate(group.patient_visits(p)):
            seen = set()
            for c in visit:
                it = item_of.get(c)
                if it is None or (len(it) > 1 and it in seen):
                    continue
                seen.add(it)
                released.append((p, v, it))
    return {it for it in set(item_of.values()) if len(it) > 1}


def sample_completion(ks: list[int]) -> None:
    """The completion pass on the shipped sample: new pass against the reference, same run."""
    from engine.anonymize.population import compare_scopes
    from engine.io.loaders import load_sample_checked
    from engine.study.runs import biobank_between
    from tests.reference_population import reference_pass
    from tests.test_population_fast import comparison_state

    ds = load_sample_checked().data
    population, cohort = ds.events, ds.group_records("cohort")
    groups = {"cohort": cohort, "population": population}
    biobank = biobank_between(ds, "population", "cohort", cohort, population)
    if biobank is not None:
        groups["biobank"] = biobank
    for name, g in groups.items():
        print(f"{name}: {g.n_patients:,} records, {g.n_visits:,} visits, {g.n_events:,} diagnoses")
    print(
        f"\ncompare_scopes(complete=True) over {', '.join(groups)} (the app's groups, bench/ui.py's "
        "engine row), CPU seconds (process time) per new k"
    )
    fast_t, slow_t = [], []
    for k in ks:
        c = cpu_s()
        fast = compare_scopes(groups, cohort.patient_ids, k, complete=True)
        fast_t.append(cpu_s() - c)
        c = cpu_s()
        with reference_pass():
            slow = compare_scopes(groups, cohort.patient_ids, k, complete=True)
        slow_t.append(cpu_s() - c)
        same = comparison_state(fast) == comparison_state(slow)
        rounds = {
            s: len(r.release.loss["completion visits below k by round"]) for s, r in fast.results.items()
        }
        print(
            f"  k={k:3d}: new {fast_t[-1]:.2f} s, reference {slow_t[-1]:.2f} s, "
            f"ratio {slow_t[-1] / fast_t[-1]:.1f}x, rounds {rounds}, same release: {same}"
        )
        assert same, f"k={k}: the new completion pass differs from the reference"
    warm = sorted(fast_t[1:]) or fast_t
    print(
        f"new: first k {fast_t[0]:.2f} s (the work that does not depend on k is memoized then), median "
        f"of the others {warm[len(warm) // 2]:.2f} s; reference median {sorted(slow_t)[len(slow_t) // 2]:.2f} s "
        "(the reference swaps in the former completion pass and release building only: the rest of "
        "compare_scopes is the new one in both)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--patients", type=int, default=SD_PATIENTS)
    ap.add_argument("--reference-patients", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--complete", action="store_true", help="also time the completion pass")
    ap.add_argument("--sample", action="store_true", help="the completion pass on the shipped sample")
    ap.add_argument("--ks", default="8,9,10,11,12", help="with --sample: the k values, each new")
    args = ap.parse_args()
    if args.sample:
        sample_completion([int(k) for k in args.ks.split(",")])
        return

    t, c = time.perf_counter(), cpu_s()
    data = generate(args.patients, seed=0, labs=False)
    t_gen = time.perf_counter() - t
    t = time.perf_counter()
    population = Records.from_frame(data.events)
    t_rec = time.perf_counter() - t
    cohort_ids = data.cohort["patient_id"].to_numpy(dtype=object)
    del data
    print(
        f"population: {population.n_patients:,} records, {population.n_visits:,} visits, "
        f"{population.n_events:,} diagnoses, {population.n_items:,} codes; cohort {len(cohort_ids):,} records"
    )
    print(
        f"generate + Records {t_gen:.1f} s + {t_rec:.1f} s wall, {cpu_s() - c:.1f} s CPU "
        f"(loading; not part of the target); peak memory after loading {peak_mb():,.0f} MB"
    )

    steps: list[tuple[str, float]] = []
    last = [time.perf_counter()]

    def progress(frac: float, msg: str) -> None:
        now = time.perf_counter()
        steps.append((msg, now - last[0]))
        last[0] = now

    t, c = time.perf_counter(), cpu_s()
    inputs = RunInputs(population, population.subset(cohort_ids))
    res = HeatherlySettings(k=args.k, scope="population", complete=False).run_result(inputs, progress)
    t_anon, c_anon = time.perf_counter() - t, cpu_s() - c
    progress(1.0, "done")
    print(
        f"DEMO_S k={args.k} phecode: anonymization + extraction + verification {t_anon:.1f} s wall, "
        f"{c_anon:.1f} s CPU (target <= 60 s)"
    )
    for (msg, _), (_, dt) in pairwise(steps):
        print(f"  {dt:6.1f} s  {msg}")
    loss = res.release.loss
    print(
        f"  codes {loss['codes']:,}, below k {loss['codes below k']:,}, generalized {loss['codes generalized']:,} "
        f"into {loss['generalized items']:,} items, suppressed {loss['codes suppressed']:,}"
    )
    print(f"  {res.verification.message()}")
    f_pop, f_anon = figures(population), figures(res.released_group, res.release.item_codes)
    print(
        f"  SD-Anon: DC {f_anon.diagnosis_count:,} of {f_pop.diagnosis_count:,} "
        f"({100 * f_anon.diagnosis_count / f_pop.diagnosis_count:.2f}%), CC {f_anon.code_count:,} of "
        f"{f_pop.code_count:,} ({100 * f_anon.code_count / f_pop.code_count:.2f}%), population size "
        f"{f_anon.population_size:,}"
    )
    print(f"peak memory {peak_mb():,.0f} MB (target <= 8192 MB)")

    if args.complete:
        t, c = time.perf_counter(), cpu_s()
        done = HeatherlySettings(k=args.k, scope="population", complete=True).run_result(inputs)
        print(
            f"with completion pass: {time.perf_counter() - t:.1f} s wall, {cpu_s() - c:.1f} s CPU; "
            f"{done.verification.message()} "
            f"visits below k by round {done.release.loss['completion visits below k by round']}, "
            f"events suppressed {done.release.loss['completion events suppressed']:,}; peak {peak_mb():,.0f} MB"
        )

    n = min(args.reference_patients, population.n_patients)
    sub = population.take(np.arange(n))
    utility = utility_groups(sub.items, "phecode")
    c = cpu_s()
    fast = vectorized(sub, args.k, utility)
    t_fast = cpu_s() - c
    c = cpu_s()
    slow = reference(sub, args.k, utility)
    t_slow = cpu_s() - c
    assert fast == slow, "vectorized and reference procedures disagree"
    print(
        f"procedure + release building on {n:,} records ({sub.n_events:,} diagnoses): vectorized {t_fast:.2f} s CPU, "
        f"plain reference {t_slow:.2f} s CPU, speed-up {t_slow / t_fast:.1f}x; same {len(fast):,} generalized items"
    )


if __name__ == "__main__":
    main()
