"""This script run as Streamlit runs it: its stop/rerun check.

`yield_check()` is the check of whether this script run was superseded or stopped (it raises then), for
loops that make no Streamlit call of their own (ui/progress.py, the shared cache's waits,
ui/admission.py). It is built on public calls only (issue 38, finding 4): Streamlit handles a pending
stop or rerun at every read or write of `st.session_state` (its session state calls the run's
execution-control check first), as it does at every element it sends. So the check reads session
state: it draws nothing and sends the browser nothing; it reads at most every 10 ms (bench/yield_check.py).
tests/test_script_run.py holds Streamlit to it. Outside a script run of the app (`ui.state.running`)
it is a no-op.

`is_rerun(exc)` tells a rerun's exception from a stop (`st.stop`, the Stop button, the session's end).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import streamlit as st

from ui import state

_PROBE = "_script_run_probe"  # never set: only looked up, for the check its lookup makes
_EVERY_S = 0.01  # a read of session state costs some 10 us: at most one per 10 ms of calls


class _Check:
    """Read session state at the first call and then at most every `_EVERY_S` seconds (an engine loop
    may report progress far more often than that)."""

    def __init__(self) -> None:
        self.last = -_EVERY_S

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self.last >= _EVERY_S:
            self.last = now
            _PROBE in st.session_state  # noqa: B015  (the lookup is the yield point)


def _nothing() -> None:
    pass


def yield_check() -> Callable[[], None]:
    """This script run's stop/rerun check (see the module); a no-op outside a script run."""
    return _Check() if state.in_a_run() else _nothing


# Streamlit's exception for a rerun (`streamlit.runtime.scriptrunner_utils.exceptions`), known by name:
# importing it is importing `streamlit.runtime` (tests/test_script_run.py checks the name against it)
_RERUN = "RerunException"


def is_rerun(exc: BaseException) -> bool:
    """Whether `exc` is Streamlit stopping this script run for a rerun (not a stop of the session, nor
    anything else)."""
    return any(c.__name__ == _RERUN and c.__module__.startswith("streamlit.") for c in type(exc).__mro__)
