"""Issue 24, "one cache mechanism, bounded": `ui.cache` is the app's one memo. A bounded LRU per name;
the same key computes once; results derived from an upload stay in their session (two sessions on one
upload compute it twice), results of the shipped sample are shared (two sessions compute them once);
the engine's own memos of a run are the session's too (`engine_scope`: tests/test_engine_memo.py);
and ui/ and pages/ hold no other cache (no SharedMemo, no dict memo in session state, no Streamlit
cache outside `ui.cache.STREAMLIT_CACHES`)."""

from __future__ import annotations

import ast
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from apptest_support import count_calls, fresh_process_memo, page_app, page_text

from engine import memo as engine_memo
from ui import cache
from ui.context import Context

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*(ROOT / "ui").rglob("*.py"), *(ROOT / "pages").glob("*.py"), ROOT / "app.py"])
needs_sample = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


@dataclass(eq=False)
class _Data:
    """Stands for a dataset (any object: `shipped` goes by identity)."""

    name: str = "sample"


@dataclass(eq=False)
class _Loaded:
    data: _Data


def _context(data: object) -> Context:
    return Context(data, "population", "cohort", None, None, None, 5)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------- the mechanism
def test_a_memo_computes_a_key_once_and_drops_the_least_recently_used():
    calls: list[str] = []

    def compute(key: str):
        return lambda: calls.append(key) or f"value of {key}"

    assert cache.memo("test lru", "a", compute("a"), size=2) == "value of a"
    assert cache.memo("test lru", "a", compute("a"), size=2) == "value of a"  # held: not computed again
    cache.memo("test lru", "b", compute("b"), size=2)
    cache.memo("test lru", "a", compute("a"), size=2)  # a used last: b is now the least recently used
    cache.memo("test lru", "c", compute("c"), size=2)  # over the bound: b dropped
    assert calls == ["a", "b", "c"]
    assert cache.held("test lru", "b") is None and cache.held("test lru", "a") == "value of a"
    cache.memo("test lru", "b", compute("b"), size=2)
    assert calls == ["a", "b", "c", "b"]


def test_only_held_reads_and_raises_on_what_it_would_compute():
    """The probe of ui.progress.run: held entries come back, a missing one raises instead of running,
    in the app's memo (session and shared) and the engine's (through the session's engine scope)."""
    cache.memo("test probe", "held", lambda: "v", size=2)
    ran: list[str] = []
    with cache.only_held():
        assert cache.memo("test probe", "held", lambda: ran.append("held") or "w", size=2) == "v"
        with pytest.raises(cache.NotHeld):
            cache.memo("test probe", "missing", lambda: ran.append("missing") or "w", size=2)
        with cache.engine_scope(), pytest.raises(cache.NotHeld):
            engine_memo.memo("test probe", "missing", lambda: ran.append("engine") or "w", size=2)
    assert ran == []
    assert cache.memo("test probe", "missing", lambda: "computed", size=2) == "computed"  # outside: as ever


def test_a_probe_claims_a_shared_key_and_other_sessions_wait_for_its_worker():
    """Issue 24: eight sessions on the sample asking for the same new k start one worker, not eight.
    The first probe claims the shared key (NotHeld.end); another session's probe waits for it and gets
    what the worker stored; a claim ended without a value lets the next one claim it."""
    sample = cache.load_shipped("test sample", "options", lambda: _Loaded(_Data()), size=1).data
    with cache.only_held(), pytest.raises(cache.NotHeld) as miss:
        cache.memo("test claim", 1, lambda: "computed by the probe", size=2, data=sample)
    end = miss.value.end
    assert end is not None
    got: list[object] = []

    def other_session(key: int = 1) -> None:
        with cache.only_held():
            try:
                got.append(cache.memo("test claim", key, lambda: "computed twice", size=2, data=sample))
            except cache.NotHeld as again:
                got.append(again)

    waiter = threading.Thread(target=other_session)
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive() and not got, "the other session did not wait for the claimed key"
    cache.put("test claim", 1, "stored by the worker", size=2, data=sample)  # the worker's replay
    end()
    waiter.join(5)
    assert got == ["stored by the worker"]

    with cache.only_held(), pytest.raises(cache.NotHeld) as first:
        cache.memo("test claim", 2, lambda: "x", size=2, data=sample)
    got.clear()
    waiter = threading.Thread(target=other_session, args=(2,))
    waiter.start()
    time.sleep(0.2)
    assert waiter.is_alive() and not got
    assert first.value.end is not None
    first.value.end()  # the worker failed or was cancelled: nothing stored
    waiter.join(5)
    # the waiter looked again, found nothing and claimed the key itself (a worker of its own)
    assert len(got) == 1 and isinstance(got[0], cache.NotHeld) and got[0].end is not None
    got[0].end()


def test_a_name_has_one_size():
    cache.memo("test one size", 1, lambda: 1, size=3)
    with pytest.raises(ValueError, match="bounded at 3"):
        cache.memo("test one size", 2, lambda: 2, size=4)


def test_the_shared_store_computes_one_key_at_a_time_and_recovers_from_a_failed_run():
    """(Formerly ui.progress.SharedMemo's test.) A second caller waits for the first's computation;
    a failed computation holds nothing; the store is bounded."""
    memo = cache.Shared(2)
    calls: list[str] = []
    started = threading.Event()

    def slow() -> str:
        calls.append("slow")
        started.set()
        time.sleep(0.2)
        return "value"

    out: list[str] = []
    first = threading.Thread(target=lambda: out.append(memo.compute("a", slow)))
    first.start()
    started.wait()
    out.append(memo.compute("a", slow))  # waits for the first caller's computation
    first.join()
    assert out == ["value", "value"] and calls == ["slow"]

    def failing() -> str:
        raise RuntimeError("cancelled")

    with pytest.raises(RuntimeError):
        memo.compute("b", failing)
    assert memo.compute("b", lambda: "second") == "second"  # nothing held from the failed run
    memo.compute("c", lambda: "c")
    assert memo.get("a") is None and len(memo) == 2  # bounded: least recently used dropped


def test_shipped_is_the_loaded_sample_by_identity_and_what_the_shared_store_derives_from_it():
    sample = cache.load_shipped("test sample", "options", lambda: _Loaded(_Data()), size=1).data
    named_alike = _Data("sample")  # an upload named like the sample is no shipped data
    assert cache.shipped(sample) and cache.shipped(_context(sample))
    assert not cache.shipped(named_alike) and not cache.shipped(_context(named_alike))
    assert not cache.shipped(None) and not cache.shipped((None, None))

    derived = cache.memo("test derived", 1, lambda: _Data("derived"), size=2, data=sample)
    assert cache.shipped(derived) and cache.shipped((derived, sample, None))  # a result of the sample
    assert not cache.shipped((derived, named_alike))  # anything of an upload among the inputs: no
    private = cache.memo("test derived", 2, lambda: _Data("private"), size=2, data=named_alike)
    assert not cache.shipped(private)
    assert cache.shared_size("test derived") == 1  # the upload's result is in the session's store only
    assert cache.held("test derived", 2) is private and cache.held("test derived", 2, data=sample) is None


# ------------------------------------------------------------------------- two sessions, AppTest
@pytest.fixture
def counted(monkeypatch, tmp_path):
    """GCCens releases made (`GCCensSettings.release_of`, every release of the view) and uploads
    parsed (`ui.sidebar.load_uploaded`), across AppTest sessions and the worker processes their runs
    happen in (`apptest_support.Counts`)."""
    fresh_process_memo()
    cache.clear()
    yield from count_calls(
        monkeypatch,
        tmp_path / "counts",
        {"releases": "engine.study.runs:GCCensSettings.release_of", "uploads": "ui.sidebar:load_uploaded"},
    )


def _events_csv(n: int = 60) -> bytes:
    codes = ["401.1", "250.00", "272.4", "724.2"]
    rows = [(f"U{p:03d}", v, codes[(p + v) % 4]) for p in range(n) for v in (1, 2)]
    return pd.DataFrame(rows, columns=["patient_id", "visit", "code"]).to_csv(index=False).encode()


def _gccens_session(upload: bytes | None):
    at = page_app(view=("ui.views.gccens", "render_anonymize"))
    if upload is not None:
        at.session_state["dataset_choice"] = "Upload files"
        at.run()
        at.sidebar.file_uploader(key="upload_events").upload("my_events.csv", upload, "text/csv")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "erified" in page_text(at)  # the view drew its release and its verdict
    return at


SHAREABLE = ("previews", "gccens releases", "gccens measures", "gccens inputs", "groups", "code order")


def test_two_sessions_on_an_upload_share_nothing(counted):
    first = _gccens_session(_events_csv())
    assert first.session_state["context"].dataset.name == "uploaded: my_events.csv"
    made = counted["releases"]
    assert made > 0 and counted["uploads"] == 1
    assert all(cache.shared_size(name) == 0 for name in SHAREABLE), "an upload's result was shared"
    assert engine_memo.held_count() == 0, "the engine kept an upload's work in the process"
    assert "_cache_previews" in first.session_state  # held in the session

    second = _gccens_session(_events_csv())
    assert counted["uploads"] == 2, "the second session read the first one's upload"
    assert counted["releases"] == 2 * made, "the second session got the first one's releases"
    assert all(cache.shared_size(name) == 0 for name in SHAREABLE)
    assert second.session_state["_cache_previews"] is not first.session_state["_cache_previews"]


@needs_sample
def test_two_sessions_on_the_sample_compute_its_results_once(counted):
    first = _gccens_session(None)
    made = counted["releases"]
    assert made > 0 and cache.shared_size("gccens releases") > 0 and cache.shared_size("previews") > 0
    assert "_cache_previews" not in first.session_state  # the sample's previews are the server's

    second = _gccens_session(None)
    assert counted["releases"] == made, "the second session made the sample's releases again"
    assert "_cache_gccens releases" not in second.session_state


# ------------------------------------------------------------------------ no other cache in the app
def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# session state set with setdefault that is state, not a memo of a computation
NOT_MEMOS = {
    ("ui/progress.py", "_CANCELLED"): "the jobs the user cancelled, per place",
    ("ui/progress.py", "_RAN"): "the jobs run per place (bounded by _JOBS_KEPT)",
    ("ui/progress.py", "_RESULTS"): "the result last drawn per place, drawn greyed while Run waits",
    ("ui/study.py", "MADE"): "the study's releases and their files (the user's work)",
    ("ui/downloads.py", "AUDIT_SESSION"): "this session's audit entries",
    ("ui/verifications.py", "PSEUDONYM_KEY"): "the session study's pseudonym key",
    ("ui/worker.py", "_WORKERS"): "the worker processes running per place (killed when left)",
}


def _is_session_state(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "session_state"


def test_the_app_holds_no_other_cache():
    found: list[str] = []
    for path in SOURCES:
        text, rel = path.read_text(), _rel(path)
        tree = ast.parse(text)
        if "SharedMemo" in text:
            found.append(f"{rel}: SharedMemo")
        listed = {  # the decorators of the listed Streamlit caches
            id(n)
            for f in ast.walk(tree)
            if isinstance(f, ast.FunctionDef) and (rel, f.name) in cache.STREAMLIT_CACHES
            for dec in f.decorator_list
            for n in ast.walk(dec)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Name | ast.Attribute) and "MEMO" in (
                getattr(node, "id", "") or node.attr
            ):
                found.append(f"{rel}:{node.lineno}: a memo of its own ({ast.unparse(node)})")
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("cache_data", "cache_resource")
                and id(node) not in listed
            ):
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}, not in ui.cache.STREAMLIT_CACHES")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "setdefault"
                and _is_session_state(node.func.value)
                and (rel, ast.unparse(node.args[0])) not in NOT_MEMOS
            ):
                found.append(
                    f"{rel}:{node.lineno}: session state set with setdefault ({ast.unparse(node.args[0])})"
                )
    assert not found, "\n".join(found)


def test_the_listed_streamlit_caches_exist():
    """The docstring's list of exceptions is the code's: each names a function that has one."""
    for (rel, function), why in cache.STREAMLIT_CACHES.items():
        tree = ast.parse((ROOT / rel).read_text())
        defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
        assert len(defs) == 1 and defs[0].decorator_list, (rel, function)
        assert why and function in (cache.__doc__ or ""), (rel, function)


def test_a_shipped_frames_fingerprint_is_read_once_for_the_server(monkeypatch):
    """The sample's lab orders (6.9 million rows) are named by content in every key, but read once per
    server: `frame_fingerprint(frame, data=...)` of the shipped sample is held in the shared store; an
    upload's stays in its session (issue 24)."""
    from ui import fingerprints

    reads: list[int] = []
    original = fingerprints._fingerprint
    monkeypatch.setattr(fingerprints, "_fingerprint", lambda f: reads.append(1) or original(f))
    sample = cache.load_shipped("test sample", "options", lambda: _Loaded(_Data()), size=1).data
    frame = pd.DataFrame({"patient_id": ["a", "b"], "code": ["x", "y"]})
    first = fingerprints.frame_fingerprint(frame, data=_context(sample))
    import streamlit as st

    for key in [k for k in st.session_state if str(k).startswith(cache.PREFIX + "frame fingerprints")]:
        del st.session_state[key]  # another session: nothing of this one's
    assert fingerprints.frame_fingerprint(frame, data=_context(sample)) == first
    assert reads == [1]
    assert fingerprints.frame_fingerprint(frame.copy()) == first  # by content: an equal frame, same name
