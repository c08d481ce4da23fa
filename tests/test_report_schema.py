"""report.json against its documented, versioned schema (docs/report.schema.json, JSON Schema draft
2020-12; issue 23): the toy study's report, a release not verified among them, and what the schema
refuses."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from test_report import KEY, _toy

from engine import risk
from engine.adversary import ALL_ADVERSARIES
from engine.report.report import REPORT_FORMAT, build_report

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text("utf-8"))


def _validator() -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())


@pytest.fixture(scope="module")
def report_json() -> dict:
    study, inputs, pop, cohort = _toy()
    return json.loads(build_report(study, inputs, pop, cohort).to_json())


def test_schema_is_draft_2020_12_and_names_the_report_format():
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert REPORT_FORMAT == "cohortshield-report/2"
    assert SCHEMA["properties"]["format"]["const"] == REPORT_FORMAT


def test_report_json_is_valid(report_json):
    _validator().validate(report_json)
    good, bad = report_json["releases"]
    assert good["verified"] is True and bad["verified"] is False
    assert set(good["files"]) == {"release.csv", "code_map.csv"} and bad["files"] == {}
    assert good["pairs_retained"] == {"kept": 3, "of": 4}
    assert bad["records_below_k"] == 1
    assert KEY not in json.dumps(report_json)  # the pseudonym key is in no report


def test_report_risk_figures_are_risk_measures_of_the_verification(report_json):
    """Issue 27: every maximum and average risk and records at risk of report.json (each release's, its
    comparison row, the original's under each adversary) is `risk.risk_measures` at 1/k of the
    distinguishability the report verified (or counted, for the original)."""
    study, inputs, pop, cohort = _toy()
    k = study.k
    rows = {r["release"]: r for r in report_json["comparison"]["rows"]}
    for rel in report_json["releases"]:
        m = risk.risk_measures(inputs[rel["name"]].verification.distinguishability, 1 / k)
        assert rel["risk measures"] == m.as_dict()
        row = rows[rel["name"]]
        assert (row["maximum risk"], row["average risk"], row["records at risk"]) == (
            m.prosecutor_max,
            m.average,
            m.records_at_risk,
        )
    for entry in report_json["risk measures before, every adversary"]:
        adv = next(a for a in ALL_ADVERSARIES if a.label == entry["adversary"])
        m = risk.risk_measures(risk.original_distinguishability(cohort, adv, pop), 1 / k)
        assert {key: entry[key] for key in m.as_dict()} == m.as_dict()
        if entry["chosen"]:
            assert report_json["risk measures before"] == m.as_dict()
    d = report_json["determination"]
    assert d["k"] == k and d["threshold"] == 1 / k and d["context"] == study.determination.context
    assert d["statement"].startswith(f"Threshold checked: maximum risk 1/k = {1 / k:.2f} (k = {k}")


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(format="cohortshield-report/1"),
        lambda d: d["releases"][0].pop("pairs_retained"),
        lambda d: d["releases"][0]["pairs_retained"].update(kept=-1),
        lambda d: d["releases"][0].update(verified="yes"),
        lambda d: d["releases"][0]["files"].update({"crosswalk.csv": "0" * 64}),
        lambda d: d["releases"][0]["files"].update({"release.csv": "not a hash"}),
        lambda d: d["releases"][0]["utility"].update(
            {"largest generalized items": [["{1,2}#abc", 2, "extra"]]}
        ),
        lambda d: d["small cells"]["policy"].update(name="lax"),
        lambda d: d["small cells"].pop("rule"),
        lambda d: d["membership"].update(original=[{"option": "as computed", "power": 2}]),
        lambda d: d["ledger"].append({"a": "good", "b": "bad", "below k": -1}),
        lambda d: d["releases"][0].update(membership="high"),
        lambda d: d["releases"][0].update(ledger=[{"other release": "bad"}]),
        lambda d: d["releases"][0]["risk measures"].update({"maximum risk": 1.5}),
        lambda d: d["determination"].update(context="friends"),
        lambda d: d["risk measures before"].pop("average risk"),
    ],
)
def test_schema_refuses_what_the_report_may_not_say(report_json, change):
    broken = copy.deepcopy(report_json)
    change(broken)
    assert list(_validator().iter_errors(broken))


def test_report_states_the_threshold_and_the_risk_measures():
    study, inputs, pop, cohort = _toy()
    text = build_report(study, inputs, pop, cohort).to_markdown().decode("utf-8")
    assert "Threshold checked" in text and "Maximum and average risk" in text


def test_issue_28_keys_are_in_the_report_and_valid(report_json):
    """The small-cell policy, the membership attack and the ledger (issue 28) are in the report and
    validated by the schema; the toy has no genotypes, so the attack says it was not run."""
    _validator().validate(report_json)
    assert report_json["small cells"]["policy"] == {"name": "none", "low": 1, "high": 0}
    assert report_json["small cells"]["suppressed"] == [] and report_json["small cells"]["rule"]
    assert report_json["membership"]["original"] is None
    assert report_json["membership"]["status"].startswith("no genotypes loaded")
    assert [r["membership"] for r in report_json["releases"]] == [None, None]
    (pair,) = report_json["ledger"]  # the two toy releases share their patients
    assert (pair["a"], pair["b"]) == ("good", "bad") and pair["verified"] is False
    good, bad = report_json["releases"]
    assert [x["other release"] for x in good["ledger"]] == ["bad"]
    assert [x["other release"] for x in bad["ledger"]] == ["good"]
