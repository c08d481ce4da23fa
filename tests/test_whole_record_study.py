"""Issue 39, second bullet, through the study and the app's choices: the whole-record attacker is named
in the glossary and the sidebar's help, every method's view opens under it on a setting the papers
target, and a release made under it is verified under it and refused by name when it fails."""

from __future__ import annotations

import json

import pytest

from engine.adversary import WHOLE_RECORD_NOTE, Adversary
from engine.report.glossary import help_for, term
from engine.study.runs import HeatherlySettings, opening_settings
from engine.study.study import Study, StudyError, make_release
from tests.pseudonym_support import KEY, PSEUDONYMS
from tests.test_study import small  # noqa: F401  (the fixture)

WHOLE = Adversary("cohort", "whole_record")


def test_the_glossary_and_the_sidebar_name_the_whole_record_attacker() -> None:
    t = term("whole_record")
    assert "does not hold" in t.sentence and "exactly the same" in t.sentence
    from ui.sidebar import _KNOWLEDGE_HELP

    assert help_for("whole_record") in _KNOWLEDGE_HELP
    assert WHOLE.label == "cohort / whole record" and "no method of the papers" in WHOLE.describe()


def test_every_view_opens_on_a_setting_the_papers_target(small) -> None:  # noqa: F811
    _, inputs, _ = small
    for settings in opening_settings(inputs.cohort, WHOLE, 3).values():
        settings.validate()  # UGACLIP under "whole_record" raised SettingsError
        assert settings.adversary.targeted_by_papers


def test_a_release_failing_the_whole_record_attacker_is_refused_by_name(small) -> None:  # noqa: F811
    _, inputs, data = small
    made = make_release("DEMO_D", HeatherlySettings(k=3), inputs, data, WHOLE, 3, pseudonyms=PSEUDONYMS)
    assert made.verification.adversary == WHOLE and not made.verification.ok  # verified, and it reports
    assert made.entry.verification.below_k > 0
    study = Study(data, WHOLE, 3, pseudonym_key=KEY)
    with pytest.raises(StudyError, match="below k = 3 \\(cohort / whole record\\)") as err:
        study.admit(made.entry)
    assert WHOLE_RECORD_NOTE in str(err.value)
    again = Study.from_json(study.to_json())  # the study file keeps the attacker
    assert again.adversary == WHOLE
    assert json.loads(study.to_json())["adversary"] == {"scope": "cohort", "knowledge": "whole_record"}


def test_the_report_matrix_gives_each_release_its_whole_record_verdict(small) -> None:  # noqa: F811
    """Done-when of the bullet: each method's verdict under the whole-record attacker, in the report's
    verification matrix (engine.study.study.verification_matrix) beside the papers' four."""
    from engine import risk
    from engine.adversary import WHOLE_RECORD_ADVERSARIES
    from engine.study.study import verification_matrix

    _, inputs, data = small
    adv = Adversary("cohort", "single_visit")
    made = make_release("DEMO_D", HeatherlySettings(k=3), inputs, data, adv, 3, pseudonyms=PSEUDONYMS)
    m = verification_matrix(made.release, inputs.population, 3).set_index("adversary")
    for whole in WHOLE_RECORD_ADVERSARIES:
        v = risk.verify(made.release, whole, 3, inputs.population)
        assert bool(m.loc[whole.label, "verified"]) == v.ok
        assert int(m.loc[whole.label, "below k"]) == int((v.distinguishability < 3).sum())


def test_releases_held_together_are_judged_under_the_whole_record(small) -> None:  # noqa: F811
    """The joint verdict (engine.study.ledger) under the whole-record attacker: the linked releases'
    classes of identical item sets (`combine_all` verified by `risk`), never the single-visit count."""
    import numpy as np

    from engine import risk
    from engine.study import ledger

    _, inputs, data = small
    a = make_release("A", HeatherlySettings(k=3), inputs, data, WHOLE, 3, pseudonyms=PSEUDONYMS).release
    b = make_release("B", HeatherlySettings(k=4), inputs, data, WHOLE, 3, pseudonyms=PSEUDONYMS).release
    linked = ledger.combine_all((a, b), inputs.population)
    ids, values = ledger._linked_distinguishability((a, b), WHOLE, inputs.population, ledger.PairCache())
    assert ids.tolist() == linked.records.patient_ids.tolist()
    assert values.tolist() == risk.release_distinguishability(linked, WHOLE).tolist()  # was single-visit
    got = ledger.set_distinguishability((a, b), WHOLE, inputs.population)
    want = dict(
        zip(
            linked.records.patient_ids.astype(str),
            risk.release_distinguishability(linked, WHOLE),
            strict=True,
        )
    )
    for rel in (a, b):
        alone = risk.release_distinguishability(rel, WHOLE, inputs.population)
        for p, d in zip(rel.records.patient_ids.astype(str), alone, strict=True):
            want[p] = min(want.get(p, d), int(d))
    assert got == {p: int(d) for p, d in want.items()}
    assert np.mean([d < 3 for d in got.values()]) > 0


def test_a_study_under_the_whole_record_attacker_reports_it() -> None:
    """The report (JSON, HTML, PDF) of a study whose attacker knows the whole record names it, with its
    meaning, and judges each release under it."""
    import pandas as pd

    from engine.records import Records
    from engine.release import Release
    from engine.report.report import build_report
    from engine.study.runs import RunInputs
    from engine.study.study import data_ref
    from tests.test_report import _entry

    frame = pd.DataFrame(
        {
            "patient_id": ["a", "a", "b", "c", "d"],
            "visit": [1, 2, 1, 1, 1],
            "code": ["401.1", "250.00", "401.1", "401.1", "272.4"],
        }
    )
    pop = Records.from_frame(frame)
    cohort = pop.subset(["a", "b", "c"])
    data = data_ref("toy", pop, RunInputs(pop, cohort), sources={"events.csv": "abc"})
    keep = cohort.items[cohort.event_item] == "401.1"  # every record shows {401.1}: one class of 3
    entry, given = _entry(
        "suppress",
        Release("suppress", cohort.keep_events(keep)),
        HeatherlySettings(k=2),
        data,
        pop,
        adv=WHOLE,
    )
    study = Study(data, WHOLE, 2, pseudonym_key=KEY).admit(entry)
    rep = build_report(study, {"suppress": given}, pop, cohort, reproducible=True)
    assert rep.data["attacker"]["knowledge"] == "whole_record"
    assert rep.data["attacker"]["description"] == WHOLE.describe()
    (row,) = rep.data["releases"]
    assert row["verified"] and row["verification"]["adversary"] == "cohort / whole record"
    assert "cohort / whole record" in rep.to_html().decode() and rep.to_pdf().startswith(b"%PDF")
