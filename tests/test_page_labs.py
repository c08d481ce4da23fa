"""AppTest of the Lab orders page on the shipped sample (issue #9's UI)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "labs.parquet").exists(), reason="the shipped sample has no labs.parquet"
)


# the app's own entry point once every page it lists exists; until then a harness with the same
# sidebar and this page alone (so the page can be tested while other pages are being written)
HARNESS = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import streamlit as st
from ui import sidebar
navigation = st.navigation([st.Page({str(ROOT / "pages" / "labs.py")!r}, title="Lab orders")])
sidebar.render()
navigation.run()
"""


def app_pages_exist() -> bool:
    text = (ROOT / "app.py").read_text()
    pages = [
        n.args[0].value
        for n in ast.walk(ast.parse(text))
        if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "Page"
    ]
    return all((ROOT / p).exists() for p in pages)


def labs_page(**state) -> AppTest:
    if app_pages_exist():
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
        at.run()
        at.switch_page("pages/labs.py")
    else:
        at = AppTest.from_string(HARNESS, default_timeout=240)
    # small, fast settings for the test (the defaults are the page's own)
    at.session_state["labs_simulations"] = 5
    at.session_state["labs_trials"] = 20
    at.session_state["labs_epochs"] = 1
    at.session_state["labs_max_train"] = 1000
    for k, v in state.items():
        at.session_state[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [i.value for i in at.info] + [c.value for c in at.caption]
    return "\n".join(map(str, parts))


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_page_renders_figures_3_to_6_and_follows_the_sidebar():
    at = labs_page()
    headers = [h.value for h in at.header]
    assert "Uniqueness of lab sets (Figure 3)" in headers
    assert "Re-identification from lab orders (Figure 4)" in headers
    assert "Latent-space release (Figures 5 and 6)" in headers
    assert len(at.get("plotly_chart")) == 6  # uniqueness, ROC, PR, Recall@n, spread, paired
    labels = [m.label for m in at.metric]
    for label in (
        "Unique, all patients",
        "Recall@1",
        "Recall@10",
        "ROC AUC (held-out days)",
        "Latent Recall@1",
    ):
        assert label in labels
    assert float(metric(at, "ROC AUC (held-out days)")) > 0.5
    assert metric(at, "Candidates per query") == "100"
    downloads = [b.label for b in at.get("download_button")]
    for label in (
        "Uniqueness by days (CSV)",
        "Recall@n curves (CSV)",
        "Paired test (CSV)",
        "ROC curve (CSV)",
    ):
        assert label in downloads
    assert "one day known" in texts(at) and "99 others" in texts(at)

    # the sidebar's adversary: all visits -> all days known; population -> the whole population
    at.session_state["adversary_knowledge"] = "all_visits"
    at.session_state["adversary_scope"] = "population"
    at.session_state["labs_train_vae"] = False
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    info = texts(at)
    assert "all days known" in info and "whole population" in info
    assert int(metric(at, "Candidates per query").replace(",", "")) > 100
    assert len(at.get("plotly_chart")) == 3  # no VAE figures when training is off


def test_page_imports_the_vae_module_only_inside_a_function():
    tree = ast.parse((ROOT / "pages" / "labs.py").read_text())
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    names = {a.name for n in top for a in n.names} | {getattr(n, "module", None) for n in top}
    assert "torch" not in names and "engine.latent" not in names
