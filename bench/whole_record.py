"""Each method's verdict under the attacker who knows the whole record (issue 39, second bullet).

    .venv/bin/python -m bench.whole_record [--k 5]

On the shipped sample (`engine.io.loaders.load_sample`): first the issue's flat-table figure (the cohort
restricted to its 10 most frequent codes: records below k for the papers' attacker, who knows the codes a
record holds, and for the whole-record attacker, who also knows those it does not hold); then each method
of the papers at k (Heatherly DEMO_D / DEMO_B / DEMO_S, GCCens on the paper's codes, UGACLIP and ACLIP
under each knowledge, the LDA), its release verified by `engine.risk` under the adversary it targets and
under both whole-record adversaries (cohort: k-anonymity of the flat table; population: k-map). No
method of the papers targets the whole-record attacker: the table says which releases still meet k.
Records no population candidate matches (d = 0: a record the release changed locally) count as below k.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from engine import risk
from engine.adversary import WHOLE_RECORD_ADVERSARIES, Adversary
from engine.io.loaders import load_sample
from engine.study.runs import (
    OPENING_CODES,
    GCCensSettings,
    HeatherlySettings,
    LDASettings,
    ProfilesSettings,
    RunInputs,
)


def top_codes_figure(cohort, k: int) -> None:
    held = np.asarray(cohort.patient_item_sets.sum(axis=0)).ravel()
    top = cohort.items[np.argsort(-held, kind="stable")[:10]]
    top10 = cohort.keep_events(np.isin(cohort.items[cohort.event_item], top))
    for knowledge in ("all_visits", "whole_record"):
        dis = risk.original_distinguishability(top10, Adversary("cohort", knowledge))
        print(
            f"  top-10 codes, cohort / {knowledge:<12}: {np.mean(dis < k):6.1%} of {len(dis):,} records below k = {k}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=5)
    k = parser.parse_args().k
    ds = load_sample()
    cohort, population = ds.group_records("cohort"), ds.events
    inputs = RunInputs(population, cohort, ds.group_records("biobank"))
    print(f"== sample: cohort {cohort.n_patients:,}, population {population.n_patients:,}, k = {k}")
    top_codes_figure(cohort, k)
    for adv in (Adversary("cohort", "all_visits"), *WHOLE_RECORD_ADVERSARIES):
        dis = risk.original_distinguishability(cohort, adv, population)
        print(f"  original cohort, {adv.label:<26}: {np.mean(dis < k):6.1%} below k")
    methods = [
        ("Heatherly DEMO_D", HeatherlySettings(k=k, scope="cohort")),
        ("Heatherly DEMO_B", HeatherlySettings(k=k, scope="biobank")),
        ("Heatherly DEMO_S", HeatherlySettings(k=k, scope="population")),
        ("GCCens (paper's codes)", GCCensSettings(k=k, scope="population", codes=OPENING_CODES)),
        ("UGACLIP single visit", ProfilesSettings(algorithm="UGACLIP", k=k, knowledge="single_visit")),
        ("UGACLIP all visits", ProfilesSettings(algorithm="UGACLIP", k=k, knowledge="all_visits")),
        ("ACLIP all visits", ProfilesSettings(algorithm="ACLIP", k=k, knowledge="all_visits")),
        ("LDA (paper's codes)", LDASettings(k=k, codes=OPENING_CODES)),
    ]
    head = ["method", "targets", "verdict", *(f"{a.label}" for a in WHOLE_RECORD_ADVERSARIES), "s"]
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for name, settings in methods:
        t0 = time.perf_counter()
        release = settings.run(inputs)
        target = settings.adversary
        own = risk.verify(release, target, k, population)
        cells = [
            name,
            target.label,
            "verified" if own.ok else f"NOT ({int((own.distinguishability < k).sum())} below k)",
        ]
        for adv in WHOLE_RECORD_ADVERSARIES:
            v = risk.verify(release, adv, k, population)
            below = int((v.distinguishability < k).sum())
            zero = int((v.distinguishability < 1).sum())
            verdict = (
                "verified"
                if v.ok
                else f"NOT: {below:,} of {len(v.distinguishability):,} below k ({below / len(v.distinguishability):.1%})"
            )
            cells.append(verdict + (f", {zero:,} unmatched" if zero else ""))
        cells.append(f"{time.perf_counter() - t0:.1f}")
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
