"""Method views shared by the Anonymize and Trade-offs pages (issue 17: `ui/` holds views, charts and
widgets only).

Each method has one view module here, `ui/views/<method>.py` (gccens: Tamersoy 2010; heatherly:
Heatherly 2013; profiles: UGACLIP / ACLIP, Loukides 2010; lda: the thesis' chapter IV), with `render_anonymize(ctx)` (parameters, run,
verification, measures, download) and `render_tradeoffs(ctx)` (its sweeps over k, caps or weights).
A segmented control picks the method and only that method's view runs: `st.tabs` would compute every
method on every rerun.
"""

from __future__ import annotations

import importlib

import streamlit as st

from ui import persist
from ui.context import Context

# each method's view module, imported when its method is first picked (issue 24: a page that draws one
# view, e.g. Lab orders through `ui.views.labs`, does not import the four methods and what they need)
METHODS: dict[str, str] = {
    "GCCens (censoring)": "ui.views.gccens",
    "Generalization (Heatherly)": "ui.views.heatherly",
    "Clinical profiles (UGACLIP / ACLIP)": "ui.views.profiles",
    "Trajectories (LDA)": "ui.views.lda",
}


persist.register({f"method_{f}": next(iter(METHODS)) for f in ("render_anonymize", "render_tradeoffs")})


def render_method(ctx: Context, function: str) -> None:
    """A method picker (kept across page switches: ui/persist.py), then the chosen method module's
    `function(ctx)`."""
    titles = list(METHODS)
    choice = st.segmented_control("Method", titles, key=f"method_{function}", selection_mode="single")
    getattr(importlib.import_module(METHODS[choice or titles[0]]), function)(ctx)


def import_all() -> None:
    """Import every method view, declaring its kept settings (`ui.persist.register`): a resumed
    session's settings of a method not opened yet in this server are then restored too."""
    for name in METHODS.values():
        importlib.import_module(name)
