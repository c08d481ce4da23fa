"""Long work in a worker process of its own (issue 24: "long work off the script thread").

`call(work, check=...)` (or a `Worker` taken up across waits) forks the calling process, runs `work(progress)` in the child and returns its
result (or raises its exception) in the parent. The child is a copy of the parent at the moment of
the call: `work` may be any closure (nothing is pickled on the way in, and the data it reads are the
parent's pages, shared copy-on-write); only what comes back is pickled (the result, the progress
reports, and what `finish()` in the child returns, e.g. the entries the app's cache recorded).

The parent waits without holding the GIL (it polls the pipe every `_POLL_S` seconds): other threads,
e.g. the server's other sessions, run on meanwhile, and the work itself runs on another core. Between
polls the parent calls `check()`, which raises when the run is no longer wanted (the app: a superseded
script run or the user's Cancel); the child is then killed at once (SIGKILL), whatever it was doing, and
what `check` raised propagates. A child that dies (out of memory, a crash) raises `WorkerDied`.

Only where `fork` exists (Linux, macOS) and `COHORTSHIELD_WORKERS` is not "0": elsewhere, or nested
inside a worker, `work(progress)` runs in the caller's thread (`enabled()`), the engine's cancellation
at its progress calls still holding. Torch, if the parent imported it, is told to use one thread in the
child: GNU OpenMP's thread pool does not survive a fork.
"""

from __future__ import annotations

import gc
import os
import pickle
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from engine.io.progress import Progress
from engine.scale.pool import WorkerDied, pickled_back

T = TypeVar("T")
_POLL_S = 0.05
_SEND_EVERY_S = 0.1  # progress reports from the child, at most this often (the last one always)
_IN_CHILD = False


def _no_progress(fraction: float, message: str = "") -> None:
    pass


def enabled() -> bool:
    """Whether `call` runs its work in a child process here."""
    return hasattr(os, "fork") and os.environ.get("COHORTSHIELD_WORKERS", "1") != "0" and not _IN_CHILD


class Worker:
    """One worker process running `work(progress)`, started at construction (`enabled()` must hold).

    `wait(progress, check)` waits for its result, drawing its reports with `progress` and calling
    `check()` between polls; what `check` raises propagates and leaves the worker running, so a later
    `wait` can take it up again (the app: a rerun for the same job). `kill()` stops it at once.
    `in_child()` runs first in the child; `finish()` last, after `work` succeeded, and its value is
    `extra` once the result came back. `fraction` and `message` are its last report."""

    def __init__(
        self,
        work: Callable[[Progress], Any],
        *,
        in_child: Callable[[], None] | None = None,
        finish: Callable[[], Any] | None = None,
    ) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        self._conn, child_end = ctx.Pipe(duplex=False)
        self._file = _result_file()
        self._process = ctx.Process(
            target=_child, args=(work, child_end, self._file, in_child, finish), daemon=True
        )
        self._process.start()
        child_end.close()
        # the pipe and the result file are closed once, whichever thread ends the worker first (a run
        # finishing in the background and a Cancel: `Connection.close` alone let both close one fd)
        self._release_lock = threading.Lock()
        self.fraction, self.message = 0.0, ""
        self.extra: Any = None

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def alive(self) -> bool:
        return self._process.is_alive()

    def readable(self) -> bool:
        """Whether `wait` has something to wait for: the process runs, or it ended leaving what it sent
        (its result) unread in the pipe; False once killed, reaped or read."""
        if self.alive():
            return True
        with self._release_lock:
            try:
                return not self._conn.closed and self._conn.poll(0)
            except (OSError, ValueError):
                return False

    def _died(self) -> WorkerDied:
        self._process.join(1.0)
        self.kill()
        return WorkerDied(f"the worker process ended without a result (exit code {self._process.exitcode})")

    def wait(self, progress: Progress | None = None, check: Callable[[], None] | None = None) -> Any:
        """Its result (its exception raised here), reports drawn by `progress` meanwhile."""
        report: Progress = progress or _no_progress
        if self.message or self.fraction:
            report(self.fraction, self.message)  # taken up again: where it is
        while True:
            if check is not None:
                check()
            if not self._conn.poll(_POLL_S):
                if not self._process.is_alive() and not self._conn.poll(0):
                    raise self._died()
                continue
            try:
                kind, *payload = self._conn.recv()
            except EOFError:
                raise self._died() from None
            if kind == "progress":
                self.fraction, self.message = payload
                report(*payload)
                continue
            if kind == "in file":  # the result, in the result file (`_result_file`)
                assert self._file is not None
                kind, *payload = pickle.loads(_read_file(self._file, payload[0]))
            self._process.join(5.0)
            self._release()
            if kind == "done":
                value, self.extra = payload
                return value
            exc, text = payload  # "error"
            if isinstance(exc, BaseException):
                exc.add_note(f"raised in the worker process:\n{text}")  # the bug's log keeps where
                raise exc
            raise RuntimeError(f"the worker's run failed:\n{text}")

    def kill(self) -> None:
        """Stop it at once (SIGKILL), wherever it is, and reap it."""
        if self._process.is_alive():
            self._process.kill()
        self._process.join(5.0)
        self._release()

    def _release(self) -> None:
        """Close the pipe and the result file, once, under the lock (`__init__`)."""
        with self._release_lock:
            self._conn.close()
            if self._file is not None:
                os.close(self._file)
                self._file = None


def call(
    work: Callable[[Progress], T],
    *,
    progress: Progress | None = None,
    check: Callable[[], None] | None = None,
    in_child: Callable[[], None] | None = None,
    finish: Callable[[], Any] | None = None,
    on_finish: Callable[[Any], None] | None = None,
) -> T:
    """`work(progress)` in a forked child; its result here.

    `progress(fraction, message)` is called here with the child's reports; `check()` between polls
    (what it raises kills the child and propagates); `in_child()` runs first in the child (e.g. to
    start recording what a cache stores); `finish()` runs last in the child, after `work`, and its
    value is given to `on_finish` here before the result is returned (only when `work` succeeded)."""
    report: Progress = progress or _no_progress
    if not enabled():
        value = work(report)
        if on_finish is not None and finish is not None:
            on_finish(finish())
        return value
    worker = Worker(work, in_child=in_child, finish=finish)
    try:
        value = worker.wait(report, check)
    finally:
        worker.kill()
    if on_finish is not None and worker.extra is not None:
        on_finish(worker.extra)
    return value


def _child(
    work: Callable[[Progress], Any],
    conn: Any,
    file: int | None,
    in_child: Callable | None,
    finish: Callable | None,
) -> None:
    global _IN_CHILD
    _IN_CHILD = True
    # the inherited heap is the parent's: a collection would walk (and so copy, page by page) all of it;
    # frozen, the collector sees only what the child makes (about 0.2 s of an LDA run on the sample)
    gc.freeze()
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    last = [0.0]

    def progress(fraction: float, message: str = "") -> None:
        now = time.monotonic()
        if now - last[0] >= _SEND_EVERY_S or fraction >= 1.0:
            last[0] = now
            conn.send(("progress", float(fraction), str(message)))

    try:
        if in_child is not None:
            in_child()
        value = work(progress)
        extra = finish() if finish is not None else None
        data = pickled_back("done", value, extra)
        if file is None:
            conn.send_bytes(data)
        else:
            _write_all(file, data)
            conn.send(("in file", len(data)))
    except BaseException as exc:  # every failure goes back to the parent, which raises it
        text = traceback.format_exc()
        try:
            pickle.dumps(exc)
            conn.send(("error", exc, text))
        except Exception:  # an exception that cannot be pickled: its text
            conn.send(("error", None, text))
    finally:
        conn.close()
        os._exit(0)  # no atexit handlers, no flushing of the parent's copied buffers


# ------------------------------------------------------------------------------ the result's way back
def _result_file() -> int | None:
    """A memory-backed file (Linux `memfd_create`) made before a fork, which the child writes its
    pickled result to and this process reads in one call; None where there is none (the result
    then crosses the pipe). The Heatherly comparison's 11-16 MB took about 30 ms through a pipe,
    which carries 64 KB at a time."""
    create = getattr(os, "memfd_create", None)
    if create is None:
        return None
    try:
        return create("cohortshield-result")
    except OSError:
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_file(fd: int, size: int) -> bytes:
    """The `size` bytes a child wrote to the result file `fd`, from its start."""
    parts, at = [], 0
    while at < size:
        part = os.pread(fd, size - at, at)
        if not part:
            raise WorkerDied(f"the result file ended at {at} of {size} bytes")
        parts.append(part)
        at += len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)
