"""This script run as Streamlit runs it: its stop/rerun check.

`yield_check()` is Streamlit's check of whether this script run was superseded or stopped (it raises
then), for loops that make no Streamlit call of their own (ui/progress.py, the shared cache's waits,
ui/admission.py); `is_rerun(exc)` tells a rerun's exception from a stop.
"""

from __future__ import annotations

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
