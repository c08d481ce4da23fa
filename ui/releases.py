"""The releases made in this session, shared between pages (Risk before/after, PheWAS, Report).

Every run of a method tab publishes its latest release under a stable name (e.g. "GCCens",
"Heatherly DEMO_S") together with the risk engine's verification, verified or not, so that a later
run that fails verification replaces an earlier one instead of leaving it standing. Pages that list
releases show the verification with the name (`PublishedRelease.label`); only the method tabs offer
downloads, and only of verified releases.
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

    @property
    def label(self) -> str:
        """The name with the verification status, for lists and legends."""
        return (
            self.name if self.verification.ok else f"{self.name} (not verified at k = {self.verification.k})"
        )


def publish(name: str, release: Release, verification: Verification) -> None:
    st.session_state.setdefault(_KEY, {})[name] = PublishedRelease(name, release, verification)


def available() -> dict[str, PublishedRelease]:
    return dict(st.session_state.get(_KEY, {}))


def clear() -> None:
    st.session_state[_KEY] = {}
