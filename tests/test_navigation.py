"""The app's own record of its navigation (`ui.navigation`, issue 38, finding 4): the guided start links
to the pages this session's navigation holds, and the sign-in gate knows whether Streamlit's legacy
pages/ mode is still on, both without Streamlit's pages manager."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent

_ONE_PAGE = """
import sys
sys.path.insert(0, {root!r})
import streamlit as st
from ui import navigation

navigation.navigation([navigation.page({page!r}), st.Page(lambda: None, title="a function")])
st.session_state["seen"] = [navigation.registered(p) for p in ("pages/glossary.py", "pages/risk.py")]
st.session_state["navigated"] = navigation.navigated()
"""


def test_only_the_page_files_of_this_sessions_navigation_are_registered() -> None:
    glossary = str(ROOT / "pages" / "glossary.py")
    at = AppTest.from_string(_ONE_PAGE.format(root=str(ROOT), page=glossary)).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["seen"] == [glossary, None]
    assert at.session_state["navigated"] is True
    other = AppTest.from_string(_ONE_PAGE.format(root=str(ROOT), page=str(ROOT / "pages" / "risk.py"))).run()
    assert other.session_state["seen"] == [None, str(ROOT / "pages" / "risk.py")]


def test_a_fresh_process_has_not_navigated() -> None:
    """Streamlit's legacy pages/ mode is on in a fresh server until the first `st.navigation`."""
    code = "from ui import navigation\nprint(navigation.navigated())"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
