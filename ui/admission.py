"""At most a few script runs compute at once, the sessions served in turn (issue 40, finding 7).

Sixteen sessions changing k once a second ran sixteen script threads at once: they took turns on the
interpreter lock with each other and with the server's event loop (the health endpoint waited seconds,
reruns p95 58 s), and a session's heavy run held the lock the others waited for. app.py runs each
script run's work inside `admitted()`: a run takes one of `SLOTS` places (`COHORTSHIELD_SCRIPT_SLOTS`,
default 2), waiting first come, first served behind the sessions already waiting (`FairQueue`); the
page says "queued (position p)" while it waits. A queued run does not look for reruns (each would start
the script again, at the top, beside the runs computing): when its turn comes, a rerun asked for
meanwhile (the user changed k again) starts at once in the place it was given, with the latest widget
values, so the changes made while queued cost one run. A run superseded after its start keeps its
place for the rerun while the session has held it less than `_KEEP_S` seconds (a quick change of k
costs no queueing); after that it queues again behind the others, so a session changing k faster than
its runs end cannot keep a place. A run waiting for its worker process (`ui.worker.run`) steps out of its place (`stepped_out`) and
takes one back when the worker is done, without queueing: what remains is drawing its result, and
waiters may be waiting for that very result (`ui.cache.Shared`). Outside a Streamlit script run
(`ui.state.running`: tests, a pool worker) nothing waits.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager

from ui import state
from ui.script_run import is_rerun, yield_check

SLOTS_ENV = "COHORTSHIELD_SCRIPT_SLOTS"
_STALE_S = 2.0  # a waiting place not asked about for this long is given up (its session went away)
_POLL_S = 0.1
_SHOW_AFTER_S = 0.3
_KEEP_S = 1.0  # a run superseded within this long after its session took its place reruns there
_REDRAW_S = 2.0  # the position is redrawn at most this often


class FairQueue:
    """`slots` places, given to waiters in the order they first asked (`try_enter`). A waiter keeps
    its place while it keeps asking; one that has not asked for `stale_s` seconds loses it, and so does
    a place `reserve`d and not taken up again within `stale_s`. A holder may `step_out` (its place
    goes to the next waiter) and `come_back` without waiting (over `slots` for a while). Thread-safe;
    `clock` is injectable for tests."""

    def __init__(self, slots: int, *, stale_s: float = _STALE_S, clock: Callable[[], float] = time.monotonic):
        self.slots = max(int(slots), 1)
        self._stale_s = stale_s
        self._clock = clock
        self._cond = threading.Condition()
        self._waiting: OrderedDict[Hashable, float] = OrderedDict()  # who -> last asked, first come first
        self._holding: dict[Hashable, float | None] = {}  # who -> since when reserved (None: in use)
        self._taken: dict[Hashable, float] = {}  # who -> when it took its place from the queue

    def try_enter(self, who: Hashable) -> bool:
        """Take a place if one is free for `who` (the waiters before it go first); else queue `who`
        (or keep its place) and return False."""
        with self._cond:
            if who in self._holding:
                self._holding[who] = None
                return True
            now = self._clock()
            for other, asked in list(self._waiting.items()):
                if other != who and now - asked > self._stale_s:
                    del self._waiting[other]
            for other, since in list(self._holding.items()):
                if since is not None and now - since > self._stale_s:
                    del self._holding[other]
                    self._taken.pop(other, None)
            self._waiting[who] = now  # a new waiter goes last; one already waiting keeps its place
            free = self.slots - len(self._holding)
            if free > 0 and list(self._waiting).index(who) < free:
                del self._waiting[who]
                self._holding[who] = None
                self._taken[who] = now
                return True
            return False

    def held_for(self, who: Hashable) -> float:
        """Seconds since `who` took its place from the queue (kept through `reserve`); 0 if none."""
        with self._cond:
            taken = self._taken.get(who)
            return 0.0 if taken is None or who not in self._holding else self._clock() - taken

    def reserve(self, who: Hashable) -> None:
        """Keep `who`'s place for its next `try_enter` (within `stale_s`): a rerun asked for while it
        was queued starts in the place the queue just gave it."""
        with self._cond:
            if who in self._holding:
                self._holding[who] = self._clock()

    def position(self, who: Hashable) -> int | None:
        """1 for the first waiter; None when `who` is not waiting."""
        with self._cond:
            for i, other in enumerate(self._waiting, 1):
                if other == who:
                    return i
        return None

    def wait(self, timeout: float) -> None:
        """Sleep until a place is given up, or `timeout` seconds."""
        with self._cond:
            self._cond.wait(timeout)

    def leave(self, who: Hashable) -> None:
        """Give up `who`'s place, held or waited for."""
        with self._cond:
            self._holding.pop(who, None)
            self._taken.pop(who, None)
            self._waiting.pop(who, None)
            self._cond.notify_all()

    def step_out(self, who: Hashable) -> bool:
        """Give `who`'s place to the next waiter for a while; whether it held one."""
        with self._cond:
            if who not in self._holding:
                return False
            del self._holding[who]
            self._cond.notify_all()
            return True

    def come_back(self, who: Hashable) -> None:
        """Take a place again after `step_out`, without waiting."""
        with self._cond:
            self._holding[who] = None

    def holding(self) -> int:
        """How many places are held (or reserved)."""
        with self._cond:
            return len(self._holding)


def _slots() -> int:
    """`COHORTSHIELD_SCRIPT_SLOTS` (default 2); a value that is not a whole number is logged and ignored."""
    raw = os.environ.get(SLOTS_ENV, "2").strip()
    if not raw.isdigit():
        logging.getLogger(__name__).warning("%s=%r is not a whole number; 2 script slots", SLOTS_ENV, raw)
        return 2
    return max(int(raw), 1)


QUEUE = FairQueue(_slots())


def _session() -> Hashable | None:
    """The session of this script run (`ui.state.session`: None outside one, a pool worker's job too)."""
    return state.session()


@contextmanager
def admitted(queue: FairQueue | None = None) -> Iterator[None]:
    """Run the block in one of the queue's places, waiting in turn for it (see the module)."""
    queue = queue or QUEUE
    who = _session()
    if who is None:
        yield
        return
    check = yield_check()
    start = time.monotonic()
    shown, said, entered = None, 0.0, False
    try:
        while not queue.try_enter(who):
            now = time.monotonic()
            if now - start > _SHOW_AFTER_S and now - said > _REDRAW_S:  # a draw may raise for a rerun
                import streamlit as st

                shown = shown or st.empty()
                shown.caption(
                    f"Queued (position {queue.position(who) or 1}): the server is running other sessions' work."
                )
                said = now
            queue.wait(_POLL_S)
        entered = True
        check()  # a rerun asked for while queued starts now, in this place
        if shown is not None:
            shown.empty()
    except BaseException as exc:
        if not is_rerun(exc):
            queue.leave(who)
        elif entered:
            queue.reserve(who)
        raise
    try:
        yield
    except BaseException as exc:
        if is_rerun(exc) and queue.held_for(who) < _KEEP_S:
            queue.reserve(who)  # a quick change: the rerun starts here, not behind the queue
        else:
            queue.leave(who)
        raise
    else:
        queue.leave(who)


@contextmanager
def stepped_out(queue: FairQueue | None = None) -> Iterator[None]:
    """Give this session's place to the next waiter during the block (a wait that computes nothing
    here: a worker process's run), taking it back, without queueing, after."""
    queue = queue or QUEUE
    who = _session()
    out = who is not None and queue.step_out(who)
    try:
        yield
    finally:
        if out:
            queue.come_back(who)
