"""Live-preview times of the method views on the shipped sample (issue 13: target under 1 s).

For each method, the time of the computation a parameter change triggers in its view (k 5 -> 6 with
the rest at the view's defaults, the sample's population and cohort): the method's `run` (the
study's preview, engine/study/runs.py) and, for Heatherly, the three-scope comparison its view draws.
Each is timed twice after a warm-up of the loaded data (hierarchies, vocabularies); the minimum is
printed, with the process's CPU time (less sensitive to a shared machine's load). Not a test.

    .venv/bin/python -m bench.preview [--repeat 2]
"""

from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    from engine.anonymize.population import compare_scopes
    from engine.io.loaders import load_sample_checked
    from engine.study.runs import (
        CodeSelection,
        GCCensSettings,
        HeatherlySettings,
        LDASettings,
        ProfilesSettings,
        RunInputs,
    )

    ds = load_sample_checked().data
    population, cohort = ds.events, ds.group_records("cohort")
    biobank = ds.group_records("biobank") if "biobank" in ds.groups else None
    inputs = RunInputs(population, cohort, biobank)
    groups = {"cohort": cohort, "population": population} | ({"biobank": biobank} if biobank else {})
    cases = {
        "GCCens, paper codes, cohort scope": lambda k: GCCensSettings(k=k, scope="cohort").run(inputs),
        "GCCens, paper codes, population scope": lambda k: GCCensSettings(k=k).run(inputs),
        "GCCens, all codes, cohort scope": lambda k: GCCensSettings(
            k=k, scope="cohort", codes=CodeSelection("all")
        ).run(inputs),
        "Heatherly DEMO_D (one scope)": lambda k: HeatherlySettings(k=k).run(inputs),
        "Heatherly, the view's three-scope comparison": lambda k: compare_scopes(
            groups, cohort.patient_ids, k, constraints="phecode", complete=True
        ),
        "UGACLIP (PPE + greedy + checks)": lambda k: ProfilesSettings(k=k).run(inputs),
        "ACLIP": lambda k: ProfilesSettings(algorithm="ACLIP", k=k).run(inputs),
        "LDA (D4 codes, A-GS)": lambda k: LDASettings(k=k).run(inputs),
    }
    cases["GCCens, paper codes, cohort scope"](5)  # warm-up: hierarchies and vocabularies
    print(f"sample: {population.n_patients:,} patients, cohort {cohort.n_patients:,}")
    for name, case in cases.items():
        times, cpu = [], []
        for r in range(max(args.repeat, 1)):
            t, c = time.perf_counter(), time.process_time()
            case(6 + r)
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        flag = "" if min(times) < 1 else "  (above 1 s)"
        print(f"{name}: {min(times):.2f} s wall, {min(cpu):.2f} s CPU{flag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
