"""Method views shared by the Anonymize and Trade-offs pages.

Each method has one UI module `ui/tab_<method>.py` with `render_anonymize(ctx)` (parameters, run,
verification, measures, download) and `render_tradeoffs(ctx)` (its sweeps over k, caps or weights).
A segmented control picks the method and only that method's view runs: `st.tabs` would compute every
method on every rerun.
"""

from __future__ import annotations

from types import ModuleType

import streamlit as st

from ui import persist, tab_gccens, tab_population, tab_profiles, tab_trajectories
from ui.context import Context

METHODS: dict[str, ModuleType] = {
    "GCCens (censoring)": tab_gccens,
    "Generalization (Heatherly)": tab_population,
    "Clinical profiles (UGACLIP / ACLIP)": tab_profiles,
    "Trajectories (LDA)": tab_trajectories,
}


persist.register({f"method_{f}": next(iter(METHODS)) for f in ("render_anonymize", "render_tradeoffs")})


def render_method(ctx: Context, function: str) -> None:
    """A method picker (kept across page switches: ui/persist.py), then the chosen method module's
    `function(ctx)`."""
    titles = list(METHODS)
    choice = st.segmented_control("Method", titles, key=f"method_{function}", selection_mode="single")
    getattr(METHODS[choice or titles[0]], function)(ctx)
