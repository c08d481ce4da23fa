"""Every page exercised after its first render (issue 13, "Done when"): one AppTest per page (and per
method on Anonymize) renders it, changes a widget and reruns, switches to another page and back, and
finds no exception at any step. The pages run inside app.py's own navigation (`full_app`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import full_app, page_path
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)

ANONYMIZE = "pages/anonymize.py"


def _ok(at: AppTest, step: str) -> None:
    assert not at.exception, (step, [e.value for e in at.exception])


def _go(at: AppTest, page: str) -> None:
    at.switch_page(page_path(page)).run()
    _ok(at, f"open {page}")


def _set(at: AppTest, kind: str, key: str, value) -> None:
    getattr(at, kind)(key=key).set_value(value).run()
    _ok(at, f"{kind} {key} = {value!r}")


def _exercise(page: str, changes: list[tuple[str, str, object]], state: dict | None = None) -> AppTest:
    """Open `page`, make each change (a rerun each), switch to another page and back, change the first
    widget back and forth once more: no exception at any step."""
    at = full_app()
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.run()
    _ok(at, "first run")
    _go(at, page)
    for kind, key, value in changes:
        _set(at, kind, key, value)
    other = "pages/report.py" if page == "pages/cohort.py" else "pages/cohort.py"
    _go(at, other)
    _go(at, page)
    kind, key, value = changes[-1]
    assert getattr(at, kind)(key=key).value == value, "the changed setting survived the switch"
    return at


@pytest.mark.parametrize(
    ("page", "changes"),
    [
        ("pages/cohort.py", [("slider", "cohort_top_n", 30)]),
        ("pages/risk.py", [("slider", "risk_n_patterns", 30)]),
        ("pages/phewas.py", [("radio", "phewas_correction", "bonferroni")]),
        ("pages/report.py", [("text_input", "report_recipient", "Study team")]),
    ],
)
def test_page_takes_interactions_and_a_return(page, changes):
    at = _exercise(page, changes)
    at.sidebar.number_input(key="k").set_value(6).run()
    _ok(at, "sidebar k = 6")


@pytest.mark.parametrize(
    ("method", "changes"),
    [
        (
            "GCCens (censoring)",
            [("radio", "gcc_capmode", "Universal cap"), ("radio", "gcc_variant", "targeted")],
        ),
        ("Generalization (Heatherly)", [("checkbox", "hea_complete", True)]),
        ("Clinical profiles (UGACLIP / ACLIP)", [("radio", "profiles_method", "ACLIP")]),
        ("Trajectories (LDA)", [("slider", "lda_w", 0.3)]),
    ],
)
def test_anonymize_each_method_takes_interactions_and_a_return(method, changes):
    at = _exercise(ANONYMIZE, changes, {"method_render_anonymize": method})
    assert at.session_state["method_render_anonymize"] == method


def test_tradeoffs_takes_interactions_and_a_return():
    _exercise("pages/tradeoffs.py", [("radio", "gcct_variant", "targeted")])


@pytest.mark.skipif(
    not (ROOT / "sample_data" / "labs.parquet").exists(), reason="the shipped sample has no labs.parquet"
)
def test_lab_orders_takes_every_interaction_and_a_return():
    """Issue 13: the page showed `CacheReplayClosureError` on any interaction after its first render
    (a cached function had drawn a progress bar created outside it; replaying the cache failed)."""
    small = {"labs_simulations": 5, "labs_trials": 20, "labs_epochs": 1, "labs_max_train": 1000}
    at = _exercise(
        "pages/labs.py",
        [
            ("slider", "labs_max_days", 10),
            ("toggle", "labs_train_vae", True),
            ("slider", "labs_max_days", 12),
        ],
        {**small, "labs_train_vae": False},
    )
    at.sidebar.radio(key="adversary_knowledge").set_value("all_visits").run()
    _ok(at, "knowledge all visits")
    at.sidebar.radio(key="adversary_scope").set_value("population").run()
    _ok(at, "scope population")
    at.sidebar.radio(key="adversary_knowledge").set_value("single_visit").run()
    _ok(at, "knowledge back to single visit (cached results replayed)")
    _set(at, "toggle", "labs_train_vae", False)
    _set(at, "toggle", "labs_train_vae", True)
