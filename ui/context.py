"""The shared choices of the sidebar, as one object the pages read.

`app.py` draws the sidebar and stores a `Context` in `st.session_state["context"]` on every run;
pages call `current()` to get it. Records are cached objects: use their `fingerprint` as a cache key
(`hash_funcs={Records: fingerprint}` in `st.cache_data`) rather than hashing arrays.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from engine.adversary import Adversary
from engine.dataset import Dataset
from engine.records import Records
from ui import state
from ui.state import ABSENT


@dataclass(frozen=True, eq=False)
class Context:
    dataset: Dataset
    population_group: str  # group name chosen as the population
    cohort_group: str  # group name chosen as the cohort
    population: Records
    cohort: Records
    adversary: Adversary
    k: int
    # the sidebar's load options that change the data (`ui.study.load_options`), read in the script run:
    # a page's job runs in a pool worker, which has no session to read them from (issue 38, finding 4)
    # (the defaults: what the sidebar reads when nothing is chosen)
    load_options: tuple[tuple[str, object], ...] = (("unknown_codes", "keep"), ("drop_duplicates", False))

    @property
    def key(self) -> str:
        """Identifies data and group choice (not adversary or k), for cache keys."""
        return f"{self.population.fingerprint}:{self.cohort.fingerprint}"


WHOLE_POPULATION = (
    "The cohort is the whole population ({n:,} patients): every release will hold all of them. "
    "To share a smaller cohort, load its patient list or choose its group in the sidebar (for an imported "
    "source: under Cohort on the Cohort page)."
)


def cohort_is_population(cohort: Records, population: Records) -> bool:
    """The cohort holds every patient of the population (the same patients, in any order)."""
    if cohort is population:
        return True
    if cohort.n_patients != population.n_patients:
        return False
    return set(map(str, cohort.patient_ids)) == set(map(str, population.patient_ids))


def warn_if_whole_population(ctx: Context) -> bool:
    """On every page that releases data: a visible warning when the cohort is the whole population
    (issue 12, finding 2). Returns whether it was shown."""
    if not cohort_is_population(ctx.cohort, ctx.population):
        return False
    st.warning(WHOLE_POPULATION.format(n=ctx.cohort.n_patients), icon=":material/warning:")
    return True


APP_DIR = Path(__file__).resolve().parent.parent
DEEP_LINK = "_deep_link"


SIDEBAR_RAN = (
    "_sidebar_ran"  # session state: app.py's sidebar has run in this session (written by ui.sidebar)
)
state.declare(__name__, held={DEEP_LINK: ABSENT})


def _recover_deep_link(page_file: str | None) -> None:
    """A page opened by its URL before any session ran app.py is served by Streamlit's legacy
    `pages/` mode (Streamlit 1.67 decides per process: `pages/` exists until the first `st.navigation`
    call), without the entry point and its sidebar. Send it through app.py, which returns to it.

    Such a run is known by the session, not by Streamlit's process-wide flag: another session's
    app.py may turn the flag off while this run is under way (bench/load.py's eight first loads).
    A session whose sidebar never ran is in that mode, since app.py runs the sidebar before every
    page; once any sidebar ran, the flag is off for good, so no later run of the session is."""
    if page_file and not st.session_state.get(SIDEBAR_RAN):
        st.session_state[DEEP_LINK] = Path(page_file).resolve().relative_to(APP_DIR).as_posix()
        st.switch_page("app.py")


def through_entry_point() -> None:
    """For a page that does not call `current()` (it draws without a loaded dataset): send a run in
    Streamlit's legacy pages/ mode through app.py, as `current()` does."""
    _recover_deep_link(sys._getframe(1).f_globals.get("__file__"))


def follow_deep_link() -> None:
    """Called by app.py once st.navigation is set up: go to the page a deep link asked for."""
    target = st.session_state.pop(DEEP_LINK, None)
    if target:
        st.switch_page(target)


def current() -> Context:
    """The Context set by app.py for this run; stops the page with a message when none is loaded."""
    _recover_deep_link(sys._getframe(1).f_globals.get("__file__"))
    ctx = st.session_state.get("context")
    if ctx is None:
        st.info("Load a dataset on the Cohort page (or use the shipped sample) to begin.")
        st.stop()
    return ctx


def records_hash(r: Records) -> str:
    return r.fingerprint


HASH_FUNCS = {Records: records_hash}
