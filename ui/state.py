"""The one owner of session state (issue 24): every session-state key is declared here, once, with its
owner (the module that writes it), its default and whether it is kept across pages.

Each module declares its keys at import (`declare`), next to the constants that name them; a key
declared twice, by the same or another module, is an error at import. Two kinds:

- **kept** (`declare(owner, kept={...})`): a widget's value that must survive a run that does not draw
  the widget (another page, another method). Streamlit forgets such a value, so `keep()`, the one
  "keep" of the app, called by the sidebar before anything else on every run, re-assigns every kept
  key already set and seeds the static defaults once. A default of `LAZY` depends on the data: the
  view seeds it (`ui.persist.seed`) or the widget's first draw does.
- **held** (`declare(owner, held={...})`): what the app holds between runs (the study, memos, one-shot
  hand-overs between pages). `ABSENT` means the owner sets it when it has something to hold; `get`
  returns the declared default for a key not set.

A family of keys made at run time (a widget per release, per k) is declared by its prefix
(`declare(owner, prefixes=...)`). `tests/test_state_owner.py` walks every page and method and checks
that every key in session state is declared here or belongs to a widget drawn in that run, and that
only its owner writes a declared key.

`running()` marks a script run (app.py wraps each one in it): inside, `in_a_run()` is true and
`session()` is this session's own token, a random id kept in session state (`_SESSION`). That is the
app's own record of where it runs, read through `st.session_state` only, not Streamlit's run context
(issue 38, finding 4). The mark is a context variable, so per thread, as Streamlit's context is: a
thread started from a run, or code run outside app.py (the command line, unit tests), is outside; so
are widget callbacks, which Streamlit calls before the script, and would be a fragment's rerun, which
runs the fragment alone (a fragment of the app enters `running()` itself).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import streamlit as st

LAZY = object()  # kept: a default that depends on the data (seeded by the view or the widget's first draw)
ABSENT = object()  # held: no default; the owner sets the key when it has something to hold


@dataclass(frozen=True)
class Key:
    """One declared session-state key (or a family of keys, by prefix)."""

    name: str
    owner: str  # the module that writes it
    default: Any
    kept: bool  # re-assigned on every run so a widget not drawn keeps its value
    prefix: bool = False


DECLARED: dict[str, Key] = {}
PREFIXES: dict[str, Key] = {}


class StateDeclarationError(RuntimeError):
    """A key declared twice: a programming error, raised at import."""


def _add(key: Key) -> None:
    table = PREFIXES if key.prefix else DECLARED
    held = table.get(key.name)
    if held is not None and held != key:
        raise StateDeclarationError(
            f"session-state key {key.name!r} declared by {key.owner} was already declared by {held.owner}"
        )
    table[key.name] = key


def declare(
    owner: str,
    *,
    kept: Mapping[str, Any] | None = None,
    held: Mapping[str, Any] | None = None,
    prefixes: Iterable[str] = (),
) -> None:
    """Declare `owner`'s keys (see the module docstring). Declaring the same key again with the same
    owner, default and kind is harmless (a module imported twice under AppTest); anything else is an
    error. Kept keys declared during a run (a module imported on its page's first visit, after this
    run's `keep`) are seeded at once."""
    for name, default in (kept or {}).items():
        if default is ABSENT:
            raise StateDeclarationError(f"kept key {name!r} of {owner}: a static default or LAZY, not ABSENT")
        _add(Key(name, owner, default, kept=True))
    if kept and in_a_run():  # a module imported during a run (a page's first visit, after `keep`)
        for name, default in kept.items():
            if name not in st.session_state and default is not LAZY:
                st.session_state[name] = default
    for name, default in (held or {}).items():
        _add(Key(name, owner, default, kept=False))
    for name in prefixes:
        _add(Key(name, owner, ABSENT, kept=False, prefix=True))


_SESSION = "_session_token"  # this session's own id (`running`): admission's place in the queue
_RUN: ContextVar[str | None] = ContextVar("ui_state_run", default=None)  # the run's session token


@contextmanager
def running() -> Iterator[str]:
    """Mark the block as a script run of this session (app.py, around each run); yields the session's
    token, made on its first run."""
    token = st.session_state.get(_SESSION)
    if not isinstance(token, str):
        token = st.session_state[_SESSION] = secrets.token_hex(16)
    mark = _RUN.set(token)
    try:
        yield token
    finally:
        _RUN.reset(mark)


def in_a_run() -> bool:
    """Whether this thread is inside a script run of the app (`running`)."""
    return _RUN.get() is not None


def session() -> str | None:
    """The token of the session whose script run this thread is in (None outside one)."""
    return _RUN.get()


declare(__name__, held={_SESSION: ABSENT})


def declared(name: str) -> Key | None:
    """The declaration of `name` (its own, or its family's by prefix), None when undeclared."""
    key = DECLARED.get(name)
    if key is not None:
        return key
    for prefix, family in PREFIXES.items():
        if name.startswith(prefix):
            return family
    return None


def get(name: str) -> Any:
    """The key's value, or its declared default when not set (None for `ABSENT` and `LAZY`)."""
    key = DECLARED.get(name)
    if key is None:
        raise KeyError(f"session-state key {name!r} is not declared (ui/state.py)")
    if name in st.session_state:
        return st.session_state[name]
    return None if key.default is ABSENT or key.default is LAZY else key.default


def keep() -> None:
    """The one keep: seed each kept key's static default once; re-assign every kept key already set,
    so Streamlit keeps a widget's value on a run that does not draw it."""
    for name, key in DECLARED.items():
        if not key.kept:
            continue
        if name in st.session_state:
            st.session_state[name] = st.session_state[name]
        elif key.default is not LAZY:
            st.session_state[name] = key.default


def kept_keys() -> list[str]:
    """Every kept key (the choices a saved session holds: `ui.resume`)."""
    return [name for name, key in DECLARED.items() if key.kept]


def kept_defaults() -> dict[str, Any]:
    """Every kept key with a static default, and that default."""
    return {name: key.default for name, key in DECLARED.items() if key.kept and key.default is not LAZY}


def restore(values: Mapping[str, Any]) -> None:
    """Put back a saved session's values (`ui.resume`), each under its declared key as its owner had
    it; an undeclared key is refused (a saved session of an older version: its value is not used)."""
    for name, value in values.items():
        if declared(name) is None:
            raise KeyError(f"session-state key {name!r} is not declared (ui/state.py)")
        st.session_state[name] = value
