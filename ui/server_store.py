"""The server's store (engine/store): one connection per location, for the users' saved studies
(ui/resume.py) and the sign-in's revocation list (ui/auth.py). Below both, so that neither imports the
other (tests/test_architecture.py: no import cycle)."""

from __future__ import annotations

import streamlit as st

from engine.store import Store, open_store, store_location


def shared_store() -> Store:
    """The server's store (one connection per location): the users' records, and ui/auth.py's
    revocation list."""
    return _open(store_location())


@st.cache_resource(show_spinner=False)
def _open(location: str) -> Store:
    """The store's connection per location: the one Streamlit cache left in the app (a server
    resource, no result, no user's data: `ui.cache.STREAMLIT_CACHES`)."""
    return open_store(location)
