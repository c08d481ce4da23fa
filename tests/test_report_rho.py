"""report.json per release and category against the study's rho (issue 39): the highest confidence,
the records inferred above rho and their share, the threshold and its reason; a release above rho is
not exported; a study stating no rho says so. Validated by docs/report.schema.json."""

from __future__ import annotations

import json

import pandas as pd
from test_report import ADV, KEY, _entry
from test_report_schema import _validator

from engine.disclosure.sensitive import RhoPolicy
from engine.records import Records
from engine.release import Release
from engine.report.report import build_report
from engine.study.runs import HeatherlySettings, RunInputs
from engine.study.study import Study, data_ref

POLICY = RhoPolicy(("mental_health", "hiv"), 0.8, "IRB 12-345: at most 80%")


def _study(policy: RhoPolicy | None):
    """a and b hold {250.00, 296.20} in one visit, c and e {401.1}: every record meets k = 2, but
    250.00 -> mental health 2 of 2 in the cohort; without 250.00 only the prior is left, 2 of 4."""
    df = pd.DataFrame(
        {
            "patient_id": ["a", "a", "b", "b", "c", "e", "d"],
            "visit": [1, 1, 1, 1, 1, 1, 1],
            "code": ["250.00", "296.20", "250.00", "296.20", "401.1", "401.1", "272.4"],
        }
    )
    pop = Records.from_frame(df)
    cohort = pop.subset(["a", "b", "c", "e"])
    inputs = RunInputs(pop, cohort)
    data = data_ref("toy", pop, inputs, sources={"events.csv": "abc"})
    keep = cohort.items[cohort.event_item] != "250.00"
    e1, i1 = _entry(
        "without 250", Release("suppress", cohort.keep_events(keep)), HeatherlySettings(k=2), data, pop
    )
    e2, i2 = _entry("all", Release("none", cohort), HeatherlySettings(k=2), data, pop)
    study = Study(data, ADV, 2, pseudonym_key=KEY, sensitive=policy).add(e1).add(e2)
    return study, {"without 250": i1, "all": i2}, pop, cohort


def test_report_json_states_rho_per_release_and_category():
    study, inputs, pop, cohort = _study(POLICY)
    d = json.loads(build_report(study, inputs, pop, cohort, reproducible=True, membership=False).to_json())
    _validator().validate(d)
    assert d["sensitive"] == {
        "checked": True,
        "categories": ["mental_health", "hiv"],
        "rho": 0.8,
        "reason": "IRB 12-345: at most 80%",
        "m": 2,
        "message": "rho = 0.8 for mental_health, hiv, up to 2 known codes: IRB 12-345: at most 80%",
    }
    good, bad = d["releases"]
    assert good["sensitive"]["verified"] and not bad["sensitive"]["verified"]
    assert [c["category"] for c in bad["sensitive"]["categories"]] == ["hiv", "mental_health"]
    hiv, mh = bad["sensitive"]["categories"]
    assert mh["records holding"] == 2 and mh["highest confidence"] == 1.0 and mh["inferred above rho"] == 2
    assert mh["share inferred above rho"] == 0.5 and mh["rules above rho"] == 1
    assert hiv["records holding"] == 0 and hiv["highest confidence"] == 0.0
    assert bad["sensitive"]["message"].startswith(
        "not verified for rho = 0.8 (IRB 12-345: at most 80%): mental_health"
    )
    assert good["sensitive"]["categories"][1]["highest confidence"] == 0.5  # the prior
    assert good["sensitive"]["categories"][1]["inferred above rho"] == 0
    # above rho: verified at k, yet never handed over
    assert bad["verification"]["verified"] and bad["files"] == {} and not bad["exported"]
    assert good["exported"] and set(good["files"]) == {"release.csv", "code_map.csv"}


def test_a_study_without_rho_says_it_is_not_checked():
    study, inputs, pop, cohort = _study(None)
    d = json.loads(build_report(study, inputs, pop, cohort, reproducible=True, membership=False).to_json())
    _validator().validate(d)
    assert d["sensitive"] == {
        "checked": False,
        "message": "rho not checked: the study states no sensitive categories",
    }
    assert [r["sensitive"] for r in d["releases"]] == [None, None]


def _plain(md: bytes) -> str:
    """The Markdown without its escapes (backslashes, word joiners)."""
    return md.decode().replace("\\", "").replace("\u2060", "")


def test_the_report_shows_rho_its_reason_and_the_release_above_it():
    study, inputs, pop, cohort = _study(POLICY)
    md = _plain(build_report(study, inputs, pop, cohort, reproducible=True, membership=False).to_markdown())
    assert "## Sensitive diagnoses (rho)" in md
    assert "rho = 0.8 for mental_health, hiv, up to 2 known codes: IRB 12-345: at most 80%." in md
    assert "| all | mental_health | 2 | 1.000 | 2 (50.0%) | NO |" in md
    assert "verified at k, NOT exported: above the study's rho" in md
    plain, inputs, pop, cohort = _study(None)
    md = _plain(build_report(plain, inputs, pop, cohort, reproducible=True, membership=False).to_markdown())
    assert "rho not checked: the study states no sensitive categories." in md
