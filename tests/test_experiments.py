"""engine/study/experiments.py: the sweeps' grid order and rows (the methods themselves are tested in their
own test files; the GCCens and LDA sweeps in tests/test_censor.py and tests/test_trajectories.py)."""

from __future__ import annotations

from engine.study.experiments import PROFILES_METHODS, profiles_sweep


def test_profiles_sweep_runs_the_grid_in_a_stated_order() -> None:
    calls: list[tuple[int, str, str]] = []
    progress: list[tuple[float, str]] = []

    def point(k: int, knowledge: str, method: str) -> dict:
        calls.append((k, knowledge, method))
        return {"k": k, "knowledge": knowledge, "method": method}

    frame = profiles_sweep(
        point, [10, 2], ["single_visit", "all_visits"], progress=lambda *a: progress.append(a)
    )
    expected = [
        (k, kn, m) for kn in ("single_visit", "all_visits") for k in (2, 10) for m in PROFILES_METHODS
    ]
    assert calls == expected
    assert [tuple(r) for r in frame[["k", "knowledge", "method"]].itertuples(index=False)] == expected
    # the engine's one protocol (engine.io.progress): before each point, then done
    n = len(expected)
    assert [f for f, _ in progress] == [i / n for i in range(n + 1)]
    assert progress[0][1] == f"{expected[0][2]}, single visit, k = 2: point 1 of {n}"
    assert profiles_sweep(point, [], ["single_visit"]).empty


def test_lda_sweeps_take_the_apps_point_and_report_each_step() -> None:
    """The Trade-offs view runs the engine's LDA sweeps on its own cached points (issue 17: every
    sweep in engine/study/experiments.py): the grid, its order, the columns and the steps are the engine's."""
    from engine.study.experiments import lda_sweep_k, lda_sweep_weights

    calls: list[tuple[int, float, str]] = []
    steps: list[tuple[float, str]] = []

    def point(k: int, w_icd: float, method: str) -> dict[str, float]:
        calls.append((k, w_icd, method))
        return {"ILM": k / 10, "ALM": w_icd, "AvgRE": 1.0 if method == "a-gs" else 2.0}

    df = lda_sweep_k(
        None, (3, 2), ("baseline", "a-gs"), w_icd=0.3, point=point, progress=lambda *a: steps.append(a)
    )
    assert calls == [(3, 0.3, "baseline"), (2, 0.3, "baseline"), (3, 0.3, "a-gs"), (2, 0.3, "a-gs")]
    assert df.columns.tolist() == ["method", "k", "ILM", "ALM", "AvgRE"]
    assert df["AvgRE"].tolist() == [2.0, 2.0, 1.0, 1.0]
    assert steps == [
        (0.0, "baseline, k = 3: point 1 of 4"),
        (0.25, "baseline, k = 2: point 2 of 4"),
        (0.5, "a-gs, k = 3: point 3 of 4"),
        (0.75, "a-gs, k = 2: point 4 of 4"),
        (1.0, "4 points done"),
    ]
    calls.clear()
    w = lda_sweep_weights(None, 4, (0.1, 0.7), point=point)
    assert calls == [(4, 0.1, "a-gs"), (4, 0.7, "a-gs")]
    assert w.to_dict("list") == {
        "w_icd": [0.1, 0.7],
        "w_age": [0.9, 0.3],
        "ILM": [0.4, 0.4],
        "ALM": [0.1, 0.7],
    }


def test_an_lda_sweep_without_trajectories_or_point_says_so() -> None:
    import pytest

    from engine.study.experiments import lda_sweep_k

    with pytest.raises(ValueError, match="needs the trajectories, or a point function"):
        lda_sweep_k(None, (2,))
