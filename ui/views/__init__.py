"""Method views shared by the Anonymize and Trade-offs pages (issue 17: `ui/` holds views, charts and
widgets only).

Each method has one view module here, `ui/views/<method>.py` (gccens: Tamersoy 2010; heatherly:
Heatherly 2013; profiles: UGACLIP / ACLIP, Loukides 2010; lda: the thesis' chapter IV), with `render_anonymize(ctx)` (parameters, run,
verification, measures, download; a `ui.method_view.MethodView`) and `render_tradeoffs(ctx)` (its
sweeps over k, caps or weights). A segmented control picks the method and only that method's view
runs: `st.tabs` would compute every method on every rerun.

The other pages' bodies are views here too (issue 38, finding 3: a page is a few lines): `labs`,
`cohort`, `risk`, `phewas`, `compare` and `report`, each with its `render`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import streamlit as st

from ui import persist
from ui.context import Context


@dataclass(frozen=True)
class View:
    """A method's view: its title in the picker and its module, imported when the method is first
    picked (issue 24: a page that draws one view, e.g. Lab orders through `ui.views.labs`, does not
    import the four methods and what they need)."""

    title: str
    module: str


# the method views by the method registry's names (`MethodSettings.method`, engine/study/runs.py;
# tests/test_method_view.py checks them), in the picker's order (issue 38, finding 3)
VIEWS: dict[str, View] = {
    "GCCens": View("GCCens (censoring)", "ui.views.gccens"),
    "Heatherly": View("Generalization (Heatherly)", "ui.views.heatherly"),
    "Profiles": View("Clinical profiles (UGACLIP / ACLIP)", "ui.views.profiles"),
    "LDA": View("Trajectories (LDA)", "ui.views.lda"),
}
_BY_TITLE = {v.title: v for v in VIEWS.values()}
PAGES = ("render_anonymize", "render_tradeoffs")  # each view module's two pages

persist.register({f"method_{f}": next(iter(_BY_TITLE)) for f in PAGES})


def render_method(ctx: Context, function: str) -> None:
    """A method picker (kept across page switches: ui/persist.py), then the chosen method's view
    `function(ctx)`, one of `PAGES`."""
    if function not in PAGES:
        raise ValueError(f"no method view page {function!r}: one of {PAGES}")
    titles = list(_BY_TITLE)
    choice = st.segmented_control("Method", titles, key=f"method_{function}", selection_mode="single")
    getattr(importlib.import_module(_BY_TITLE[choice or titles[0]].module), function)(ctx)


def import_all() -> None:
    """Import every method view, declaring its kept settings (`ui.persist.register`): a resumed
    session's settings of a method not opened yet in this server are then restored too."""
    for view in VIEWS.values():
        importlib.import_module(view.module)
