"""Long work in a worker process (issue 24, `engine.scale.forked`): the result and progress come back,
failures are raised here, a run no longer wanted kills its worker at once, and a dead worker is said."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from engine.io.errors import UserError
from engine.scale import forked

pytestmark = pytest.mark.skipif(not forked.enabled(), reason="no fork on this platform")


class Stop(Exception):
    """What a superseded script run raises (Streamlit's StopException in the app)."""


def test_the_result_and_the_progress_come_back() -> None:
    seen: list[tuple[float, str]] = []

    def work(progress) -> dict:
        for i in range(3):
            progress(i / 3, f"step {i}")
            time.sleep(0.12)  # more than the child's report interval: every step is sent
        progress(1.0, "done")
        return {"pid": os.getpid(), "rows": [1, 2, 3]}

    out = forked.call(work, progress=lambda f, m="": seen.append((f, m)))
    assert out["rows"] == [1, 2, 3]
    assert out["pid"] != os.getpid()  # it ran elsewhere
    assert seen == [(0.0, "step 0"), (1 / 3, "step 1"), (2 / 3, "step 2"), (1.0, "done")]


@pytest.mark.parametrize("in_file", [True, False], ids=["memory file", "pipe"])
def test_a_large_result_comes_back_whole(monkeypatch: pytest.MonkeyPatch, in_file: bool) -> None:
    """A result of megabytes, with the finish's entries, comes back whole: in a memory-backed file
    where the system has one (`forked._result_file`), else through the pipe; the file is closed."""
    if not in_file:
        monkeypatch.setattr(forked, "_result_file", lambda: None)
    elif forked._result_file() is None:
        pytest.skip("no memory-backed files here")
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    got: list = []
    out = forked.call(lambda progress: bytes(range(256)) * 40_000, finish=lambda: ["e"], on_finish=got.append)
    assert out == bytes(range(256)) * 40_000 and got == [["e"]]
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) == fds


def test_the_parent_waits_without_the_gil() -> None:
    """Another thread of the server runs on while the worker computes."""
    ticks = []
    stop = threading.Event()

    def ticker() -> None:
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.01)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        forked.call(lambda progress: sum(i * i for i in range(3_000_000)))
    finally:
        stop.set()
        t.join()
    assert len(ticks) >= 5


def test_a_failure_in_the_worker_is_raised_here_with_its_type_and_text() -> None:
    def work(progress) -> None:
        raise UserError("the cohort file names no patient (row 3, column 'patient_id')")

    with pytest.raises(UserError, match="row 3, column 'patient_id'"):
        forked.call(work)


def test_an_exception_that_cannot_travel_is_raised_with_its_traceback() -> None:
    class Local(Exception):  # a local class cannot be pickled
        pass

    def work(progress) -> None:
        raise Local("a local failure")

    with pytest.raises(RuntimeError, match="a local failure"):
        forked.call(work)


def test_a_run_no_longer_wanted_kills_its_worker_at_once(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    def work(progress) -> None:
        pid_file.write_text(str(os.getpid()))
        while True:  # an engine loop that makes no progress call: only a kill stops it
            sum(range(10_000))

    started = time.monotonic()

    def check() -> None:
        if time.monotonic() - started > 0.5:
            raise Stop

    with pytest.raises(Stop):
        forked.call(work, check=check)
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone (killed and reaped)


def test_a_worker_that_dies_is_said() -> None:
    def work(progress) -> None:
        os._exit(3)  # as the system's out-of-memory killer would leave it: no result, no message

    with pytest.raises(forked.WorkerDied, match="exit code 3"):
        forked.call(work)


def test_a_result_that_cannot_be_pickled_is_an_error_not_a_hang() -> None:
    with pytest.raises(Exception, match="pickle"):
        forked.call(lambda progress: lambda: 1)


def test_finish_runs_in_the_worker_and_its_value_comes_here() -> None:
    got = []
    out = forked.call(lambda progress: 7, finish=lambda: os.getpid(), on_finish=got.append)
    assert out == 7 and got and got[0] != os.getpid()


def test_finish_entries_that_cannot_be_pickled_are_left_out_and_the_rest_kept() -> None:
    """The worker's recorded cache entries travel with the result, pickled once with it; an entry
    that cannot be pickled (a lambda) is left out, the others kept in order."""
    got: list = []
    out = forked.call(lambda progress: 7, finish=lambda: [1, lambda: 0, 2], on_finish=got.append)
    assert out == 7 and got == [[1, 2]]


def test_in_child_runs_first_in_the_worker() -> None:
    marks: list[str] = []  # the child's list: the parent's stays empty
    out = forked.call(lambda progress: list(marks), in_child=lambda: marks.append("first"))
    assert out == ["first"] and marks == []


def test_switched_off_or_nested_it_runs_in_this_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COHORTSHIELD_WORKERS", "0")
    assert not forked.enabled()
    assert forked.call(lambda progress: os.getpid()) == os.getpid()
    monkeypatch.delenv("COHORTSHIELD_WORKERS")
    # a worker's own call runs inline: no grandchild
    inner = forked.call(lambda progress: (os.getpid(), forked.call(lambda p: os.getpid())))
    assert inner[0] == inner[1] != os.getpid()


def test_a_raised_exception_carries_the_workers_traceback() -> None:
    def deep_in_the_engine(progress) -> None:
        raise ValueError("a bug")

    with pytest.raises(ValueError) as info:
        forked.call(deep_in_the_engine)
    assert any("deep_in_the_engine" in note for note in info.value.__notes__)


def test_a_worker_left_by_a_check_is_taken_up_again_where_it_is() -> None:
    """The app's rerun for the same job: the first wait is interrupted, the worker runs on, the second
    wait shows its last report at once and gets the result of the same process."""

    def work(progress) -> int:
        for i in range(6):
            progress(i / 6, f"step {i}")
            time.sleep(0.15)
        return os.getpid()

    worker = forked.Worker(work)
    started = time.monotonic()

    def impatient() -> None:
        if time.monotonic() - started > 0.4:
            raise Stop

    with pytest.raises(Stop):
        worker.wait(check=impatient)
    assert worker.alive()
    seen: list[tuple[float, str]] = []
    try:
        pid = worker.wait(lambda f, m="": seen.append((f, m)))
    finally:
        worker.kill()
    assert pid == worker.pid
    assert seen[0][1] != "step 0" and seen[-1] == (5 / 6, "step 5")


def test_a_value_being_computed_by_another_thread_at_the_fork_is_computed_by_the_worker() -> None:
    """The shipped sample's lab orders are read on first use under a lock (engine.dataset.Deferred);
    a worker forked while another session's thread reads them must not wait on a lock whose holder
    it does not have: it computes the value itself."""
    from engine.dataset import Deferred

    reading, release = threading.Event(), threading.Event()

    def read() -> str:
        if forked._IN_CHILD:
            return "read in the worker"
        reading.set()
        release.wait(10)  # the parent's reader holds the lock meanwhile
        return "read in the parent"

    labs = Deferred(read)
    reader = threading.Thread(target=labs.get)
    reader.start()
    reading.wait(5)
    started = time.monotonic()

    def patience() -> None:
        if time.monotonic() - started > 20:
            raise Stop

    try:
        assert forked.call(lambda progress: labs.get(), check=patience) == "read in the worker"
    finally:
        release.set()
        reader.join()
    assert labs.get() == "read in the parent"


def test_two_threads_killing_one_worker_close_its_pipe_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug report (CI, this session): a superseded run finishing in a background thread
    (`ui.worker._finish`) and a Cancel in the script thread both closed the worker's pipe at once;
    `Connection.close` checks its handle before closing, so both closed the same descriptor number
    (EBADF at best, another file's descriptor at worst). The low-level close is slowed down here so
    that the second thread arrives while the first is inside it: it must close nothing."""
    from multiprocessing import connection

    worker = forked.Worker(lambda progress: time.sleep(30))
    closes = []
    real_close = os.close

    def slow_close(fd: int) -> None:
        closes.append(fd)
        time.sleep(0.3)
        real_close(fd)

    monkeypatch.setattr(connection.Connection, "_close", lambda self, _close=slow_close: _close(self._handle))
    errors: list[BaseException] = []

    def kill() -> None:
        try:
            worker.kill()
        except BaseException as exc:  # collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=kill) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert errors == [] and len(closes) == 1, (errors, closes)
