"""The study states sensitive categories, rho and its reason (issue 39): saved and read back, and a
release above rho refused by name where a release is verified for the export gate, like one below k."""

from __future__ import annotations

import json

import pytest

from engine.adversary import Adversary
from engine.disclosure.sensitive import RhoPolicy
from engine.study.runs import HeatherlySettings
from engine.study.study import Study, StudyError, make_release, rebuild
from tests.pseudonym_support import KEY, PSEUDONYMS
from tests.test_study import small  # noqa: F401  (the module's 600-patient fixture)

POLICY = RhoPolicy(("mental_health", "hiv"), 0.8, "IRB protocol 12-345: at most 80% confidence", m=2)
ADV = Adversary("cohort", "single_visit")


def test_the_study_states_rho_with_its_reason_and_reads_it_back(small):  # noqa: F811
    _, _, data = small
    study = Study(data, ADV, 3, pseudonym_key=KEY).with_sensitive(POLICY)
    again = Study.from_json(study.to_json())
    assert again.sensitive == POLICY and again == study
    assert json.loads(study.to_json())["sensitive"] == {
        "categories": ["mental_health", "hiv"],
        "rho": 0.8,
        "reason": "IRB protocol 12-345: at most 80% confidence",
        "m": 2,
    }
    # optional: a study without it is written as before and reads as "not checked"
    plain = Study(data, ADV, 3, pseudonym_key=KEY)
    assert "sensitive" not in json.loads(plain.to_json())
    assert Study.from_json(plain.to_json()).sensitive is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"categories": ["mental_health"], "rho": 1.5, "reason": "x"}, "rho must be a number"),
        ({"categories": ["nosuch"], "rho": 0.5, "reason": "x"}, "no sensitive category 'nosuch'"),
        ({"categories": ["hiv"], "rho": 0.5, "reason": " "}, "needs a written reason"),
        ({"categories": "hiv", "rho": 0.5, "reason": "x"}, "list of category names"),
        ({"categories": ["hiv"], "rho": 0.5, "reason": "x", "m": 9}, "known codes m"),
        ([1], "sensitive must be an object"),
    ],
)
def test_a_bad_sensitive_field_is_refused_by_name(small, value, message):  # noqa: F811
    _, _, data = small
    d = json.loads(Study(data, ADV, 3, pseudonym_key=KEY).to_json())
    d["sensitive"] = value
    with pytest.raises(StudyError, match=message):
        Study.from_json(json.dumps(d))


def test_a_release_above_rho_is_refused_by_name_like_k(small):  # noqa: F811
    _, inputs, data = small
    strict = RhoPolicy(("mental_health",), 0.3, "test threshold")
    made = make_release(
        "DEMO_D k=3", HeatherlySettings(k=3), inputs, data, ADV, 3, pseudonyms=PSEUDONYMS, rho=strict
    )
    assert made.verification.ok  # k is met ...
    assert made.sensitive is not None and not made.sensitive.ok  # ... rho is not
    assert made.files == {} and not made.entry.exportable
    worst = made.sensitive.summary().sort_values("highest confidence").iloc[-1]
    assert "mental_health is inferred with confidence" in made.entry.rho_refusal
    assert f"{worst['highest confidence']:.3f}" in made.entry.rho_refusal
    assert (
        f"{int(worst['inferred above rho']):,} of {inputs.cohort.n_patients:,} records"
        in made.entry.rho_refusal
    )
    study = Study(data, ADV, 3, pseudonym_key=KEY).with_sensitive(strict)
    with pytest.raises(
        StudyError, match=r"not added to the study: not verified for rho = 0\.3 \(test threshold\)"
    ):
        study.admit(made.entry)


def test_a_release_meeting_rho_is_exported_and_rebuilt(small):  # noqa: F811
    _, inputs, data = small
    made = make_release(
        "DEMO_D k=3", HeatherlySettings(k=3), inputs, data, ADV, 3, pseudonyms=PSEUDONYMS, rho=POLICY
    )
    assert made.sensitive is not None and made.sensitive.ok, made.sensitive.message()
    assert made.entry.exportable and made.files
    study = Study(data, ADV, 3, pseudonym_key=KEY).with_sensitive(POLICY).admit(made.entry)
    # a study whose rho is lowered afterwards fails the release on rebuild, naming rho
    lowered = study.with_sensitive(RhoPolicy(("mental_health",), 0.3, "lowered"))
    (check,) = rebuild(lowered, inputs, data)
    assert not check.passed
    assert any(d.startswith("fails the study's rho: not verified for rho = 0.3") for d in check.differences())
    assert not lowered.reverified([check]).releases[0].exportable


# ------------------------------------------------------------------------------ command line
def test_cli_study_new_and_set_state_rho_and_add_refuses_a_release_above_it(small, tmp_path, capsys):  # noqa: F811
    from engine.commands.cli import main

    paths, _, _ = small
    ev, co = str(paths["events"]), str(paths["cohort"])
    study = tmp_path / "study.json"
    new = ["study", "new", str(study), "--events", ev, "--cohort", co, "--scope", "cohort"]
    new += ["--knowledge", "single_visit", "--k", "3"]
    assert main([*new, "--sensitive", "mental_health", "--rho", "0.3"]) == 2  # the reason is needed
    assert "--rho-reason is needed with --sensitive" in capsys.readouterr().err
    assert main([*new, "--sensitive", "mental_health", "--rho", "0.3", "--rho-reason", "IRB 7"]) == 0
    assert "rho = 0.3 for mental_health, up to 2 known codes (IRB 7)" in capsys.readouterr().out
    assert Study.from_json(study.read_text()).sensitive == RhoPolicy(("mental_health",), 0.3, "IRB 7")
    before = study.read_text()
    add = ["study", "add", str(study), "--name", "D3", "generalize", "--events", ev, "--cohort", co]
    add += ["--k", "3", "--complete"]
    assert main(add) == 2
    assert "'D3' is not added to the study: not verified for rho = 0.3 (IRB 7): mental_health" in (
        capsys.readouterr().err
    )
    assert study.read_text() == before
    assert (
        main(["study", "set", str(study), "--sensitive", "all", "--rho", "0.8", "--rho-reason", "IRB 8"]) == 0
    )
    assert Study.from_json(study.read_text()).sensitive.categories == (  # type: ignore[union-attr]
        "hiv",
        "mental_health",
        "substance_use",
        "reproductive_health",
    )
    assert main(add) == 0
    assert main(["study", "set", str(study), "--no-rho"]) == 0
    assert Study.from_json(study.read_text()).sensitive is None
    assert main(["study", "set", str(study)]) == 2


def test_a_release_suppressed_to_meet_rho_is_admitted_recorded_and_rebuilt(small, tmp_path, capsys):  # noqa: F811
    """The method option in a study: `suppress_rho` suppresses the implying codes before the gate and
    is recorded with the release, so that the rebuild makes the same files."""
    from engine.commands.cli import main

    _, inputs, data = small
    strict = RhoPolicy(("mental_health",), 0.3, "test threshold")
    made = make_release(
        "D3",
        HeatherlySettings(k=3),
        inputs,
        data,
        ADV,
        3,
        pseudonyms=PSEUDONYMS,
        rho=strict,
        suppress_rho=True,
    )
    assert made.sensitive is not None and made.sensitive.ok and made.verification.ok
    assert "rho suppression" in made.release.method and len(made.release.suppressed) > 0
    study = Study(data, ADV, 3, pseudonym_key=KEY).with_sensitive(strict).admit(made.entry)
    again = Study.from_json(study.to_json())
    assert json.loads(study.to_json())["releases"][0]["rho suppressed"] is True
    assert again.releases[0].rho_suppressed
    (check,) = rebuild(again, inputs, data)
    assert check.passed, check.differences()
    with pytest.raises(StudyError, match="the study states no rho"):
        make_release(
            "x", HeatherlySettings(k=3), inputs, data, ADV, 3, pseudonyms=PSEUDONYMS, suppress_rho=True
        )
    # the command line: study add --suppress-rho
    paths, _, _ = small
    ev, co = str(paths["events"]), str(paths["cohort"])
    path = tmp_path / "s.json"
    new = ["study", "new", str(path), "--events", ev, "--cohort", co, "--scope", "cohort"]
    new += ["--knowledge", "single_visit", "--k", "3", "--sensitive", "mental_health", "--rho", "0.3"]
    assert main([*new, "--rho-reason", "IRB 7"]) == 0
    add = ["study", "add", str(path), "--name", "D3", "--suppress-rho", "generalize", "--events", ev]
    assert main([*add, "--cohort", co, "--k", "3", "--complete"]) == 0
    assert Study.from_json(path.read_text()).releases[0].rho_suppressed
    assert main(["study", "run", str(path), "--events", ev, "--cohort", co]) == 0


def test_the_anonymize_page_offers_the_option_when_the_study_states_rho():
    """Issue 39: "Add to study" refuses a release above the study's rho by name; the checkbox the
    control shows when the study states rho suppresses the implying codes, and the release enters."""
    from apptest_support import run_view

    from ui.study import STUDY

    at = run_view(
        "ui.views.heatherly", "anonymize", adversary_scope="cohort", adversary_knowledge="single_visit"
    )
    assert not [c for c in at.checkbox if c.key == "hea_study_rho"]  # the study states no rho
    strict = RhoPolicy(("mental_health",), 0.8, "test threshold")
    at.session_state[STUDY] = at.session_state[STUDY].with_sensitive(strict)
    at.run()
    at.button(key="hea_study_add").click().run()
    shown = [e.value.replace("\\", "").replace("\u2060", "") for e in at.error]
    assert any("not verified for rho = 0.8 (test threshold): mental_health" in text for text in shown), shown
    assert not at.session_state[STUDY].releases
    at.checkbox(key="hea_study_rho").check().run()
    at.button(key="hea_study_add").click().run()
    assert not at.exception, [e.value for e in at.exception]
    (entry,) = at.session_state[STUDY].releases
    assert entry.rho_suppressed and entry.exportable
