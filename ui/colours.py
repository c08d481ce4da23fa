"""One colour per release across every chart of the app (issue 16).

The original data is always `ORIGINAL` (a neutral grey). Every other series name (a release of the
study, a comparison release, a variant) gets the next free colour of `PALETTE` the first time a chart of
this session draws it, and keeps it on every page (the assignment lives in session state; outside a
Streamlit run, in a module dictionary). `PALETTE` holds no grey and no colour close to `ORIGINAL`
(tests/test_glossary_colours.py checks the distance).
"""

from __future__ import annotations

from collections.abc import Iterable

ORIGINAL = "#6b6b6b"
ORIGINAL_NAMES = frozenset({"original", "Original", "original cohort", "Original cohort"})
# Okabe-Ito (colour-blind safe, without black, grey and yellow), then Dark2's distinct hues
PALETTE: tuple[str, ...] = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#A6761D",
    "#E7298A",
    "#66A61E",
)
_STATE_KEY = "_release_colours"
_FALLBACK: dict[str, str] = {}


def _assigned() -> dict[str, str]:
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        if get_script_run_ctx(suppress_warning=True) is not None:
            import streamlit as st

            return st.session_state.setdefault(_STATE_KEY, {})
    except ImportError:  # pragma: no cover - streamlit is a dependency of the app
        pass
    return _FALLBACK


def is_original(name: str) -> bool:
    return str(name) in ORIGINAL_NAMES


def colour_of(name: str) -> str:
    """The colour of a series: `ORIGINAL` for the original data, else the release's own colour."""
    name = str(name)
    if is_original(name):
        return ORIGINAL
    assigned = _assigned()
    if name not in assigned:
        assigned[name] = PALETTE[len(assigned) % len(PALETTE)]
    return assigned[name]


def colour_map(names: Iterable[str]) -> dict[str, str]:
    """name -> colour for a chart's series (plotly express `color_discrete_map`)."""
    return {str(n): colour_of(n) for n in names}
