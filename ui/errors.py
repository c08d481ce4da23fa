"""Exceptions shown in the app (issue 24, "Errors"): the one place a page turns one into a message.

A `UserError` (engine/io/errors.py: the user's file, setting or data; its subclasses StudyError,
SettingsError, DataError, ReportError, ...) is shown as its own message, literally. Anything else is a
bug (a `ReleaseInvariantError`, a KeyError, ...): it is logged with its traceback under a short
reference id, and the page shows only "Something went wrong (reference 3f2a9c1b); the details are in
the server log", never the exception's text (it may quote patient data or the code's internals).

Every page catches with `except Exception as exc: errors.show(exc)` (or takes the text with
`errors.message(exc)`); the method views do it in one place, `ui.method_view.drive` / `guarded`. Streamlit's stop and rerun are BaseExceptions and pass through.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import streamlit as st

from engine.io.errors import UserError
from ui import literal

log = logging.getLogger("cohortshield.ui")


def is_user_error(exc: BaseException) -> bool:
    return isinstance(exc, UserError)


def _user_text(exc: UserError) -> str:
    if isinstance(exc, KeyError) and exc.args:  # a KeyError's str() is the repr of its message
        return str(exc.args[0])
    return str(exc)


def reference(exc: BaseException) -> str:
    """Log a bug with its traceback under a new short reference id, and return the id."""
    ref = uuid.uuid4().hex[:8]
    log.error("unexpected error (reference %s)", ref, exc_info=(type(exc), exc, exc.__traceback__))
    return ref


def message(exc: BaseException) -> str:
    """What the user reads of `exc` (plain text, not Markdown): a UserError's own message; for
    anything else a generic message with the reference under which it was logged."""
    if isinstance(exc, UserError):
        return _user_text(exc)
    return f"Something went wrong (reference {reference(exc)}); the details are in the server log."


def show(exc: BaseException, where: Any = st, *, warning: bool = False) -> None:
    """An error box (a warning with `warning`) of `message(exc)`, shown literally."""
    (literal.warning if warning else literal.error)(message(exc), where)


__all__ = ["is_user_error", "message", "reference", "show"]
