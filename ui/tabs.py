"""Method tabs shared by the Anonymize and Trade-offs pages.

Each method has one UI module `ui/tab_<method>.py` with `render_anonymize(ctx)` (parameters, run,
verification, measures, download) and optionally `render_tradeoffs(ctx)` (its sweeps over k or caps).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import streamlit as st

from ui.context import Context

METHODS: tuple[tuple[str, str], ...] = (
    ("GCCens (censoring)", "ui.tab_gccens"),
    ("Generalization (Heatherly)", "ui.tab_population"),
    ("Clinical profiles (UGACLIP / ACLIP)", "ui.tab_profiles"),
    ("Trajectories (LDA)", "ui.tab_trajectories"),
)


def render_tabs(ctx: Context, function: str) -> None:
    """One tab per method module that defines `function`."""
    found: list[tuple[str, Callable[[Context], None]]] = []
    for title, module_name in METHODS:
        module = importlib.import_module(module_name)
        fn = getattr(module, function, None)
        if fn is not None:
            found.append((title, fn))
    for tab, (_, fn) in zip(st.tabs([t for t, _ in found]), found, strict=True):
        with tab:
            fn(ctx)
