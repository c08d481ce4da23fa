"""Method settings that survive page switches (issue 13).

Streamlit forgets a widget's value when a run does not draw it (another page, another method). Every
method widget therefore has a fixed session-state key, declared kept with its default in `ui.state`
(the one owner of session state) by `register`, called by each method module at import: the one
`ui.state.keep()` (called by the sidebar on every run, whatever the page) seeds a default once and
re-assigns every kept key already set, so Streamlit keeps it while the widget is not drawn. The widgets
are drawn without a default of their own (the registered one is the default). Keys whose default
depends on the data (`LAZY`) are seeded by their view with `seed()`.

The pages' own widgets (drawn with a default of their own in pages/*.py) are kept the same way once
drawn (`PAGE_KEYS`, declared `LAZY` for their page: the widget's first draw seeds them). Not among
them: choices whose options follow the data (a kept value outside them would be refused).

Not kept: uploads and buttons. Editable tables (`st.data_editor`, whose state cannot be set) keep
their edits through `edits()` (the edited column, stored under a key of its own).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
import streamlit as st

from ui import state
from ui.state import ABSENT, LAZY

__all__ = ["LAZY", "edited_column", "register", "seed"]

# the pages' kept widgets, by the page that draws them
PAGE_KEYS = {
    "pages/cohort.py": ("cohort_top_n", "cohort_measure"),
    "pages/risk.py": ("risk_count_repeats", "risk_n_patterns"),
    "pages/phewas.py": (
        "phewas_test",
        "phewas_mincount",
        "phewas_mincases",
        "phewas_alpha",
        "phewas_correction",
        "phewas_heatherly",
    ),
    "pages/report.py": ("report_reproducible",),  # its recipient: ui/threshold.py
}


def register(keys: Mapping[str, Any]) -> None:
    """Declare the calling module's kept widget keys and their defaults (each method module at import;
    `ui.state.declare`). A module imported during a run (its page's first visit, after the sidebar's
    `keep`) seeds them at once; later runs get them from `ui.state.keep`."""
    state.declare(sys._getframe(1).f_globals["__name__"], kept=keys)


# the sliders among them, seeded with their default here and drawn without one (a widget given a
# default and a value set through session state makes Streamlit warn on every page switch)
PAGE_DEFAULTS = {"cohort_top_n": 20, "risk_n_patterns": 20}
for _page, _keys in PAGE_KEYS.items():
    state.declare(_page, kept={k: PAGE_DEFAULTS.get(k, LAZY) for k in _keys})


def seed(key: str, default: Any, options: Iterable[Any] | None = None) -> None:
    """A data-dependent default, set once; with `options`, a kept multiselect value is cut to the
    options of the data loaded now (a value not among them would be refused by Streamlit)."""
    if key not in st.session_state:
        st.session_state[key] = default
    elif options is not None:
        allowed = set(options)
        st.session_state[key] = [v for v in st.session_state[key] if v in allowed]


def seed_choice(key: str, default: Any, options: Iterable[Any]) -> None:
    """A choice's default, set when the key holds nothing or a value the data loaded now does not offer
    (Streamlit would refuse it): e.g. a CDM's hierarchy kept while other data are loaded."""
    if st.session_state.get(key) not in set(options):
        st.session_state[key] = default


def edited_column(
    store: str, table: pd.DataFrame, index: str, column: str, key: str, **editor: Any
) -> pd.DataFrame:
    """`st.data_editor` of `table` whose edits of `column` survive page switches (its widget state
    cannot be set, so it is lost whenever a run does not draw it).

    The edits (rows, by their `index` value, whose `column` differs from `table`'s) are kept under
    `store` in session state, merged over every earlier table's. An editor drawn again after a run
    that did not draw it starts from `table` with the kept edits written in, under a key naming them
    (a fresh editor, never an old editor's deltas applied to another table); while it stays drawn its
    key and starting table stay the same, so the browser's edits keep applying. Returns the edited
    table. `store` and its `:drawn` companion are declared as the caller's keys (`ui.state`)."""
    state.declare(sys._getframe(1).f_globals["__name__"], held={store: ABSENT, f"{store}:drawn": ABSENT})
    kept: dict[str, Any] = dict(st.session_state.get(store, {}))
    rows = table[index].astype(str).tolist()
    defaults = dict(zip(rows, table[column].tolist(), strict=True))
    drawn = st.session_state.get(f"{store}:drawn")  # (key, rows, applied, editor key) of the last draw
    if drawn is not None and drawn[:2] == (key, rows) and drawn[3] in st.session_state:
        applied, editor_key = drawn[2], drawn[3]  # still on screen: its starting table is unchanged
    else:
        applied = {r: kept[r] for r in rows if r in kept}
        digest = hashlib.sha256(repr(sorted(applied.items())).encode()).hexdigest()[:12]
        editor_key = f"{key}:{digest}"
    base = table.copy()
    if applied:
        base[column] = [applied.get(r, d) for r, d in zip(rows, table[column], strict=True)]
    edited = st.data_editor(base, key=editor_key, **editor)
    st.session_state[f"{store}:drawn"] = (key, rows, applied, editor_key)
    for r, value in zip(edited[index].astype(str), edited[column].tolist(), strict=True):
        if value == defaults[r] or (pd.isna(value) and pd.isna(defaults[r])):
            kept.pop(r, None)
        else:
            kept[r] = value
    st.session_state[store] = kept
    return edited
