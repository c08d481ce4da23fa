"""Compile the numba kernels once per installation (issue 24): `python -m engine.anonymize.warm`.

UGACLIP / ACLIP's greedy (`profiles_kernel`), the LDA's alignment and clustering
(`alignment_kernel`), GCCens' cohort-scope loop and population-scope exit-step search
(`censor_kernel`), the capped risk count (`engine.scale.trie`) and the membership attack's count
(`engine.utility.membership_kernel`) are numba-compiled with
`cache=True`: the first call after an install compiles them (some seconds) and writes the machine
code beside the sources; every later process loads it.
`make run` and `make test` run this once after installing, so no officer's first run waits for the
compiler. It runs each method on the shipped sample's first 60 cohort patients and prints the time.
"""

from __future__ import annotations

import time

import numpy as np


def load_kernels() -> float:
    """Run every method with a compiled kernel once on the shipped sample's first 60 cohort patients,
    so that each kernel's machine code is compiled (the first call after an install) or loaded from
    its cache (later) in this process; returns the seconds it took. A process forked after this call
    inherits the loaded kernels: the app pool's fork server calls it (`engine.scale.preload_kernels`),
    so its workers do not pay numba's start (about 0.2 s: its target's registries) and each kernel's
    load for every UGACLIP / ACLIP, LDA and GCCens run."""
    from engine import risk
    from engine.io.loaders import load_sample_checked
    from engine.study.runs import CodeSelection, GCCensSettings, LDASettings, ProfilesSettings, RunInputs
    from engine.utility import membership

    t = time.perf_counter()
    data = load_sample_checked().data
    cohort = data.group_records("cohort")
    few = cohort.subset(list(map(str, cohort.patient_ids[:60])))
    inputs = RunInputs(data.events.subset(list(map(str, few.patient_ids))), few)
    for algorithm in ("UGACLIP", "ACLIP"):
        ProfilesSettings(algorithm=algorithm, k=2).run(inputs)
    LDASettings(k=2).run(inputs)
    risk.distinguishability(few, few, "single_visit", risk.Matching(cap=2))
    for scope, variant in (("cohort", "faithful"), ("cohort", "targeted"), ("population", "faithful")):
        GCCensSettings(k=2, scope=scope, codes=CodeSelection("all"), variant=variant).run(inputs)
    # the membership attack's count (the report's PheWAS tables): three targets against three genotypes
    rng = np.random.default_rng(0)
    membership.flag_rates(
        rng.normal(size=(3, 2)), rng.normal(size=(3, 2)), rng.normal(size=(3, 2)), 0.05, leave_out=True
    )
    return time.perf_counter() - t


def main() -> int:
    print(f"numba kernels compiled or loaded from their cache in {load_kernels():.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
