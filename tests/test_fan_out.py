"""engine.scale.pool.fan_out (issue 24; issue 38, finding 4): the calls after the first in workers of the
pool (not forks of this process), results and exceptions as if run one after the other here, the jobs
killed when this process stops waiting, what they memoized stored here."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from engine.scale import pool


@pytest.fixture
def fan_out():
    return pool.fan_out


def _pid() -> int:
    return os.getpid()


def test_results_come_back_in_order_and_from_other_processes(fan_out) -> None:
    me = os.getpid()
    out = fan_out([_pid, _pid, _pid, lambda: "text", lambda: [1, 2, 3]])
    assert out[0] == me
    assert me not in out[1:3]  # each call after the first: in a child
    assert len(set(out[1:3])) <= max((os.cpu_count() or 2) - 1, 1)  # one process per core at most
    assert out[3:] == ["text", [1, 2, 3]]


def test_a_large_result_comes_back_whole(fan_out) -> None:
    big = np.arange(3_000_000, dtype=np.int64)
    out = fan_out([lambda: 0, lambda: (big * 2, "x" * 100_000)])
    np.testing.assert_array_equal(out[1][0], big * 2)
    assert out[1][1] == "x" * 100_000


def test_a_child_running_several_calls_keeps_their_order(monkeypatch, fan_out) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # one child for every call after the first
    assert fan_out([lambda: 0, *[(lambda i=i: i) for i in range(1, 7)]]) == list(range(7))


def test_sequential_without_workers(monkeypatch, fan_out) -> None:
    monkeypatch.setenv("COHORTSHIELD_WORKERS", "0")
    assert not pool.fan_out_enabled()
    me = os.getpid()
    assert fan_out([_pid, _pid]) == [me, me]


def test_a_fan_out_process_does_not_fan_out_again(fan_out) -> None:
    inner = fan_out([lambda: 0, lambda: fan_out([_pid, _pid])])[1]
    assert inner[0] == inner[1]  # the nested calls ran in that one process


def test_a_child_exception_is_raised_here_with_where_it_came_from(fan_out) -> None:
    def fails() -> None:
        raise KeyError("scope")

    with pytest.raises(KeyError, match="scope") as info:
        fan_out([lambda: 1, fails, lambda: 3])
    assert any("fan-out process" in note for note in getattr(info.value, "__notes__", []))


def test_the_first_failure_in_call_order_is_raised(fan_out) -> None:
    def first() -> None:
        raise ValueError("first")

    def second() -> None:
        raise KeyError("second")

    with pytest.raises(ValueError, match="first"):
        fan_out([first, second])
    with pytest.raises(KeyError, match="second"):
        fan_out([lambda: 1, second, first])
    with pytest.raises(KeyError, match="second"):
        fan_out([lambda: 1, lambda: 2, second, first, lambda: 5])


def test_children_are_killed_when_this_process_stops_waiting(tmp_path, fan_out) -> None:
    started, mark = tmp_path / "child-pid", tmp_path / "child-finished"

    def slow() -> None:
        started.write_text(str(os.getpid()))
        time.sleep(3)
        mark.write_text("done")

    def cancelled() -> None:
        while not started.exists():  # the child is running
            time.sleep(0.01)
        raise RuntimeError("cancelled")  # as a superseded run's progress callback raises

    with pytest.raises(RuntimeError, match="cancelled"):
        fan_out([cancelled, slow])
    with pytest.raises(ProcessLookupError):  # killed and reaped when fan_out returned
        os.kill(int(started.read_text()), 0)
    assert not mark.exists()


def test_a_memo_entry_that_cannot_be_pickled_is_left_out(fan_out) -> None:
    """What a child memoized travels back with its results; an entry that cannot be pickled (a
    lambda) is left out and the others are stored here."""
    from engine import memo

    store: dict = {}

    def child_work() -> int:
        memo.memo("test fan-out", "bad", lambda: lambda: 0, size=4)
        return memo.memo("test fan-out", "good", lambda: os.getpid(), size=4)

    with memo.scope(_Plain(store)):
        pids = fan_out([lambda: 0, child_work])
    assert store == {("test fan-out", "good"): pids[1]}


def test_a_result_that_cannot_be_pickled_is_an_error_not_a_hang(fan_out) -> None:
    with pytest.raises(Exception, match=r"pickle|lambda|local"):
        fan_out([lambda: 1, lambda: lambda: 2])


class _Plain:
    """A memo store over a dict (`engine.memo.scope`)."""

    def __init__(self, store: dict) -> None:
        self.store = store

    def get(self, name, key, default):
        return self.store.get((name, key), default)

    def put(self, name, key, value, size):
        self.store[(name, key)] = value


def test_what_a_child_memoized_is_stored_here(fan_out) -> None:
    from engine import memo

    store: dict = {}

    def child_work() -> int:
        return memo.memo("test fan-out", "k", lambda: os.getpid(), size=4)

    with memo.scope(_Plain(store)):
        pids = fan_out([lambda: 0, child_work])
        assert store[("test fan-out", "k")] == pids[1] != os.getpid()  # the child's value, kept here
        assert memo.memo("test fan-out", "k", lambda: -1, size=4) == pids[1]  # not computed again


def _fan_out_in_a_daemon(path: str) -> None:
    try:
        out = repr(pool.fan_out([_pid, _pid]) == [os.getpid()] * 2)
    except BaseException as exc:  # what the test shows
        out = f"{type(exc).__name__}: {exc}"
    with open(path, "w") as f:
        f.write(out)


def test_a_daemonic_process_runs_its_fan_out_in_place(tmp_path) -> None:
    """A daemonic process (`engine.scale.forked.Worker`'s child, where the app's Heatherly run is until
    it moves onto the pool) may not start processes: its fan-out runs in it, not raises."""
    import multiprocessing

    out = tmp_path / "out"
    child = multiprocessing.get_context("forkserver").Process(
        target=_fan_out_in_a_daemon, args=(str(out),), daemon=True
    )
    child.start()
    child.join(60)
    assert out.read_text() == "True"


def test_the_workers_start_while_the_first_call_runs() -> None:
    """A job's first fan-out starts its own fork server and worker (about 2 s, bench/pool.py): that
    overlaps the first call, here, instead of coming before it."""
    import threading

    workers = pool.Pool(size=1)
    first_runs = threading.Event()
    take = workers._take

    def take_once_the_first_call_runs():
        if not first_runs.wait(10):
            raise AssertionError("a worker was started before the first call ran")
        return take()

    workers._take = take_once_the_first_call_runs  # type: ignore[method-assign]
    try:
        out = pool.fan_out([lambda: first_runs.set() or os.getpid(), _pid], workers)
    finally:
        workers.close()
    assert out[0] == os.getpid() != out[1]
