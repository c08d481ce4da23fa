"""The guided start (issue 26, finding 2) and the greyed previous results (issue 26, finding 5).

`ui.steps.states` is a pure function of the session's facts; the AppTests run the whole app on the
shipped sample (the Cohort page first) and the LDA view.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import add_release, full_app, page_text, run_prompts, run_view
from streamlit.testing.v1 import AppTest

from engine.report.markdown import escape
from ui.steps import Facts, states

ROOT = Path(__file__).resolve().parent.parent
needs_sample = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


def _states(facts: Facts) -> list[str]:
    return [s.state for s in states(facts)]


def test_nothing_loaded_the_first_step_is_current() -> None:
    assert _states(Facts()) == ["current", "next", "next", "next"]
    # without data nothing counts, not even a report built on other data
    assert _states(Facts(attacker_chosen=True, releases=2, report_built=True)) == [
        "current",
        "next",
        "next",
        "next",
    ]


def test_each_fact_moves_the_current_step() -> None:
    assert _states(Facts(data_loaded=True)) == ["done", "current", "next", "next"]
    assert _states(Facts(data_loaded=True, attacker_chosen=True)) == ["done", "done", "current", "next"]
    # a release was verified under an attacker: the attacker is chosen
    assert _states(Facts(data_loaded=True, releases=1)) == ["done", "done", "done", "current"]
    assert _states(Facts(data_loaded=True, releases=1, report_built=True)) == ["done"] * 4
    # a report of no release is not the fourth step done
    assert _states(Facts(data_loaded=True, attacker_chosen=True, report_built=True))[2:] == [
        "current",
        "next",
    ]


def test_each_step_says_what_it_needs_and_links_its_page() -> None:
    steps = states(Facts(data_loaded=True, releases=2))
    assert [s.number for s in steps] == [1, 2, 3, 4]
    assert [s.page for s in steps] == [
        "pages/cohort.py",
        "pages/risk.py",
        "pages/anonymize.py",
        "pages/report.py",
    ]
    assert steps[2].needs == "2 releases in the study."
    assert "Build the report" in steps[3].needs
    assert all((ROOT / s.page).exists() for s in steps)


def _step_labels(at: AppTest) -> list[str]:
    return [p.proto.label for p in at.get("page_link")]


def _current(at: AppTest) -> list[str]:
    return [label for label in _step_labels(at) if "(now)" in label]


@needs_sample
def test_cohort_page_shows_the_four_steps_and_the_current_one() -> None:
    at = full_app()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    labels = _step_labels(at)
    for n, title in enumerate(("Load data", "Choose the attacker", "Make releases", "Build the report"), 1):
        assert any(f"{n}. {title}" in label for label in labels), labels
    assert len(_current(at)) == 1 and "2. Choose the attacker" in _current(at)[0], labels
    # choosing k: the attacker step is done, making releases is next
    at.sidebar.number_input(key="k").set_value(4).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "3. Make releases" in _current(at)[0], _step_labels(at)


@needs_sample
def test_a_release_in_the_study_makes_the_report_current() -> None:
    from apptest_support import page_path

    from engine.release import Release

    at = full_app()
    at.run()
    at.switch_page(page_path("pages/report.py")).run()  # a page that opens the session's study
    add_release(at, "Unchanged", Release("unchanged", at.session_state["context"].cohort))
    at.switch_page(page_path("pages/cohort.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "4. Build the report" in _current(at)[0], _step_labels(at)
    assert any("1 release in the study" in c.value for c in at.caption), [c.value for c in at.caption]


@needs_sample
def test_the_teach_toggle_beside_the_steps_is_the_sidebars() -> None:
    at = full_app()
    at.run()
    at.toggle(key="teach_mode_here").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["teach_mode"] is True
    assert at.sidebar.toggle(key="teach_mode").value is True
    assert any("Try this" in i.value for i in at.info)


@needs_sample
def test_lda_keeps_the_previous_results_greyed_until_run() -> None:
    at = run_view("ui.views.lda", "anonymize")
    assert "Verified" in page_text(at)
    at.slider(key="lda_w").set_value(0.3).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(run_prompts(at)) == 1
    assert at.button(key="lda_run_start")
    captions = [c.value for c in at.caption if "Results of the previous parameters" in c.value]
    # the caption is shown literally (ui.progress.greyed): its Markdown source is escaped
    assert captions and escape("w_ICD = 0.5") in captions[0] and "press Run to update" in captions[0], (
        captions
    )
    assert "Clusters (MDAV)" in {m.label for m in at.metric}  # the previous results, still there
    assert not [b for b in at.button if b.key == "lda_study_add"]  # nothing added from stale results
    at.button(key="lda_run_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not [c for c in at.caption if "Results of the previous parameters" in c.value]
    assert not run_prompts(at)
    assert [b for b in at.button if b.key == "lda_study_add"]


@needs_sample
def test_profiles_keep_the_previous_results_greyed_until_run() -> None:
    at = run_view("ui.views.profiles", "anonymize", profiles_method="UGACLIP")
    assert at.button(key="profiles_UGACLIP_study_add")
    at.number_input(key="profiles_limit").set_value(50).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(run_prompts(at)) == 1
    captions = [c.value for c in at.caption if "Results of the previous parameters" in c.value]
    assert captions and escape("k = 5") in captions[0], captions
    assert not [b for b in at.button if b.key == "profiles_UGACLIP_study_add"]
    assert at.get("plotly_chart")  # the previous risk curves, still there
