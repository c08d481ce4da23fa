"""AppTests of long work in the method views (issue 13): "Add to study" reuses the live preview (no
second run), a long run draws a progress bar with a Cancel button, and a cancelled run is not started
again until asked."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import count_calls, page_app

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """Counts every release made per method, in this process and the worker processes the views'
    runs happen in (`apptest_support.Counts`): Heatherly's `settings.run`, GCCens' `release_of` (its
    `run` calls it; the view makes its releases with it from one preparation, issue 24)."""
    from ui import cache

    cache.clear()  # previews and measures of the sample are shared by sessions: start this test from none
    yield from count_calls(
        monkeypatch,
        tmp_path / "counts",
        {
            "GCCens": "engine.study.runs:GCCensSettings.release_of",
            "Heatherly": "engine.study.runs:HeatherlySettings.run",
        },
    )


def _ok(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def test_gccens_add_to_study_reuses_the_preview(counted):
    at = page_app(view=("ui.views.gccens", "render_anonymize"))
    at.run()
    _ok(at)
    runs_after_view = counted.get("GCCens", 0)
    assert runs_after_view == 2, "the view's release and the other variant's, both by release_of"
    at.button(key="gcc_study_add").click().run()
    _ok(at)
    assert [r.name for r in at.session_state["study"].releases] == ["GCCens k=5"]
    assert counted.get("GCCens", 0) == runs_after_view, "Add to study ran GCCens again"


def test_heatherly_add_to_study_reuses_the_comparisons_release(counted):
    # completed: verified at k = 5, so it may enter the study (issue 35: the default is refused)
    at = page_app(view=("ui.views.heatherly", "render_anonymize"), state={"hea_complete": True})
    at.run()
    _ok(at)
    at.button(key="hea_study_add").click().run()
    _ok(at)
    assert len(at.session_state["study"].releases) == 1
    assert counted.get("Heatherly", 0) == 0, "Add to study ran Heatherly again after the comparison"


_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
import streamlit as st
from ui import progress

job = st.session_state.setdefault("job", 1)

def compute(step):  # runs in a worker process (ui/worker.py): the calls are counted in a file
    with open({calls!r}, "a") as f:
        f.write(f"{{job}} ")
    for i in range(3):
        step(i / 3, "steps")
    return f"done {{job}}"

st.write(f"result: {{progress.run('The job', compute, key='job', job=job)}}")
"""


def test_a_cancelled_run_is_not_started_again_until_asked(tmp_path):
    from streamlit.testing.v1 import AppTest

    from ui import progress

    log = tmp_path / "calls"
    log.write_text("")

    def calls() -> list[int]:
        return [int(j) for j in log.read_text().split()]

    at = AppTest.from_string(_SCRIPT.format(root=str(ROOT), calls=str(log)), default_timeout=60)
    at.run()
    _ok(at)
    assert calls() == [1]
    assert "result: done 1" in [m.value for m in at.markdown]
    # what the Cancel button's on_click records (AppTest cannot click while the script runs)
    at.session_state[progress._CANCELLED] = {"job": 1}
    at.run()
    _ok(at)
    assert calls() == [1], "a cancelled job was started again"
    assert "result: None" in [m.value for m in at.markdown]
    assert any("cancelled" in i.value for i in at.info)
    at.button(key="job_again").click().run()
    _ok(at)
    assert calls() == [1, 1]
    # another job (the parameters changed) runs without asking
    at.session_state[progress._CANCELLED] = {"job": 1}
    at.session_state["job"] = 2
    at.run()
    _ok(at)
    assert calls() == [1, 1, 2]
    assert "result: done 2" in [m.value for m in at.markdown]


def test_the_greyed_results_caption_is_shown_literally():
    """The greyed results' caption names the previous parameters, GCCens' codes among them, which may
    come from an upload: Markdown in it is escaped (`engine.report.markdown.escape`), not rendered."""
    from streamlit.testing.v1 import AppTest

    from engine.report.markdown import escape

    def script() -> None:
        import streamlit as st

        from ui import progress

        with progress.greyed("t", "Results of the previous parameters (codes *x*, [a](http://e)): press Run"):
            st.write("old results")

    at = AppTest.from_function(script).run()
    assert not at.exception
    raw = "Results of the previous parameters (codes *x*, [a](http://e)): press Run"
    assert at.caption[0].value == escape(raw) != raw
