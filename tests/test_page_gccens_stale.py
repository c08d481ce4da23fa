"""GCCens keeps the previous results greyed while changed parameters wait for "Run" (issue 26,
finding 5: '"Run" prompts replace the results instead of greying them'), as the LDA and profiles
views do (ui/progress.py: `run(..., stale=True)` -> `Stale`, drawn inside `greyed`).

AppTest of the GCCens view on the shipped sample: "All codes" is the setting that waits for "Run".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import run_prompts, run_view
from streamlit.testing.v1 import AppTest

from engine.report.markdown import escape
from ui.views.gccens import CODE_MODES

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)

STALE = "stale_gccens"  # the keyed container of the greyed results (class st-key-stale_gccens)
PREVIOUS = "Results of the previous parameters"


def _greyed(at: AppTest):
    """The greyed container, or None when the page has none."""
    try:
        return at.main.get_by_key(STALE)
    except KeyError:
        return None


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _study_buttons(at: AppTest) -> list:
    return [b for b in at.button if b.key == "gcc_study_add"]


def test_gccens_keeps_the_previous_results_greyed_until_run() -> None:
    from ui import cache

    cache.clear()  # previews are shared by the process's sessions: another test's would show
    at = run_view("ui.views.gccens", "anonymize", gcc_mode=CODE_MODES[0])  # the paper's codes first
    at.selectbox(key="gcc_mode").set_value("All codes").run()
    _ok(at)
    at.button(key="gcc_run_start").click().run()
    _ok(at)
    at.button(key="gcc_run_other_start").click().run()  # the compared variant, run too
    _ok(at)
    assert not run_prompts(at) and _greyed(at) is None
    assert _study_buttons(at) and "gcc_dl_release" in {b.key for b in at.get("download_button")}
    # a changed parameter waits for "Run": the all-codes results stay, greyed, under their parameters
    at.radio(key="gcc_capmode").set_value("Universal cap").run()
    _ok(at)
    assert len(run_prompts(at)) == 1 and at.button(key="gcc_run_start")
    captions = [c.value for c in at.caption if PREVIOUS in c.value]
    assert len(captions) == 1, captions
    assert "all codes" in captions[0] and escape("per-code caps") in captions[0], captions  # shown literally
    assert "press Run to update" in captions[0], captions
    box = _greyed(at)
    assert box is not None, "the previous results are not drawn in the greyed container"
    labels = {m.label for m in box.metric}
    assert {"Mean CUL against the original record", "Censored by caps / by the loop"} <= labels, labels
    compared = next(d.value for d in box.dataframe if "Variant" in d.value.columns)
    assert compared["Variant"].tolist() == ["faithful", "targeted"]  # the compared run, already made
    assert box.get("plotly_chart")
    # nothing from them goes to the study or out as a file: no "Add to study", no release download
    assert not _study_buttons(at)
    downloads = {b.key for b in at.get("download_button")}
    assert "gcc_dl_cdf" in downloads, downloads  # the tables of the greyed results, still offered
    assert not downloads & {"gcc_dl_release", "gcc_dl_codemap", "gcc_dl_report", "gcc_dl_examples"}
    # "Run" replaces them with the new parameters' results
    at.button(key="gcc_run_start").click().run()
    _ok(at)
    assert _greyed(at) is None
    assert not [c for c in at.caption if PREVIOUS in c.value]
    assert _study_buttons(at) and "gcc_dl_release" in {b.key for b in at.get("download_button")}
