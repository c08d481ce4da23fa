"""Issue 28 in the app: `ui.downloads.table_download(..., counts=...)` writes a table's counts of
patients under the study's small-cell policy and says under the button what it suppressed and why;
the call sites that download counts of patients name their count columns."""

from __future__ import annotations

import ast

import pandas as pd
from apptest_support import ROOT, shown
from streamlit.testing.v1 import AppTest

from engine.disclosure.cells import SUPPRESSED, SmallCellPolicy
from ui.downloads import small_cells_of

CMS = SmallCellPolicy.preset("cms")


def test_counts_and_their_derived_cells_are_suppressed():
    top = pd.DataFrame(
        {"code": ["401.1", "250.00", "272.4"], "patients": [50, 3, 0], "% of patients": [50.0, 3.0, 0.0]}
    )
    out, caption = small_cells_of(top, ("patients",), ("% of patients",), policy=CMS)
    assert out["patients"].tolist() == [50, SUPPRESSED, 0]  # zeros are published
    assert out["% of patients"].tolist() == [50.0, SUPPRESSED, 0.0]  # it would give 3 back
    assert "1 small cell(s)" in caption and "CMS" in caption and "derived" in caption
    same, none = small_cells_of(top, ("patients",), policy=SmallCellPolicy())
    assert same is top and none == ""


def test_a_phewas_table_loses_its_small_rows_whole():
    table = pd.DataFrame(
        {
            "snp": ["s", "s"],
            "phecode": ["1", "2"],
            "n_cases": [40, 40],
            "n_controls": [900, 900],
            "case_maf": [0.3, 0.05],  # 4 minor alleles among 80: a small count
            "control_maf": [0.3, 0.3],
            "odds_ratio": [1.0, 0.1],
            "p": [0.9, 0.001],
        }
    )
    out, caption = small_cells_of(table, ("n_cases", "n_controls"), policy=CMS)
    assert (
        out.loc[0, "n_cases"] == 40 and out.loc[1, "p"] == SUPPRESSED and out.loc[1, "n_cases"] == SUPPRESSED
    )
    assert "1 row(s) withheld whole" in caption


def test_the_caption_under_the_download_says_what_and_why():
    def page() -> None:
        import pandas as pd
        import streamlit as st

        from engine.disclosure.cells import SmallCellPolicy
        from ui.downloads import table_download

        class _Study:  # the session study: only its policy is read
            small_cells = SmallCellPolicy.preset("ohdsi")

            def to_json(self, with_key: bool = True) -> str:
                return "{}"

        st.session_state["study"] = _Study()
        frame = pd.DataFrame({"code": ["a", "b"], "patients": [2, 30]})
        table_download(frame, "Download (CSV)", "t.csv", "t", counts=("patients",))
        table_download(frame, "Download all (CSV)", "u.csv", "u")  # no counts named: as it is

    at = AppTest.from_function(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [shown(c.value) for c in at.caption]
    assert len(captions) == 1
    assert "Suppressed in this table (patients): 1 small cell(s)" in captions[0] and "OHDSI" in captions[0]


def _count_call_sites() -> dict[str, int]:
    """Per file, the table_download calls (or its alias `_download`) that name `counts=`."""
    out: dict[str, int] = {}
    for rel in ("ui/views/phewas.py", "ui/views/cohort.py", "ui/views/heatherly.py"):
        tree = ast.parse((ROOT / rel).read_text())
        n = 0
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("table_download", "_download"):
                n += any(k.arg == "counts" for k in node.keywords)
        out[rel] = n
    return out


def test_the_tables_of_patient_counts_name_their_counts():
    """PheWAS (the original results, the original/released pairs), the Cohort page's code frequencies
    (top codes, rank/frequency) and Heatherly's Tables 1-3."""
    assert _count_call_sites() == {
        "ui/views/phewas.py": 2,
        "ui/views/cohort.py": 2,
        "ui/views/heatherly.py": 1,
    }


def test_report_page_policy_select_and_ledger_table():
    """The Report page: the select stores the policy in the study (and the report states it); two
    releases sharing every patient are on the ledger table (the cohort unchanged twice: together
    not verified at k = 10, as each alone)."""
    import numpy as np
    import pytest
    from apptest_support import add_release, page_app

    from engine.release import Release

    if not (ROOT / "sample_data" / "events.parquet").exists():
        pytest.skip("the shipped sample is not there yet")
    at = page_app("pages/report.py", state={"k": 10})
    at.run()
    ctx = at.session_state["context"]
    empty = Release("suppress all", ctx.cohort.keep_events(np.zeros(ctx.cohort.n_events, dtype=bool)))
    add_release(at, "Suppress all", empty)
    add_release(at, "Unchanged", Release("unchanged", ctx.cohort))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    (table,) = [d.value for d in at.dataframe if "shared patients" in d.value.columns]
    assert table[["a", "b"]].values.tolist() == [["Suppress all", "Unchanged"]]
    assert not table["verified"].iloc[0]
    assert any("together NOT verified" in shown(w.value) for w in at.warning)
    at.selectbox(key="report_small_cells").select("aou").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["study"].small_cells == SmallCellPolicy.preset("aou")
    at.selectbox(key="report_small_cells").select("custom").run()
    at.number_input(key="report_small_cells_n").set_value(7).run()
    assert at.session_state["study"].small_cells == SmallCellPolicy.min_cell(7)
    at.button(key="report_build").click().run()
    assert not at.exception, [e.value for e in at.exception]
    report = at.session_state["report_built"][1]
    assert report.data["small cells"]["policy"] == SmallCellPolicy.min_cell(7).to_dict()
    assert len(report.data["ledger"]) == len(table)


def test_report_page_says_verified_pairs_once_and_warns_of_each_failing_pair():
    """The ledger's pairs verified together are one line under the table (there was a sentence per pair,
    dozens on a study of a few releases); each pair not verified together keeps its warning."""
    import numpy as np
    import pytest
    from apptest_support import add_release, page_app

    from engine.release import Release

    if not (ROOT / "sample_data" / "events.parquet").exists():
        pytest.skip("the shipped sample is not there yet")
    at = page_app("pages/report.py", state={"k": 10})
    at.run()
    ctx = at.session_state["context"]
    for name in ("Suppress all", "Suppress all (2)", "Suppress all (3)"):
        add_release(
            at, name, Release(name, ctx.cohort.keep_events(np.zeros(ctx.cohort.n_events, dtype=bool)))
        )
    add_release(at, "Unchanged", Release("unchanged", ctx.cohort))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    (table,) = [d.value for d in at.dataframe if "shared patients" in d.value.columns]
    assert len(table) == 6 and int(table["verified"].sum()) == 3
    captions = [shown(c.value) for c in at.caption]
    assert sum("together verified" in c for c in captions) == 0
    assert any(
        c.startswith("3 of 6 pairs sharing patients are verified together at k = 10") for c in captions
    )
    assert sum("together NOT verified" in shown(w.value) for w in at.warning) == 3
