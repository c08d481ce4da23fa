"""AppTest of the PheWAS and Report pages, with a release published in the session."""

from __future__ import annotations

import pytest
from apptest_support import page_app, shown

from engine.adversary import Adversary
from engine.anonymize.population import anonymize
from engine.risk import verify
from ui.releases import PublishedRelease


@pytest.fixture(scope="module")
def published(sample_dataset):
    cohort = sample_dataset.group_records("cohort")
    res = anonymize(cohort, cohort.patient_ids, 5, scope="cohort", complete=True)
    v = verify(res.release, Adversary("cohort", "single_visit"), 5)
    return {"Heatherly DEMO_D": PublishedRelease("Heatherly DEMO_D", res.release, v)}


def test_phewas_page_without_release_shows_original(sample_dataset):
    at = page_app("pages/phewas.py", state={"phewas_heatherly": False})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("No release yet" in i.value for i in at.info)
    assert len(at.get("plotly_chart")) == 1  # the Manhattan plot
    # the planted 9p21 association is among the significant rows of the first SNP
    sig = at.dataframe[-1].value
    assert "411.4" in set(sig["phecode"])


def test_phewas_page_compares_a_release(published):
    at = page_app("pages/phewas.py", state={"releases": published, "phewas_heatherly": False})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    table4 = at.dataframe[0].value
    assert list(table4["snp"])[-1] == "Total"
    assert {"Heatherly DEMO_D: lost", "Heatherly DEMO_D: false"} <= set(table4.columns)
    assert len(at.get("plotly_chart")) == 3  # QQ, change histogram, Manhattan
    at.radio(key="phewas_correction").set_value("bonferroni").run()
    assert not at.exception
    bonf = at.dataframe[0].value
    assert bonf.iloc[-1]["original"] <= table4.iloc[-1]["original"]


def test_report_page_lists_verified_release(published):
    at = page_app("pages/report.py", state={"releases": published})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    text = "\n".join(shown(m.value) for m in at.markdown)  # as displayed (names are escaped)
    assert "Heatherly DEMO_D" in text and "Verified: every one of" in text
    assert len(at.get("download_button")) == 2


def test_phewas_page_compares_heatherlys_three_scopes_at_the_sidebar_k(sample_dataset):
    at = page_app("pages/phewas.py", state={"k": 5})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    table4 = at.dataframe[0].value
    for scope in ("DEMO_D", "DEMO_B", "DEMO_S"):
        assert f"Heatherly {scope}: lost" in table4.columns
    # the page's picker lists the three releases, with their verification status
    assert len(at.multiselect(key="phewas_releases").value) == 3
    at.sidebar.number_input(key="k").set_value(10).run()
    assert not at.exception
    assert at.session_state["releases"]["Heatherly DEMO_D"].release.params["k"] == 10
