"""Issue 24, "Live means live": everything derived from uploads is scoped to its session.

The engine's one memo (`engine.memo`) keeps its entries where the caller's scope says: the app's
session during a script run (`ui.cache.engine_scope`, installed by app.py), this process on the command
line. Two sessions on one upload share no engine entry and the process keeps none; the command line
still memoizes; every memo holds its bound; the journal of a worker (`ui.cache.recording` / `replay`)
stores again what was stored, where it was. (That engine/ keeps no other memo at module level than
those `engine.memo.PROCESS_WIDE` lists is a rule of tests/test_architecture.py.)
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import streamlit as st
from apptest_support import fresh_process_memo, full_app, page_path

from engine import memo
from engine.records import Records
from ui import cache

ROOT = Path(__file__).resolve().parent.parent


class _DictStore:
    """A `memo.Store` over plain dicts (no bound: the test reads what was put)."""

    def __init__(self) -> None:
        self.data: dict[tuple[str, Hashable], Any] = {}

    def get(self, name: str, key: Hashable, default: Any) -> Any:
        return self.data.get((name, key), default)

    def put(self, name: str, key: Hashable, value: Any, size: int) -> None:
        self.data[(name, key)] = value


def _cohort(shift: int = 0) -> Records:
    rows = [
        (f"P{p}", v, ["401.1", "250.00", "272.4"][(p + v + shift) % 3]) for p in range(12) for v in (1, 2)
    ]
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))


# ------------------------------------------------------------------------------- the mechanism
def test_outside_a_scope_the_process_memoizes_within_the_bound():
    """The command line's path: `LOCAL`, an LRU per name, one size per name."""
    memo.clear("test local")
    calls: list[int] = []

    def compute(k: int):
        return lambda: calls.append(k) or [k]

    first = memo.memo("test local", 1, compute(1), size=2)
    assert memo.memo("test local", 1, compute(1), size=2) is first and calls == [1]
    memo.memo("test local", 2, compute(2), size=2)
    memo.memo("test local", 1, compute(1), size=2)  # 1 used last: 2 is the least recently used
    memo.memo("test local", 3, compute(3), size=2)  # over the bound: 2 dropped
    assert memo.held_count("test local") == 2 and calls == [1, 2, 3]
    memo.memo("test local", 2, compute(2), size=2)
    assert calls == [1, 2, 3, 2]
    with pytest.raises(ValueError, match="bounded at 2"):
        memo.memo("test local", 4, compute(4), size=3)


def test_an_engine_memo_on_the_command_line_path_computes_once():
    """`original_disease_counts` (utility_satisfaction's memo of the original's counts), outside any
    scope: the second call returns the held counts; another content is computed."""
    from engine.utility.queries import original_disease_counts

    memo.clear()
    diseases = [frozenset({"401.1"}), frozenset({"250.00", "272.4"})]
    first = original_disease_counts(_cohort(), diseases)
    assert original_disease_counts(_cohort(), diseases) is first  # same content, another object
    assert memo.held_count("utility original counts") == 1
    other = original_disease_counts(_cohort(shift=1), diseases)
    assert other is not first and memo.held_count("utility original counts") == 2


def test_a_scope_keeps_the_entries_in_its_store_for_this_thread_only():
    memo.clear()
    store, inner = _DictStore(), _DictStore()
    seen_by_other_thread: list[int] = []
    with memo.scope(store):
        assert memo.memo("test scoped", "a", lambda: "A", size=4) == "A"
        with memo.scope(inner):  # the innermost scope's store
            memo.memo("test scoped", "b", lambda: "B", size=4)
        other = threading.Thread(
            target=lambda: memo.memo(
                "test scoped", "c", lambda: seen_by_other_thread.append(1) or "C", size=4
            )
        )
        other.start()
        other.join()
    assert store.data == {("test scoped", "a"): "A"} and inner.data == {("test scoped", "b"): "B"}
    # another thread is outside this thread's scope: its entry is the process's
    assert seen_by_other_thread == [1] and memo.held_count("test scoped") == 1
    memo.memo("test scoped", "a", lambda: "again", size=4)
    assert memo.held_count("test scoped") == 2  # after the scope: the process again


def test_the_engine_memos_hold_their_bounds_in_a_session():
    """Through the app's store (bare mode: one session state): the bound of each name holds."""
    from engine.anonymize import population

    memo.clear()
    st.session_state.pop(cache.PREFIX + cache.ENGINE + "population", None)
    with cache.engine_scope():
        for i in range(population._MEMO_KEPT + 5):
            population._memoized(("test bound", i), lambda i=i: [i])
    held = st.session_state[cache.PREFIX + cache.ENGINE + "population"]
    assert list(held) == [("test bound", i) for i in range(5, population._MEMO_KEPT + 5)]  # the last ones
    assert memo.held_count() == 0  # nothing in the process


# ------------------------------------------------------------------------------------ the journal
@dataclass(eq=False)
class _Data:
    name: str = "sample"


@dataclass(eq=False)
class _Loaded:
    data: _Data


def test_the_journal_records_what_was_stored_and_replays_it_where_it_was():
    """Session entries (`memo`, `put`, the engine's), shared entries (the shipped sample's) and
    nothing from another thread; picklable; stored again where they were by `replay`."""
    sample = cache.load_shipped("test journal sample", "options", lambda: _Loaded(_Data()), size=1).data
    cache.clear("test journal shared")
    for name in ("test journal", "test journal put", cache.ENGINE + "test journal engine"):
        st.session_state.pop(cache.PREFIX + name, None)

    with cache.recording() as journal:
        cache.memo("test journal", 1, lambda: "one", size=3)
        cache.memo("test journal", 1, lambda: "again", size=3)  # held: nothing stored
        cache.put("test journal put", "k", "put", size=2)
        cache.memo("test journal shared", "s", lambda: "shared value", size=2, data=sample)
        with cache.engine_scope():
            memo.memo("test journal engine", ("fp", 3), lambda: [3], size=5)
        threading.Thread(target=lambda: cache.put("test journal put", "other", "x", size=2)).start()
    cache.put("test journal put", "after", "late", size=2)  # after the block: not recorded

    assert [(e.name, e.key, e.value, e.size, e.shared) for e in journal] == [
        ("test journal", 1, "one", 3, False),
        ("test journal put", "k", "put", 2, False),
        ("test journal shared", "s", "shared value", 2, True),
        (cache.ENGINE + "test journal engine", ("fp", 3), [3], 5, False),
    ]
    travelled = pickle.loads(pickle.dumps(journal))  # a worker's journal comes back pickled

    # a fresh start: nothing of it held in the session or the shared store
    for name in ("test journal", "test journal put", cache.ENGINE + "test journal engine"):
        st.session_state.pop(cache.PREFIX + name, None)
    cache.clear("test journal shared")
    assert cache.shared_size("test journal shared") == 0

    cache.replay(travelled)
    assert cache.held("test journal", 1) == "one" and cache.held("test journal put", "k") == "put"
    assert cache.held("test journal shared", "s", data=sample) == "shared value"
    assert cache.shared_size("test journal shared") == 1 and cache.held("test journal shared", "s") is None
    with cache.engine_scope():  # the engine finds its entry without computing
        assert memo.memo("test journal engine", ("fp", 3), lambda: pytest.fail("computed again"), size=5) == [
            3
        ]
    assert memo.held_count("test journal engine") == 0  # in the session, not the process


def test_a_recording_entered_alone_records_until_the_thread_ends():
    """A worker enters a recording and never leaves it (ui/worker.py): dropping the context manager
    does not stop it."""

    def child(out: list) -> None:
        out.append(cache.recording().__enter__())  # the manager itself is dropped at once
        cache.put("test journal alone", "k", "v", size=1)

    out: list = []
    thread = threading.Thread(target=child, args=(out,))
    thread.start()
    thread.join()
    assert [(e.name, e.key, e.value) for e in out[0]] == [("test journal alone", "k", "v")]


def test_a_shared_entry_computed_by_another_caller_is_not_recorded():
    sample = cache.load_shipped("test journal sample", "options", lambda: _Loaded(_Data()), size=1).data
    cache.clear("test journal waits")
    cache.memo("test journal waits", "s", lambda: "first", size=2, data=sample)
    with cache.recording() as journal:
        assert cache.memo("test journal waits", "s", lambda: "second", size=2, data=sample) == "first"
    assert journal == []


# ------------------------------------------------------------------- two sessions through app.py
def _events_csv(n: int = 60) -> bytes:
    codes = ["401.1", "250.00", "272.4", "724.2"]
    rows = [(f"U{p:03d}", v, codes[(p + v) % 4]) for p in range(n) for v in (1, 2)]
    return pd.DataFrame(rows, columns=["patient_id", "visit", "code"]).to_csv(index=False).encode()


def _heatherly_on_an_upload():
    """app.py, an uploaded file, then Heatherly's view on the Anonymize page."""
    at = full_app()
    at.session_state["method_render_anonymize"] = "Generalization (Heatherly)"
    at.run()
    at.sidebar.radio(key="dataset_choice").set_value("Upload files").run()
    at.sidebar.file_uploader(key="upload_events").upload("my_events.csv", _events_csv(), "text/csv")
    at.run()
    at.switch_page(page_path("pages/anonymize.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["context"].dataset.name == "uploaded: my_events.csv"
    return at


def _engine_entries(at) -> dict[str, dict]:
    names = [
        k for k in at.session_state._state._state.filtered_state if k.startswith(cache.PREFIX + cache.ENGINE)
    ]
    return {k: dict(at.session_state[k]) for k in names}


def test_two_sessions_on_an_upload_share_no_engine_entry():
    fresh_process_memo()
    first = _engine_entries(_heatherly_on_an_upload())
    assert memo.held_count() == 0, "the process kept an engine entry of an upload"
    assert first.get(cache.PREFIX + cache.ENGINE + "population"), "Heatherly's work is not in the session"

    second = _engine_entries(_heatherly_on_an_upload())
    assert memo.held_count() == 0
    assert second.keys() == first.keys()
    for name, entries in second.items():
        assert entries.keys() == first[name].keys()  # the same content: the same keys ...
        shared = [key for key, value in entries.items() if value is first[name][key] and _mutable(value)]
        assert not shared, f"{name}: the second session got the first one's entries {shared}"


def _mutable(value: Any) -> bool:
    """An object computed for a session (interned numbers, strings and None are no sign of sharing)."""
    return not isinstance(value, int | float | str | bytes | bool | type(None))
