"""Issue 24 ("Live means live"): the Report page's build reuses what the session already measured:
the ledger's pairs (the page's ledger), each release's file figures and headline (`ui.honest`'s memos),
and the report is the same, byte for byte, as one built from nothing (bench/report.py's study: three
releases of the sample, GCCens, Heatherly DEMO_D and LDA, cohort / single visit at k = 5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


@pytest.fixture(scope="module")
def study() -> dict[str, Any]:
    from bench.report import sample_study

    return sample_study()


@pytest.fixture(scope="module")
def memos(study) -> dict[str, Any]:
    from bench.report import session_memos

    return session_memos(study)


def _build(study, releases, **given):
    from engine.report.report import build_report

    inputs = study["inputs"]
    return build_report(
        study["study"],
        releases,
        inputs.population,
        inputs.cohort,
        genotypes=study["ds"].genotypes,
        recipient="Study team",
        reproducible=True,
        **given,
    )


def _forbid(monkeypatch, *names: str) -> None:
    """The engine functions a build handed everything must not call."""
    from engine.study import compare, ledger

    where = {"verify_pair": ledger, "release_figures": compare, "headline": compare}

    def refuse(name):
        def fn(*_a, **_k):
            raise AssertionError(f"{name} called: the session had it")

        return fn

    for name in names:
        monkeypatch.setattr(where[name], name, refuse(name))


def test_the_report_built_on_what_the_session_holds_is_the_report_built_from_nothing(
    study, memos, monkeypatch
):
    cold = _build(study, study["plain"])
    assert len(cold.data["ledger"]) == len(memos["ledger"]) >= 1  # pairs sharing patients, all handed over
    _forbid(monkeypatch, "verify_pair", "release_figures", "headline")
    handed = _build(study, study["held"], **memos)
    assert handed.to_json() == cold.to_json()
    assert handed.to_markdown() == cold.to_markdown()
    assert handed.release_files == cold.release_files


def test_the_figures_handed_over_are_those_of_the_gates_files(study, memos):
    """The session's figures are measured on the files naming patients by source ids
    (`compare.measuring_files`); the report's are those of the gate's files: relabelling changes no count."""
    from engine.study import compare

    for name, m in study["made"].items():
        files = study["held"][name].files
        assert files, name  # verified: the gate's files
        gate = compare.release_figures(m.release, study["inputs"].cohort, files, study["study"].pseudonyms)
        assert memos["figures"][name] == gate


def test_pairs_of_another_k_or_release_are_verified_again(study, memos, monkeypatch):
    from dataclasses import replace

    from engine.study import ledger

    calls: list[tuple[str, str]] = []
    verify = ledger.verify_pair

    def counted(a, b, *args, **kwargs):
        calls.append((a.name, b.name))
        return verify(a, b, *args, **kwargs)

    monkeypatch.setattr(ledger, "verify_pair", counted)
    expected = _build(study, study["held"], **memos).to_json()
    assert calls == []
    pairs = memos["ledger"]
    other_k = [replace(p, k=p.k + 1) for p in pairs]
    assert _build(study, study["held"], **(memos | {"ledger": other_k})).to_json() == expected
    assert len(calls) == len(pairs)
    calls.clear()
    stranger = replace(pairs[0].a, release=study["made"][pairs[0].b.name].release)  # another content
    swapped = [replace(pairs[0], a=stranger), *pairs[1:]]
    assert _build(study, study["held"], **(memos | {"ledger": swapped})).to_json() == expected
    assert calls == [(pairs[0].a.name, pairs[0].b.name)]


def test_the_report_page_build_verifies_no_pair_and_measures_no_figure_again(study, monkeypatch):
    """The build (in this process: COHORTSHIELD_WORKERS=0) reads the ledger, figures and headlines
    the page's run before it computed."""
    from apptest_support import add_release, page_app

    from engine.study import compare, ledger
    from ui import cache

    monkeypatch.setenv("COHORTSHIELD_WORKERS", "0")
    calls: list[str] = []

    def counting(mod, name):
        fn = getattr(mod, name)

        def counted(*a, **k):
            calls.append(name)
            return fn(*a, **k)

        monkeypatch.setattr(mod, name, counted)

    for mod, name in ((ledger, "verify_pair"), (compare, "release_figures"), (compare, "headline")):
        counting(mod, name)
    cache.clear()
    at = page_app("pages/report.py")
    at.run()
    for name, m in study["made"].items():
        add_release(at, name, m.release, m.entry.settings)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert {"verify_pair", "release_figures", "headline"} <= set(calls)  # the page's own (ledger, warnings)
    calls.clear()
    at.button(key="report_build").click().run()
    assert not at.exception, [e.value for e in at.exception]
    _, report, _ = at.session_state["report_built"]
    assert [r["name"] for r in report.data["releases"]] == list(study["made"])
    assert report.data["ledger"]
    assert calls == []
