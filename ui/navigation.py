"""The app's navigation, and its own record of it (issue 38, finding 4: read from what the app asked
`st.navigation` for, not from Streamlit's pages manager).

`page(file, ...)` is `st.Page` of a page file that remembers its file; `navigation(pages, ...)` is
`st.navigation` that records, for this session, which page files it holds (`registered(file)`: the guided
start links only to a page the run's navigation has; a page test registers one page), and, for the
process, that it was called (`navigated()`). Until some run of the process has called `st.navigation`,
Streamlit 1.67 serves the app in its legacy `pages/` mode (ui/context.py, ui/auth.py); every call of the
app goes through `navigation`, so `navigated()` is false exactly while that mode is on.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import streamlit as st

from ui.state import ABSENT, declare

ROOT = Path(__file__).resolve().parent.parent  # where app.py is: relative page files are under it
_REGISTERED = "_navigation_files"  # session state: the page files (absolute) of the run's navigation
declare(__name__, held={_REGISTERED: ABSENT})
_FILES: weakref.WeakKeyDictionary[st.Page, str] = weakref.WeakKeyDictionary()  # page -> its file
_NAVIGATED = threading.Event()


def _absolute(file: str | Path) -> str:
    return str((ROOT / file).resolve())


def page(file: str | Path, **kwargs: Any) -> st.Page:
    """`st.Page(file, **kwargs)`, its file remembered for `navigation`."""
    made = st.Page(file, **kwargs)
    _FILES[made] = _absolute(file)
    return made


def navigation(pages: Sequence[st.Page], **kwargs: Any) -> st.Page:
    """`st.navigation(pages, **kwargs)`, recording the page files it holds for this session."""
    st.session_state[_REGISTERED] = frozenset(_FILES[p] for p in pages if p in _FILES)
    _NAVIGATED.set()
    return st.navigation(list(pages), **kwargs)


def registered(file: str | Path) -> str | None:
    """The page file's absolute path when this session's navigation holds it, else None."""
    path = _absolute(file)
    return path if path in st.session_state.get(_REGISTERED, frozenset()) else None


def navigated() -> bool:
    """Whether any run of this process has called `navigation` (Streamlit's legacy pages/ mode is off)."""
    return _NAVIGATED.is_set()
