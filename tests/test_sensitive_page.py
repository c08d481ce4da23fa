"""The Risk page's "Sensitive diagnoses" expander (issue 39): nothing is computed until ticked; then the
table is the engine's measure of the original under the sidebar's adversary."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import page_app

from engine.disclosure.sensitive import load_categories, rho_uncertainty
from ui.format import percent

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


def test_sensitive_expander_shows_the_engines_measure():
    at = page_app("pages/risk.py", state={})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not [d for d in at.dataframe if "inferred above rho" in d.value.columns]
    at.checkbox(key="risk_sensitive_on").check().run()
    assert not at.exception, [e.value for e in at.exception]
    table = next(d.value for d in at.dataframe if "inferred above rho" in d.value.columns)
    ctx = at.session_state["context"]
    got = rho_uncertainty(
        ctx.cohort, ctx.adversary, load_categories(), rho=0.5, m=2, candidates=ctx.population
    )
    summary = got.summary()
    assert table["category"].tolist() == list(got.categories)
    assert table["inferred above rho"].tolist() == summary["inferred above rho"].tolist()
    assert table["share of records inferred"].tolist() == [
        percent(x) for x in summary["share of records inferred"]
    ]


def test_the_expander_states_rho_with_its_reason_in_the_study():
    """Issue 39: the Risk page's expander writes the categories, rho and the reason into the session's
    study (which then refuses a release above rho), and a missing reason is said, not stored."""
    from engine.disclosure.sensitive import RhoPolicy
    from ui.study import STUDY

    at = page_app("pages/risk.py", state={})
    at.run()
    at.multiselect(key="risk_sensitive_categories").set_value(["mental_health"]).run()
    at.number_input(key="risk_sensitive_rho").set_value(0.8).run()
    at.button(key="risk_sensitive_state").click().run()
    assert any("needs a written reason" in e.value for e in at.error)
    assert at.session_state[STUDY].sensitive is None
    at.text_input(key="risk_sensitive_reason").input("IRB 12-345").run()
    at.button(key="risk_sensitive_state").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state[STUDY].sensitive == RhoPolicy(("mental_health",), 0.8, "IRB 12-345", 2)
    assert any("The study states rho = 0.8 for mental" in c.value.replace("\\", "") for c in at.caption)
    at.button(key="risk_sensitive_unstate").click().run()
    assert at.session_state[STUDY].sensitive is None
