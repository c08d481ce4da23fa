"""engine/study/experiments.py: the sweeps' grid order and rows (the methods themselves are tested in their
own test files; the GCCens and LDA sweeps in tests/test_censor.py and tests/test_trajectories.py)."""

from __future__ import annotations

from engine.study.experiments import PROFILES_METHODS, profiles_sweep


def test_profiles_sweep_runs_the_grid_in_a_stated_order() -> None:
    calls: list[tuple[int, str, str]] = []
    progress: list[tuple[int, int, tuple[int, str, str]]] = []

    def point(k: int, knowledge: str, method: str) -> dict:
        calls.append((k, knowledge, method))
        return {"k": k, "knowledge": knowledge, "method": method}

    frame = profiles_sweep(
        point, [10, 2], ["single_visit", "all_visits"], on_progress=lambda *a: progress.append(a)
    )
    expected = [
        (k, kn, m) for kn in ("single_visit", "all_visits") for k in (2, 10) for m in PROFILES_METHODS
    ]
    assert calls == expected
    assert [tuple(r) for r in frame[["k", "knowledge", "method"]].itertuples(index=False)] == expected
    assert [p[:2] for p in progress] == [(n, len(expected)) for n in range(1, len(expected) + 1)]
    assert profiles_sweep(point, [], ["single_visit"]).empty
