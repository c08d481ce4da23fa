"""One colour per release across every chart of the app and the IRB report (issues 16, 26).

The table is `engine.report.palette` (the report draws with it too). The original data is always
`ORIGINAL` (a neutral grey). A release of the study is drawn in the colour of its place in the study
(`palette.release_colour(name, study_names)`), so it keeps its colour on every page and in the report.
Any other series name (a sweep's variant such as DEMO_D, "released" before it is added, a method) gets a
colour no release of the study holds, from the end of `PALETTE`, the first time a chart of this session
draws it, and keeps it (the assignment lives in session state; outside a Streamlit run, in a module
dictionary). The four adversaries have their own colours and line styles (`adversary_style`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from engine.report.palette import ORIGINAL, PALETTE, adversary_style, release_colour
from ui.state import ABSENT, declare, in_a_run

__all__ = ["ORIGINAL", "PALETTE", "adversary_style", "colour_map", "colour_of", "is_original", "study_names"]

ORIGINAL_NAMES = frozenset({"original", "Original", "original cohort", "Original cohort"})
_STATE_KEY = "_release_colours"  # release name -> its colour, assigned once for the session's study
declare(__name__, held={_STATE_KEY: ABSENT})
_FALLBACK: dict[str, str] = {}


def _session():
    """This session's state during a script run of the app (`ui.state.running`), else None."""
    if not in_a_run():
        return None
    import streamlit as st

    return st.session_state


def _assigned() -> dict[str, str]:
    state = _session()
    return _FALLBACK if state is None else state.setdefault(_STATE_KEY, {})


def study_names() -> list[str]:
    """The names of the session's study's releases of the data loaded now, in the study's order (the
    order the IRB report lists them in); [] outside a Streamlit run or before a study exists."""
    state = _session()
    study = None if state is None else state.get("study")  # ui.study.STUDY
    if study is None:
        return []
    return [e.name for e in study.current()]


def is_original(name: str) -> bool:
    return str(name) in ORIGINAL_NAMES


def colour_of(name: str, study: Sequence[str] | None = None) -> str:
    """The colour of a series: `ORIGINAL` for the original data, a study release's colour (its place in
    `study`, by default the session's study), else a colour no release of the study holds."""
    name = str(name)
    if is_original(name):
        return ORIGINAL
    names = study_names() if study is None else [str(n) for n in study]
    own = release_colour(name, names)
    assigned = _assigned()
    if own is not None:
        assigned[name] = own  # the session's record of what each series was drawn in
        return own
    taken = {release_colour(n, names) for n in names}
    if name not in assigned or assigned[name] in taken:
        used = taken | {c for n, c in assigned.items() if n != name and n not in names}
        # a colour nobody holds; when every one is held by some series, one no study release holds
        free = [c for c in reversed(PALETTE) if c not in used] or [
            c for c in reversed(PALETTE) if c not in taken
        ]
        assigned[name] = free[0] if free else PALETTE[::-1][len(assigned) % len(PALETTE)]
    return assigned[name]


def colour_map(names: Iterable[str], study: Sequence[str] | None = None) -> dict[str, str]:
    """name -> colour for a chart's series (plotly express `color_discrete_map`)."""
    order = study_names() if study is None else [str(n) for n in study]
    out: dict[str, str] = {}
    for n in dict.fromkeys(str(n) for n in names):
        c = colour_of(n, order)
        if c in out.values() and release_colour(n, order) is None and not is_original(n):
            # a session colour met again in this chart (more names than colours): one free here
            free = [p for p in reversed(PALETTE) if p not in out.values()]
            if free:
                c = _assigned()[n] = free[0]
        out[n] = c
    return out
