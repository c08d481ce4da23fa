"""The Report page's "Differentially private tables" expander (issue 39): the officer states the
recipient's budget, draws a table at an epsilon, sees its error and the download; a table the budget
cannot take is refused and nothing is drawn."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import download_labels, page_app, shown

from engine.disclosure.dp_tables import PatientSets, bounded_code_sets

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


def test_the_report_page_draws_a_dp_table_within_the_recipients_budget():
    at = page_app("pages/report.py", state={})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Download the noisy table (CSV)" not in download_labels(at)
    at.text_input(key="dp_recipient").set_value("Vanderbilt lab")
    at.number_input(key="dp_budget").set_value(1.5)
    at.number_input(key="dp_epsilon").set_value(1.0)
    at.button(key="dp_draw").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Download the noisy table (CSV)" in download_labels(at)
    ctx = at.session_state["context"]
    table = next(d.value for d in at.dataframe if list(d.value.columns) == ["code", "patients"])
    assert table["code"].tolist() == sorted(map(str, ctx.population.items))[:200]
    assert (table["patients"] >= 0).all()
    error = dict(next(d.value for d in at.dataframe if "measure" in d.value.columns).itertuples(index=False))
    _, truncated = bounded_code_sets(PatientSets.of_codes(ctx.cohort), 20)
    assert error["patients truncated by the bound"] == truncated
    assert error["mean absolute error"] > 0
    assert any("Vanderbilt lab has spent epsilon 1 of 1.5" in shown(c.value) for c in at.caption)
    at.button(key="dp_draw").click().run()  # a second epsilon 1 would spend 2 of 1.5
    assert not at.exception, [e.value for e in at.exception]
    assert any("would exceed it" in e.value for e in at.error)
    assert at.session_state["_dp_ledger"].spent("Vanderbilt lab") == (1.0, 0.0)
    assert at.session_state["study"].dp_budget.spent("Vanderbilt lab") == (1.0, 0.0)  # in the study file


def test_the_report_page_draws_the_dp_phewas_counts_with_the_associations_kept():
    """With the sample's genotypes the PheWAS counts are offered; the officer sees the associations of
    the exact PheWAS kept, lost and false, which add up to the exact PheWAS's count."""
    at = page_app("pages/report.py", state={})
    at.run()
    at.radio(key="dp_kind").set_value("PheWAS case/control counts")
    at.number_input(key="dp_epsilon").set_value(10.0)
    at.number_input(key="dp_budget").set_value(10.0)
    at.button(key="dp_draw").click().run()
    assert not at.exception, [e.value for e in at.exception]
    table = next(d.value for d in at.dataframe if "controls" in d.value.columns)
    assert list(table.columns) == ["snp", "phecode", "genotype", "cases", "controls"]
    error = dict(next(d.value for d in at.dataframe if "measure" in d.value.columns).itertuples(index=False))
    original = error["associations (p <= 0.05): original"]
    assert original == 107  # the sample's exact PheWAS (docs/architecture.md)
    assert error["associations (p <= 0.05): kept"] + error["associations (p <= 0.05): lost"] == original
    assert "Download the noisy table (CSV)" in download_labels(at)
