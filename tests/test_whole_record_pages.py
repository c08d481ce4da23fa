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
