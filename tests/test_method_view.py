"""The view protocol of the method views (issue 38, finding 3: "No view protocol ... each has its own
preview, memo keys, Run button and error handling"): one driver, `ui.method_view.drive`, runs a
view's settings under Run / Cancel, draws the previous results greyed while changed settings wait for
"Run" (without "Add to study"), and is the one place a view's error becomes a message: a `UserError`'s
own text, anything else a reference, never its text.

AppTests of a toy view (tests/method_view_toy.py) with the real sidebar on the shipped sample, and the
registry of views by the method registry's names.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import page_app, run_prompts, shown
from method_view_toy import WHY_NOT
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


def _toy(**state) -> AppTest:
    at = page_app(view=("method_view_toy", "render"), state=state)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _greyed(at: AppTest):
    try:
        return at.main.get_by_key("stale_toy")
    except KeyError:
        return None


def _doubles(at: AppTest) -> list[str]:
    return [m.value for m in at.metric if m.label == "double"]


def _offers_add(at: AppTest) -> bool:
    return any(WHY_NOT in shown(w.value) for w in at.warning)


def test_the_driver_runs_greys_the_previous_results_and_adds_only_fresh_ones() -> None:
    at = _toy()
    assert _doubles(at) == ["2"] and _offers_add(at) and _greyed(at) is None
    at.number_input(key="toy_x").set_value(5).run()  # a change waits for "Run" (ask=True)
    assert len(run_prompts(at)) == 1
    box = _greyed(at)
    assert box is not None and [m.value for m in box.metric] == ["2"]
    assert any("(x = 1): press Run to update" in shown(c.value) for c in at.caption)
    assert not _offers_add(at)  # nothing of the greyed results enters the study
    at.button(key="toy_run_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert _doubles(at) == ["10"] and _greyed(at) is None and _offers_add(at)


def test_a_user_error_is_shown_as_its_own_text() -> None:
    at = _toy(toy_x=13)
    assert [shown(e.value) for e in at.error] == ["x = 13 is refused: choose another x"]


@pytest.mark.shows_a_bug
def test_a_bug_is_shown_as_a_reference_never_its_text() -> None:
    at = _toy(toy_x=66)  # the first run at a place starts by itself: the results section raises
    assert len(at.error) == 1, [e.value for e in at.error]
    assert "Something went wrong (reference" in shown(at.error[0].value)
    assert "P-0066" not in at.error[0].value


def test_views_are_registered_by_the_method_registry_names() -> None:
    from engine.study.runs import GCCensSettings, HeatherlySettings, LDASettings, ProfilesSettings
    from ui.views import VIEWS

    assert list(VIEWS) == [
        s.method for s in (GCCensSettings, HeatherlySettings, ProfilesSettings, LDASettings)
    ]


def test_profiles_on_the_driver_keeps_its_previous_runs_greyed_and_picking_both_reruns_nothing() -> None:
    """The profiles view on `drive`: a changed suppression limit waits for "Run" with the previous
    run greyed and no "Add to study"; picking "Both" afterwards runs only the method not run yet."""
    from apptest_support import run_view

    at = run_view(
        "ui.views.profiles", "anonymize", adversary_knowledge="all_visits", profiles_method="ACLIP", k=10
    )
    assert at.button(key="profiles_ACLIP_study_add")
    at.number_input(key="profiles_limit").set_value(50).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(run_prompts(at)) == 1
    assert at.main.get_by_key("stale_profiles") is not None
    assert not [b for b in at.button if b.key == "profiles_ACLIP_study_add"]
    at.number_input(key="profiles_limit").set_value(None).run()  # back to the parameters run
    at.radio(key="profiles_method").set_value("Both").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.button(key="profiles_ACLIP_study_add")  # ACLIP's run is the same job: not asked again
    assert {b.key for b in at.button if (b.key or "").endswith("_start")} <= {"profiles_run_UGACLIP_start"}


def test_every_page_is_a_few_lines_calling_ui() -> None:
    """'Five pages carry 94-235 lines of body each': a page file defines nothing and holds at most 30
    lines of statements (imports and its docstring aside); its body is a `ui/views` function."""
    import ast

    long = {}
    for page in sorted((ROOT / "pages").glob("*.py")):
        tree = ast.parse(page.read_text())
        body = [
            n
            for n in tree.body
            if not isinstance(n, ast.Import | ast.ImportFrom)
            and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
        ]
        defines = [n.name for n in body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
        lines = sum(n.end_lineno - n.lineno + 1 for n in body)  # type: ignore[operator]
        if defines or lines > 30:
            long[page.name] = (lines, defines)
    assert not long, long
