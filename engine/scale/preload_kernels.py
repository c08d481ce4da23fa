"""The numba kernels' machine code loaded once per process (`engine.anonymize.warm.load_kernels`), for the
app's pool (ui/worker.py): importing this module loads them, and the pool's fork server imports it, so
every worker forked from it starts with them instead of loading numba's target and each kernel again
(about 0.2-0.5 s of every UGACLIP / ACLIP, LDA and GCCens run, issue 24). The fork server is a clean,
single-threaded interpreter: forking it after the warm-up is what forking the server after its preload
was, without the server's threads and locks (issue 38). A process's fork server is shared by every pool
it makes and keeps the preload of the first: `ensure` is also each app worker's warm-up, a no-op where
the fork server has loaded them.

A failure (no shipped sample on this machine, say) is logged, never raised: the fork server must start,
and each worker then loads the kernels at their first use."""

from __future__ import annotations

import contextvars
import logging

_LOADED: list[bool] = []


def ensure() -> None:
    """Load the kernels in this process, once (in an empty context: no session's memo store)."""
    if _LOADED:
        return
    _LOADED.append(True)
    try:
        from engine.anonymize.warm import load_kernels

        contextvars.Context().run(load_kernels)
    except Exception:
        logging.getLogger(__name__).warning("the kernels were not loaded ahead", exc_info=True)


ensure()
