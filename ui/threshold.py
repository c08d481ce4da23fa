"""The threshold a page checks, and the determination's controls (issue 27).

`caption(ctx)`: the one line every page (Risk, Compare, Report) shows: "Threshold checked: maximum risk
1/k = 0.20 (k = 5; controlled access under a data use agreement: <reason>)" from the study's
`Determination` and the sidebar's k (`engine.report.report.threshold_sentence`, the report's sentence).
`controls(ctx)`: the Report page's recipient, release context and written reason; choosing a context
hands its precedent's k (`engine.risk.RISK_THRESHOLD_PRECEDENTS`) to the sidebar (`ui.sidebar.hand_over_k`,
in the widget's callback: before the sidebar draws on the next run)."""

from __future__ import annotations

import streamlit as st

from engine import risk
from engine.report.glossary import help_for
from engine.report.report import threshold_sentence
from engine.study.study import RELEASE_CONTEXTS, Determination, Study, StudyError
from ui import literal, state
from ui import study as session_study
from ui.context import Context
from ui.state import ABSENT, LAZY

CONTEXT_KEY, REASON_KEY, RECIPIENT_KEY = "determination_context", "determination_reason", "report_recipient"
_WRITTEN = "_determination_written"  # the determination the widgets last wrote into the study
state.declare(
    __name__, kept={RECIPIENT_KEY: LAZY}, held=dict.fromkeys((CONTEXT_KEY, REASON_KEY, _WRITTEN), ABSENT)
)
# release context -> the precedent whose k it sets (a public release: 0.09, k = 11; custom: k unchanged)
PRECEDENT_OF_CONTEXT: dict[str, str] = {
    "public": "public release",
    "controlled": "controlled access under a data use agreement",
    "internal": "internal use, trusted recipients",
}


def precedent_k(context: str) -> int | None:
    """The k of a release context's precedent, None for a custom threshold."""
    name = PRECEDENT_OF_CONTEXT.get(context)
    return next((p.k for p in risk.RISK_THRESHOLD_PRECEDENTS if p.name == name), None)


def sentence(ctx: Context) -> str:
    return threshold_sentence(int(ctx.k), session_study.session(ctx).determination)


def caption(ctx: Context) -> None:
    """The page's one line: which threshold it checks, and why."""
    st.caption(literal.md(sentence(ctx)), help=help_for("risk_threshold", "release_context"))


def _context_chosen() -> None:
    from ui.sidebar import hand_over_k

    k = precedent_k(st.session_state.get(CONTEXT_KEY, "controlled"))
    if k is not None:
        hand_over_k(k)


def controls(ctx: Context) -> Study:
    """Recipient, release context and written reason, written into the session's study."""
    study = session_study.session(ctx)
    d = study.determination
    if st.session_state.get(_WRITTEN) != d:  # first run, or a study reopened: the widgets follow it
        st.session_state.update({CONTEXT_KEY: d.context, REASON_KEY: d.reason, RECIPIENT_KEY: d.recipient})
        st.session_state[_WRITTEN] = d
    c1, c2 = st.columns([1, 2])
    with c1:
        recipient = st.text_input(
            "To whom the data goes (filled in by the privacy officer)", key=RECIPIENT_KEY
        )
        context = st.selectbox(
            "Release context",
            list(RELEASE_CONTEXTS),
            format_func=lambda c: (
                RELEASE_CONTEXTS[c] + (f" (k = {precedent_k(c)})" if precedent_k(c) is not None else "")
            ),
            key=CONTEXT_KEY,
            on_change=_context_chosen,
            help=help_for("release_context", "risk_threshold"),
        )
    with c2:
        reason = st.text_area(
            "Why this threshold (written into the study and the report; required for a custom one)",
            key=REASON_KEY,
            height=80,
        )
    try:
        wanted = Determination(recipient, context, reason)
    except StudyError as exc:
        literal.error(exc)
        return study
    if wanted != d:
        study = study.with_determination(wanted)
        session_study.update(study)
        st.session_state[_WRITTEN] = wanted
    return study
