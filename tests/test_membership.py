"""Membership inference on released PheWAS statistics (issue 28, engine/utility/membership.py).

The construction: 800 people, 400 independent SNPs (minor-allele frequencies 0.1-0.5, no
association), each person with one of five diagnoses (phecodes 250.2, 401.1, 714.1, 427.2, 340);
the first 400 are the cohort, the rest the population outside it. The cohort's PheWAS (at least 5
cases per test) is released; pools of ~80 cases against 400 SNPs let the presence test find members
far above chance. Each option of the officer then lowers the detection rate at 5% false positives:
coarser frequencies, bigger cells (no pool under 100 people: here no row is left), fewer rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.disclosure.cells import SmallCellPolicy
from engine.records import Records
from engine.utility import membership
from engine.utility.phewas import PhewasSettings, phewas_of_records

CODES = ["250.00", "401.1", "714.0", "427.31", "340"]


@pytest.fixture(scope="module")
def world():
    rng = np.random.default_rng(7)
    n, m = 800, 400
    ids = [f"P{i:04d}" for i in range(n)]
    rows = []
    for pid in ids:
        for c in rng.choice(CODES, size=1):
            rows.append({"patient_id": pid, "code": c})
    events = Records.from_frame(pd.DataFrame(rows))
    maf = rng.uniform(0.1, 0.5, m)
    geno = pd.DataFrame(rng.binomial(2, maf, size=(n, m)).astype(float), columns=[f"rs{j}" for j in range(m)])
    geno.insert(0, "patient_id", ids)
    cohort = events.subset(np.array(ids[:400]))
    table = phewas_of_records(cohort, geno, PhewasSettings(min_cases=5))
    return events, cohort, geno, table


def test_power_falls_as_the_options_are_applied(world):
    events, cohort, geno, table = world
    results = membership.assess({"original": table}, cohort, events, geno, SmallCellPolicy.preset("aou"))
    power = {r.option.split(":")[0].split(" (")[0]: r.power for r in results["original"]}
    assert results["original"][0].members == 400 and results["original"][0].non_members > 150
    assert "outside the cohort" in results["original"][0].reference
    base = power["as computed"]
    assert base > 0.2  # over four times the 5% a blind guess achieves
    assert power["coarser statistics"] < base
    assert power["fewer rows"] < base
    assert power["bigger cells"] <= 0.15  # no pool of >= 100 cases and controls: nothing left to test
    assert power["all options together"] <= 0.15
    frame = membership.results_frame(results)
    assert list(frame.columns[:3]) == ["table", "option", "rows"]


def test_non_members_alone_set_the_threshold(world):
    events, cohort, geno, table = world
    members, non, panel, _ = membership.targets_of(cohort, events, geno)
    assert not set(non.patient_ids) & set(cohort.patient_ids)
    assert not set(panel.patient_ids) & set(non.patient_ids)
    r = membership.attack(table.iloc[:0], members, non, geno, panel)
    assert r.rows == 0 and r.power == 0.0  # nothing released, nothing detected
