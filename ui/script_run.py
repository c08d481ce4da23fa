"""This script run as Streamlit runs it: its stop/rerun check, and a worker's copy of it made mute.

`yield_check()` is Streamlit's check of whether this script run was superseded or stopped (it raises
then), for loops that make no Streamlit call of their own (ui/progress.py, the shared cache's waits,
ui/admission.py); `is_rerun(exc)` tells a rerun's exception from a stop.
`mute_in_child()` prepares a worker process forked from the server (ui/worker.py): whatever the
child would draw goes nowhere, and it never waits on a lock or a check that the parent's threads own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


def yield_check() -> Callable[[], None]:
    """Streamlit's stop/rerun check of this script run (a no-op outside one)."""
    try:
        from streamlit.runtime.scriptrunner_utils.script_run_context import get_run_yield_check
    except ImportError:  # an older Streamlit: its own calls are the only yield points
        return lambda: None
    return get_run_yield_check() or (lambda: None)


def is_rerun(exc: BaseException) -> bool:
    """Whether `exc` is Streamlit stopping this script run for a rerun (not a stop of the session, nor
    anything else)."""
    try:
        from streamlit.runtime.scriptrunner_utils.exceptions import RerunException
    except ImportError:
        return False
    return isinstance(exc, RerunException)


def mute_in_child() -> None:
    """In a forked worker: Streamlit's calls draw nothing (the session's message queue is the
    parent's), its checks pass (the parent decides whether the run is wanted) and the session state's
    lock is a new one (another thread of the parent may have held it at the fork)."""
    try:
        from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
    except ImportError:
        return
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None:
        return
    ctx._enqueue = lambda msg: None
    ctx.yield_check = lambda: None
    state = ctx.session_state
    object.__setattr__(state, "_yield_callback", lambda: None)
    object.__setattr__(state, "_lock", threading.RLock())
