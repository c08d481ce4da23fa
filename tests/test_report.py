"""The IRB report: contents, determinism, and that verification status is carried through."""

from __future__ import annotations

import json

import pandas as pd

from engine.adversary import Adversary
from engine.dataset import Dataset
from engine.records import Records
from engine.release import Release
from engine.report import ReleaseEntry, build_report, report_json, report_markdown
from engine.risk import verify


def _setup():
    df = pd.DataFrame(
        {
            "patient_id": ["a", "a", "b", "c", "d"],
            "visit": [1, 2, 1, 1, 1],
            "code": ["401.1", "250.00", "401.1", "401.1", "272.4"],
        }
    )
    pop = Records.from_frame(df)
    ds = Dataset("toy", pop, groups={"cohort": pop.patient_ids[:3]}, sources={"events.csv": "abc"})
    cohort = ds.group_records("cohort")
    # a release that suppresses everything but 401.1
    keep = cohort.items[cohort.event_item] == "401.1"
    rel = Release("suppress", cohort.keep_events(keep), params={"k": 2})
    adv = Adversary("cohort", "single_visit")
    return ds, pop, cohort, rel, adv


def test_report_has_risk_and_verification():
    ds, pop, cohort, rel, adv = _setup()
    good = ReleaseEntry("good", rel, verify(rel, adv, 2, pop))
    bad = ReleaseEntry("bad", Release("none", cohort), verify(Release("none", cohort), adv, 2, pop))
    rep = build_report(ds, "population", "cohort", pop, cohort, adv, 2, [good, bad])
    assert [r["verified"] for r in rep["releases"]] == [True, False]
    assert rep["releases"][1]["records_below_k"] == 1  # patient a's {250.00} visit is unique
    chosen = [r for r in rep["original_risk"] if r["chosen"]]
    assert len(chosen) == 1 and chosen[0]["share unique"] == 1 / 3
    assert rep["input_files_sha256"] == {"events.csv": "abc"}
    md = report_markdown(rep)
    assert "Not verified" in md and "Verified" in md
    json.loads(report_json(rep))


def test_report_is_deterministic():
    ds, pop, cohort, rel, adv = _setup()
    e = [ReleaseEntry("r", rel, verify(rel, adv, 2, pop))]
    a = report_json(build_report(ds, "population", "cohort", pop, cohort, adv, 2, e))
    b = report_json(build_report(ds, "population", "cohort", pop, cohort, adv, 2, e))
    assert a == b
