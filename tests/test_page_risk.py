"""AppTest of the Risk page (pages/risk.py) on the shipped sample, with app.py's sidebar."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from apptest_support import add_release, page_app, shown
from streamlit.testing.v1 import AppTest

from engine import risk
from engine.release import Release
from ui.format import percent

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


def _risk_page(**choices) -> AppTest:
    """The Risk page with app.py's sidebar; `choices` preset the sidebar's keyed widgets."""
    at = page_app("pages/risk.py", state=choices)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_risk_page_shows_curves_headlines_and_patterns():
    at = _risk_page()
    assert at.title[0].value == "Risk"
    metrics = _metrics(at)
    assert {"Cohort records", "Share unique", "Median distinguishability"} <= set(metrics)
    ctx = at.session_state["context"]
    # the headline figures are the engine's, for the sidebar's adversary
    dis = risk.original_distinguishability(ctx.cohort, ctx.adversary, ctx.population)
    s = risk.summarize(dis, ctx.k)
    assert metrics["Share unique"] == f"{s.share_unique:.1%}"
    assert metrics[f"Share below k = {ctx.k}"] == f"{s.share_below_k:.1%}"
    charts = at.get("plotly_chart")
    assert len(charts) == 1  # no release yet: the four-adversary chart only
    summary = at.dataframe[0].value
    assert len(summary) == 4
    patterns = at.dataframe[1].value
    assert list(patterns.columns) == ["distinguishability", "records", "items", "codes", "descriptions"]
    assert len(patterns) == 20
    assert patterns["distinguishability"].is_monotonic_increasing
    ids = set(ctx.cohort.patient_ids.astype(str).tolist())
    assert not ids & set(patterns.astype(str).to_numpy().ravel().tolist())  # never identifiers
    assert len(at.get("download_button")) >= 3
    assert any("No release in the study yet" in i.value for i in at.info)


def test_sidebar_choices_recompute():
    before = _metrics(_risk_page())
    at = _risk_page(k=10, adversary_knowledge="all_visits")
    after = _metrics(at)
    assert "Share below k = 10" in after and "Share below k = 5" in before
    assert after["Share unique"] != before["Share unique"]
    ctx = at.session_state["context"]
    assert (ctx.k, ctx.adversary.knowledge) == (10, "all_visits")
    dis = risk.original_distinguishability(ctx.cohort, ctx.adversary, ctx.population)
    assert after["Share below k = 10"] == f"{risk.summarize(dis, 10).share_below_k:.1%}"


def test_before_and_after_for_published_release():
    at = _risk_page()
    ctx = at.session_state["context"]
    # a release that suppresses every code: every record matches every candidate
    empty = ctx.cohort.keep_events(np.zeros(ctx.cohort.n_events, dtype=bool))
    release = Release("suppress all", empty)
    verification = risk.verify(release, ctx.adversary, ctx.k, ctx.population)
    assert verification.ok
    add_release(at, "Suppress all", release)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) == 2
    status = at.dataframe[2].value
    assert status["release"].tolist() == ["Suppress all"]
    assert status["records below k"].tolist() == [0]


# ------------------------------------------------------------------------------------ issue 27
def test_risk_page_states_the_threshold_and_the_risk_measures():
    at = _risk_page()
    ctx = at.session_state["context"]
    k = ctx.k
    assert any(
        shown(c.value).startswith(f"Threshold checked: maximum risk 1/k = {1 / k:.2f}") for c in at.caption
    )
    dis = risk.original_distinguishability(ctx.cohort, ctx.adversary, ctx.population)
    m = risk.risk_measures(dis, risk.threshold_of_k(k))
    metrics = _metrics(at)
    # shares through the one formatter (issue 26: percentages everywhere)
    assert metrics["Maximum risk"] == percent(m.prosecutor_max)
    assert metrics["Average risk"] == percent(m.average)
    summary = at.dataframe[0].value.set_index("curve")
    assert summary.loc[ctx.adversary.label, "average risk"] == m.average
    assert summary.loc[ctx.adversary.label, "records at risk"] == m.records_at_risk


def test_risk_page_explains_a_chosen_record_below_k():
    from engine.estimate import explain

    at = _risk_page()
    ctx = at.session_state["context"]
    box = at.selectbox(key="risk_explain_record")
    dis = risk.original_distinguishability(ctx.cohort, ctx.adversary, ctx.population)
    assert list(box.options) == [
        f"record {r + 1} (distinguishability {int(dis[r])})" for r in np.flatnonzero(dis < ctx.k)
    ]
    row = int(np.flatnonzero(dis < ctx.k)[3])
    box.set_value(row).run()
    assert not at.exception
    (e,) = explain.explain_records(ctx.cohort, ctx.adversary, ctx.k, ctx.population, rows=[row])
    (codes,) = [d.value for d in at.dataframe if list(d.value.columns) == ["code", "description"]]
    assert codes["code"].tolist() == list(e.singling_out)
    assert any(f"Cheapest change: {e.change_text()}" in shown(md.value) for md in at.markdown)
    # issue 35 finding 5: the count is engine.risk's on the release the change makes, the cost over
    # every record the change touches
    cost = (
        f"Distinguishability after, counted by engine.risk on the release this change makes: "
        f"{e.distinguishability_after}. Cost: {e.pairs_lost} of the record's {e.record_pairs} pairs "
        f"({e.events_lost} events) suppressed; {e.records_recoded} records, {e.pairs_recoded} pairs and "
        f"{e.events_recoded} events recoded in the release."
    )
    assert e.verified and any(cost in shown(md.value) for md in at.markdown)
    assert not any("this record alone" in c.value for c in at.caption)
    ids = set(ctx.cohort.patient_ids.astype(str).tolist())
    assert not ids & {o for o in box.options}  # records by position, never by id


def test_kmap_estimate_shows_when_the_cohort_is_the_population():
    from engine.estimate import kmap

    at = _risk_page()
    at.selectbox(key="cohort_group").set_value("population").run()
    ctx = at.session_state["context"]
    assert ctx.cohort.n_patients == ctx.population.n_patients
    assert any(kmap.RANDOM_SAMPLE_WARNING in w.value for w in at.warning)
    at.number_input(key="risk_population_size").set_value(100_000).run()
    est = kmap.estimate_kmap(ctx.cohort, 100_000, ctx.adversary.knowledge, ctx.k)
    assert _metrics(at)["Estimated share unique"] == f"{est.share_unique.estimate:.1%}"
