"""Every file a source opens, checked against the data roots when it is opened (issue #40, finding 1).

The app checks the path a user types (`engine.io.deployment.server_path`), but a folder source opens
other files: an OMOP or i2b2 folder its tables, a MEDS root its shards and splits. Any of them may be a
link out of the root. While the app reads a source it holds `confined()`; every reader opens its files
through `opened()`, which resolves each one (links followed, `..` removed) and refuses one outside the
roots with a `PathRefused` naming the file and the roots. The reader then opens the resolved path, so a
link is not followed a second time. Outside `confined()` (the CLI, the shipped sample) paths are free, as
the CLI runs as its user; they are still resolved.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from engine.io.deployment import data_roots, refuse_outside

_ROOTS: ContextVar[tuple[Path, ...] | None] = ContextVar("cohortshield_data_roots", default=None)


@contextmanager
def confined(roots: tuple[Path, ...] | None = None) -> Iterator[None]:
    """Within the block, `opened` refuses files outside `roots` (default: the configured data roots)."""
    token = _ROOTS.set(data_roots() if roots is None else roots)
    try:
        yield
    finally:
        _ROOTS.reset(token)


def opened(path: str | Path, shown: str | None = None) -> Path:
    """The path to open, resolved; within `confined()` a `PathRefused` when it lies outside the roots,
    naming it as `shown` (default: the path as given)."""
    resolved = Path(path).resolve()
    roots = _ROOTS.get()
    if roots is not None:
        refuse_outside(resolved, shown or str(path), roots)
    return resolved


__all__ = ["confined", "opened"]
