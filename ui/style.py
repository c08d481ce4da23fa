"""The app's one style rule beyond Streamlit's theme (issue 26's screenshots at 1440 and 1024 px).

Streamlit cuts a metric's label and value with an ellipsis when its column is narrow ("Pairs retained,
of the ori…", "1,917 (71…"): a figure an officer cannot read whole. Here they wrap between words
instead. Applied on every run by the sidebar (every page draws it first)."""

from __future__ import annotations

import streamlit as st

_METRIC_WRAP = (
    "<style>[data-testid='stMetricLabel'] *, [data-testid='stMetricValue'] * "
    "{ white-space: normal !important; overflow: visible !important; text-overflow: clip !important; "
    "overflow-wrap: normal !important; word-break: normal !important; }</style>"
)


def apply() -> None:
    """Inject the rule (an empty element: it takes no room on the page)."""
    st.html(_METRIC_WRAP)
