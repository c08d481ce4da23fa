"""What crosses between the server and a pool job besides the job (issue 38, finding 4;
`engine.scale.pool`): large data frames through shared memory once, a job's requests answered by the
caller while it waits (`ask`), and the objects the caller marks known as marked in the worker."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

from engine.scale import pool


@pytest.fixture(scope="module")
def workers() -> Iterator[pool.Pool]:
    p = pool.Pool(size=1, warm=None)
    yield p
    p.close()


def _lab_orders(n: int = 200_000) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "patient_id": pd.array([f"p{i % 5000}" for i in range(n)], dtype="str"),
            "day": rng.integers(0, 400, n),
            "lab": pd.array(rng.choice(["CBC", "=HYPERLINK(1)", "BMP"], n), dtype="str"),
        }
    )


def test_a_large_frame_goes_through_shared_memory_once_and_comes_out_equal(workers: pool.Pool) -> None:
    """Bug report: a job naming the shipped sample's lab orders (2.3 M rows) pickled them whole, 282 MB
    at every run. A frame over `_FRAME_BYTES` is sent as a handle, exported once per frame object."""
    labs = _lab_orders()
    small = pd.DataFrame({"x": [1, 2, 3]})
    data = pool.dumps(lambda progress: (labs, small), workers.exports)
    assert len(data) < 100_000, f"{len(data):,} bytes: the frame was pickled with the job"
    again = pool.dumps(lambda progress: labs, workers.exports)
    assert len(workers.exports._frames) == 1, "the same frame was exported twice"
    assert len(again) < 100_000
    got, same = workers.call(lambda progress: (labs, small))
    pd.testing.assert_frame_equal(got, labs)
    pd.testing.assert_frame_equal(same, small)


def test_a_frame_arrow_would_change_is_pickled_as_it_is(workers: pool.Pool) -> None:
    """A column of mixed objects does not survive Arrow unchanged: it goes pickled, and comes out equal."""
    mixed = pd.DataFrame({"v": pd.array([1, "a", 2.5, None] * 100_000, dtype=object)})
    assert workers.exports.frame(mixed) is None
    got = workers.call(lambda progress: mixed)
    pd.testing.assert_frame_equal(got, mixed)


def _asking(progress) -> tuple[object, object]:
    return pool.ask(("session", "a name", 1)), pool.ask(("session", "another", 2))


def test_a_job_asks_and_the_caller_answers_while_it_waits(workers: pool.Pool) -> None:
    held = {("session", "a name", 1): "held here"}
    job = workers.submit(_asking, answer=lambda request: held.get(request, pool.NOT_ANSWERED))
    try:
        first, second = job.wait()
    finally:
        job.kill()
    assert first == "held here" and second is pool.NOT_ANSWERED


def test_outside_a_job_nothing_is_answered() -> None:
    assert pool.ask(("session", "a name", 1)) is pool.NOT_ANSWERED


class _Data:
    def __init__(self, name: str) -> None:
        self.name = name


class _Marked:
    """A job that reports whether its `thing` was received marked."""

    def __init__(self, thing: object, other: object) -> None:
        self.thing, self.other = thing, other
        self.marked: list = []

    def received(self, marked: list) -> None:
        self.marked = marked

    def __call__(self, progress) -> tuple[bool, bool, int]:
        ids = {id(x) for x in self.marked}
        return id(self.thing) in ids, id(self.other) in ids, os.getpid()


def test_the_objects_the_caller_marks_are_the_jobs_own_objects_marked(workers: pool.Pool) -> None:
    """`dumps(mark=...)`: the marked objects come with the job as references to its own objects (the
    app: the shipped sample's dataset, which decides whether a result is shared by every session)."""
    thing, other = _Data("the sample"), _Data("an upload")
    job, marked = pool.loads(pool.dumps(_Marked(thing, other), pool.Exports(), mark=lambda x: x is thing))
    assert len(marked) == 1 and marked[0] is job.thing and marked[0] is not job.other
    work = _Marked(thing, other)
    ran = workers.submit(work, mark=lambda x: x is thing)
    try:
        thing_marked, other_marked, pid = ran.wait()
    finally:
        ran.kill()
    assert thing_marked and not other_marked and pid != os.getpid()


def test_a_frames_segment_goes_with_the_frame() -> None:
    """Each exported frame's segment stayed in /dev/shm until seven newer frames pushed it out (the
    lab orders of every dataset a test process loaded: 0.7 GB of shared memory in a full run)."""
    import gc

    exports = pool.Exports()
    try:
        labs = _lab_orders(100_000)
        handle = exports.frame(labs)
        assert handle is not None
        path = f"/dev/shm/{handle.segment.lstrip('/')}"
        assert os.path.exists(path)
        del labs
        gc.collect()
        assert not os.path.exists(path), "the segment outlived its frame"
        assert not exports._frames
    finally:
        exports.close()
