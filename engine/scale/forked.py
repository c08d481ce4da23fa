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
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from engine import memo
from engine.io.progress import Progress
from engine.risk import THREADS_ENV
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


# ------------------------------------------------------------------------------ fan-out
_IN_FAN_OUT = False
_PR_SET_PDEATHSIG = 1


def fan_out_enabled() -> bool:
    """Whether `fan_out` forks here: fork exists, `COHORTSHIELD_WORKERS` is not "0", the machine has
    more than one core, and this is not itself a fan-out child (a worker may fan out: it is the
    point, since the worker is the app's one process for a job)."""
    return (
        hasattr(os, "fork")
        and os.environ.get("COHORTSHIELD_WORKERS", "1") != "0"
        and (os.cpu_count() or 1) > 1
        and not _IN_FAN_OUT
    )


def _die_with_parent(parent: int) -> None:
    """Linux: this child is killed when its parent dies (a cancelled worker is SIGKILLed, and its
    fan-out children must not run on for nobody)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the child ends with its work
        pass
    if os.getppid() != parent:  # the parent died before the request above
        os._exit(1)


def _fan_child(calls: Sequence[Callable[[], Any]], fd: int, file: int | None, parent: int) -> None:
    """Run `calls` in order in this (forked) child, stopping at the first exception, and send back
    ("done", results, memo entries stored) or ("error", results so far, [], exception, traceback),
    pickled: in the result `file` (`_result_file`) with its size on the pipe `fd`, or on the pipe."""
    global _IN_FAN_OUT
    _IN_FAN_OUT = True
    gc.freeze()  # as `_child`: the inherited heap is not walked (nor copied) by the collector
    _die_with_parent(parent)
    os.environ[THREADS_ENV] = "1"  # the cores are the fan-out's processes' (engine.risk.thread_count)
    try:
        results: list[Any] = []
        try:
            with memo.recording() as stored:
                for call in calls:
                    results.append(call())
            data = pickled_back("done", results, stored)
        except BaseException as exc:
            text = traceback.format_exc()
            try:
                data = pickle.dumps(("error", results, [], exc, text), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                data = pickle.dumps(("error", [], [], None, text), protocol=pickle.HIGHEST_PROTOCOL)
        if file is None:
            _write_all(fd, _IN_PIPE + data)
        else:
            _write_all(file, data)
            _write_all(fd, _IN_FILE + len(data).to_bytes(8, "little"))
    finally:
        os._exit(0)


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


_IN_FILE = b"F"  # what a fan-out child writes to its pipe: _IN_FILE + the result's size, or _IN_PIPE + it
_IN_PIPE = b"P"


def _collect(pid: int, fd: int, file: int | None) -> tuple[list[Any], BaseException | None]:
    """What a fan-out child sent back (`_fan_child`): its results in order, and the exception that
    stopped it (with where it was raised as a note) or None. The memo entries it stored are stored
    here (`engine.memo.replay`)."""
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
        if chunks[0][:1] == _IN_FILE and sum(map(len, chunks)) == 9:
            break  # the size of the result in the file: no need to wait for the child's exit
    sent = b"".join(chunks)
    if not sent:
        os.waitpid(pid, 0)
        return [], WorkerDied("a fan-out process ended without a result")
    if sent[:1] == _IN_FILE:
        assert file is not None
        sent = _read_file(file, int.from_bytes(sent[1:9], "little"))
    else:
        sent = sent[1:]
    kind, results, stored, *failure = pickle.loads(sent)
    os.waitpid(pid, 0)  # after reading: the child's exit (unmapping its copy of this heap) overlapped
    memo.replay(stored)
    if kind == "done":
        return results, None
    exc, text = failure
    if not isinstance(exc, BaseException):
        return results, RuntimeError(f"a fan-out process failed:\n{text}")
    exc.add_note(f"raised in a fan-out process:\n{text}")
    return results, exc


def fan_out(calls: Sequence[Callable[[], T]]) -> list[T]:
    """`[c() for c in calls]`, the calls after the first in forked children while this process runs
    the first (`fan_out_enabled()`; else one after the other, here). One process per core at most:
    this one and up to (cores - 1) children, child j running calls 1 + j, 1 + j + n, ... in order
    (n children), so the cores are not shared among more processes than they can run. Each child is
    a copy of this process at the fork (nothing is pickled on the way in); its results come back
    pickled. The results, and the exception raised (that of the earliest call in `calls` that
    raised), are those of the calls run here one after the other. The children are killed if this
    process stops waiting (an exception, a cancellation) or dies."""
    if len(calls) <= 1 or not fan_out_enabled():
        return [c() for c in calls]
    n = min(len(calls) - 1, max((os.cpu_count() or 2) - 1, 1))
    shares = [list(range(1 + j, len(calls), n)) for j in range(n)]
    parent = os.getpid()
    kids: list[tuple[int, int, int | None]] = []
    try:
        for share in shares:
            r, w = os.pipe()
            file = _result_file()
            pid = os.fork()
            if pid == 0:  # pragma: no cover (the child's coverage is not collected)
                os.close(r)
                _fan_child([calls[i] for i in share], w, file, parent)
            os.close(w)
            kids.append((pid, r, file))
        out: dict[int, Any] = {0: calls[0]()}
        failed: dict[int, BaseException] = {}
        while kids:
            pid, r, file = kids[0]
            results, exc = _collect(pid, r, file)
            _close(r, file)
            kids.pop(0)
            share = shares[len(shares) - len(kids) - 1]
            out.update(zip(share, results, strict=False))
            if exc is not None:
                failed[share[len(results)] if len(results) < len(share) else share[-1]] = exc
        if failed:
            raise failed[min(failed)]
        return [out[i] for i in range(len(calls))]
    finally:
        for pid, r, file in kids:  # still running: this process stopped waiting
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            _close(r, file)


def _close(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)
