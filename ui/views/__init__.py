"""Method views shared by the Anonymize and Trade-offs pages (issue 17: `ui/` holds views, charts and
widgets only).

Each method has one view module here, `ui/views/<method>.py` (gccens: Tamersoy 2010; heatherly:
Heatherly 2013; profiles: UGACLIP / ACLIP, Loukides 2010; lda: the thesis' chapter IV), with `render_anonymize(ctx)` (parameters, run,
verification, measures, download) and `render_tradeoffs(ctx)` (its sweeps over k, caps or weights).
A segmented control picks the method and only that method's view runs: `st.tabs` would compute every
method on every rerun.
"""

from __future__ import annotations

from types import ModuleType

import streamlit as st

from ui import persist
from ui.context import Context
from ui.views import gccens, heatherly, lda, profiles

METHODS: dict[str, ModuleType] = {
    "GCCens (censoring)": gccens,
    "Generalization (Heatherly)": heatherly,
    "Clinical profiles (UGACLIP / ACLIP)": profiles,
    "Trajectories (LDA)": lda,
}


persist.register({f"method_{f}": next(iter(METHODS)) for f in ("render_anonymize", "render_tradeoffs")})


def render_method(ctx: Context, function: str) -> None:
    """A method picker (kept across page switches: ui/persist.py), then the chosen method module's
    `function(ctx)`."""
    titles = list(METHODS)
    choice = st.segmented_control("Method", titles, key=f"method_{function}", selection_mode="single")
    getattr(METHODS[choice or titles[0]], function)(ctx)
