"""Work in a pool the server does not fork (issue 38, finding 4; `engine.scale.pool`): the result, the
progress and the failures come back, Cancel kills the worker, a dead worker is said, the records are
handed over once and mapped read-only, what a job memoized is stored here, and no worker is a fork of
this process."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from functools import partial

import numpy as np
import pytest

from engine import memo
from engine.io.errors import UserError
from engine.records import Records
from engine.scale import pool

pytestmark = pytest.mark.skipif(not hasattr(os, "getppid"), reason="no process ids here")

# set in this process after the pool started: a worker forked from here would see it, one from the
# fork server imports this module afresh and does not
_MARK: list[str] = []


@pytest.fixture(scope="module")
def workers() -> Iterator[pool.Pool]:
    p = pool.Pool(size=2, warm=None)
    yield p
    p.close()


class Stop(Exception):
    """What a superseded script run raises (Streamlit's StopException in the app)."""


def _records(n: int = 50) -> Records:
    import pandas as pd

    rng = np.random.default_rng(0)
    return Records.from_frame(
        pd.DataFrame(
            {
                "patient_id": [f"p{i % n}" for i in range(4 * n)],
                "visit": rng.integers(0, 5, 4 * n),
                "code": rng.choice(["250.00", "401.1", "=HYPERLINK(1)", "272.4"], 4 * n),
                "age": rng.integers(20, 80, 4 * n),
            }
        )
    )


def _where(progress) -> tuple[int, int, list[str]]:
    return os.getpid(), os.getppid(), list(_MARK)


def test_no_worker_is_a_fork_of_this_process(workers: pool.Pool) -> None:
    _MARK.append("set in the test process")
    try:
        pid, parent, mark = workers.call(_where)
    finally:
        _MARK.clear()
    assert pid != os.getpid()
    assert parent != os.getpid()  # its parent is the fork server
    assert mark == []  # a fresh interpreter: this process's state is not there


def test_the_result_and_the_progress_come_back(workers: pool.Pool) -> None:
    seen: list[tuple[float, str]] = []

    def work(progress) -> dict:
        for i in range(3):
            progress(i / 3, f"step {i}")
            time.sleep(0.12)  # more than the worker's report interval: every step is sent
        progress(1.0, "done")
        return {"rows": [1, 2, 3]}

    assert workers.call(work, progress=lambda f, m="": seen.append((f, m))) == {"rows": [1, 2, 3]}
    assert seen == [(0.0, "step 0"), (1 / 3, "step 1"), (2 / 3, "step 2"), (1.0, "done")]


def test_a_failure_is_raised_here_with_its_type_text_and_where(workers: pool.Pool) -> None:
    def work(progress) -> None:
        raise UserError("the cohort file names no patient (row 3, column 'patient_id')")

    with pytest.raises(UserError, match="row 3, column 'patient_id'") as info:
        workers.call(work)
    notes = getattr(info.value, "__notes__", [])
    assert any("pool worker" in n and "in work" in n for n in notes)
    assert workers.call(lambda progress: "the worker serves on") == "the worker serves on"


def test_a_failure_that_cannot_be_pickled_comes_back_as_its_text(workers: pool.Pool) -> None:
    class Local(Exception):
        def __reduce__(self):
            raise TypeError("not picklable")

    def work(progress) -> None:
        raise Local("deep inside")

    with pytest.raises(RuntimeError, match="deep inside"):
        workers.call(work)


def test_cancel_kills_the_worker_at_once_and_a_fresh_one_serves(workers: pool.Pool, tmp_path) -> None:
    started = tmp_path / "started"

    def slow(progress) -> None:
        started.write_text(str(os.getpid()))
        time.sleep(30)

    def check() -> None:
        if started.exists():
            raise Stop

    t = time.monotonic()
    with pytest.raises(Stop):
        workers.call(slow, check=check)
    assert time.monotonic() - t < 10
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(started.read_text()), 0)
    assert workers.call(lambda progress: 7) == 7


def test_a_job_left_by_a_check_is_taken_up_again(workers: pool.Pool) -> None:
    def work(progress) -> str:
        progress(0.5, "half")
        time.sleep(0.4)
        return "whole"

    job = workers.submit(work)
    try:
        with pytest.raises(Stop):
            job.wait(check=lambda: (_ for _ in ()).throw(Stop))
        assert job.readable()
        seen: list = []
        assert job.wait(lambda f, m="": seen.append((f, m))) == "whole"
        assert not job.readable()
    finally:
        job.kill()


def test_a_worker_that_dies_is_said(workers: pool.Pool) -> None:
    def dies(progress) -> None:
        os.kill(os.getpid(), signal.SIGKILL)  # as the system's out-of-memory killer does

    with pytest.raises(pool.WorkerDied, match="exit code -9"):
        workers.call(dies)
    assert workers.call(lambda progress: "next") == "next"


def test_the_records_are_handed_over_once_and_mapped_read_only(workers: pool.Pool) -> None:
    records = _records()

    def seen(progress) -> tuple:
        return (
            records.fingerprint,
            records.to_frame(),
            records.event_item.flags.writeable,
            records.event_item.flags.owndata,
            id(records),
            os.getpid(),
        )

    first = workers.call(seen)
    second = workers.call(seen)
    assert first[0] == records.fingerprint
    assert first[1].equals(records.to_frame())  # the same records, ids, codes, visits and ages
    assert first[2] is False and first[3] is False  # a read-only view of the shared mapping
    assert len(workers.exports._held) == 1  # one segment for the dataset, however many jobs
    if first[5] == second[5]:  # the same worker: the records it mapped are reused
        assert first[4] == second[4]


def test_a_job_sends_only_the_handle_of_its_records(workers: pool.Pool) -> None:
    records = _records(2_000)
    plain = len(pool.dumps(lambda progress: records.n_events, workers.exports))
    assert plain < 2_000  # bytes: the handle, not the 8,000 events
    assert workers.call(lambda progress: records.n_events) == records.n_events


def test_what_a_job_memoized_is_stored_here(workers: pool.Pool) -> None:
    store: dict = {}

    class Plain:
        def get(self, name, key, default):
            return store.get((name, key), default)

        def put(self, name, key, value, size):
            store[(name, key)] = value

    def work(progress) -> int:
        memo.memo("test pool", "bad", lambda: lambda: 0, size=4)  # cannot be pickled: left out
        return memo.memo("test pool", "k", os.getpid, size=4)

    with memo.scope(Plain()):
        pid = workers.call(work)
        assert store == {("test pool", "k"): pid}
        assert memo.memo("test pool", "k", lambda: -1, size=4) == pid  # not computed again


def test_a_job_memoizes_in_a_store_of_its_own(workers: pool.Pool) -> None:
    """A worker serves every session: what one job memoized is not there for the next."""

    def first(progress) -> tuple[int, str]:
        return os.getpid(), memo.memo("test pool own", "k", lambda: "first", size=4)

    def second(progress) -> tuple[int, str]:
        return os.getpid(), memo.memo("test pool own", "k", lambda: "second", size=4)

    with memo.scope(memo.LocalStore()):
        pid, _ = workers.call(first)
    with memo.scope(memo.LocalStore()):
        again, value = workers.call(second)
    assert again == pid  # the same worker (given back, taken again)
    assert value == "second"


def test_the_segments_are_unlinked_at_close() -> None:
    p = pool.Pool(size=1, warm=None)
    try:
        handle = p.exports.handle(_records())
        path = f"/dev/shm/{handle.segment}"
        exists = os.path.exists(path)
    finally:
        p.close()
    if exists:
        assert not os.path.exists(path)


def test_a_job_never_queues_behind_another(workers: pool.Pool, tmp_path) -> None:
    """Every worker busy: the next job starts one more (a session's run never waits for another's)."""
    gate = tmp_path / "gate"

    def held(progress) -> int:
        while not gate.exists():
            time.sleep(0.01)
        return os.getpid()

    jobs = [workers.submit(held) for _ in range(workers.size + 1)]
    try:
        second = workers.call(lambda progress: os.getpid())  # while all of them wait for the gate
        gate.write_text("open")
        pids = [job.wait() for job in jobs]
    finally:
        for job in jobs:
            job.kill()
    assert len({*pids, second}) == workers.size + 2


def test_the_oldest_segment_is_unlinked_past_the_bound(monkeypatch) -> None:
    monkeypatch.setattr(pool, "_EXPORTED", 2)
    exports = pool.Exports()
    try:
        handles = [exports.handle(_records(n)) for n in (10, 20, 30)]
        paths = [f"/dev/shm/{h.segment}" for h in handles]
        if not os.path.isdir("/dev/shm"):
            pytest.skip("no /dev/shm here")
        assert [os.path.exists(p) for p in paths] == [False, True, True]
        assert exports.handle(_records(20)) is handles[1]  # the same content: the same segment
    finally:
        exports.close()
    assert not any(os.path.exists(p) for p in paths)


# ----------------------------------------------------------- a job's own fan-out (issue 38, finding 4)
def _pid() -> int:
    return os.getpid()


def _fans_out(progress) -> tuple[int, list]:
    return os.getpid(), pool.fan_out([_pid, _pid, _pid])


def _fans_out_within_a_fan_out(progress) -> list:
    return pool.fan_out([_pid, partial(pool.fan_out, [_pid, _pid])])


def test_a_fan_out_inside_a_job_runs_its_calls_in_other_processes(workers: pool.Pool) -> None:
    """The app's Heatherly run is a pool job that fans its scopes out: the calls after the first run
    in workers of the job's own, not one after the other in the job's worker."""
    job, pids = workers.call(_fans_out)
    assert pids[0] == job != os.getpid()
    assert job not in pids[1:] and os.getpid() not in pids[1:]
    again, pids_again = workers.call(_fans_out)  # the job's worker keeps its pool: the same workers
    assert again == job and pids_again[1:] == pids[1:]


def test_a_fan_out_inside_a_fan_outs_call_runs_in_place(workers: pool.Pool) -> None:
    first, inner = workers.call(_fans_out_within_a_fan_out)
    assert inner[0] == inner[1] != first  # the nested calls ran in that one worker: no deeper


def _pid_to(path: str) -> None:
    tmp = f"{path}.part"
    with open(tmp, "w") as f:
        f.write(str(os.getpid()))
    os.replace(tmp, path)


def _sleeps(path: str) -> None:
    _pid_to(path)
    time.sleep(120)


def _fans_out_slowly(directory: str, progress) -> None:
    _pid_to(f"{directory}/worker")
    pool.fan_out([partial(time.sleep, 120), partial(_sleeps, f"{directory}/grandchild")])


def _pool_owner(directory: str) -> None:
    """A process that starts a pool and a job that fans out, then waits (killed by the test)."""
    pool.Pool(size=1).submit(partial(_fans_out_slowly, directory))
    time.sleep(120)


def _pid_in(path, seconds: float = 60.0) -> int:
    end = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < end, f"no {path.name} after {seconds} s"
        time.sleep(0.05)
    return int(path.read_text())


def _gone_within(pid: int, seconds: float) -> bool:
    """Whether process `pid` ended (or is a zombie, waiting for a parent to reap it) within `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc here")
def test_a_killed_jobs_fan_out_workers_end_with_it(workers: pool.Pool, tmp_path) -> None:
    job = workers.submit(partial(_fans_out_slowly, str(tmp_path)))
    try:
        grandchild = _pid_in(tmp_path / "grandchild")
        assert grandchild != _pid_in(tmp_path / "worker")
    finally:
        job.kill()  # a Cancel: SIGKILL to the job's worker, nowhere else
    assert _gone_within(grandchild, 5.0)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc here")
def test_no_worker_outlives_the_process_of_its_pool(tmp_path) -> None:
    """The pool's process SIGKILLed (no exit handler runs): its worker, and the worker its job's fan-out
    started, end within seconds."""
    import subprocess
    import sys

    owner = subprocess.Popen(
        [sys.executable, "-c", f"from tests.test_pool import _pool_owner; _pool_owner({str(tmp_path)!r})"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        worker, grandchild = _pid_in(tmp_path / "worker"), _pid_in(tmp_path / "grandchild")
    finally:
        owner.kill()
        owner.wait()
    assert _gone_within(worker, 5.0) and _gone_within(grandchild, 5.0)


def _event_count(records: Records) -> int:
    return records.n_events


def _fans_out_the_records(records: Records, progress) -> tuple[list, int]:
    out = pool.fan_out([partial(_event_count, records), partial(_event_count, records)])
    return out, len(pool.default().exports._held)


def test_a_jobs_fan_out_hands_its_records_on_without_a_segment_of_its_own(workers: pool.Pool) -> None:
    """The records a job came with go to its fan-out's workers by the same handle: not copied into a
    second segment (at the paper's scale 252 MB and 0.62 s, bench/pool.py)."""
    records = _records(40)
    counts, segments = workers.call(partial(_fans_out_the_records, records))
    assert counts == [records.n_events] * 2
    assert segments == 0


def _fans_out_records_made_here(records: Records, progress) -> tuple[list, int]:
    mine = records.subset(records.patient_ids[:10])  # made in the job: no segment of the caller's
    out = pool.fan_out([partial(_event_count, mine), partial(_event_count, mine)])
    return out, len(pool.default().exports._held)


def test_a_jobs_fan_out_makes_no_segment_that_would_outlive_its_worker(workers: pool.Pool) -> None:
    """Records a job made go to its fan-out's workers pickled whole: a segment made in the job's worker
    would stay in /dev/shm when a Cancel SIGKILLs that worker (the owner does not know its name)."""
    records = _records(40)
    counts, segments = workers.call(partial(_fans_out_records_made_here, records))
    assert counts == [records.subset(records.patient_ids[:10]).n_events] * 2
    assert segments == 0
