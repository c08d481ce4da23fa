"""The server's work queue (issue 40, finding 7: "the server's work is queued so that one session's heavy
run cannot starve the others"): ui/admission.py. Order and fairness only; no timing assertion (the
clock is a counter the tests move)."""

from __future__ import annotations

import threading
import time

import pytest

from ui import admission
from ui.admission import FairQueue


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_places_go_to_sessions_in_the_order_they_asked() -> None:
    q = FairQueue(2, clock=_Clock())
    assert q.try_enter("a") and q.try_enter("b")
    assert not q.try_enter("c") and not q.try_enter("d") and not q.try_enter("e")
    assert [q.position(w) for w in "cde"] == [1, 2, 3]
    q.leave("a")
    assert not q.try_enter("e"), "a later waiter went before the first one"
    assert not q.try_enter("d")
    assert q.try_enter("c")
    q.leave("b")
    assert not q.try_enter("e") and q.try_enter("d")
    assert q.position("e") == 1 and q.holding() == 2


def test_asking_again_keeps_a_waiters_place() -> None:
    """A queued run superseded by a rerun asks again from its session: it keeps its place (else a
    session changing k faster than its turn came would never run)."""
    clock = _Clock()
    q = FairQueue(1, clock=clock)
    assert q.try_enter("busy")
    for who in ("k-changer", "other"):
        assert not q.try_enter(who)
    for _ in range(5):  # five reruns of the first waiter while it waits
        clock.now += 1.0
        assert not q.try_enter("k-changer") and not q.try_enter("other")
        assert q.position("k-changer") == 1
    q.leave("busy")
    assert not q.try_enter("other") and q.try_enter("k-changer")


def test_a_waiter_that_stopped_asking_loses_its_place() -> None:
    """A session that went away while queued (its run ended without a rerun) does not hold up the
    ones behind it."""
    clock = _Clock()
    q = FairQueue(1, stale_s=2.0, clock=clock)
    assert q.try_enter("busy") and not q.try_enter("gone") and not q.try_enter("here")
    clock.now += 3.0
    q.leave("busy")
    assert q.try_enter("here")
    assert q.position("gone") is None


def test_no_more_than_the_slots_hold_a_place_at_once() -> None:
    q = FairQueue(2)
    inside, most = [0], [0]
    lock = threading.Lock()
    go = threading.Barrier(8)

    def session(name: str) -> None:
        go.wait()
        while not q.try_enter(name):
            q.wait(0.01)
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        for _ in range(1000):  # some work while inside
            pass
        with lock:
            inside[0] -= 1
        q.leave(name)

    threads = [threading.Thread(target=session, args=(f"s{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert most[0] <= 2 and q.holding() == 0


def test_a_run_waiting_for_its_worker_gives_its_place_to_the_next() -> None:
    """A heavy run in a worker process does not hold a place while it waits (the others run), and
    takes one back without queueing when the worker is done."""
    q = FairQueue(1, clock=_Clock())
    assert q.try_enter("heavy") and not q.try_enter("light")
    assert q.step_out("heavy")
    assert q.try_enter("light")
    q.come_back("heavy")  # the worker is done: over the slots for a while
    assert q.holding() == 2
    q.leave("light")
    q.leave("heavy")
    assert q.holding() == 0 and not q.step_out("nobody")


def test_outside_a_script_run_nothing_waits() -> None:
    q = FairQueue(1)
    assert q.try_enter("someone else")
    with admission.admitted(q), admission.stepped_out(q):
        pass  # would wait forever if it queued behind "someone else"
    assert q.holding() == 1


def test_a_rerun_asked_while_queued_starts_in_the_place_given_and_a_stop_gives_it_up(monkeypatch) -> None:
    """The changes of k made while a session was queued cost one run: when its turn comes, the rerun
    Streamlit raises starts in that place, ahead of the sessions still waiting; a place kept so and not
    taken up (the session went away) is given to the next; a stop gives the place up at once."""
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException

    clock = _Clock()
    q = FairQueue(1, stale_s=2.0, clock=clock)
    monkeypatch.setattr(admission, "_session", lambda: "mine")
    raised: list[BaseException] = [RerunException(None)]

    def check() -> None:
        raise raised[0]

    monkeypatch.setattr(admission, "yield_check", lambda: check)
    with pytest.raises(RerunException), admission.admitted(q):
        pass
    assert not q.try_enter("waiting"), "the rerun's place went to another session"
    assert q.try_enter("mine"), "the rerun did not find its place"
    q.reserve("mine")
    clock.now += 3.0  # not taken up: the next in line gets it
    assert q.try_enter("waiting") and q.holding() == 1
    q.leave("waiting")
    raised[0] = StopException()
    with pytest.raises(StopException), admission.admitted(q):
        pass
    assert q.holding() == 0 and q.position("mine") is None


def test_a_run_waiting_for_another_sessions_result_gives_its_place_to_the_next(monkeypatch) -> None:
    """A run waiting in the shared cache for a value another session's worker computes holds no place
    meanwhile (seen in bench/load_ws.py's stacks: both places held by runs asleep in `Shared.wait`,
    the server idle, 50 runs finished in 30 s against 182 without the queue)."""
    from ui.cache import Shared

    q = FairQueue(1)
    monkeypatch.setattr(admission, "QUEUE", q)
    monkeypatch.setattr(admission, "_session", lambda: "waiter")
    shared = Shared(4)
    end = shared.claim("k=7")  # another session's worker computes it
    assert end is not None and q.try_enter("waiter")
    waiter = threading.Thread(target=shared.wait, args=("k=7",), daemon=True)
    waiter.start()
    try:
        deadline = time.monotonic() + 30
        while not q.try_enter("other") and time.monotonic() < deadline:
            q.wait(0.01)
        assert q.position("other") is None and q.holding() == 1, "the waiting run kept its place"
    finally:
        end()
        waiter.join(30)
    assert q.holding() == 2  # the waiter came back to draw, without queueing


def test_a_run_superseded_soon_after_its_turn_reruns_in_its_place_a_later_one_queues_again(
    monkeypatch,
) -> None:
    """A quick change of k costs no trip through the queue; a session whose runs keep being superseded
    cannot keep its place past `_KEEP_S`."""
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

    clock = _Clock()
    q = FairQueue(1, clock=clock)
    monkeypatch.setattr(admission, "_session", lambda: "mine")
    with pytest.raises(RerunException), admission.admitted(q):
        raise RerunException(None)  # superseded at once
    assert not q.try_enter("other") and q.try_enter("mine")
    clock.now += admission._KEEP_S + 1
    q.reserve("mine")
    q.try_enter("mine")
    with pytest.raises(RerunException), admission.admitted(q):
        raise RerunException(None)  # superseded after holding the place long
    assert q.try_enter("other"), "a session superseded again and again kept the place"
