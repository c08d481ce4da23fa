"""Long work in worker processes the server does not fork (issue 38, finding 4): `Pool`, `call`.

Design (the app's long runs and every fan-out; nothing forks the calling process):
- The workers come from a clean interpreter: `multiprocessing.get_context("forkserver")` ("spawn"
  where there is no fork server), the fork server preloading the engine's kernels' modules (`KERNELS`:
  numba, the compiled kernels' dispatchers, scipy.stats) once, so each worker starts with them
  imported; a kernel's machine code is loaded once per worker (at its first use, or at its start by
  the pool's `warm`, e.g. `engine.anonymize.warm.load_kernels`, given by the caller), not per job.
  No process of the pool is a fork of the caller: a worker's parent is the fork server.
- A worker is kept and serves one job at a time (`Job`); a job that ended gives it back to the pool
  (at most `size` idle ones are kept; more are started when every one is busy, so a job never queues).
  Cancel kills the job's worker (SIGKILL, wherever the engine is), and a fresh one replaces it when
  next needed; a worker that dies (out of memory, a crash) raises `WorkerDied`.
- The job is a picklable description of the work: `work(progress)`, pickled with cloudpickle (a
  closure is pickled by value, a module's function by reference). Progress reports (at most every
  `_SEND_EVERY_S`, the last always), then the result or the exception (with its traceback as a note)
  come back over the worker's pipe, pickled.
- The data are handed over once per dataset, not per job: a `Records` the job mentions is pickled as a
  handle (`Handle`); the first time, its numeric arrays are copied into one shared memory segment
  (`multiprocessing.shared_memory`) with its text arrays (ids, vocabulary, visit labels) pickled at
  its end, keyed by the records' fingerprint. A worker maps the segment read-only (its arrays are
  views of the mapping: zero-copy, and a write raises) and unpickles the text once, keeping the
  records by fingerprint while it lives (`_HELD_BY_WORKER` of them), so the next job mentioning them
  costs a dictionary lookup. The pool keeps at most `_EXPORTED` segments (the oldest unlinked).
  A data frame over `_FRAME_BYTES` (the lab orders: 282 MB pickled on the shipped sample) goes the same
  way, once per frame object, as an Arrow IPC stream read once per worker (`FrameHandle`); one that
  Arrow would not give back as it is is pickled with the job.
- What a job memoized (`engine.memo`) is recorded in the worker, in a store of the job's own (so one
  session's entries never serve another's job), sent back with the result and stored in the caller's
  scope (`engine.memo.replay`).
- A job may ask the caller while it runs (`ask(request)`): the caller's `answer(request)` (given to
  `Pool.submit`) is sent back while the caller waits on the job, pickled as jobs are. The app answers
  with the cache entries the session already holds, so a worker never computes again what the server
  holds (ui/worker.py). `mark(obj)` (also given to `submit`) names the objects the worker must know as
  the caller does: `dumps` sends them as a list after the job, references to the same objects
  (one pickler, one memo), and the job gets them (`received`).
- `fan_out(calls)` runs the calls after the first as jobs (one per core but this one's, each running
  its share of them in order, counting with one kernel thread) while this process runs the first,
  for calls that can be pickled (what `forked.fan_out` did by forking). A pool job may fan out: its
  worker's own pool (`default`, made at its first fan-out and kept for the worker's life; the records
  it came with handed on by the same handle, those it made pickled whole: no segment of a worker's
  own, which would outlive it when a Cancel kills it) runs the calls; a fan-out inside a fan-out's call
  runs in place. So the workers are not daemonic (multiprocessing forbids a daemonic process to start any):
  this process kills them at its exit (`_kill_all`, before multiprocessing's exit handler would wait
  for them), a worker kills its own at its end, and a worker ends as soon as the process that started
  it does (`_end_with_parent`), so none outlives its pool's process, however that one ended.
- `os.fork` is never called here (tests/test_architecture.py); the code runs on Python 3.12 as well.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import logging
import mmap
import os
import pickle
import sys
import threading
import time
import traceback
import types
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from functools import partial
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from engine import memo
from engine.io.progress import Progress
from engine.records import Records
from engine.risk import THREADS_ENV

T = TypeVar("T")
_POLL_S = 0.05
_SEND_EVERY_S = 0.1  # progress reports from the worker, at most this often (the last one always)
_EXPORTED = 8  # shared segments a pool keeps (one per dataset handed over), the oldest unlinked
_HELD_BY_WORKER = 8  # records a worker keeps mapped, by fingerprint
# imported once in the fork server, so every worker starts with them (what `ui.worker.PRELOAD` imports)
KERNELS = (
    "engine.anonymize.censor_kernel",
    "engine.anonymize.profiles_kernel",
    "engine.anonymize.alignment_kernel",
    "engine.scale.trie",
    "engine.utility.membership_kernel",
    "scipy.stats",
)


class WorkerDied(RuntimeError):
    """The worker process ended without a result (killed by the system, out of memory, a crash)."""


def _no_progress(fraction: float, message: str = "") -> None:
    pass


# ------------------------------------------------------------------------ the data, handed over once
@dataclass(frozen=True)
class Handle:
    """Where a `Records` lies in shared memory: the segment's name, the records' fingerprint, each
    numeric field's (name, dtype, shape, offset), and the (offset, length) of the text fields pickled."""

    segment: str
    fingerprint: str
    arrays: tuple[tuple[str, str, tuple[int, ...], int], ...]
    text: tuple[int, int]
    has_visits: bool
    size: int


def _layout(records: Records) -> tuple[list[tuple[str, np.ndarray]], bytes]:
    """The records' numeric arrays (name, contiguous array) and their text fields pickled."""
    numeric, text = [], {}
    for f in fields(Records):
        value = getattr(records, f.name)
        if isinstance(value, np.ndarray) and value.dtype != object:
            numeric.append((f.name, np.ascontiguousarray(value)))
        elif isinstance(value, np.ndarray):
            text[f.name] = value
    return numeric, pickle.dumps(text, protocol=pickle.HIGHEST_PROTOCOL)


@dataclass(frozen=True)
class FrameHandle:
    """Where a data frame lies in shared memory, as an Arrow IPC stream (`Exports.frame`)."""

    segment: str
    size: int


def _roundtrips(frame: pd.DataFrame, table: Any) -> bool:
    """Whether `table` (the frame in Arrow) gives back the frame's columns, dtypes and index."""
    back = table.to_pandas()
    return (
        list(back.columns) == list(frame.columns)
        and back.dtypes.equals(frame.dtypes)
        and back.index.equals(frame.index)
        and back.index.dtype == frame.index.dtype
    )


class Exports:
    """The shared segments of one pool: one per dataset (by fingerprint), at most `_EXPORTED`; one per
    large data frame (by object: the lab orders, the genotypes), at most `_EXPORTED` too."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, tuple[Any, Handle]] = OrderedDict()
        self._frames: OrderedDict[int, tuple[Any, Any, FrameHandle | None]] = OrderedDict()
        self._lock = threading.RLock()

    def frame(self, frame: pd.DataFrame) -> FrameHandle | None:
        """The frame's handle, its segment made the first time this frame object is asked for (frames
        are never modified by their users); None when Arrow does not give it back as it is (a column
        of mixed objects, say): it is then pickled with the job."""
        import weakref
        from multiprocessing import shared_memory

        import pyarrow as pa

        key = id(frame)
        with self._lock:
            held = self._frames.get(key)
            if held is not None and held[0]() is frame:
                self._frames.move_to_end(key)
                return held[2]
            if held is not None:  # another frame that had this id, gone since
                self._frames.pop(key)
                if held[1] is not None:
                    self._unlink(held[1])
            try:
                table = pa.Table.from_pandas(frame, preserve_index=True)
                fits = _roundtrips(frame, table)
            except (pa.ArrowException, TypeError, ValueError):
                fits = False
            gone_with = functools.partial(self._frame_gone, key)  # its segment goes with the frame
            if not fits:
                self._frames[key] = (weakref.ref(frame, gone_with), None, None)
                return None
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            data = sink.getvalue()
            segment = shared_memory.SharedMemory(create=True, size=max(data.size, 1))
            assert segment.buf is not None
            segment.buf[: data.size] = memoryview(data).cast("B")
            handle = FrameHandle(segment.name, data.size)
            self._frames[key] = (weakref.ref(frame, gone_with), segment, handle)
            while len(self._frames) > _EXPORTED:
                _, gone, _ = self._frames.popitem(last=False)[1]
                if gone is not None:
                    self._unlink(gone)
            return handle

    def _frame_gone(self, key: int, ref: Any) -> None:
        """A frame exported here was freed: its segment is unlinked (a worker that mapped it keeps its
        mapping). Called by the garbage collector, possibly inside `frame` (the lock is re-entrant)."""
        with self._lock:
            held = self._frames.get(key)
            if held is None or held[0] is not ref:
                return
            self._frames.pop(key)
            if held[1] is not None:
                self._unlink(held[1])

    def handle(self, records: Records) -> Handle:
        """The records' handle, their segment made the first time they are asked for."""
        from multiprocessing import shared_memory

        key = records.fingerprint
        with self._lock:
            if key in self._held:
                self._held.move_to_end(key)
                return self._held[key][1]
            numeric, text = _layout(records)
            at, arrays = 0, []
            for name, arr in numeric:
                at = -(-at // 64) * 64  # each array aligned on a cache line
                arrays.append((name, arr.dtype.str, arr.shape, at))
                at += arr.nbytes
            size = at + len(text)
            segment = shared_memory.SharedMemory(create=True, size=max(size, 1))
            buf = segment.buf
            assert buf is not None  # open until `_unlink`
            for (_, arr), (_, _, _, offset) in zip(numeric, arrays, strict=True):
                np.frombuffer(buf, arr.dtype, arr.size, offset)[:] = arr.reshape(-1)
            buf[at:size] = text
            handle = Handle(segment.name, key, tuple(arrays), (at, len(text)), records.has_visits, size)
            self._held[key] = (segment, handle)
            while len(self._held) > _EXPORTED:
                self._unlink(self._held.popitem(last=False)[1][0])
            return handle

    def close(self) -> None:
        """Unlink every segment (a worker that mapped one keeps its mapping)."""
        with self._lock:
            while self._held:
                self._unlink(self._held.popitem()[1][0])
            while self._frames:
                segment = self._frames.popitem()[1][1]
                if segment is not None:
                    self._unlink(segment)

    @staticmethod
    def _unlink(segment: Any) -> None:
        segment.close()
        with contextlib.suppress(FileNotFoundError):  # unlinked already
            segment.unlink()


def _map(handle: Handle | FrameHandle) -> Any:
    """The segment mapped read-only in this process (Linux: its file under /dev/shm, never registered
    with the resource tracker, which would unlink it when this worker ends)."""
    path = f"/dev/shm/{handle.segment.lstrip('/')}"
    if os.path.exists(path):
        with open(path, "rb") as f:
            return mmap.mmap(f.fileno(), handle.size, access=mmap.ACCESS_READ)
    from multiprocessing import shared_memory  # elsewhere: attached (writable; the arrays are not)

    return shared_memory.SharedMemory(handle.segment)  # kept with the records (`_Held`): its buffer


class _Held:
    """In a worker: the records mapped so far, by fingerprint (`_HELD_BY_WORKER`, least recent out)."""

    def __init__(self) -> None:
        self.records: OrderedDict[str, Records] = OrderedDict()
        self.mappings: dict[str, Any] = {}
        self.frames: OrderedDict[str, tuple[pd.DataFrame, Any]] = OrderedDict()
        self.handles: dict[str, Handle] = {}

    def frame_of(self, handle: FrameHandle) -> pd.DataFrame:
        """The frame `handle` names, read from its segment once (its numeric columns may be views
        of the mapping, kept open with it)."""
        if handle.segment in self.frames:
            self.frames.move_to_end(handle.segment)
            return self.frames[handle.segment][0]
        import pyarrow as pa

        mapped = _map(handle)
        buf = mapped if isinstance(mapped, mmap.mmap) else mapped.buf
        frame = pa.ipc.open_stream(pa.py_buffer(buf)).read_all().to_pandas()
        self.frames[handle.segment] = (frame, mapped)
        while len(self.frames) > _HELD_BY_WORKER:
            self.frames.popitem(last=False)
        return frame

    def handle_of(self, records: Records) -> Handle | None:
        """The handle these records came by, while their segment exists (a fan-out inside a job
        hands them on as they came, not copied again into a segment of this worker's own)."""
        handle = self.handles.get(records.fingerprint) if records.__dict__.get("fingerprint") else None
        if handle is None or self.records.get(handle.fingerprint) is not records:
            return None
        return handle if os.path.exists(f"/dev/shm/{handle.segment.lstrip('/')}") else None

    def records_of(self, handle: Handle) -> Records:
        if handle.fingerprint in self.records:
            self.records.move_to_end(handle.fingerprint)
            return self.records[handle.fingerprint]
        mapped = _map(handle)
        buf = mapped if isinstance(mapped, mmap.mmap) else mapped.buf
        values: dict[str, Any] = {}
        for name, dtype, shape, offset in handle.arrays:
            arr = np.frombuffer(buf, np.dtype(dtype), int(np.prod(shape)), offset).reshape(shape)
            arr.flags.writeable = False
            values[name] = arr
        at, length = handle.text
        values.update(pickle.loads(memoryview(buf)[at : at + length]))
        records = Records(**values, has_visits=handle.has_visits)
        records.__dict__["fingerprint"] = handle.fingerprint  # known: not hashed again
        self.records[handle.fingerprint] = records
        self.mappings[handle.fingerprint] = mapped  # open as long as the records are held
        self.handles[handle.fingerprint] = handle
        while len(self.records) > _HELD_BY_WORKER:
            gone, _ = self.records.popitem(last=False)
            self.mappings.pop(gone)
            self.handles.pop(gone)
        return records


_WORKER: _Held | None = None  # set in a worker process only (`_serve`)


def _attach(handle: Handle) -> Records:
    """Unpickling a `Handle` in a worker: the records it names (mapped once per worker)."""
    if _WORKER is None:  # unpickled outside a worker (a test): held for this call only
        return _Held().records_of(handle)
    return _WORKER.records_of(handle)


def _attach_frame(handle: FrameHandle) -> pd.DataFrame:
    """Unpickling a `FrameHandle` in a worker: the frame it names (read once per worker)."""
    if _WORKER is None:  # unpickled outside a worker (a test): read for this call only
        return _Held().frame_of(handle)
    return _WORKER.frame_of(handle)


_FRAME_BYTES = 1 << 20  # a data frame larger than this goes through shared memory (`Exports.frame`)


def dumps(work: Any, exports: Exports, mark: Callable[[Any], bool] | None = None) -> bytes:
    """`work` pickled for a worker: by cloudpickle, each `Records` in it as its shared handle; then the
    list of the objects in it for which `mark(obj)` holds (`loads` gives them back as the same objects:
    one pickler, one memo), so that the worker knows them as the caller does (the app: the shipped
    sample's, shared by every session, `ui.cache.shipped`). In a worker (a job's fan-out): the records
    it came with by their handle, those it made and its frames whole (a segment made in a worker would
    outlive it when SIGKILLed)."""
    import cloudpickle

    marked: list[Any] = []

    class _Pickler(cloudpickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            if mark is not None and mark(obj):
                marked.append(obj)
            if type(obj) is Records:
                if _WORKER is None:
                    return _attach, (exports.handle(obj),)
                # a job's fan-out: the handle the records came by, else whole (a segment made in a
                # worker would outlive it when SIGKILLed)
                held = _WORKER.handle_of(obj)
                if held is not None:
                    return _attach, (held,)
            if (
                _WORKER is None
                and type(obj) is pd.DataFrame
                and obj.memory_usage(deep=False).sum() > _FRAME_BYTES
            ):
                handle = exports.frame(obj)
                if handle is not None:
                    return _attach_frame, (handle,)
            return super().reducer_override(obj)

    out = io.BytesIO()
    pickler = _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dump(work)
    pickler.dump(marked)  # the memo is kept between dumps: the marked objects are references
    return out.getvalue()


def loads(data: bytes) -> tuple[Any, list[Any]]:
    """What `dumps` wrote: the object and its marked objects (the same objects as inside it)."""
    unpickler = pickle.Unpickler(io.BytesIO(data))
    return unpickler.load(), unpickler.load()


class _NotAnswered:
    """What the caller answers to `ask` when it holds nothing for the request (pickled by name)."""

    def __reduce__(self) -> str:
        return "NOT_ANSWERED"


NOT_ANSWERED = _NotAnswered()


# ---------------------------------------------------------------------------------- the worker side
def pickled_back(kind: str, value: Any, entries: list | None) -> bytes:
    """(kind, value, entries) pickled once, to send back; when an entry (of a cache the worker
    recorded) cannot be pickled, with the entries that can (one left out is computed again if asked).
    What `value` cannot be pickled raises."""
    try:
        return pickle.dumps((kind, value, entries), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        if not entries:
            raise
    return pickle.dumps((kind, value, picklable_entries(entries)), protocol=pickle.HIGHEST_PROTOCOL)


def picklable_entries(entries: list) -> list:
    """The entries that can be pickled, in order."""
    out = []
    for entry in entries:
        try:
            pickle.dumps(entry)
        except Exception:
            continue
        out.append(entry)
    return out


def _failure(exc: BaseException) -> bytes:
    """("error", exc, its traceback) pickled; its text alone when the exception cannot be pickled."""
    text = traceback.format_exc()
    try:
        return pickle.dumps(("error", exc, text), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return pickle.dumps(("error", None, text), protocol=pickle.HIGHEST_PROTOCOL)


def _serve(conn: Any, warm: Callable[[], None] | None) -> None:
    """A worker's life: warm, then run the jobs sent on `conn` one at a time until it closes; then
    the workers of its own pool (a job's fan-out, `default`) are stopped."""
    global _WORKER
    _WORKER = _Held()
    _end_with_parent()
    try:
        if warm is not None:
            try:
                warm()
            except Exception:  # e.g. no shipped sample: each job loads what it uses
                logging.getLogger(__name__).warning("the worker's warm-up failed", exc_info=True)
        while True:
            try:
                data = conn.recv_bytes()
            except (EOFError, OSError):
                return
            conn.send_bytes(_run(data, conn))
    finally:
        for own in list(_DEFAULT):  # the pool of this worker's jobs' fan-outs
            own.close()
        _kill_all()


def _end_with_parent() -> None:
    """This worker ends (`os._exit`) as soon as the process that started it does, however it ended
    (SIGKILLed by a Cancel, out of memory): a thread waits on multiprocessing's parent sentinel, which
    only that process holds open. So no worker outlives its pool's process, down a job's fan-out's
    workers (the workers are not daemonic, so that a job may start its own, `default`)."""
    import multiprocessing
    from multiprocessing.connection import wait

    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:
        return

    def watch() -> None:
        wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="pool: end with the parent", daemon=True).start()


_ASKING: list[tuple[Any, Any]] = []  # in a worker, while a job runs: (its pipe, the job)


def ask(request: Any) -> Any:
    """In a job: the caller's answer to `request` (`Pool.submit(answer=...)`; e.g. a cache entry the
    caller holds, so the worker does not compute it again), `NOT_ANSWERED` when it has none or this
    is not a pool job. The job waits for the answer: the caller answers while it waits for the job."""
    if not _ASKING:
        return NOT_ANSWERED
    conn, work = _ASKING[-1]
    conn.send(("ask", request))
    value, marked = loads(conn.recv_bytes())
    _hand_marked(work, marked)
    return value


def _hand_marked(work: Any, marked: list[Any]) -> None:
    """Give the job the objects the caller marked (`dumps`), when it takes them (`received`)."""
    if marked and hasattr(work, "received"):
        work.received(marked)


def _run(data: bytes, conn: Any) -> bytes:
    """One job (`dumps`) run here, its reports sent on `conn`; what to send back, pickled. A job
    object may take the objects the caller marked (`received(marked)`) and add entries of its own to
    what is sent back (`journal()`: the app's cache entries, ui/worker.py)."""
    last = [0.0]

    def progress(fraction: float, message: str = "") -> None:
        now = time.monotonic()
        if now - last[0] >= _SEND_EVERY_S or fraction >= 1.0:
            last[0] = now
            conn.send(("progress", float(fraction), str(message)))

    try:
        work, marked = loads(data)
        _hand_marked(work, marked)
        _ASKING.append((conn, work))
        try:
            with memo.scope(memo.LocalStore()), memo.recording() as stored:
                value = work(progress)
        finally:
            _ASKING.pop()
        journal = work.journal() if hasattr(work, "journal") else []
        return pickled_back("done", value, [*stored, *journal])
    except BaseException as exc:  # every failure goes back to the caller, which raises it
        return _failure(exc)


# ---------------------------------------------------------------------------------- the caller side
_NO_MAIN = types.ModuleType("__main__")  # a main module with no file and no spec: nothing to re-run
_MAIN_LOCK = threading.Lock()


def _start(process: Any) -> None:
    """`process.start()` with no main module for the worker to run again. multiprocessing's forkserver
    and spawn children first import the caller's `__main__` from its file; in the app that is the
    page script Streamlit is running (it sets `sys.modules["__main__"]` to each script's module, and
    AppTest to its script), which the worker would run again, and whose long run would start a worker
    in turn. The worker's target is `_serve` of this module: it needs no main module."""
    with _MAIN_LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = _NO_MAIN
        try:
            process.start()
        finally:
            if main is not None:
                sys.modules["__main__"] = main


_LIVE: set[_Process] = set()  # the workers this process started and has not killed
_LIVE_LOCK = threading.Lock()


def _kill_all() -> None:
    """Kill every worker this process started: at its exit (`atexit`, before multiprocessing's own
    handler, which would wait for them: they are not daemonic) and at a worker's end (`_serve`)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for worker in live:
        worker.kill()


class _Process:
    """One worker process and the caller's end of its pipe. Not daemonic (multiprocessing forbids a
    daemonic process to start any, and a job's fan-out starts workers of its own): `_kill_all` stops
    it at this process's exit, and it ends by itself if this process dies (`_end_with_parent`)."""

    def __init__(self, ctx: Any, warm: Callable[[], None] | None) -> None:
        self.conn, child_end = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=_serve, args=(child_end, warm), daemon=False)
        _start(self.process)
        child_end.close()
        with _LIVE_LOCK:
            if not _LIVE_REGISTERED:
                # after multiprocessing's import, so run before its exit handler (atexit: last in, first out)
                atexit.register(_kill_all)
                _LIVE_REGISTERED.append(True)
            _LIVE.add(self)

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5.0)
        self.conn.close()
        with _LIVE_LOCK:
            _LIVE.discard(self)


_LIVE_REGISTERED: list[bool] = []  # whether `_kill_all` is registered with atexit in this process


class Job:
    """One job running in a worker of `pool` (`Pool.submit`). `wait(progress, check)` waits for its
    result, drawing its reports with `progress` and calling `check()` between polls; what `check`
    raises propagates and leaves the job running (a later `wait` takes it up again). `kill()` stops
    it at once. `extra` is what the job memoized, once the result came back. While it waits, it answers
    the job's requests (`ask`) with `answer(request)` (`NOT_ANSWERED` without one), pickled as the job
    was (`dumps`, with `mark`)."""

    def __init__(
        self,
        pool: Pool,
        worker: _Process,
        answer: Callable[[Any], Any] | None = None,
        mark: Callable[[Any], bool] | None = None,
    ) -> None:
        self._pool, self._worker = pool, worker
        self._answer, self._mark = answer, mark
        self._lock = threading.Lock()
        self._ended = False
        self.fraction, self.message = 0.0, ""
        self.extra: list[memo.Entry] = []

    @property
    def pid(self) -> int | None:
        return self._worker.process.pid

    def alive(self) -> bool:
        return not self._ended and self._worker.process.is_alive()

    def readable(self) -> bool:
        """Whether `wait` has something to wait for: running, or its result unread."""
        with self._lock:
            if self._ended:
                return False
            try:
                return self._worker.process.is_alive() or self._worker.conn.poll(0)
            except (OSError, ValueError):
                return False

    def wait(self, progress: Progress | None = None, check: Callable[[], None] | None = None) -> Any:
        """Its result (its exception raised here), reports drawn by `progress` meanwhile."""
        report: Progress = progress or _no_progress
        if self.message or self.fraction:
            report(self.fraction, self.message)  # taken up again: where it is
        conn, process = self._worker.conn, self._worker.process
        while True:
            if check is not None:
                check()
            try:
                if not conn.poll(_POLL_S):
                    if not process.is_alive() and not conn.poll(0):
                        raise self._died()
                    continue
                message = pickle.loads(conn.recv_bytes())
            except (EOFError, OSError):
                raise self._died() from None
            kind, *payload = message
            if kind == "progress":
                self.fraction, self.message = payload
                report(*payload)
                continue
            if kind == "ask":
                self._reply(payload[0])
                continue
            self._end(keep=True)
            if kind == "done":
                value, self.extra = payload
                return value
            exc, text = payload  # "error"
            if isinstance(exc, BaseException):
                exc.add_note(f"raised in a pool worker:\n{text}")  # the bug's log keeps where
                raise exc
            raise RuntimeError(f"the worker's run failed:\n{text}")

    def _reply(self, request: Any) -> None:
        """Send the job the answer to its request (`ask`); `NOT_ANSWERED` when there is none, or when
        it cannot be pickled (the job then computes it)."""
        value = NOT_ANSWERED if self._answer is None else self._answer(request)
        try:
            data = dumps(value, self._pool.exports, self._mark)
        except Exception:
            data = dumps(NOT_ANSWERED, self._pool.exports)
        self._worker.conn.send_bytes(data)

    def _died(self) -> WorkerDied:
        self._worker.process.join(1.0)
        code = self._worker.process.exitcode
        self.kill()
        return WorkerDied(f"the worker process ended without a result (exit code {code})")

    def kill(self) -> None:
        """Stop it at once (SIGKILL) and reap its worker; no-op once it ended."""
        self._end(keep=False)

    def _end(self, *, keep: bool) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        if keep:
            self._pool._give_back(self._worker)
        else:
            self._worker.kill()


class Pool:
    """Worker processes from a clean interpreter (module docstring), at most `size` kept idle
    (default: the cores); `preload` modules imported once in the fork server, `warm()` run once
    at each worker's start."""

    def __init__(
        self,
        size: int | None = None,
        *,
        preload: Sequence[str] = KERNELS,
        warm: Callable[[], None] | None = None,
        method: str | None = None,
    ) -> None:
        import multiprocessing

        if method is None:
            method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        self._ctx = multiprocessing.get_context(method)
        if method == "forkserver":
            self._ctx.set_forkserver_preload(["engine.scale.pool", *preload])
        self.size = max(1, size if size is not None else (os.cpu_count() or 1))
        self._warm = warm
        self._idle: list[_Process] = []
        self._lock = threading.Lock()
        self.exports = Exports()
        self._closed = False
        self.pid = os.getpid()  # the process whose workers these are

    def start(self, n: int = 1) -> None:
        """Start `n` workers ahead (up to `size` idle), so the first jobs do not wait for them."""
        fresh = [_Process(self._ctx, self._warm) for _ in range(min(n, self.size))]
        with self._lock:
            self._idle.extend(fresh)

    def _take(self) -> _Process:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.process.is_alive():
                    return worker
                worker.kill()
        return _Process(self._ctx, self._warm)

    def _give_back(self, worker: _Process) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.size and worker.process.is_alive():
                self._idle.append(worker)
                return
        worker.kill()

    def submit(
        self,
        work: Callable[[Progress], Any],
        *,
        answer: Callable[[Any], Any] | None = None,
        mark: Callable[[Any], bool] | None = None,
    ) -> Job:
        """`work(progress)` started in a worker (an idle one, else a new one); `answer` answers its
        requests (`ask`) while it is waited on; `mark`: the objects it receives as marked (`dumps`)."""
        return self._send(dumps(work, self.exports, mark), answer, mark)

    def _send(
        self,
        data: bytes,
        answer: Callable[[Any], Any] | None = None,
        mark: Callable[[Any], bool] | None = None,
    ) -> Job:
        """The job pickled in `data` (`dumps`) started in a worker (an idle one, else a new one)."""
        worker = self._take()
        try:
            worker.conn.send_bytes(data)
        except BaseException:
            worker.kill()
            raise
        return Job(self, worker, answer, mark)

    def call(
        self,
        work: Callable[[Progress], T],
        *,
        progress: Progress | None = None,
        check: Callable[[], None] | None = None,
    ) -> T:
        """`work(progress)` in a worker; its result here, what it memoized stored here
        (`engine.memo.replay`). What `check()` raises between polls kills the job and propagates."""
        job = self.submit(work)
        try:
            value = job.wait(progress, check)
        finally:
            job.kill()
        memo.replay(job.extra)
        return value

    def close(self) -> None:
        """Stop the idle workers and unlink the shared segments."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()
        self.exports.close()


_DEFAULT: list[Pool] = []
_DEFAULT_LOCK = threading.Lock()


def default() -> Pool:
    """This process's pool, made at first use and closed at its exit (in a pool worker: when the
    worker ends, `_serve`). A child process's copy of its parent's is not its own: a new one."""
    with _DEFAULT_LOCK:
        if not _DEFAULT or _DEFAULT[0].pid != os.getpid():
            # in a worker (a job's fan-out) one idle worker is kept, not one per core: every worker of
            # a pool may hold a pool of its own (a fork server and its workers, some 300 MB each)
            _DEFAULT[:] = [Pool(size=1 if _WORKER is not None else None)]
            atexit.register(_DEFAULT[0].close)
        return _DEFAULT[0]


def call(
    work: Callable[[Progress], T],
    *,
    progress: Progress | None = None,
    check: Callable[[], None] | None = None,
) -> T:
    """`default().call(work, progress=..., check=...)`."""
    return default().call(work, progress=progress, check=check)


# ------------------------------------------------------------------------------------------ fan-out
def enabled() -> bool:
    """Whether long work may go to a pool worker here: `COHORTSHIELD_WORKERS` is not "0" and this is
    not itself a pool worker (the app's runs; ui/worker.py)."""
    return os.environ.get("COHORTSHIELD_WORKERS", "1") != "0" and _WORKER is None


_IN_FAN_OUT = False  # True in a worker while it runs a fan-out's share of calls (`_share`)


def fan_out_enabled() -> bool:
    """Whether `fan_out` runs calls in workers here: `COHORTSHIELD_WORKERS` is not "0", the machine has
    more than one core, this is not running a fan-out's calls (a fan-out inside one runs in place: no
    unbounded nesting) and not a daemonic process (which multiprocessing forbids to start any). A pool
    job may fan out: its workers are its own (`default`)."""
    import multiprocessing

    return (
        os.environ.get("COHORTSHIELD_WORKERS", "1") != "0"
        and (os.cpu_count() or 1) > 1
        and not _IN_FAN_OUT
        and not multiprocessing.current_process().daemon
    )


def _share(calls: Sequence[Callable[[], Any]], progress: Progress) -> tuple[list[Any], bytes | None]:
    """In a worker: `calls` in order, stopping at the first exception; their results and that
    exception pickled with its traceback (`_failure`), or None. One kernel thread: the cores are the
    fan-out's processes'."""
    global _IN_FAN_OUT
    before = os.environ.get(THREADS_ENV)
    os.environ[THREADS_ENV] = "1"
    _IN_FAN_OUT = True
    results: list[Any] = []
    try:
        for call in calls:
            results.append(call())
    except BaseException as exc:
        return results, _failure(exc)
    finally:
        _IN_FAN_OUT = False
        if before is None:
            os.environ.pop(THREADS_ENV, None)
        else:
            os.environ[THREADS_ENV] = before
    return results, None


def fan_out(calls: Sequence[Callable[[], T]], workers: Pool | None = None) -> list[T]:
    """`[c() for c in calls]`, the calls after the first in pool workers while this process runs the
    first (`fan_out_enabled()`; else one after the other, here):
    at most (cores - 1) jobs, job j running calls 1 + j, 1 + j + n, ... in order; the results, and the
    exception raised (that of the earliest call in `calls` that raised, with where as a note), those of
    the calls run one after the other; what the jobs memoized stored here; the jobs killed if this
    process stops waiting. The calls after the first must pickle (`dumps`)."""
    if len(calls) <= 1 or not fan_out_enabled():
        return [c() for c in calls]
    workers = workers or default()
    n = min(len(calls) - 1, max((os.cpu_count() or 2) - 1, 1))
    shares = [list(range(1 + j, len(calls), n)) for j in range(n)]
    jobs: list[Job] = []
    sent: list[BaseException] = []
    # pickled here (a call that cannot pickle raises before any runs); sent from a thread, so that
    # starting workers (the first fan-out of a job: its own fork server, about 2 s) overlaps the first call
    pickled = [dumps(partial(_share, [calls[i] for i in share]), workers.exports) for share in shares]

    def send() -> None:
        try:
            for data in pickled:
                jobs.append(workers._send(data))
        except BaseException as exc:  # raised here after the first call
            sent.append(exc)

    sending = threading.Thread(target=send, name="fan-out: start the jobs", daemon=True)
    sending.start()
    try:
        try:
            out: dict[int, Any] = {0: calls[0]()}
        finally:
            sending.join()
        if sent:
            raise sent[0]
        failed: dict[int, BaseException] = {}
        for share, job in zip(shares, jobs, strict=True):
            results, failure = job.wait()
            memo.replay(job.extra)
            out.update(zip(share, results, strict=False))
            if failure is not None:
                _, exc, text = pickle.loads(failure)
                if not isinstance(exc, BaseException):
                    exc = RuntimeError(f"a fan-out job failed:\n{text}")
                else:
                    exc.add_note(f"raised in a fan-out process of the pool:\n{text}")
                failed[share[min(len(results), len(share) - 1)]] = exc
        if failed:
            raise failed[min(failed)]
        return [out[i] for i in range(len(calls))]
    finally:
        for job in jobs:
            job.kill()  # a no-op for a job that ended: its worker serves on
