"""engine.scale.forked.fan_out (issue 24): calls after the first in forked processes, results and
exceptions as if run one after the other here, children killed when this process stops waiting."""

from __future__ import annotations

import os
import time

import pytest

from engine.scale import forked


def _pid() -> int:
    return os.getpid()


def test_results_come_back_in_order_and_from_other_processes() -> None:
    me = os.getpid()
    out = forked.fan_out([_pid, _pid, _pid, lambda: "text", lambda: [1, 2, 3]])
    assert out[0] == me
    assert me not in out[1:3] and out[1] != out[2]  # each call after the first: a process of its own
    assert out[3:] == ["text", [1, 2, 3]]


def test_sequential_without_workers(monkeypatch) -> None:
    monkeypatch.setenv("COHORTSHIELD_WORKERS", "0")
    assert not forked.fan_out_enabled()
    me = os.getpid()
    assert forked.fan_out([_pid, _pid]) == [me, me]


def test_a_fan_out_process_does_not_fan_out_again() -> None:
    inner = forked.fan_out([lambda: 0, lambda: forked.fan_out([_pid, _pid])])[1]
    assert inner[0] == inner[1]  # the nested calls ran in that one process


def test_a_child_exception_is_raised_here_with_where_it_came_from() -> None:
    def fails() -> None:
        raise KeyError("scope")

    with pytest.raises(KeyError, match="scope") as info:
        forked.fan_out([lambda: 1, fails, lambda: 3])
    assert any("fan-out process" in note for note in getattr(info.value, "__notes__", []))


def test_the_first_failure_in_call_order_is_raised() -> None:
    def first() -> None:
        raise ValueError("first")

    def second() -> None:
        raise KeyError("second")

    with pytest.raises(ValueError, match="first"):
        forked.fan_out([first, second])
    with pytest.raises(KeyError, match="second"):
        forked.fan_out([lambda: 1, second, first])


def test_children_are_killed_when_this_process_stops_waiting(tmp_path) -> None:
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
        forked.fan_out([cancelled, slow])
    with pytest.raises(ProcessLookupError):  # killed and reaped when fan_out returned
        os.kill(int(started.read_text()), 0)
    assert not mark.exists()


def test_a_result_that_cannot_be_pickled_is_an_error_not_a_hang() -> None:
    with pytest.raises(Exception, match=r"pickle|lambda|local"):
        forked.fan_out([lambda: 1, lambda: lambda: 2])
