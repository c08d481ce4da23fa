"""Teach mode (issue 16): with the sidebar's toggle on, a page opens with two lines on what it shows
and one suggested thing to try (texts: `engine.report.glossary.TEACH`)."""

from __future__ import annotations

import streamlit as st

from engine.report.glossary import teach
from ui import state
from ui.state import ABSENT

KEY = "teach_mode"  # the sidebar toggle's session-state key (drawn by ui/sidebar.py)
HERE_KEY = "teach_mode_here"  # the Cohort page's toggle beside the steps (ui/steps.py): follows KEY
state.declare(__name__, kept={KEY: False}, held={HERE_KEY: ABSENT})


def here_follows_sidebar() -> None:
    """Before the steps' toggle is drawn: it shows the sidebar's value."""
    st.session_state[HERE_KEY] = bool(st.session_state.get(KEY))


def sidebar_follows_here() -> None:
    """The steps' toggle changed (its callback): the sidebar's switch takes its value."""
    st.session_state[KEY] = bool(st.session_state[HERE_KEY])


def intro(page: str) -> bool:
    """Show the page's teach text when teach mode is on; returns whether it was shown."""
    if not st.session_state.get(KEY):
        return False
    text = teach(page)
    st.info(f"{text.shows[0]}  \n{text.shows[1]}\n\n**Try this:** {text.try_this}", icon=":material/school:")
    return True
