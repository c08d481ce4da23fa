"""Imported once by the app pool's fork server (ui/worker.py): the numba kernels' machine code loaded
there (`engine.anonymize.warm.load_kernels`), so every worker forked from it starts with them instead of
loading numba's target and each kernel again (about 0.2-0.5 s of every UGACLIP / ACLIP, LDA and GCCens
run, issue 24). The fork server is a clean, single-threaded interpreter: forking it after the warm-up is
what forking the server after its preload was, without the server's threads and locks (issue 38).

A failure (no shipped sample on this machine, say) is logged, never raised: the fork server must start,
and each worker then loads the kernels at their first use."""

from __future__ import annotations

import contextvars
import logging

try:
    from engine.anonymize.warm import load_kernels

    contextvars.Context().run(load_kernels)  # an empty context: no session's memo store
except Exception:
    logging.getLogger(__name__).warning("the kernels were not loaded ahead", exc_info=True)
