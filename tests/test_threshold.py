"""The threshold every page checks and the Report page's determination controls (ui/threshold.py,
issue 27): the sentence, the context's precedent k handed to the sidebar, the reason in the study."""

from __future__ import annotations

import pytest
from apptest_support import page_app, shown

from engine.report.report import threshold_sentence
from engine.study.study import Determination
from ui.threshold import precedent_k


def test_sentence_names_k_the_context_and_the_reason():
    d = Determination("Dr. A", "controlled", "DUA 2026-14")
    assert threshold_sentence(5, d) == (
        "Threshold checked: maximum risk 1/k = 0.20 (k = 5; controlled access under a data use agreement: "
        "DUA 2026-14)"
    )
    assert ", set directly;" in threshold_sentence(7, d)  # not the context's precedent
    assert precedent_k("public") == 11 and precedent_k("internal") == 3 and precedent_k("custom") is None


def test_choosing_a_context_sets_the_sidebar_k_and_the_study_records_the_reason():
    at = page_app("pages/report.py")
    at.run()
    assert not at.exception
    at.selectbox(key="determination_context").set_value("public").run()
    at.text_area(key="determination_reason").set_value("open data portal").run()
    assert not at.exception
    assert at.session_state["k"] == 11 and at.session_state["context"].k == 11
    study = at.session_state["study"]
    assert (study.determination.context, study.determination.reason, study.k) == (
        "public",
        "open data portal",
        11,
    )
    assert any(
        shown(c.value)
        == "Threshold checked: maximum risk 1/k = 0.09 (k = 11; public release: open data portal)"
        for c in at.caption
    )


def test_custom_threshold_without_a_reason_is_refused():
    at = page_app("pages/report.py")
    at.run()
    at.selectbox(key="determination_context").set_value("custom").run()
    assert any("written reason" in shown(e.value) for e in at.error)
    assert at.session_state["study"].determination.context == "controlled"


@pytest.mark.parametrize("page", ["pages/anonymize.py", "pages/tradeoffs.py", "pages/phewas.py"])
def test_every_page_that_verifies_says_which_threshold(page) -> None:
    """Issue 27: every page says which threshold it checks (Risk, Compare and Report had it)."""
    from apptest_support import page_app, shown

    at = page_app(page, state={"phewas_heatherly": False, "k": 5})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(shown(c.value).startswith("Threshold checked: maximum risk 1/k = 0.20") for c in at.caption)
