"""Progress and cancel for every long run of the app (issue 13, "Long work").

`run(label, compute, key=..., job=...)` draws a progress bar and a Cancel button, then runs
`compute(progress)` in a worker process (issue 24, ui/worker.py): the script thread waits without the
GIL, so the server's other sessions are not held up, and the engine's `progress(fraction, message)`
reports come back to move the bar. While it waits, the script asks Streamlit whether this run is
still wanted:

- a rerun (a widget changed: with `runner.fastReruns` the old run is told to stop and a new one
  starts at once) makes Streamlit's check raise RerunException; the worker runs on, and the new run
  takes it up where it is when it asks for the same job at the same place, or kills it when it asks
  for another (the superseded run is cancelled);
- the Cancel button kills the worker at once and records the job as cancelled, so the next run
  shows "cancelled" and a "Run again" button instead of starting it again.

Where no worker may be used (`engine.scale.pool.enabled`), `compute` runs in the script thread and
the same check is made at each of the engine's progress calls.

The bar is redrawn at most every `_REDRAW_S` seconds. The app's own memo (`ui.cache`) replays nothing,
and no function of the app cached by Streamlit draws (`ui.cache.STREAMLIT_CACHES`, tests/test_cache.py):
a bar is never recorded into a cached function's replay (issue 13's `CacheReplayClosureError`).
`tracker(label)` is the same callback without the Cancel control, for runs inside one. `busy(key, text)`
is a spinner with words over a whole block of work (issue 26, finding 2), `greyed` the previous results
while changed parameters wait for "Run" (finding 5). Results are memoized by `ui.cache` (the shared store
waits on another session's computation with `yield_check`, so a superseded run stops waiting).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, overload

import streamlit as st

from engine.scale import pool
from ui import cache, state
from ui import worker as workers
from ui.literal import md
from ui.script_run import yield_check
from ui.state import ABSENT

T = TypeVar("T")
Progress = Callable[..., None]
_CANCELLED = "_progress_cancelled"  # session state: run key -> the job cancelled there
_REDRAW_S = 0.25


class Tracker:
    """The progress callback, the engine's one protocol (`engine.io.progress.Progress`):
    `tracker(fraction, message="")`. Raises when the script run was superseded or cancelled."""

    def __init__(self, bar: Any, label: str) -> None:
        self.bar, self.label = bar, label
        self.check = yield_check()
        self.last = 0.0
        self.calls = 0

    def __call__(self, fraction: float, message: str = "") -> None:
        fraction = float(fraction)
        self.calls += 1
        self.check()  # raises Streamlit's stop or rerun exception when this run was superseded
        now = time.monotonic()
        if now - self.last < _REDRAW_S and fraction < 1.0:
            return
        self.last = now
        text = f"{self.label}: {message} ({fraction:.0%})" if message else f"{self.label}: {fraction:.0%}"
        self.bar.progress(min(max(fraction, 0.0), 1.0), text=text)


def steps(tracker: Callable[..., None], total: int, message: Callable[[int], str]) -> Callable[[int], None]:
    """A per-step callback for loops of `total` steps: `step(i)` reports i of total done."""
    return lambda i: tracker(i / max(total, 1), f"{message(i)}: {i:,} of {total:,}")


def tracker(label: str, box: Any = None) -> Tracker:
    """A progress bar (in `box`, default here) and its callback, without a Cancel control."""
    bar = (box or st).progress(0.0, text=f"{label}: starting…")
    return Tracker(bar, label)


class _Background:
    """One computation in a thread of the server (`in_background`): its last progress report, then
    its result or exception."""

    def __init__(self, compute: Callable[[Progress], Any]) -> None:
        self.latest: tuple[float, str] = (0.0, "starting")
        self.result: Any = None
        self.error: BaseException | None = None
        self.compute = compute
        self.thread = threading.Thread(target=self._work, name="cohortshield background", daemon=True)

    def report(self, fraction: float, message: str = "") -> None:
        self.latest = (float(fraction), message)

    def _work(self) -> None:
        try:
            self.result = self.compute(self.report)
        except BaseException as exc:  # handed to every script run that waits for it
            self.error = exc


_BACKGROUND: dict[Hashable, _Background] = {}  # job -> its computation under way
_BACKGROUND_LOCK = threading.Lock()


def in_background(label: str, job: Hashable, compute: Callable[[Progress], T]) -> T:
    """`compute(progress)` in a thread of the server, a progress bar here following its reports
    (issue 36: the paper-scale population's first load, a minute of stages, showed a bare spinner).
    A rerun stops this script run's wait, never the work: the next run that asks for the same `job`
    waits for the same computation (so a click during a load does not start it again). The bar is
    removed when the work ends; its exception is raised here."""
    with _BACKGROUND_LOCK:
        bg = _BACKGROUND.get(job)
        if bg is None:
            bg = _BACKGROUND[job] = _Background(compute)
            bg.thread.start()
    box = st.empty()
    bar = tracker(label, box)
    try:
        while bg.thread.is_alive():
            bar(*bg.latest)  # raises when this run is superseded: the thread goes on
            bg.thread.join(_REDRAW_S / 2)
    finally:
        if not bg.thread.is_alive():
            with _BACKGROUND_LOCK:
                if _BACKGROUND.get(job) is bg:
                    del _BACKGROUND[job]
    box.empty()
    if bg.error is not None:
        raise bg.error
    return bg.result


def _quiet(fraction: float, message: str = "") -> None:
    """The progress callback of a probe (nothing to draw: it only reads the cache)."""


def _cancel(key: str, job: Hashable) -> None:
    st.session_state.setdefault(_CANCELLED, {})[key] = job
    workers.cancel(key)  # the worker stops now, not when this rerun reaches it


def cancelled(key: str, job: Hashable) -> bool:
    """Was this job cancelled at this place (and not started again since)?"""
    return st.session_state.get(_CANCELLED, {}).get(key, _NOTHING) == job


_NOTHING = object()
_RESULTS = "_progress_results"  # session state: run key -> (job, result) of its last run (`stale=True`)


@dataclass(frozen=True, eq=False)
class Stale(Generic[T]):
    """The last result at a place whose parameters changed since and that waits for "Run" (issue 26,
    finding 5): the view draws it greyed (`greyed`), under the parameters of its `job`."""

    result: T
    job: Any


# keyed containers carry the class st-key-<key> (Streamlit 1.67): the previous results, greyed
_GREY_CSS = '<style>div[class*="st-key-stale_"] { opacity: 0.45; filter: grayscale(0.7); }</style>'


@contextmanager
def greyed(key: str, caption: str):
    """Draw the previous parameters' results greyed, under a caption that says so, shown literally
    (it names the parameters, which may quote codes from the data)."""
    st.html(_GREY_CSS)
    st.caption(md(caption))
    with st.container(key=f"stale_{key}"):
        yield


# a keyed container (class st-key-busy_<key>) held at a fixed place on screen, at the top right under
# the toolbar: its spinner neither moves the page when it comes and goes nor scrolls out of view
_BUSY_CSS = (
    '<style>div[class*="st-key-busy_"] { position: fixed; top: 4.25rem; right: 2rem; z-index: 999990; '
    'width: auto !important; } div[class*="st-key-busy_"] [data-testid="stSpinner"] { '
    "background: rgba(128, 128, 128, 0.14); backdrop-filter: blur(8px); padding: 0.4rem 0.9rem; "
    "border-radius: 0.5rem; box-shadow: 0 2px 10px rgba(0, 0, 0, 0.18); }</style>"  # either theme
)


@contextmanager
def busy(key: str, text: str):
    """A spinner with words (`text`) for the whole block, at a fixed place on screen (issue 26, finding
    2: a page sat at its heading for seconds with no spinner while it prepared, ran and verified).
    Streamlit shows it once the block has lasted half a second and removes it when the block ends;
    the block's own elements are drawn where they would be without it."""
    st.html(_BUSY_CSS)
    box = st.container(key=f"busy_{key}")
    with box.spinner(text):
        yield


@overload
def run(
    label: str,
    compute: Callable[[Tracker], T],
    *,
    key: str,
    job: Hashable = ...,
    ask: bool = ...,
    ask_first: bool = ...,
    stale: Literal[False] = ...,
    worker: bool = ...,
    probe: bool = ...,
) -> T | None: ...


@overload
def run(
    label: str,
    compute: Callable[[Tracker], T],
    *,
    key: str,
    job: Hashable = ...,
    ask: bool = ...,
    ask_first: bool = ...,
    stale: Literal[True],
    worker: bool = ...,
    probe: bool = ...,
) -> T | Stale[T] | None: ...


def run(
    label: str,
    compute: Callable[[Tracker], T],
    *,
    key: str,
    job: Hashable = None,
    ask: bool = False,
    ask_first: bool = False,
    stale: bool = False,
    worker: bool = True,
    probe: bool = True,
) -> T | Stale[T] | None:
    """`compute(progress)` under a progress bar with a Cancel button; None when the user cancelled
    this `job` (the parameters of the run: another job at `key` starts afresh) and has not asked to
    run it again. Exceptions of `compute` propagate; the bar and the button are removed after it.

    `ask` (the methods too slow for a live preview, issue 13: "Run" for anything slow): the first run
    at `key` in a session starts by itself; after that, a job not run here yet waits for the user's
    "Run" (None until then). `ask_first` (a run of a minute, issue 26): the first one waits too. The
    message names the last run's time only when it took a second or more (issue 26: "took 0.0 s"
    before a 48 s run). A job run before starts by itself (its result is normally still cached).
    `stale` (issue 26, finding 5): while a changed job waits for "Run", the last job's result at `key`
    comes back as `Stale(result, job)` for the view to draw greyed, instead of None.
    `worker` (issue 24): `compute` runs in a worker process (ui/worker.py); False keeps it in this
    thread (a `compute` that must write more than the app's cache). `probe`: `compute` is first tried
    here with the app's cache only read (`ui.cache.only_held`): when every step it asks for is held,
    its result is shown at once; False for a `compute` with uncached work of its own (the report)."""
    memo: dict = st.session_state.setdefault(_CANCELLED, {})
    if key in memo and memo[key] != job:
        memo.pop(key)  # the parameters changed since the cancel: a new job
    if key in memo:
        c1, c2 = st.columns([4, 1])
        c1.info(f"{label}: cancelled. Change a parameter, or run it again.")
        if not c2.button("Run again", key=f"{key}_again"):
            return None
        memo.pop(key)
    ran: dict[str, _Ran] = st.session_state.setdefault(_RAN, {})
    last = ran.get(key)
    claim: list[Callable[[], None]] = []  # the probe's claim on a shared key, for the worker
    workers.settle(key, job)  # a superseded run's worker at `key`: finished in the background, or killed
    if probe and not workers.underway(key, job):
        try:
            with cache.only_held():
                result = compute(_quiet)  # every step held: shown at once, no worker, no bar
        except cache.NotHeld as miss:
            claim.extend([miss.end] if miss.end is not None else [])
        else:
            ran[key] = (last or _Ran()).after(job, last.seconds if last else 0.0)
            if stale:
                hold(key, job, result)
            return result
    try:
        return _started(label, compute, key, job, ask, ask_first, stale, worker, claim)
    finally:
        for end in claim:  # not handed to a worker (asked to wait for Run, cancelled, failed)
            end()


def _started(
    label: str,
    compute: Callable[[Tracker], T],
    key: str,
    job: Hashable,
    ask: bool,
    ask_first: bool,
    stale: bool,
    worker: bool,
    claim: list[Callable[[], None]],
) -> T | Stale[T] | None:
    """`run` after the probe: the Run prompt when asked, else the run under its bar; a claim in
    `claim` is handed to the worker (which ends it when its results are stored) and removed."""
    ran: dict[str, _Ran] = st.session_state.setdefault(_RAN, {})
    last = ran.get(key)
    new_job = last is None or job not in last.jobs
    if new_job and (ask_first or (ask and last is not None)) and not workers.underway(key, job):
        # issue 26: a run too slow even for a first preview (`ask_first`) asks too, and no other job's
        # time is quoted as this one's ("took 0.0 s" before a 48 s run): only a second or more is named
        took = f" The last run here took {last.seconds:.0f} s." if last and last.seconds >= 1 else ""
        box = st.empty()
        with box.container():
            c1, c2 = st.columns([4, 1])
            c1.info(
                (
                    f"{label}: the parameters changed since the last run.{took} "
                    if last is not None
                    else f"{label}: a long run (a minute or more on large data), not started by itself. "
                )
                + "Press Run to compute these."
            )
            clicked = c2.button("Run", key=f"{key}_start", type="primary", help="Run with these parameters")
        if not clicked:
            held = st.session_state.get(_RESULTS, {}).get(key) if stale else None
            return None if held is None else Stale(held[1], held[0])
        box.empty()  # the bar takes its place
    holder = st.empty()
    with holder.container():
        c1, c2 = st.columns([5, 1])
        bar = c1.progress(0.0, text=f"{label}: starting…")
        c2.button("Cancel", key=f"{key}_cancel", on_click=_cancel, args=(key, job), help="Stop this run")
    start = time.monotonic()
    try:
        tracker = Tracker(bar, label)
        if worker and pool.enabled():
            end = claim.pop() if claim else None
            result = workers.run(compute, tracker, key=key, job=job, end=end)
        else:
            for end in claim:  # computed here: this thread takes the shared key itself
                end()
            claim.clear()
            result = compute(tracker)
    finally:
        holder.empty()
    ran[key] = (last or _Ran()).after(job, time.monotonic() - start)
    if stale:
        hold(key, job, result)
    return result


def underway(key: str, job: Hashable) -> bool:
    """Whether a run of `job` at `key` is under way in a worker, left there by a rerun: a page whose
    run starts on a button click calls `run` again for it on the next run, and so waits on."""
    return workers.underway(key, job)


def hold(key: str, job: Hashable, result: Any) -> None:
    """Record `result` as the one drawn at `key` for `job`, what `run(..., stale=True)` gives back
    (greyed) while a changed job waits for "Run": `run` does it; a view that draws a memoized result
    without calling `run` says so here, so the greyed results are the last ones drawn."""
    st.session_state.setdefault(_RESULTS, {})[key] = (job, result)


_RAN = "_progress_ran"  # session state: run key -> what ran there (`_Ran`)
state.declare(__name__, held={_CANCELLED: ABSENT, _RESULTS: ABSENT, _RAN: ABSENT})
_JOBS_KEPT = 32


@dataclass(frozen=True)
class _Ran:
    """The jobs run at one place in this session (the most recent last) and the last one's seconds."""

    jobs: tuple = ()
    seconds: float = 0.0

    def after(self, job: Hashable, seconds: float) -> _Ran:
        jobs = (*(j for j in self.jobs if j != job), job)
        return _Ran(jobs[-_JOBS_KEPT:], seconds)
