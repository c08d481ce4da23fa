"""The one progress protocol of the engine (issue 24): `progress(fraction, message)`.

`fraction` runs from 0.0 to 1.0 and `message` says, in a few words, what is being done. Every engine
function that reports progress takes `progress: Progress | None` and calls it in the caller's thread
between steps; whatever it raises propagates, which is how the app cancels a run (ui/progress.py,
tests/test_cancel.py). Here in `engine/io`, beside `errors`, as a contract between the engine and
its callers (the app, the CLI) that every engine package may import without a cycle.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[float, str], None]

__all__ = ["Progress"]
