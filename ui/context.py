"""The shared choices of the sidebar, as one object the pages read.

`app.py` draws the sidebar and stores a `Context` in `st.session_state["context"]` on every run;
pages call `current()` to get it. Records are cached objects: use their `fingerprint` as a cache key
(`hash_funcs={Records: fingerprint}` in `st.cache_data`) rather than hashing arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from engine.adversary import Adversary
from engine.dataset import Dataset
from engine.records import Records


@dataclass(frozen=True, eq=False)
class Context:
    dataset: Dataset
    population_group: str  # group name chosen as the population
    cohort_group: str  # group name chosen as the cohort
    population: Records
    cohort: Records
    adversary: Adversary
    k: int

    @property
    def key(self) -> str:
        """Identifies data and group choice (not adversary or k), for cache keys."""
        return f"{self.population.fingerprint}:{self.cohort.fingerprint}"


def current() -> Context:
    """The Context set by app.py for this run; stops the page with a message when none is loaded."""
    ctx = st.session_state.get("context")
    if ctx is None:
        st.info("Load a dataset on the Cohort page (or use the shipped sample) to begin.")
        st.stop()
    return ctx


def records_hash(r: Records) -> str:
    return r.fingerprint


HASH_FUNCS = {Records: records_hash}
