"""The app's long runs in worker processes (issues 24, 38): `run(compute, tracker, key=..., job=...)`.

`compute(progress)` runs in a worker of the app's process pool (`engine.scale.pool`): processes forked
by a fork server started once from a clean interpreter, never by this multi-threaded server, their
kernels loaded ahead (`engine.scale.preload_kernels`). The script thread only waits, without the GIL:
the server's other sessions are not held up and the work has a core of its own. The progress bar moves
with the worker's reports.

The job is `compute` pickled (cloudpickle; the records it names go as shared-memory handles), run in
`ui.cache.worker_side`: the app's cache there is the job's own, and an entry the job asks for that it
has not computed is asked of this session (`ui.cache.answerer`), so a worker never computes again what
the server already holds. The entries it computes are recorded and stored here when it succeeds
(`cache.recording` / `cache.replay`), so the next run finds them as if it had run in this thread;
whether an input is the shipped sample's (shared by every session) is this server's verdict, sent with
the job (`cache.is_shipped_object`). A `compute` must write nothing but the app's cache: every other
write is lost with the job.

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
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import streamlit as st

from engine.io.progress import Progress
from engine.scale import pool
from ui import admission, cache, state
from ui.script_run import is_rerun
from ui.state import ABSENT

T = TypeVar("T")
_WORKERS = "_workers"  # session state: run key -> the worker running there (`_Running`)
state.declare(__name__, held={_WORKERS: ABSENT})
_ABANDONED_S = 60.0
_FINISHING = "\x00superseded "  # + a place's key: the one superseded run there let finish (`_let_finish`)
_ALL: dict[int, _Running] = {}  # every session's workers, for the sweep of abandoned ones
_ALL_LOCK = threading.Lock()
# imported once by the pool's fork server, so every worker starts with them: the kernels' modules,
# this module (and with it Streamlit and the app's cache, which every job's unpickling imports) and
# the kernels' machine code (`engine.scale.preload_kernels`)
PRELOAD = (*pool.KERNELS, "ui.worker", "engine.scale.preload_kernels")
_POOL: list[pool.Pool] = []
_POOL_LOCK = threading.Lock()


def app_pool() -> pool.Pool:
    """The app's pool of workers (`PRELOAD`), made at its first use and closed at the process's exit."""
    with _POOL_LOCK:
        if not _POOL:
            import atexit

            from engine.scale import preload_kernels

            _POOL.append(pool.Pool(preload=PRELOAD, warm=preload_kernels.ensure))
            atexit.register(_POOL[0].close)
        return _POOL[0]


@dataclass
class _Running:
    worker: pool.Job
    job: Hashable
    end: Callable[[], None] | None = None  # ends the claim on a shared cache key (`ui.cache.Shared`)
    seen: float = field(default_factory=time.monotonic)

    def stop(self) -> None:
        """Kill the worker (if it still runs) and end its claim."""
        self.worker.kill()
        if self.end is not None:
            self.end()
            self.end = None


_NO_RUN_CONTEXT_LOGGER = "streamlit.runtime.scriptrunner_utils.script_run_context"  # its logger's name


class AppJob:
    """A page's `compute` as a pool job: run in `ui.cache.worker_side` with this session's engine
    memos (`cache.engine_scope`), what it stores in the app's cache recorded (`journal`, sent back
    with its result: `engine.scale.pool`)."""

    def __init__(self, compute: Callable[[Progress], Any]) -> None:
        self.compute = compute
        self._journal: list[cache.Entry] = []

    def received(self, marked: list[Any]) -> None:
        """The objects the server knows as shipped (`pool.dumps`): known so here too."""
        cache.mark_shipped(marked)

    def __call__(self, progress: Progress) -> Any:
        # what a job draws goes nowhere (no page here): Streamlit's warning for each such call is noise
        logging.getLogger(_NO_RUN_CONTEXT_LOGGER).setLevel(logging.ERROR)
        with cache.worker_side(pool.ask), cache.engine_scope(), cache.recording() as journal:
            self._journal = journal
            return self.compute(progress)

    def journal(self) -> list[cache.Entry]:
        return self._journal


def preload_ahead(after: threading.Thread) -> threading.Thread | None:
    """In a daemon thread, once `after` (the script run that loaded the data) has ended: the app's
    pool started with its workers, so the first run of the process does not wait for the fork
    server's preload. None when the pool is already made."""
    if _POOL or not pool.enabled():
        return None

    def ahead() -> None:
        after.join()
        try:
            app_pool().start(2)
        except Exception:  # the first run starts them itself, and says what failed
            logging.getLogger(__name__).warning("the workers were not started ahead", exc_info=True)

    thread = threading.Thread(target=ahead, name="cohortshield-preload", daemon=True)
    thread.start()
    return thread


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
    if not pool.enabled():
        if end is not None:
            end()
        return compute(tracker)
    mine: dict[str, _Running] = st.session_state.setdefault(_WORKERS, {})
    settle(key, job)
    running = mine.get(key)
    if running is None:
        try:
            worker = app_pool().submit(AppJob(compute), answer=cache.answerer(), mark=cache.is_shipped_object)
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
