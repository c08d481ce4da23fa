"""AppTest of the PheWAS and Report pages, with a release in the session's study."""

from __future__ import annotations

import pytest
from apptest_support import add_release, page_app

from engine.report.table4 import NOT_REPRODUCED
from engine.study.runs import HeatherlySettings, RunInputs

SETTINGS = HeatherlySettings(k=5, scope="cohort", complete=True)


@pytest.fixture(scope="module")
def published(sample_dataset):
    cohort = sample_dataset.group_records("cohort")
    return SETTINGS.run(RunInputs(sample_dataset.events, cohort))


def _with_release(page: str, release, **state):
    at = page_app(page, state=state)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    add_release(at, "Heatherly DEMO_D", release, SETTINGS)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_phewas_page_without_release_shows_original(sample_dataset):
    at = page_app("pages/phewas.py", state={"phewas_heatherly": False})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("No release in the study yet" in i.value for i in at.info)
    assert len(at.get("plotly_chart")) == 1  # the Manhattan plot
    assert at.radio(key="phewas_correction").value == "bh"  # a correction by default (issue 16)
    # the planted 9p21 association is among the significant rows of the first SNP at Heatherly's
    # setting (uncorrected p <= 0.05), the named option
    at.selectbox(key="phewas_snp").set_value("rs1333049")  # the page opens on the strongest SNP (issue 26)
    at.radio(key="phewas_correction").set_value("none").run()
    assert not at.exception, [e.value for e in at.exception]
    sig = at.dataframe[-1].value
    assert "411.4" in set(sig["phecode"])


def test_phewas_page_compares_a_release(published):
    at = _with_release("pages/phewas.py", published, phewas_heatherly=False)
    table4 = at.dataframe[0].value
    assert list(table4["snp"])[-1] == "Total"
    assert {"Heatherly DEMO_D: lost", "Heatherly DEMO_D: false"} <= set(table4.columns)
    assert len(at.get("plotly_chart")) == 3  # QQ, change histogram, Manhattan
    at.radio(key="phewas_correction").set_value("bonferroni").run()
    assert not at.exception
    bonf = at.dataframe[0].value
    assert bonf.iloc[-1]["original"] <= table4.iloc[-1]["original"]


def test_report_page_lists_verified_release(published):
    at = _with_release("pages/report.py", published)
    at.button(key="report_build").click().run()
    assert not at.exception, [e.value for e in at.exception]
    report = at.session_state["report_built"][1]
    (row,) = report.data["releases"]
    assert row["name"] == "Heatherly DEMO_D" and row["verification"]["message"].startswith(
        "Verified: every one of"
    )
    assert row["phewas"] is not None  # the sample's genotypes: associations lost and false are reported
    labels = [b.proto.label for b in at.get("download_button")]
    # the study file, the release's crosswalk (identifying); bundle, PDF, HTML, JSON, Markdown; the office's
    # public key the bundle is signed with (issue 39)
    assert len(labels) == 8 and labels[1] == "Heatherly DEMO_D: crosswalk (CSV, IDENTIFYING)"
    assert "Office public key (PEM, for verify)" in labels


def test_phewas_page_compares_heatherlys_three_scopes_at_the_sidebar_k(sample_dataset):
    """Issue 36, finding 1: the page shows the paper's procedure (its records below k, failing the
    guarantee, counted by the arbiter) beside the verified release, scope by scope. Failed before: the
    page compared the paper's procedure alone, with no word on the records it leaves below k."""
    at = page_app("pages/phewas.py", state={"k": 5})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.toggle(key="phewas_heatherly").set_value(True).run()  # off until asked (issue 13)
    assert not at.exception, [e.value for e in at.exception]
    table4 = at.dataframe[0].value
    for scope in ("DEMO_D", "DEMO_B", "DEMO_S"):
        for kind in ("paper's procedure", "verified"):
            assert f"Heatherly {scope}, {kind} (comparison, not in the study): lost" in table4.columns
    guarantee = next(d.value for d in at.dataframe if "paper's procedure: guarantee" in d.value.columns)
    assert list(guarantee["release"]) == ["DEMO_D", "DEMO_B", "DEMO_S"]
    assert guarantee["paper's procedure: guarantee"].str.endswith("fails the guarantee").all()
    assert guarantee.iloc[0]["paper's procedure: guarantee"] == "records below k: 1,805 — fails the guarantee"
    assert (guarantee["verified: guarantee"] == "met (verified)").all()
    # said plainly beside it: the paper's Table 4 is not reproduced with the guarantee (issue 36)
    assert any(i.value == NOT_REPRODUCED for i in at.info)
    # the page's picker lists the six comparison releases; none of them enters the study
    assert len(at.multiselect(key="phewas_left_out").options) == 6
    assert at.session_state["study"].releases == ()
    at.sidebar.number_input(key="k").set_value(10).run()
    assert not at.exception
    assert "Heatherly DEMO_D, verified (comparison, not in the study): lost" in at.dataframe[0].value.columns
    assert at.session_state["study"].releases == ()


def test_phewas_page_does_not_run_the_three_scopes_unasked(sample_dataset):
    """Issue 13: opening PheWAS (or changing k there) ran Heatherly's three scopes, 10-20 s on the
    sample per k change; the comparison is off until switched on, and the page lists no scope."""
    at = page_app("pages/phewas.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.toggle(key="phewas_heatherly").value is False
    assert not at.multiselect(key="phewas_left_out").options
    assert any("No release in the study yet" in i.value for i in at.info)
