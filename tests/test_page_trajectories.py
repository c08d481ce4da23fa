"""AppTest of the Trajectories (LDA) tabs on the shipped sample (issue #8's UI).

Runs the real sidebar and this method's view functions through `apptest_support.page_app` (the
Anonymize and Trade-offs pages show one method at a time through ui/views/).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import page_text as _text
from apptest_support import run_prompts, run_view
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


def _app(page: str) -> AppTest:
    return run_view("ui.views.lda", page)


def test_anonymize_tab_verifies_and_teaches() -> None:
    at = _app("anonymize")
    text = _text(at)
    assert "Verified" in text, text[:2000]
    labels = {m.label for m in at.metric}
    assert {
        "ICD loss, ILM (method-internal)",
        "Age loss, ALM (method-internal)",
        "Query error, AvgRE (method-internal)",
        "Clusters (MDAV)",
        "Pairs retained, of the original cohort",
    } <= labels
    # the teaching view starts on Figure 7: the thesis' result and the three matrices
    assert "(401.1, 33) (401.1, 34) (401.1, 35)" in text
    assert "ILM 0.5, ALM 0.5" in text
    assert len(at.dataframe) >= 4  # example clusters + i, a, r
    downloads = [b for b in at.get("download_button")]
    assert len(downloads) >= 5  # release + every chart's data + the matrices
    # two cohort patients, Baseline, and a typo in a typed trajectory
    at.radio(key="lda_t_src").set_value("Two cohort patients").run()
    assert not at.exception, [e.value for e in at.exception]
    at.radio(key="lda_method").set_value("baseline").run()
    assert not at.exception, [e.value for e in at.exception]
    # LDA is too slow for a live preview (issue 13): a changed parameter waits for "Run"
    asked = run_prompts(at)
    assert len(asked) == 1 and "BASELINE result" not in _text(at), asked
    at.button(key="lda_run_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "BASELINE result" in _text(at)
    # back to parameters run before: shown again without asking (their result is cached)
    at.radio(key="lda_method").set_value("a-gs").run()
    assert not run_prompts(at)
    at.radio(key="lda_method").set_value("baseline").run()
    assert "BASELINE result" in _text(at)
    at.radio(key="lda_t_src").set_value("Type them").run()
    at.text_area(key="lda_t_tx").set_value("(401.1, 33) oops").run()
    assert not at.exception
    assert any("could not read" in e.value for e in at.error)


def test_tradeoffs_tab_sweeps() -> None:
    from ui.views.lda import CODE_MODES

    at = _app("tradeoffs")
    # small, fast settings: the two most frequent codes, k = 4..5
    at.selectbox(key="ldat_mode").set_value(CODE_MODES[1]).run()
    at.number_input(key="ldat_top").set_value(2).run()
    at.slider(key="ldat_krange").set_value((4, 5)).run()
    at.button(key="ldat_run_k").click().run()
    assert not at.exception, [e.value for e in at.exception]
    text = _text(at)
    assert "ILM against k" in text and "AvgRE against k" in text
    at.button(key="ldat_run_w").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "by attribute weights" in _text(at)
