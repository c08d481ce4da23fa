"""GCCens at the paper's scale (Tamersoy 2010, "Materials"): a population of 301,423 records and a
research sample of 2,676 with the codes 250, 272, 401, 724 and repeat profiles like the paper's
(`engine.synth.repeats.repeated_codes`), k = 5, caps 3; then a 50-code variant.

Prints sizes, the mean repeats per code (paper: 3.5 / 2.3 / 4.4 / 2.0 in S, 2.2 / 1.3 / 2.5 / 0.9 in
P), times, peak memory, and the speed-up of the incremental dominance-count kernel over the plain
reference measured in the same run: Algorithm 1 recounting every record's distinguishability with the
risk engine (`engine.risk.distinguishability`) on every iteration. Both must give the same release,
and the risk engine verifies it. Also prints Tables 1 and 2 on this synthetic data.

Then "all codes on the sample" (issue 16): GCCens as the app runs it (`engine.study.runs.GCCensSettings` with
`CodeSelection("all")`, k-map against the shipped sample's population) against the pre-issue-16 path,
`engine/anonymize/censor.py` as of commit e6fef49 loaded from git, in the same run; both must give
the same release.

Then "live" (issue 24, "Live means live"; `--live` prints only this): GCCens on all codes of the
shipped sample as the app runs it (`GCCensSettings.run`, the engine alone) in both scopes, at k 5
(and 3, 7), with the loop of today (the cohort scope's compiled loop, `engine.anonymize.censor_kernel`)
against the loop as it was (tests/reference_censor.py) in the same run: the loop alone
(`censor_counts`) and the whole engine run, medians of 3, the ratio, and whether the counts, steps
and release are equal. The machine's load average is printed beside the figures.

    .venv/bin/python -m bench.gccens [--quick] [--sample-only] [--live]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from engine import risk
from engine.adversary import Adversary
from engine.anonymize.censor import gccens_run, prepare
from engine.records import Records
from engine.study.experiments import gccens_sweep_caps as sweep_caps
from engine.study.experiments import gccens_sweep_k as sweep_k
from engine.synth.repeats import repeated_codes

PAPER_CODES = ["250", "272", "401", "724"]
K_MAP = Adversary("population", "all_visits")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(n_pop: int, n_sample: int, codes: list[str], seed: int) -> tuple[Records, Records]:
    t = time.perf_counter()
    events, sample_ids = repeated_codes(n_pop, n_sample, codes, seed)
    population = Records.from_frame(events)
    sample = population.subset(sample_ids)
    print(
        f"  data: population {population.n_patients:,} records / {population.n_events:,} codes, "
        f"sample {sample.n_patients:,} / {sample.n_events:,}, {len(codes)} codes "
        f"(built in {time.perf_counter() - t:.1f} s)"
    )
    for name, recs in (("sample", sample), ("population", population)):
        counts = np.asarray(recs.patient_item_counts.sum(axis=0)).ravel() / recs.n_patients
        shown = {
            c: round(float(counts[j]), 2)
            for c, j in zip(PAPER_CODES, recs.item_index(PAPER_CODES), strict=True)
        }
        print(f"  mean repeats per record in the {name}: {shown}")
    return population, sample


def timed(fn, *args, **kwargs):
    """(result, wall seconds); the CPU seconds of the last call are in `timed.cpu`."""
    t, c = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    timed.cpu = time.process_time() - c
    return out, time.perf_counter() - t


def run_case(label: str, population: Records, sample: Records, k: int, cap: int, reference: bool) -> None:
    print(f"\n== {label}: k = {k}, caps {cap}")
    before, t_before = timed(
        risk.original_distinguishability, sample, K_MAP, population, risk.Matching(count_repeats=True)
    )
    print(
        f"  original sample: {np.mean(before <= 1):.1%} unique, {np.mean(before < k):.1%} below k "
        f"(risk engine, {t_before:.2f} s)"
    )
    problem, t_prep = timed(prepare, sample, population, "population")
    cpu_prep = timed.cpu
    fast, t_fast = timed(gccens_run, problem, k, cap=cap)
    total, cpu = t_prep + t_fast, cpu_prep + timed.cpu
    kernel = "dense histogram" if problem.counter_for(problem.cap_vector(cap)).dense else "bitsets"
    print(
        f"  GCCens (dominance kernel, {kernel}): prepare {t_prep:.3f} s + run {t_fast:.3f} s = {total:.3f} s wall "
        f"({cpu:.3f} s CPU), {fast.loss['iterations']} iterations, peak RSS {peak_mb():.0f} MB"
    )
    cul = fast.loss["cul"]
    print(
        f"  CUL mean {cul['mean']:.3f} sd {cul['std']:.3f} median {cul['median']:.3f} skew {cul['skewness']:.3f}; "
        f"{cul['share_modified']:.1%} records modified, {cul['share_codes_retained']:.1%} codes retained"
    )
    verification, t_ver = timed(risk.verify, fast, K_MAP, k, population)
    print(f"  risk.verify: {verification.message()} ({t_ver:.2f} s)")
    if reference:
        ref, t_ref = timed(gccens_run, problem, k, cap=cap, kernel="risk")
        same = ref.records.fingerprint == fast.records.fingerprint and ref.loss["steps"] == fast.loss["steps"]
        print(
            f"  reference (risk engine recount every iteration): {t_ref:.2f} s wall ({timed.cpu:.2f} s CPU); "
            f"same release: {same}; speed-up {t_ref / total:.1f}x wall incl. prepare ({timed.cpu / cpu:.1f}x CPU)"
        )


def tables(population: Records, sample: Records) -> None:
    problem = prepare(sample, population, "population")
    t1, t = timed(sweep_k, problem, ks=[2, 5, 10, 15, 20, 25], cap=3)
    print(
        f"\n== Table 1 on this data (caps 3; {t:.2f} s incl. verification; paper: k=5 mean 0.046, k=25 0.091)"
    )
    print(t1.drop(columns=["variant", "cap"]).round(3).to_string(index=False))
    t2, t = timed(sweep_caps, problem, caps=range(3, 11), k=5)
    print(f"\n== Table 2 on this data (k = 5; {t:.2f} s; paper: cap 3 mean 0.046 ... cap 10 0.213)")
    print(t2.drop(columns=["variant", "k"]).round(3).to_string(index=False))


OLD_COMMIT = "e6fef49"  # main before issue 16's kernel (per-target exact counts of every censored record)


def _old_censor(commit: str = OLD_COMMIT):
    """engine/anonymize/censor.py as of `commit`, loaded as its own module (None without git)."""
    root = Path(__file__).resolve().parent.parent
    try:
        src = subprocess.run(
            ["git", "show", f"{commit}:engine/anonymize/censor.py"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    spec = importlib.util.spec_from_loader(f"censor_at_{commit}", loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    exec(compile(src, f"{commit}:engine/anonymize/censor.py", "exec"), module.__dict__)
    return module


def all_codes_on_the_sample(variant: str = "faithful", old: bool = True) -> None:
    """The app's all-codes run, three ways in one process: the default kernel (faithful: every
    record's exit step by binary search over the precomputed step sequence), the stepwise loop
    (`kernel="stepwise"`, the default before that), and the pre-issue-16 path; same release each."""
    import functools
    from unittest import mock

    from engine.anonymize import censor
    from engine.io import loaders
    from engine.study.runs import CodeSelection, GCCensSettings, RunInputs

    ds = loaders.load_sample()
    inputs = RunInputs(ds.events, ds.group_records("cohort"), ds.group_records("biobank"))
    settings = GCCensSettings(codes=CodeSelection("all"), variant=variant)
    print(f"\n== all codes on the sample: {settings.describe()}")
    new, t_new = timed(settings.run, inputs)
    cpu_new = timed.cpu
    print(
        f"  GCCens all codes on the sample (default kernel): {t_new:.2f} s wall ({cpu_new:.2f} s CPU), "
        f"{new.loss['iterations']} iterations, {new.records.n_events:,} instances released"
    )

    def compare(label: str, patched: dict) -> None:
        with mock.patch.multiple(censor, **patched):
            other, t_other = timed(settings.run, inputs)
        same = (
            other.records.fingerprint == new.records.fingerprint and other.loss["steps"] == new.loss["steps"]
        )
        print(
            f"  {label}: {t_other:.2f} s wall ({timed.cpu:.2f} s CPU); same release: {same}; "
            f"ratio {label.split(' (')[0]}/default {t_other / t_new:.1f}x wall ({timed.cpu / cpu_new:.1f}x CPU)"
        )

    stepwise = functools.partial(censor.gccens_run, kernel="stepwise")
    compare("stepwise loop (kernel='stepwise')", {"gccens_run": stepwise})
    if not old:
        print("  old path: not run (--no-old)")
        return
    old_module = _old_censor()
    if old_module is None:
        print("  old path: git not available, not measured")
        return

    def old_run(problem, k, *, progress=None, **kw):  # the old path takes no progress callback
        return old_module.gccens_run(problem, k, **kw)

    compare(
        f"old path (censor.py at {OLD_COMMIT})",
        {"gccens_run": old_run, "prepare": old_module.prepare, "select_codes": old_module.select_codes},
    )


def _median(fn, repeat: int = 3):
    """(last result, median wall seconds of `repeat` calls); their median CPU seconds in `_median.cpu`
    (on a shared machine the CPU time moves less with the load than the wall time)."""
    times, cpus, out = [], [], None
    for _ in range(repeat):
        out, t = timed(fn)
        times.append(t)
        cpus.append(timed.cpu)
    _median.cpu = statistics.median(cpus)
    return out, statistics.median(times)


def _load() -> str:
    return "load average " + " / ".join(f"{x:.2f}" for x in os.getloadavg())


BEFORE_COMMIT = "bb4bcfb"  # main before issue 24's compiled cohort loop (eba19fb's numpy batches)


def live(ks: tuple[int, ...] = (5, 3, 7), repeat: int = 3) -> None:
    """Issue 24: all codes on the sample in both scopes, today's code against censor.py as it was
    before (BEFORE_COMMIT, loaded from git) and against tests/reference_censor.py's loop, same
    process: the loop alone (`censor_counts`) and the engine's whole run (`GCCensSettings.run`)."""
    import functools
    from unittest import mock

    from engine.anonymize import censor
    from engine.io import loaders
    from engine.study.runs import CodeSelection, GCCensSettings, RunInputs
    from tests.reference_censor import reference_censor_counts

    before = _old_censor(BEFORE_COMMIT)
    if before is None:
        print("  live: git not available, not measured")
        return
    ds = loaders.load_sample_checked().data
    inputs = RunInputs(ds.events, ds.group_records("cohort"), ds.group_records("biobank"))
    # the compiled loop's first call in a process loads numba and the cached machine code
    _, t_first = timed(GCCensSettings(k=2, scope="cohort", codes=CodeSelection("all")).run, inputs)
    print(
        f"\n== live (issue 24): GCCens on all codes of the sample, {inputs.cohort.n_patients:,} cohort "
        f"records, population {inputs.population.n_patients:,}; median of {repeat} (seconds); {_load()}"
    )
    print(f"  first run in this process (numba loaded, kernels from their cache): {t_first:.2f} s")
    print(
        f"  loop alone (censor_counts): reference = tests/reference_censor.py, before = censor.py at "
        f"{BEFORE_COMMIT}; engine = GCCensSettings.run (codes selected, prepared, censored, checked) "
        "with the per-code caps the view passes (each code's maximum)"
    )
    print(
        f"  {'scope':<11}{'k':>3}{'steps':>7}  {'reference':>10}{'before':>8}{'new':>7}{'before/new':>11}  "
        f"{'engine before':>14}{'new':>7}{'before/new':>11}  {'CPU before':>10}{'new':>7}  equal"
    )
    patched = {
        "prepare": before.prepare,
        "select_codes": before.select_codes,
        "gccens_run": before.gccens_run,
    }
    for scope in ("cohort", "population"):
        for k in ks:
            problem = GCCensSettings(scope=scope, codes=CodeSelection("all")).prepare_input(inputs).problem
            caps = problem.cap_vector()
            # the per-code caps the view passes by default (its cap table: each code's maximum)
            named = tuple((str(c), int(v)) for c, v in problem.default_caps().items())
            settings = GCCensSettings(k=k, scope=scope, codes=CodeSelection("all"), caps=named)
            new, t_new = _median(functools.partial(censor.censor_counts, problem, k, caps), repeat)
            ref, t_ref = _median(functools.partial(reference_censor_counts, problem, k, caps), repeat)
            old, t_old = _median(functools.partial(before.censor_counts, problem, k, caps), repeat)
            same = all(
                all(np.array_equal(a, b) for a, b in zip(new[:2], other[:2], strict=True))
                and new[2:] == other[2:]
                for other in (ref, old)
            )
            rel_new, e_new = _median(functools.partial(settings.run, inputs), repeat)
            c_new = _median.cpu
            with mock.patch.multiple(censor, **patched):
                rel_old, e_old = _median(functools.partial(settings.run, inputs), repeat)
            c_old = _median.cpu
            same = same and rel_new.fingerprint == rel_old.fingerprint and rel_new.loss == rel_old.loss
            print(
                f"  {scope:<11}{k:>3}{len(new[2]):>7}  {t_ref:>10.3f}{t_old:>8.3f}{t_new:>7.3f}"
                f"{t_old / t_new:>10.1f}x  {e_old:>14.3f}{e_new:>7.3f}{e_old / e_new:>10.1f}x  "
                f"{c_old:>10.3f}{c_new:>7.3f}  {same}"
            )
    print(f"  ({_load()})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sample-only", action="store_true", help="only the all-codes-on-the-sample line")
    ap.add_argument(
        "--variant", default="faithful", choices=["faithful", "targeted"], help="for --sample-only"
    )
    ap.add_argument(
        "--no-old", action="store_true", help="--sample-only without the old path (targeted: minutes)"
    )
    ap.add_argument(
        "--live", action="store_true", help="only issue 24's line: today's loop against the reference"
    )
    args = ap.parse_args()
    if args.live:
        live()
        return
    if args.sample_only:
        all_codes_on_the_sample(args.variant, not args.no_old)
        return
    scale = 10 if args.quick else 1
    n_pop, n_sample = 301_423 // scale, 2_676 // scale

    print("Paper setting (Tamersoy 2010): 4 codes")
    population, sample = build(n_pop, n_sample, PAPER_CODES, args.seed)
    run_case("4 codes", population, sample, k=5, cap=3, reference=True)
    run_case("4 codes, Table 2's largest cap", population, sample, k=5, cap=10, reference=True)
    run_case("4 codes, k = 25", population, sample, k=25, cap=10, reference=True)
    tables(population, sample)

    codes50 = PAPER_CODES + [f"{c}" for c in range(500, 546)]
    print("\n50-code variant")
    population, sample = build(n_pop, n_sample, codes50, args.seed)
    run_case("50 codes", population, sample, k=5, cap=3, reference=True)
    all_codes_on_the_sample()
    live()
    print(f"\npeak RSS {peak_mb():.0f} MB")


if __name__ == "__main__":
    main()
