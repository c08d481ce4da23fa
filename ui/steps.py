"""The guided start (issue 26, finding 2): the four steps of a release and where the user stands.

1 load data, 2 choose the attacker, 3 make releases, 4 build the report. `states(facts)` is a pure
function from the session's facts (`Facts`) to each step's state: "done", "current" (the first step
not done) or "next" (after it), with what the step needs. `facts()` reads those facts from the session;
`render()` draws the steps in one row of four at the top of the Cohort page, each linking to its page,
with the teach-mode toggle under them (the sidebar's `teach_mode`, through its own widget key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import streamlit as st

from ui import navigation, teach
from ui.state import declare

State = Literal["done", "current", "next"]
_TOUCHED = "_steps_attacker_touched"  # the sidebar's adversary or k was changed once in this session
declare(__name__, held={_TOUCHED: False})


@dataclass(frozen=True)
class Facts:
    """What the session holds: data loaded, the attacker chosen (the sidebar's adversary or k changed,
    or a determination recorded), the study's releases of the data loaded now, a report built."""

    data_loaded: bool = False
    attacker_chosen: bool = False
    releases: int = 0
    report_built: bool = False


@dataclass(frozen=True)
class Step:
    number: int
    title: str
    page: str  # the page file it links to
    state: State
    needs: str  # what the step needs (shown under it)


# (title, page, what it needs, what it says once done)
_STEPS: tuple[tuple[str, str, str, str], ...] = (
    (
        "Load data",
        "pages/cohort.py",
        "Choose the sample or upload your files in the sidebar.",
        "Data loaded.",
    ),
    (
        "Choose the attacker",
        "pages/risk.py",
        "Set the adversary's scope and knowledge and k in the sidebar; the Risk page shows what they mean.",
        "Attacker chosen.",
    ),
    (
        "Make releases",
        "pages/anonymize.py",
        "Run a method on the Anonymize page and press 'Add to study'.",
        "",
    ),
    ("Build the report", "pages/report.py", "Press 'Build the report' on the Report page.", "Report built."),
)


def states(facts: Facts) -> tuple[Step, ...]:
    """Each step's state. A step is done when its fact holds (a release implies an attacker chosen:
    it was verified under one); the first step not done is current, the ones after it are next. Without
    data nothing is done: the releases and the report are those of the data loaded now."""
    loaded = facts.data_loaded
    done = (
        loaded,
        loaded and (facts.attacker_chosen or facts.releases > 0),
        loaded and facts.releases > 0,
        loaded and facts.releases > 0 and facts.report_built,
    )
    current = next((i for i, d in enumerate(done) if not d), None)
    out = []
    for i, ((title, page, needs, said), d) in enumerate(zip(_STEPS, done, strict=True)):
        if d:
            state: State = "done"
            text = said or f"{facts.releases} release{'s' if facts.releases != 1 else ''} in the study."
        else:
            state = "current" if i == current else "next"
            text = needs
        out.append(Step(i + 1, title, page, state, text))
    return tuple(out)


def facts() -> Facts:
    """The session's facts, read without changing the study (no release is added or removed)."""
    from engine.study.study import Determination
    from ui import sidebar
    from ui.study import STUDY, current

    state = st.session_state
    ctx = state.get("context")
    attacker = ("adversary_scope", "adversary_knowledge", "k")
    if any(key in state and state[key] != sidebar.KEYS[key] for key in attacker):
        state[_TOUCHED] = True
    study = state.get(STUDY)
    determined = study is not None and study.determination != Determination()
    releases = len(current(ctx)) if ctx is not None and study is not None else 0
    built = state.get("report_built")
    return Facts(
        data_loaded=ctx is not None,
        attacker_chosen=bool(state.get(_TOUCHED)) or determined,
        releases=releases,
        report_built=built is not None and len(built) == 5,  # (key, report, html, pdf, bundle)
    )


_MARK = {"done": ":material/check_circle:", "current": ":material/arrow_forward:", "next": ""}


# the row's labels wrap inside their columns (between words) instead of Streamlit's one line cut with an
# ellipsis ("2. Choose the attacker (no…" at 1440 px, every step at 1024 px; issue 26); the teach-mode
# toggle sits under the row, where a fifth column cut it to "T…" at 1024 px
_WRAP_CSS = (
    "<style>.st-key-guided_start [data-testid='stPageLink'] * "
    "{ white-space: normal !important; overflow: visible !important; text-overflow: clip !important; "
    "overflow-wrap: normal !important; word-break: normal !important; }</style>"
)


def render() -> tuple[Step, ...]:
    """The four steps in one row, each linking to its page, and the teach-mode toggle under them."""
    steps = states(facts())
    teach.here_follows_sidebar()
    st.html(_WRAP_CSS)
    with st.container(key="guided_start"):
        for col, step in zip(st.columns(4, vertical_alignment="top"), steps, strict=True):
            with col:
                label = f"{step.number}. {step.title}"
                if step.state == "current":
                    label = f"**{label}** (now)"
                path = navigation.registered(step.page)  # a page test registers one page
                if path is not None:
                    st.page_link(path, label=label, icon=_MARK[step.state] or None)
                else:
                    st.markdown(label)
                st.caption(step.needs)
        st.toggle(
            "Teach mode",
            key=teach.HERE_KEY,
            on_change=teach.sidebar_follows_here,
            help="Each page opens with what it shows and one thing to try (the same switch as the sidebar's).",
        )
    return steps
