"""The app's one cache (issue 24): a bounded LRU per name; where an entry lives follows what it is
derived from.

- `memo(name, key, compute, *, size, data=None)`: `compute()` once per `key`, the least recently
  used entry dropped past `size`. Held in THIS session's state (`_cache_<name>`, declared here as a
  family: `ui.state`), never seen by another session: everything derived from an upload or an import
  lives there and goes with the session. Only when every input the caller names in `data` is shipped
  (`shipped`) is the entry held in the process-wide store of that name instead: the shipped sample's
  data are the same for every user, so eight sessions on it compute each result once.
- `load_shipped(name, key, load, *, size)`: the shipped sample and its variants, loaded once per
  process. Their datasets are what `shipped` starts from: a `Context` or `Dataset` is shipped when its
  dataset is one of these objects (by identity: an upload or an import never is, whatever its name or
  content). Every value the process-wide store holds is shipped too (a release made from the sample,
  a group's records, the items of a tuple value), so a result derived from it may be shared in turn
  (`data=(release, cohort)`).
- `held(name, key, *, data=None)` / `put(name, key, value, *, size, data=None)`: read or record an
  entry without computing (a release a view made another way, recorded as the study's preview).

The engine's own memos (`engine.memo`: the work a method does once per data, e.g. Heatherly's
utility groups, the LDA's prepared input) are kept the same way: `engine_scope()` installs this
session's store for them (app.py, around every script run), under names prefixed "engine " (declared
by the same `_cache_` family), so nothing an upload gives the engine outlives its session or reaches
another. Outside a script run (the command line, engine tests) the engine keeps them in its process.

In a pool worker running one of the app's jobs (ui/worker.py, `worker_side`), the stores are the job's
own, filled on demand from the server's: an entry the job asks for and has not computed is asked of the
server (`engine.scale.pool.ask`), which answers with what the session or the shared store holds
(`answerer`); only what the job computes is recorded and sent back. Whether an input is shipped is the
server's verdict: the objects it knows as shipped are sent marked (`is_shipped_object`, `mark_shipped`).

`recording()` / `replay(entries)`: the journal of a worker process (ui/worker.py). Inside
`recording()`, every entry `memo`, `put` and the engine's store keep in this thread is recorded, in
order, as an `Entry` (picklable when its value is); `replay` stores the entries again where they were
stored (this session, or the process-wide store for the shipped sample's). `load_shipped` records
nothing: every process loads the shipped sample from its files.

The caller states `data`, and names in it everything the result is derived from that could be a
user's: leave it None (this session only) when a user's file or edited table is among the inputs (an
uploaded utility policy or hierarchy), even on the sample. Keys name the data by content
(fingerprints) and every parameter; values are never modified. The process-wide store computes one key
at a time: a session asking for a key another is computing waits for it (and stops waiting when its
own run is superseded); if the first fails or is cancelled, the next caller computes. Sizes are stated
per name (a name asked with two sizes is a programming error).

Streamlit's caches (`st.cache_data`, `st.cache_resource`) are no longer used by ui/ or pages/,
with two exceptions (`STREAMLIT_CACHES`, checked by tests/test_cache.py):

- `ui/server_store.py` `_open`: the study store's connection per store location (SQLite file or
  PostgreSQL pool, `engine.store.open_store`): a server resource named by the administrator's setting,
  shared by every session like any connection pool; it caches no result and no user's data.
- `ui/worker.py` `_session_end`: a session-scoped resource holding the session's worker processes,
  whose release (the session's end) kills them (issue 40); it caches no result.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import streamlit as st

from engine import memo as engine_memo
from engine.io.progress import Progress
from engine.scale import pool
from ui import state
from ui.admission import stepped_out
from ui.context import Context
from ui.script_run import yield_check

T = TypeVar("T")
PREFIX = "_cache_"  # session state: PREFIX + name -> that name's OrderedDict (key -> value)
ENGINE = "engine "  # the names of the engine's memos in this session (`engine_scope`)
state.declare(__name__, prefixes=(PREFIX,))

# the Streamlit caches left in ui/ and pages/, (file, function) -> why (tests/test_cache.py)
STREAMLIT_CACHES: dict[tuple[str, str], str] = {
    (
        "ui/server_store.py",
        "_open",
    ): "the study store's connection per location: a server resource, no results",
    ("ui/worker.py", "_session_end"): "the session's worker processes, killed at its end: no results",
}

_MISSING = object()


class Shared:
    """A bounded memo shared by the server's sessions (least recently used dropped first), one
    computation per key at a time: a second caller waits for the first (and stops waiting when its
    own script run is superseded); if the first fails or is cancelled, the next caller computes."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._running: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        return default

    def put(self, key: Hashable, value: Any) -> None:
        _mark(value)
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)

    def claim(self, key: Hashable) -> Callable[[], None] | None:
        """Mark `key` as being computed elsewhere (a worker process, `ui.progress.run`), so other
        callers wait for it as for a computation here; the function returned ends the claim (call it
        once the value is stored, or the work failed). None when the key is held or already claimed."""
        with self._lock:
            if key in self._data or key in self._running:
                return None
            gate = self._running[key] = threading.Lock()
            gate.acquire()
        ended: list[bool] = []

        def end() -> None:
            with self._lock:
                if ended:
                    return
                ended.append(True)
                if self._running.get(key) is gate:
                    self._running.pop(key)
            gate.release()

        return end

    def wait(self, key: Hashable) -> None:
        """Wait while `key` is being computed by another caller (stops when this run is superseded)."""
        with self._lock:
            gate = self._running.get(key)
        if gate is None:
            return
        check = yield_check()
        with stepped_out():  # asleep: its place in the server's queue goes to another run (issue 40)
            while not gate.acquire(timeout=0.1):
                check()
        gate.release()

    def compute(self, key: Hashable, fn: Callable[[], T]) -> T:
        """The value of `key`, computed by `fn()` unless held or being computed by another caller."""
        while True:
            with self._lock:
                if key in self._data:
                    self._data.move_to_end(key)
                    return self._data[key]
                gate = self._running.get(key)
                mine = gate is None
                if mine:
                    gate = self._running[key] = threading.Lock()
                    gate.acquire()
            assert gate is not None
            if mine:
                break
            check = yield_check()
            with stepped_out():
                while not gate.acquire(timeout=0.1):
                    check()
            gate.release()
        try:
            value = fn()
            self.put(key, value)
            return value
        finally:
            with self._lock:
                self._running.pop(key, None)
            gate.release()


_SHARED: dict[str, Shared] = {}
_SIZES: dict[str, int] = {}
_LOADS: set[str] = set()  # the names `load_shipped` holds the shipped datasets under
_LOCK = threading.Lock()
# objects known to be the shipped sample's or derived from it alone: the datasets `load_shipped`
# loaded and every value the shared stores hold (weakly: an object's id is not reused while it lives)
_SHIPPED: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def _mark(value: Any) -> None:
    """Record `value` as shipped (and the items of a tuple value: a release and its verification)."""
    for v in value if isinstance(value, tuple) else (value,):
        try:
            with _LOCK:
                _SHIPPED[id(v)] = v
        except TypeError:  # strings, numbers: not weakly referable, and never asked about
            pass


def is_shipped_object(x: Any) -> bool:
    """Whether `x` itself is known here as shipped (a job's objects to send marked: `pool.dumps`)."""
    with _LOCK:
        return _SHIPPED.get(id(x)) is x


def mark_shipped(objects: list[Any]) -> None:
    """In a pool worker: know `objects` as shipped, as the server does (`is_shipped_object`)."""
    for x in objects:
        _mark(x)


def _is_shipped(x: Any) -> bool:
    if isinstance(x, Context):
        x = x.dataset
    with _LOCK:
        return _SHIPPED.get(id(x)) is x


def shipped(data: Any) -> bool:
    """Whether `data` is the shipped sample's alone: a Context or Dataset of it, an object the
    shared stores hold, or a tuple of such (None items are no input; a tuple of only None is not)."""
    items = [x for x in (data if isinstance(data, tuple) else (data,)) if x is not None]
    return bool(items) and all(_is_shipped(x) for x in items)


def _size(name: str, size: int) -> None:
    with _LOCK:
        stated = _SIZES.setdefault(name, size)
    if stated != size:
        raise ValueError(f"cache {name!r} is bounded at {stated}, asked with size {size}")


@dataclass
class _WorkerSide:
    """One app job in a pool worker (`worker_side`): its stores, and how to ask the server."""

    ask: Callable[[Any], Any]
    sessions: dict[str, OrderedDict] = field(default_factory=dict)
    shared: dict[str, Shared] = field(default_factory=dict)

    def fetch(self, kind: str, name: str, key: Hashable) -> Any:
        """The server's entry of `key` under `name` (`kind` "session" or "shared"), `_MISSING` when
        it holds none; kept in this job's store, not recorded (the server has it)."""
        value = self.ask((kind, name, key))
        if value is pool.NOT_ANSWERED:
            return _MISSING
        if kind == "shared":  # its bound as stated here, else none: the job's store goes with it
            self.shared.setdefault(name, Shared(_SIZES.get(name, 1 << 30))).put(key, value)
        else:
            self.sessions.setdefault(name, OrderedDict())[key] = value
        return value

    def shared_entry(self, name: str, key: Hashable) -> Any:
        """The entry of `key` in the shared store of `name`: this job's, else the server's (`fetch`)."""
        mine = self.shared.get(name)
        hit = _MISSING if mine is None else mine.get(key, _MISSING)
        return self.fetch("shared", name, key) if hit is _MISSING else hit


_WORKER_SIDE: ContextVar[_WorkerSide | None] = ContextVar("ui_cache_worker_side", default=None)


@contextmanager
def worker_side(ask: Callable[[Any], Any]) -> Iterator[None]:
    """Inside: this thread is an app job in a pool worker (ui/worker.py). Its entries are held in
    stores of its own; one it does not hold is asked of the server with `ask` (`pool.ask`) before it
    is computed. No spinner is drawn (there is no page here)."""
    token = _WORKER_SIDE.set(_WorkerSide(ask))
    try:
        yield
    finally:
        _WORKER_SIDE.reset(token)


def answerer() -> Callable[[Any], Any]:
    """In a script run: the server's answer to its job's requests (`_WorkerSide.fetch`): this
    session's entries (its stores as they are now, read from the thread that waits on the job) and
    the shared stores'; `pool.NOT_ANSWERED` for what neither holds."""
    sessions = {k[len(PREFIX) :]: st.session_state[k] for k in list(st.session_state) if k.startswith(PREFIX)}

    def answer(request: Any) -> Any:
        kind, name, key = request
        store = _SHARED.get(name) if kind == "shared" else sessions.get(name)
        if store is None:
            return pool.NOT_ANSWERED
        value = store.get(key, _MISSING)
        return pool.NOT_ANSWERED if value is _MISSING else value

    return answer


def _shared_hit(name: str, size: int, key: Hashable) -> tuple[Shared, Any]:
    """The store of `name` and its entry of `key` (`_MISSING` when absent): in a pool job, asked of
    the server when the job does not hold it."""
    store = _shared(name, size)
    side = _WORKER_SIDE.get()
    return store, (store.get(key, _MISSING) if side is None else side.shared_entry(name, key))


def _shared(name: str, size: int) -> Shared:
    _size(name, size)
    side = _WORKER_SIDE.get()
    if side is not None:
        if name not in side.shared:
            side.shared[name] = Shared(size)
        return side.shared[name]
    with _LOCK:
        store = _SHARED.get(name)
        if store is None:
            store = _SHARED[name] = Shared(size)
    return store


def _session(name: str, size: int) -> OrderedDict:
    _size(name, size)
    side = _WORKER_SIDE.get()
    if side is not None:
        return side.sessions.setdefault(name, OrderedDict())
    store = st.session_state.get(PREFIX + name)
    if store is None:
        store = st.session_state[PREFIX + name] = OrderedDict()
    return store


_SPINNER: ContextVar[str | None] = ContextVar("ui_cache_spinner", default=None)


@contextmanager
def spinner(text: str) -> Iterator[None]:
    """`st.spinner(text)`, shown only if a memo inside the block computes (issue 40, finding 7): a
    spinner starts a timer thread, and at a k already computed every result is held, so sixteen
    sessions' reruns each started three or four threads for nothing (about 2 % of the server's CPU,
    and the wait for each thread to start under the GIL)."""
    token = _SPINNER.set(text)
    try:
        yield
    finally:
        _SPINNER.reset(token)


@contextmanager
def _spinning(text: str | None) -> Iterator[None]:
    text = text or _SPINNER.get()
    if not text or _WORKER_SIDE.get() is not None:
        yield
        return
    token = _SPINNER.set(None)  # the memos computed inside show no spinner of their own
    try:
        with st.spinner(text):
            yield
    finally:
        _SPINNER.reset(token)


@dataclass(frozen=True)
class Entry:
    """One entry a cache stored: under `name` and `key`, bounded at `size`, in the process-wide store
    (`shared`) or this session's (`recording`, `replay`)."""

    name: str
    key: Hashable
    value: Any
    size: int
    shared: bool


_JOURNALS: ContextVar[tuple[list[Entry], ...]] = ContextVar("ui_cache_journals", default=())


def _record(name: str, key: Hashable, value: Any, size: int, shared: bool) -> None:
    journals = _JOURNALS.get()
    if journals:
        entry = Entry(name, key, value, size, shared)
        for journal in journals:
            journal.append(entry)


def _store_session(name: str, key: Hashable, value: Any, size: int) -> None:
    _put(_session(name, size), key, value, size)
    _record(name, key, value, size, False)


def _store_shared(name: str, key: Hashable, value: Any, size: int) -> None:
    _shared(name, size).put(key, value)
    _record(name, key, value, size, True)


def _held_here(name: str, key: Hashable, default: Any) -> Any:
    """This session's entry of `key` under `name` (now the most recently used), `default` when absent
    (in a pool job: the job's, else the server's session's, `_WorkerSide.fetch`)."""
    side = _WORKER_SIDE.get()
    here = side.sessions.get(name) if side is not None else st.session_state.get(PREFIX + name)
    if here is None or key not in here:
        if side is not None:
            hit = side.fetch("session", name, key)
            return default if hit is _MISSING else hit
        return default
    here.move_to_end(key)
    return here[key]


def memo(
    name: str,
    key: Hashable,
    compute: Callable[[], T],
    *,
    size: int,
    data: Any = None,
    spinner: str | None = None,
) -> T:
    """`compute()` once per `key` under `name`, in this session, or shared by the server's sessions
    when `data` is shipped (module docstring); `spinner`: words shown while it computes."""
    if shipped(data):
        store, hit = _shared_hit(name, size, key)
        if hit is not _MISSING:
            return hit
        while _ONLY_HELD.get():  # a probe: claim the key for the worker that will compute it, or wait
            end = store.claim(key)
            if end is not None:
                raise NotHeld(name, end)
            store.wait(key)  # another session's computation of it
            hit = store.get(key, _MISSING)
            if hit is not _MISSING:
                return hit
        computed: list[T] = []

        def computing() -> T:
            computed.append(compute())
            return computed[0]

        with _spinning(spinner):
            value = store.compute(key, computing)
        if computed:  # computed here, not by another session this one waited for
            _record(name, key, value, size, True)
        return value
    _session(name, size)
    hit = _held_here(name, key, _MISSING)
    if hit is not _MISSING:
        return hit
    _miss(name)
    with _spinning(spinner):
        value = compute()
    _store_session(name, key, value, size)
    return value


class NotHeld(Exception):
    """Inside `only_held`: an entry the code asked for is not held (it would be computed). For an
    entry of a shared store, `end` ends the claim on its key taken meanwhile (`Shared.claim`): other
    sessions wait for the worker computing it instead of computing it too; None for this session's."""

    def __init__(self, name: str, end: Callable[[], None] | None = None) -> None:
        super().__init__(name)
        self.end = end


_ONLY_HELD: ContextVar[bool] = ContextVar("ui_cache_only_held", default=False)


def _miss(name: str) -> None:
    if _ONLY_HELD.get():
        raise NotHeld(name)


class _OnlyHeld:
    def __enter__(self) -> None:
        self._token = _ONLY_HELD.set(True)

    def __exit__(self, *exc: object) -> None:
        _ONLY_HELD.reset(self._token)


def only_held() -> AbstractContextManager[None]:
    """Inside, `memo` (and the engine's memos in `engine_scope`) only read: an entry not held
    raises `NotHeld` instead of being computed (an entry of a shared store another session is
    computing is waited for). `ui.progress.run` tries a run this way in the script thread first, so
    a result already computed is shown without starting a worker (issue 24)."""
    return _OnlyHeld()


def _put(store: OrderedDict, key: Hashable, value: Any, size: int) -> None:
    store[key] = value
    store.move_to_end(key)
    while len(store) > size:
        store.popitem(last=False)


def held(name: str, key: Hashable, *, data: Any = None) -> Any:
    """The entry of `key` under `name` (where `memo` with this `data` holds it), None when absent."""
    if shipped(data):
        side = _WORKER_SIDE.get()
        if side is not None:
            hit = side.shared_entry(name, key)
            return None if hit is _MISSING else hit
        store = _SHARED.get(name)
        return None if store is None else store.get(key)
    return _held_here(name, key, None)


def put(name: str, key: Hashable, value: Any, *, size: int, data: Any = None) -> None:
    """Record `value` as the entry of `key` under `name` (where `memo` with this `data` holds it)."""
    if shipped(data):
        _store_shared(name, key, value, size)
    else:
        _store_session(name, key, value, size)


class _EngineStore:
    """`engine.memo`'s store during a script run (`engine_scope`): this session's state, under the
    engine's names prefixed `ENGINE`. Stateless: it reads the session of the run it is called in."""

    def get(self, name: str, key: Hashable, default: Any) -> Any:
        hit = _held_here(ENGINE + name, key, default)
        if hit is default:
            _miss(ENGINE + name)
        return hit

    def put(self, name: str, key: Hashable, value: Any, size: int) -> None:
        _store_session(ENGINE + name, key, value, size)


def engine_scope() -> AbstractContextManager[engine_memo.Store]:
    """Keep the engine's memos (`engine.memo`) of the code run inside in this session (app.py wraps
    every script run in it)."""
    return engine_memo.scope(_EngineStore())


class _Recording:
    """`recording()`'s context manager: records from `__enter__` until `__exit__` (a worker that
    records until it ends calls only `__enter__`: nothing stops the recording when this object goes)."""

    def __init__(self) -> None:
        self.journal: list[Entry] = []
        self._token: Token | None = None

    def __enter__(self) -> list[Entry]:
        self._token = _JOURNALS.set((*_JOURNALS.get(), self.journal))
        return self.journal

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _JOURNALS.reset(self._token)
            self._token = None


def recording() -> AbstractContextManager[list[Entry]]:
    """A list of every entry stored in this thread while inside, in order (module docstring)."""
    return _Recording()


def replay(entries: list[Entry]) -> None:
    """Store `entries` (a `recording`'s) again where they were stored: this session, or the
    process-wide store of their name."""
    for e in entries:
        (_store_shared if e.shared else _store_session)(e.name, e.key, e.value, e.size)


class _Loaded(Protocol):
    data: Any


L = TypeVar("L", bound=_Loaded)


def load_shipped(
    name: str,
    key: Hashable,
    load: Callable[..., L],
    *,
    size: int,
    spinner: str | None = None,
    background: Callable[[Callable[[Progress], L]], L] | None = None,
) -> L:
    """The shipped sample or a sample variant (`load()` gives the engine's `Loaded`: data and
    report), loaded once per process and shared; its dataset is recorded as shipped (`shipped`).
    With `background` (issue 36, a load of a minute): `background(compute)` runs `compute(progress)`,
    which calls `load(progress)`, under a progress bar instead of a spinner (the caller passes
    `ui.progress.in_background` with its label: ui.progress draws with this module's memos, so this
    module does not import it)."""
    store, loaded = _shared_hit(name, size, key)  # in a pool job: the server's, not read again
    _LOADS.add(name)
    if loaded is _MISSING and background is not None:
        loaded = background(lambda progress: store.compute(key, lambda: load(progress)))
    elif loaded is _MISSING:
        with _spinning(spinner):
            loaded = store.compute(key, load)
    _mark(loaded.data)
    return loaded


def clear(name: str | None = None) -> None:
    """Empty the process-wide store of `name` (when None, every one but the shipped datasets'
    loads): tests start from no shared result."""
    with _LOCK:
        stores = [s for n, s in _SHARED.items() if (n not in _LOADS if name is None else n == name)]
    for s in stores:
        s.clear()


def shared_size(name: str) -> int:
    """How many entries the process-wide store of `name` holds now (0 when never used)."""
    store = _SHARED.get(name)
    return 0 if store is None else len(store)
