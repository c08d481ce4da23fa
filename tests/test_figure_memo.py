"""A rerun at a k already computed does not rebuild the page's figures (issue 40, finding 7): the
figures are memoized per session on their inputs' content (`ui.figure_memo`). Calls counted, no
timing."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from apptest_support import page_app

from ui.fingerprints import value_fingerprint

ROOT = Path(__file__).resolve().parent.parent
needs_sample = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


def _counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    calls: list[int] = []
    original = getattr(module, name)

    @functools.wraps(original)
    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def _rerun_builds(at, calls: list[int]) -> tuple[int, int, int]:
    """Builds in the run at k = 6, in a second run at k = 6, and in a run at k = 7 (the shipped
    sample's figures held for the server emptied first: another test may have built them)."""
    from ui import cache

    cache.clear("shared figures")
    at.run()
    at.sidebar.number_input(key="k").set_value(6).run()
    assert not at.exception, [e.value for e in at.exception]
    first = len(calls)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    again = len(calls) - first
    at.sidebar.number_input(key="k").set_value(7).run()
    assert not at.exception, [e.value for e in at.exception]
    return first, again, len(calls) - first - again


@needs_sample
def test_a_second_risk_run_at_the_same_k_does_not_rebuild_the_cdf(monkeypatch: pytest.MonkeyPatch) -> None:
    import ui.risk_charts

    calls = _counting(monkeypatch, ui.risk_charts, "distinguishability_cdf_figure")
    first, again, other_k = _rerun_builds(page_app("pages/risk.py"), calls)
    assert first >= 1
    assert again == 0
    assert other_k >= 1  # k is drawn on the figure: a new k builds it anew


@needs_sample
@pytest.mark.parametrize(
    ("page", "module", "name"),
    [
        ("pages/phewas.py", "ui.phewas_charts", "manhattan_figure"),
        ("pages/cohort.py", "ui.cohort_view", "rank_frequency_figure"),
        ("pages/cohort.py", "ui.cohort_view", "distribution_figure"),
    ],
)
def test_a_second_run_of_the_bench_pages_at_the_same_k_does_not_rebuild_their_figures(
    monkeypatch: pytest.MonkeyPatch, page: str, module: str, name: str
) -> None:
    import importlib

    calls = _counting(monkeypatch, importlib.import_module(module), name)
    first, again, _ = _rerun_builds(page_app(page), calls)
    assert first >= 1
    assert again == 0


@needs_sample
@pytest.mark.parametrize("name", ["distinguishability_cdf_figure", "cul_histogram", "retention_figure"])
def test_a_second_gccens_run_at_the_same_k_does_not_rebuild_its_figures(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    import ui.views.gccens

    calls = _counting(monkeypatch, ui.views.gccens, name)
    at = page_app(
        view=("ui.views.gccens", "render_anonymize"), state={"gcc_mode": ui.views.gccens.CODE_MODES[0]}
    )
    first, again, _ = _rerun_builds(at, calls)
    assert first >= 1
    assert again == 0


def test_the_fingerprint_follows_every_value_and_refuses_unknown_types() -> None:
    a = {"original": np.arange(5), "released": np.array([1, 1, 2])}
    assert value_fingerprint(a) == value_fingerprint(
        {"original": np.arange(5), "released": np.array([1, 1, 2])}
    )
    assert value_fingerprint(a) != value_fingerprint(
        {"original": np.arange(5), "released": np.array([1, 1, 3])}
    )
    assert value_fingerprint(a) != value_fingerprint(
        {"released": np.array([1, 1, 2]), "original": np.arange(5)}
    )
    assert value_fingerprint(np.arange(3, dtype=np.int64)) != value_fingerprint(np.arange(3, dtype=np.int32))
    assert value_fingerprint(1) != value_fingerprint(1.0) != value_fingerprint("1")
    f = pd.DataFrame({"x": [1, 2]})
    assert value_fingerprint(f) != value_fingerprint(f.assign(x=[1, 3]))
    with pytest.raises(TypeError):
        value_fingerprint(object())


@needs_sample
def test_a_second_session_on_the_shipped_sample_does_not_rebuild_the_risk_cdf(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """16 sessions on the sample each built every figure at every k (about 0.1 s each: most of the
    server's CPU in the first half minute of bench/load_ws.py). A figure of the shipped sample's data
    alone is now held once for the server; one of an upload stays in its session (tests/test_cache.py's
    two-sessions tests hold the rule for every other entry)."""
    import ui.risk_charts
    from ui import cache

    cache.clear("shared figures")
    calls = _counting(monkeypatch, ui.risk_charts, "distinguishability_cdf_figure")
    first = page_app("pages/risk.py")
    first.run()
    assert not first.exception, [e.value for e in first.exception]
    built_first = len(calls)
    second = page_app("pages/risk.py")
    second.run()
    assert not second.exception, [e.value for e in second.exception]
    assert built_first >= 1
    assert len(calls) == built_first, "the second session built the shipped sample's CDF again"
