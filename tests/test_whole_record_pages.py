"""Issue 39, second bullet, in the app: with the sidebar's knowledge set to the whole record, the Risk
page measures it (headlines equal to the engine's) and names it among the adversaries."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import page_app

from engine import risk

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


@pytest.mark.parametrize("scope", ["cohort", "population"])
def test_risk_page_under_the_whole_record_attacker(scope):
    at = page_app("pages/risk.py", state={"adversary_knowledge": "whole_record", "adversary_scope": scope})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    ctx = at.session_state["context"]
    assert ctx.adversary.knowledge == "whole_record"
    dis = risk.original_distinguishability(ctx.cohort, ctx.adversary, ctx.population)
    s = risk.summarize(dis, ctx.k)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[f"Share below k = {ctx.k}"] == f"{s.share_below_k:.1%}"
    summary = at.dataframe[0].value
    assert f"{scope} / whole record" in set(summary.iloc[:, 0].astype(str))
    # the explanation models the papers' attacker: said so, no explanation of a whole-record class
    assert any("whole-record knowledge" in i.value for i in at.info)
    assert not [s for s in at.selectbox if s.key == "risk_explain_record"]


@pytest.mark.parametrize(
    "view", ["ui.views.heatherly", "ui.views.profiles", "ui.views.gccens", "ui.views.lda"]
)
def test_every_method_view_opens_under_the_whole_record_attacker(view, monkeypatch):
    """Each method's view runs under the sidebar's whole-record attacker (the papers' settings it opens
    on: `papers_knowledge`), and no view raises."""
    monkeypatch.setenv("COHORTSHIELD_WORKERS", "0")
    at = page_app(view=(view, "render_anonymize"), state={"adversary_knowledge": "whole_record"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["context"].adversary.knowledge == "whole_record"


def test_the_lab_orders_page_reads_the_whole_record_as_all_days(monkeypatch):
    """The Lab orders page under the whole-record attacker: all days known (it raised KeyError)."""
    monkeypatch.setenv("COHORTSHIELD_WORKERS", "0")
    state = {"adversary_knowledge": "whole_record", "labs_simulations": 5, "labs_trials": 20}
    at = page_app("pages/labs.py", state={**state, "labs_epochs": 1, "labs_max_train": 1000}, timeout=240)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("all days known" in i.value for i in at.info)
