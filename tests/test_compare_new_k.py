"""Issue 36: the Compare page at a new k measures no release again (at 1.37 M patients it ran every
release's PheWAS and read its files again, 10 s): what does not depend on k is the pages' memos, and
the table is the one the engine makes from the gate's files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from apptest_support import add_release, page_app

from engine.study import compare
from engine.study.runs import GCCensSettings, HeatherlySettings, RunInputs
from engine.utility import phewas

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)
SETTINGS = {"GCCens cap 3": GCCensSettings(k=5, scope="cohort", cap=3), "Heatherly": HeatherlySettings(k=5)}


def _counted(calls: list[str], name: str, fn):
    def counted(*args, **kwargs):
        calls.append(name)
        return fn(*args, **kwargs)

    return counted


def test_a_new_k_on_compare_measures_no_release_again_and_the_table_is_the_engines(
    sample_dataset, monkeypatch
):
    from ui import cache
    from ui.study import MADE, STUDY

    cache.clear()
    inputs = RunInputs(sample_dataset.events, sample_dataset.group_records("cohort"))
    at = page_app("pages/compare.py", state={"k": 5})
    at.run()
    for name, s in SETTINGS.items():
        add_release(at, name, s.run(inputs), s)
    at.run()
    assert not at.exception, [e.value for e in at.exception]

    calls: list[str] = []
    for module, name in (
        (phewas, "phewas_of_release"),
        (phewas, "phewas_of_records"),
        (compare, "release_figures"),
        (compare, "headline"),
    ):
        monkeypatch.setattr(module, name, _counted(calls, name, getattr(module, name)))
    at.sidebar.number_input(key="k").set_value(7).run()
    assert not at.exception, [e.value for e in at.exception]
    assert calls == []  # before: each release's PheWAS, file figures and headline again

    ctx, study, made = at.session_state["context"], at.session_state[STUDY], at.session_state[MADE]
    releases = {n: made[n].release for n in SETTINGS}
    geno = ctx.dataset.genotypes
    want = compare.comparison_table(  # the engine's own path: figures read from the gate's files
        releases,
        ctx.cohort,
        ctx.population,
        ctx.adversary,
        7,
        phewas_lost_false=compare.phewas_changes(
            phewas.phewas_of_records(ctx.cohort, geno),
            {n: phewas.phewas_of_release(r, geno) for n, r in releases.items()},
        ),
        files={n: made[n].files for n in SETTINGS},
        pseudonyms=study.pseudonyms,
    )
    got = at.dataframe[0].value
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True), check_dtype=False)


def test_compare_measures_the_gate_files_the_session_holds_without_writing_them_again(
    sample_dataset, monkeypatch
):
    """Issue 36: Compare's first opening wrote every release's files again to measure them (0.78 s of
    1.67 s for the three releases at paper scale) although the session holds the files the export gate
    wrote when each was added: it reads those (the file exported is the file measured) and the table is
    the engine's from them."""
    from ui import cache
    from ui.study import MADE, STUDY

    cache.clear()
    inputs = RunInputs(sample_dataset.events, sample_dataset.group_records("cohort"))
    at = page_app("pages/compare.py", state={"k": 5})
    at.run()
    for name, s in SETTINGS.items():
        add_release(at, name, s.run(inputs), s)
    cache.clear()  # nothing measured yet: Compare's first opening with the releases
    calls: list[str] = []
    monkeypatch.setattr(
        compare, "measuring_files", _counted(calls, "measuring_files", compare.measuring_files)
    )
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert calls == []  # before: each release's files written again (`measuring_files`)

    ctx, study, made = at.session_state["context"], at.session_state[STUDY], at.session_state[MADE]
    assert all(made[n].files for n in SETTINGS)
    got = at.dataframe[0].value
    for n in SETTINGS:
        f = compare.release_figures(made[n].release, ctx.cohort, made[n].files, study.pseudonyms)
        row = got[got["release"] == n].iloc[0]
        assert (row["pairs kept"], row["rows released"], row["patients released"]) == (
            f.pairs_kept,
            f.rows,
            f.patients,
        )
