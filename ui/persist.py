"""Method settings that survive page switches (issue 13).

Streamlit forgets a widget's value when a run does not draw it (another page, another method). Every
method widget therefore has a fixed session-state key registered here with its default, as
`ui/sidebar.py` does with its `KEYS`: `keep()` (called by the sidebar on every run, whatever the page)
seeds a default once and re-assigns every registered key already set, so Streamlit keeps it while the
widget is not drawn. The widgets are drawn without a default of their own (the registered one is the
default). Keys whose default depends on the data (`LAZY`) are seeded by their view with `seed()`.

Not kept: editable tables (`st.data_editor` state cannot be set), uploads and buttons.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import streamlit as st

LAZY = object()  # a default the view computes from the data (see `seed`)
REGISTRY: dict[str, Any] = {}


def register(keys: Mapping[str, Any]) -> None:
    """Register widget keys and their defaults (each method module at import). A module imported
    during a run (its page's first visit, after the sidebar's `keep`) seeds them at once; later
    sessions get them from `keep`."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    REGISTRY.update(keys)
    if get_script_run_ctx(suppress_warning=True) is not None:
        for key, default in keys.items():
            if key not in st.session_state and default is not LAZY:
                st.session_state[key] = default


def keep() -> None:
    """Seed the static defaults once; re-assign every registered key already set."""
    for key, default in REGISTRY.items():
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]
        elif default is not LAZY:
            st.session_state[key] = default


def seed(key: str, default: Any, options: Iterable[Any] | None = None) -> None:
    """A data-dependent default, set once; with `options`, a kept multiselect value is cut to the
    options of the data loaded now (a value not among them would be refused by Streamlit)."""
    if key not in st.session_state:
        st.session_state[key] = default
    elif options is not None:
        allowed = set(options)
        st.session_state[key] = [v for v in st.session_state[key] if v in allowed]
