"""The server process's heap after its first run with data (issue 24: every interaction within a second).

A Streamlit server holds some 200,000 objects the cyclic garbage collector tracks once the app has
imported its libraries and loaded the sample. Python's oldest-generation collection walks all of them:
on the sample it took 0.14 s, and it fell on about one page run in three (measured on the Heatherly
completion pass: 0.70 s runs, and 0.84-0.89 s runs with that collection in them). Those objects live
as long as the server (modules, classes, the shipped sample), so `settle()` moves them, once, to the
collector's permanent generation (`gc.freeze`): later collections walk only what was made after.

Objects are still freed by their reference counts as before; what freezing gives up is collecting a
reference cycle among the frozen objects that later becomes garbage. That is bounded by what exists at
the first run (nothing is collected first: a full collection there would cost the first run the same
0.14 s), and it happens once per process.
"""

from __future__ import annotations

import gc
import threading

_LOCK = threading.Lock()
_SETTLED: list[bool] = []


def settle(data_loaded: bool) -> bool:
    """After a script run: freeze the heap the first time a run ends with data loaded (the imports
    done, the shipped sample in the server's cache). Returns whether this call froze it."""
    if not data_loaded or _SETTLED:
        return False
    with _LOCK:
        if _SETTLED:
            return False
        gc.freeze()
        _SETTLED.append(True)
        return True


def settled() -> bool:
    """Whether this process's heap was frozen by `settle`."""
    return bool(_SETTLED)
