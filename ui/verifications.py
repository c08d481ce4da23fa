"""What the session's pages and downloads verify with, below both (`ui.downloads`, `ui.study`): the
distinguishability of a release memoized per content (`verification`) and the session's release ids
(`session_pseudonyms`, `session_pseudonym_key`). Kept apart so that `ui.study` and `ui.downloads` need
not import each other (tests/test_architecture.py: no import cycle)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from engine import risk
from engine.adversary import Adversary
from engine.io.pseudonyms import Pseudonyms, new_key
from engine.records import Records
from engine.release import Release
from engine.risk import Verification
from ui import cache, state
from ui.fingerprints import release_key
from ui.state import ABSENT

PSEUDONYM_KEY = "_pseudonym_key"  # the session study's key before the study exists (ui/study.py)
state.declare(__name__, held={PSEUDONYM_KEY: ABSENT})

_DISTINGUISHABILITIES = 64  # (release, population, adversary) held


def verification(
    release: Release, adversary: Adversary, k: int, population: Records | None, *, data: Any = None
) -> Verification:
    """`risk.verify` of `release` under `adversary` at k. The distinguishability does not depend on k:
    it is memoized per release content (its source included: `release_key`), population and
    adversary, and k only thresholds it, as `risk.verify` does. `data`: what the release and the
    population are derived from, for `ui.cache` (shared when the shipped sample's alone)."""
    key = (
        release_key(release),
        population.fingerprint if population is not None else None,
        adversary.scope,
        adversary.knowledge,
    )
    dis = cache.memo(
        "distinguishability",
        key,
        lambda: risk.release_distinguishability(release, adversary, population),
        size=_DISTINGUISHABILITIES,
        data=data,
        spinner="Verifying the release for the adversary…",
    )
    return Verification(adversary, int(k), dis, release.records.patient_ids, release.fingerprint)


def session_pseudonyms() -> Pseudonyms:
    """The release ids of this session's files: the session study's key (one per study, kept in the
    study file only), so a download and the study's own files name a patient alike."""
    study = st.session_state.get("study")
    if study is None:
        return Pseudonyms(session_pseudonym_key())
    return study.pseudonyms


def session_pseudonym_key(adopt: str | None = None) -> str:
    """The session's pseudonym key: made once (a download before the study exists and the study
    itself use the same one); `adopt` replaces it with a reopened study's."""
    if adopt is not None:
        st.session_state[PSEUDONYM_KEY] = adopt
    return st.session_state.setdefault(PSEUDONYM_KEY, new_key())
