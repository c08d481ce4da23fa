"""Long runs report progress and stop when their progress callback raises (issue 13, "Long work").

The app's progress bar (ui/progress.py) is the cancellation point: a Cancel click or a superseding
rerun makes the callback raise. Here the engine side in plain Python: every method's `run(inputs,
progress)` calls the callback in the caller's thread, lets what it raises propagate, leaves no worker
thread of the risk kernel running, and gives the same release with or without a callback.
"""

from __future__ import annotations

import threading

import pytest

from engine.study.runs import (
    CodeSelection,
    GCCensSettings,
    HeatherlySettings,
    LDASettings,
    ProfilesSettings,
    RunInputs,
)
from engine.synth.generator import write_sample

LONG_RUNS = [
    GCCensSettings(k=5, scope="cohort", codes=CodeSelection("all")),
    GCCensSettings(k=5, scope="population", codes=CodeSelection("all"), cap=3),
    HeatherlySettings(k=5, scope="population"),
    ProfilesSettings(algorithm="UGACLIP", k=5),
    ProfilesSettings(algorithm="ACLIP", k=5, knowledge="all_visits"),
    LDASettings(k=5),
]


class Stop(Exception):
    """What the app's callback raises (Streamlit's StopException in the app)."""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> RunInputs:
    from engine.commands.inputs import load_groups

    d = tmp_path_factory.mktemp("cancel")
    paths = write_sample(d, 600, seed=5, labs=False)
    g = load_groups(str(paths["events"]), cohort=str(paths["cohort"]), biobank=str(paths["biobank"]))
    return RunInputs(g.population, g.cohort, g.biobank)


@pytest.fixture(autouse=True)
def two_threads(monkeypatch):
    """The risk kernel counts with worker threads (as on a server with COHORTSHIELD_THREADS > 1)."""
    monkeypatch.setenv("COHORTSHIELD_THREADS", "2")


def _ids(s) -> str:
    return f"{s.method}-{getattr(s, 'scope', getattr(s, 'algorithm', ''))}"


@pytest.mark.parametrize("settings", LONG_RUNS, ids=_ids)
def test_progress_is_reported_in_the_callers_thread_and_changes_nothing(inputs, settings):
    calls: list[tuple[float, str, threading.Thread]] = []
    with_progress = settings.run(inputs, lambda f, m: calls.append((f, m, threading.current_thread())))
    without = settings.run(inputs, None)
    assert len(calls) >= 2, "a long run reports more than its start"
    assert all(0.0 <= f <= 1.0 for f, _, _ in calls)
    assert all(isinstance(m, str) for _, m, _ in calls)
    assert {t for _, _, t in calls} == {threading.current_thread()}
    assert with_progress.fingerprint == without.fingerprint


@pytest.mark.parametrize("settings", LONG_RUNS, ids=_ids)
def test_a_raising_callback_stops_the_run_and_leaves_no_thread(inputs, settings):
    before = set(threading.enumerate())
    seen: list[float] = []

    def progress(fraction: float, message: str) -> None:
        seen.append(fraction)
        if len(seen) == 2:
            raise Stop(message)

    with pytest.raises(Stop):
        settings.run(inputs, progress)
    assert len(seen) == 2, "the run stopped at the raising call"
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], f"threads still running after the cancelled run: {left}"
