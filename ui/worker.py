"""The app's long runs in worker processes (issue 24): `run(compute, tracker, key=..., job=...)`.

`compute(progress)` runs in a child process forked from the server (`engine.scale.forked.Worker`), so
the script thread only waits, without the GIL: the server's other sessions are not held up and the
work has a core of its own. The progress bar moves with the child's reports.

While it waits, the script asks Streamlit whether this run is still wanted (`tracker.check`):
- a rerun of the page (the user changed something: Streamlit's RerunException) leaves the worker running: the next run that asks
  for the same job at the same place takes it up where it is, so a change elsewhere on the page loses
  no work; a run that asks for another job there kills it (the superseded run is cancelled), unless
  its result is shared and the session lets no other finish: then it finishes in the background and
  its result lands in the shared cache (`_let_finish`, issue 40);
- `cancel(key)` (the Cancel button) kills it at once;
- the session's end (the tab closed: Streamlit releases the session's resources) kills and reaps
  every worker the session left running (`_session_end`; issue 40: they stayed for over 60 s);
- a worker nobody took up again for `_ABANDONED_S` seconds (the user went to another page) is killed
  at the next run of any session.

The child is a copy of this session at the call: `compute` reads the session's state and caches as they
are. What it stores in the app's cache (`ui.cache`) is recorded there and stored again here when it
succeeds (`cache.recording` / `cache.replay`), so the next run finds it as if it had run in this thread;
every other write the child makes is lost with it, so a `compute` must write nothing else.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import streamlit as st

from engine.io.progress import Progress
from engine.scale import forked, pool
from ui import admission, cache, state
from ui.script_run import is_rerun, mute_in_child
from ui.state import ABSENT

T = TypeVar("T")
_WORKERS = "_workers"  # session state: run key -> the worker running there (`_Running`)
state.declare(__name__, held={_WORKERS: ABSENT})
_ABANDONED_S = 60.0
_FINISHING = "\x00superseded "  # + a place's key: the one superseded run there let finish (`_let_finish`)
_JOURNAL: list[list] = []  # in the child: the cache entries `compute` stored
_ALL: dict[int, _Running] = {}  # every session's workers, for the sweep of abandoned ones
_ALL_LOCK = threading.Lock()


@dataclass
class _Running:
    worker: forked.Worker
    job: Hashable
    end: Callable[[], None] | None = None  # ends the claim on a shared cache key (`ui.cache.Shared`)
    seen: float = field(default_factory=time.monotonic)

    def stop(self) -> None:
        """Kill the worker (if it still runs) and end its claim."""
        self.worker.kill()
        if self.end is not None:
            self.end()
            self.end = None


# what the runs import when first needed and every worker would otherwise import again (numba and the
# compiled kernels, about 0.5 s; scipy.stats for PheWAS): imported once here, before the first fork,
# so every worker inherits them (torch, for the VAE alone, is imported by its first training); then
# the kernels' machine code is loaded (`engine.anonymize.warm.load_kernels`), which each worker
# otherwise loaded again: about 0.2 s of every UGACLIP / ACLIP, LDA and GCCens run through the app
PRELOAD = pool.KERNELS  # the modules the pool's fork server preloads too
_PRELOADED: list[bool] = []
_PRELOAD_LOCK = threading.RLock()
# Every fork of this process waits for a preload under way: a child must not inherit numba's compiler
# lock held by the preloading thread (a child loading a kernel would then wait for it forever).
os.register_at_fork(
    before=_PRELOAD_LOCK.acquire,
    after_in_parent=_PRELOAD_LOCK.release,
    after_in_child=_PRELOAD_LOCK.release,
)


def _preload() -> None:
    """`PRELOAD` and the kernels, once per process, before the first worker (any fork meanwhile waits
    for it: `os.register_at_fork` above). The kernels run in an empty context, so the warm-up's memo
    entries are the process's, not a session's."""
    with _PRELOAD_LOCK:
        if _PRELOADED:
            return
        import contextvars
        import importlib

        from engine.anonymize.warm import load_kernels

        for name in PRELOAD:
            importlib.import_module(name)
        try:
            contextvars.Context().run(load_kernels)
        except Exception:  # e.g. no shipped sample on this server: each worker loads its kernels itself
            logging.getLogger(__name__).warning("the kernels were not loaded ahead", exc_info=True)
        _PRELOADED.append(True)


def preload_ahead(after: threading.Thread) -> threading.Thread | None:
    """In a daemon thread, once `after` (the script run that loaded the data) has ended: `_preload`,
    so the first worker of the process does not wait for it. None when already done."""
    if _PRELOADED:
        return None

    def ahead() -> None:
        after.join()
        _preload()

    thread = threading.Thread(target=ahead, name="cohortshield-preload", daemon=True)
    thread.start()
    return thread


def _start_child() -> None:
    mute_in_child()
    cache.after_fork()
    _JOURNAL.append(cache.recording().__enter__())


def _finish_child() -> list:
    """The cache entries `compute` stored, sent back with its result (those that cannot be pickled
    are left out by `engine.scale.forked` and computed again here if asked)."""
    return _JOURNAL[-1] if _JOURNAL else []


def _sweep() -> None:
    """Kill the workers no run took up again for `_ABANDONED_S` seconds (any session's)."""
    now = time.monotonic()
    with _ALL_LOCK:
        gone = [k for k, r in _ALL.items() if now - r.seen > _ABANDONED_S]
        dropped = [_ALL.pop(k) for k in gone]
    for r in dropped:
        r.stop()


def _kill_all(mine: dict[str, _Running]) -> None:
    """Kill and reap every worker in `mine` (a session's) and forget them."""
    for key in list(mine):
        running = mine.pop(key, None)
        if running is not None:
            with _ALL_LOCK:
                _ALL.pop(id(running), None)
            running.stop()


@st.cache_resource(
    scope="session", on_release=lambda guard: [_kill_all(m) for m in guard], show_spinner=False
)
def _session_end() -> list[dict[str, _Running]]:
    """A session-scoped resource holding the session's workers: Streamlit releases it when the session
    disconnects or shuts down (the tab closed), which kills them (issue 40, low finding)."""
    return []


def _watch(mine: dict[str, _Running]) -> None:
    """Have the end of this session kill the workers in `mine` (a no-op outside a script run)."""
    if not st.runtime.exists():
        return
    guard = _session_end()
    if not guard:
        guard.append(mine)
    elif guard[0] is not mine:
        guard[0] = mine


def _forget(key: str) -> _Running | None:
    running = st.session_state.get(_WORKERS, {}).pop(key, None)
    if running is not None:
        with _ALL_LOCK:
            _ALL.pop(id(running), None)
    return running


def _let_finish(mine: dict[str, _Running], key: str, running: _Running) -> bool:
    """Let a superseded run finish in the background instead of killing it, when its result is
    shared (it holds a claim on a process-wide cache key: the shipped sample's) and no other run at
    its place `key` is finishing (issue 40, finding 7: a k typed over another was killed, so the Risk
    and Anonymize pages finished only when changes stopped; its result serves the next session asking
    that k). One per place, not per session: the Anonymize page runs two places at each k (the release
    and the compared variant), and with one slot the compared run was killed at every change, its
    claim ended without a result, so no session ever held it (16 sessions: over a second at two k of
    six, every time). A worker already ended is taken too: its result is stored, not thrown away. Its
    session entries are dropped (their state is not touched outside a script run); the sweep of
    abandoned workers still kills it `_ABANDONED_S` after its last wait, and the session's end too."""
    slot = _FINISHING + key
    if running.end is None or slot in mine:
        return False
    mine.pop(key)
    mine[slot] = running
    threading.Thread(target=_finish, args=(mine, slot, running), name="superseded run", daemon=True).start()
    return True


def _finish(mine: dict[str, _Running], slot: str, running: _Running) -> None:
    """Wait for a superseded run (`_let_finish`), store its shared entries, end its claim."""
    try:
        running.worker.wait()
        cache.replay([e for e in running.worker.extra or [] if e.shared])
    except Exception:  # killed meanwhile (the session's end, the sweep) or failed: nothing to store
        logging.getLogger(__name__).debug("a superseded run ended without a result", exc_info=True)
    finally:
        if mine.get(slot) is running:
            mine.pop(slot)
        with _ALL_LOCK:
            _ALL.pop(id(running), None)
        running.stop()


def cancel(key: str) -> None:
    """Kill the worker running at `key` in this session, if any (the Cancel button)."""
    running = _forget(key)
    if running is not None:
        running.stop()


def settle(key: str, job: Hashable) -> None:
    """This session's worker at `key`, when it runs another job than `job` (a run superseded while it
    waited): let it finish in the background, its shared result stored and its claim ended
    (`_let_finish`), or kill it; one of `job` with nothing left to read (`underway` False) is dropped.
    Called before any run at `key`, also one whose result is held and needs no worker: else the superseded worker kept its claim on a shared key until the sweep
    (`_ABANDONED_S`), and every session asking that key waited for it until its own run was superseded
    (issue 40, finding 7: the Anonymize page at two k of six took over a second at every visit)."""
    mine = st.session_state.get(_WORKERS)
    running = None if not mine else mine.get(key)
    if running is None or (running.job == job and running.worker.readable()):
        return  # nothing there, or this job's worker to take up
    if running.job == job or not _let_finish(mine, key, running):
        cancel(key)  # this job's worker killed by the sweep or dead without a result: it starts afresh


def underway(key: str, job: Hashable) -> bool:
    """Whether a worker of this session runs `job` at `key` (a run left by a rerun, to take up), or
    ran it and its result waits to be read (it ended meanwhile: taken up, its result is there at once).
    One killed (the sweep) or that died without sending anything is not: the job starts afresh."""
    running = st.session_state.get(_WORKERS, {}).get(key)
    return running is not None and running.job == job and running.worker.readable()


def run(
    compute: Callable[[Progress], T],
    tracker: Any,
    *,
    key: str,
    job: Hashable,
    end: Callable[[], None] | None = None,
) -> T:
    """`compute(progress)` in a worker process for `job` at `key`: the one already running there
    for this job taken up again, any other killed; `tracker` (ui.progress.Tracker) draws its progress
    and decides (its `check`) whether this script run still waits. `end`: a claim on a shared cache
    key (`ui.cache.NotHeld.end`) the worker holds until its results are stored or it is killed."""
    _sweep()
    if not forked.enabled():
        if end is not None:
            end()
        return compute(tracker)
    mine: dict[str, _Running] = st.session_state.setdefault(_WORKERS, {})
    settle(key, job)
    running = mine.get(key)
    if running is None:
        try:
            _preload()
            worker = forked.Worker(compute, in_child=_start_child, finish=_finish_child)
        except BaseException:
            if end is not None:
                end()  # no worker will store the key: other sessions must not wait for it
            raise
        running = mine[key] = _Running(worker, job, end)
        with _ALL_LOCK:
            _ALL[id(running)] = running
        _watch(mine)
    elif end is not None:
        end()  # the worker taken up holds its own claim, if any
    waiting = running

    def check() -> None:
        waiting.seen = time.monotonic()  # waited on: not abandoned, however long it runs
        tracker.check()

    try:
        with admission.stepped_out():  # the wait computes nothing here: another session's run may
            value = running.worker.wait(tracker, check)
    except BaseException as exc:
        if is_rerun(exc):
            running.seen = time.monotonic()  # a rerun: the next run for this job takes it up
            # unless its result is shared: then it finishes now, whether or not this session asks for
            # it again (a page that shows the study's preview of these settings never does, and every
            # session asking the key waited on its claim until its own run was superseded)
            _let_finish(mine, key, running)
        else:
            cancel(key)
        raise
    _forget(key)
    running.worker.kill()
    cache.replay(running.worker.extra or [])  # stored before the claim ends: waiters find it
    running.stop()
    return value
