"""`ui.progress.in_background` (issue 36): the paper-scale population's first load runs in a thread of
the server under a progress bar; a superseded script run stops waiting, never the load."""

from __future__ import annotations

import threading
import time

import pytest
from streamlit.testing.v1 import AppTest

from ui import progress


def _slow(calls: list[int], result: object = 42, wait: float = 0.3):
    def compute(report):
        calls.append(1)
        report(0.5, "half way")
        time.sleep(wait)
        if isinstance(result, BaseException):
            raise result
        return result

    return compute


def test_a_superseded_wait_leaves_the_work_going_and_the_next_run_takes_it_up(monkeypatch):
    calls: list[int] = []

    class Superseded(Exception):
        pass

    def superseded(label, box=None):
        def draw(fraction, message=""):
            raise Superseded  # Streamlit's RerunException at the bar's first draw

        return draw

    with monkeypatch.context() as m:
        m.setattr(progress, "tracker", superseded)
        with pytest.raises(Superseded):
            progress.in_background("Loading", "job-a", _slow(calls))
    assert progress.in_background("Loading", "job-a", _slow(calls)) == 42
    assert calls == [1]  # one load, not two
    assert progress.in_background("Loading", "job-a", _slow(calls, 43, 0.0)) == 43  # done: a new job
    assert calls == [1, 1]


def test_concurrent_waiters_share_one_computation_and_its_error():
    calls: list[int] = []
    got: list[object] = []

    def wait() -> None:
        try:
            got.append(progress.in_background("Loading", "job-b", _slow(calls, ValueError("bad file"))))
        except ValueError as exc:
            got.append(str(exc))

    threads = [threading.Thread(target=wait) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1] and got == ["bad file"] * 3


def _page():
    import time

    import streamlit as st

    from ui import progress

    def compute(report):
        report(0.25, "reading the events")
        time.sleep(0.6)
        return "loaded"

    st.write(progress.in_background("Loading the population", "job-c", compute))


def test_the_result_is_shown_and_the_bar_removed_after():
    at = AppTest.from_function(_page, default_timeout=30)
    at.run()
    assert not at.exception
    assert [m.value for m in at.markdown] == ["loaded"]
    assert not at.get("progress")
