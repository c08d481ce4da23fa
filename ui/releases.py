"""The releases made in this session, shared between pages (Risk before/after, PheWAS, Report).

A method tab publishes its latest release under a stable name (e.g. "GCCens", "Heatherly DEMO_S")
together with the risk engine's verification; other pages list what is there.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from engine.release import Release
from engine.risk import Verification

_KEY = "releases"


@dataclass(frozen=True, eq=False)
class PublishedRelease:
    name: str
    release: Release
    verification: Verification


def publish(name: str, release: Release, verification: Verification) -> None:
    st.session_state.setdefault(_KEY, {})[name] = PublishedRelease(name, release, verification)


def available() -> dict[str, PublishedRelease]:
    return dict(st.session_state.get(_KEY, {}))


def clear() -> None:
    st.session_state[_KEY] = {}
