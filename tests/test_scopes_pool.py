"""Heatherly's three scopes fanned out on the pool the server does not fork (issue 38, finding 4):
`compare_scopes(parallel=True)` runs the scopes after the cohort's in pool workers (`engine.scale.pool
.fan_out`), with only the first call reporting progress and calling `while_waiting`, so the calls
sent pickle whatever the caller's progress holds; the comparison is the one made here."""

from __future__ import annotations

import os
import threading
from functools import partial

import pytest

from engine.anonymize.population import compare_scopes
from engine.records import Records
from engine.scale import pool
from tests.test_pickled_results import _same_comparison


@pytest.fixture(scope="module")
def groups(sample_groups) -> dict[str, Records]:
    return sample_groups


def _with_pid(call) -> tuple[int, object]:
    return os.getpid(), call()


def test_the_scopes_after_the_first_run_in_pool_workers_whatever_the_progress_holds(
    groups, monkeypatch
) -> None:
    """The app's progress and `while_waiting` hold what cannot pickle (a pool worker's pipe, the
    session): the calls sent to the pool carry neither, and the comparison equals the one made here."""
    assert pool.fan_out_enabled()
    real, sent = pool.fan_out, []

    def spy(calls, workers=None):
        sent.append(len(calls))
        out = real([partial(_with_pid, c) for c in calls], workers)
        pids = [pid for pid, _ in out]
        assert pids[0] == os.getpid() and os.getpid() not in pids[1:]  # the others: in workers
        return [value for _, value in out]

    monkeypatch.setattr(pool, "fan_out", spy)
    held = threading.Lock()  # cannot be pickled, as a worker's progress pipe or the page's session
    seen: list[tuple[float, str]] = []
    waited: list[int] = []

    def progress(fraction: float, message: str = "") -> None:
        with held:
            seen.append((fraction, message))

    def while_waiting(res) -> None:
        with held:
            waited.append(os.getpid())

    coh = groups["cohort"]
    fanned = compare_scopes(
        groups,
        coh.patient_ids,
        5,
        complete=True,
        parallel=True,
        progress=progress,
        while_waiting=while_waiting,
    )
    assert sent == [len(groups)]
    assert waited == [os.getpid()]
    assert seen and all(f <= 1 / len(groups) + 1e-9 for f, _ in seen)  # the cohort's share only
    assert "waiting for the other scopes" in seen[-1][1]
    _same_comparison(fanned, compare_scopes(groups, coh.patient_ids, 5, complete=True))


def _compared_in_a_job(groups: dict[str, Records], k: int, progress) -> tuple[bool, object]:
    ids = groups["cohort"].patient_ids
    return pool.fan_out_enabled(), compare_scopes(
        groups, ids, k, complete=True, parallel=True, progress=progress
    )


def test_the_scopes_fan_out_from_inside_a_pool_job_as_here(groups) -> None:
    """The app computes the comparison in a pool job (ui/views/heatherly.py's compute): there too the
    scopes after the cohort's are fanned out (tests/test_pool.py: in workers of the job's own), and
    the comparison is the one made here."""
    workers = pool.Pool(size=1)
    try:
        seen: list[float] = []
        fanned, got = workers.call(
            partial(_compared_in_a_job, groups, 4), progress=lambda f, m="": seen.append(f)
        )
    finally:
        workers.close()
    assert fanned
    assert seen and max(seen) <= 1 / len(groups) + 1e-9  # the cohort's share: fanned out
    _same_comparison(got, compare_scopes(groups, groups["cohort"].patient_ids, 4, complete=True))
