"""AppTest of the clinical profiles tabs (Anonymize and Trade-offs pages) on the shipped sample.

The real sidebar and this method's views run through `apptest_support.page_app`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import page_text as _text
from apptest_support import run_view
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_MISSING = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


def _app(page: str, **state) -> AppTest:
    return run_view("ui.views.profiles", page, **state)


@SAMPLE_MISSING
def test_anonymize_tab_runs_verifies_and_offers_downloads() -> None:
    at = _app("anonymize", adversary_knowledge="all_visits", profiles_method="ACLIP", k=10)
    assert at.radio(key="adversary_knowledge").value == "all_visits"
    text = _text(at)
    assert "Privacy policy satisfied" in text and "Verified" in text, text[:2000]
    assert {"Privacy constraints", "Collected"} <= {m.label for m in at.metric}
    frames = [d.value for d in at.dataframe]
    table1 = next(f for f in frames if "disease" in f.columns and "ACLIP" in f.columns)
    assert len(table1) == 18
    measures = next(f for f in frames if "RE mean" in f.columns)
    assert measures["method"].tolist() == ["ACLIP"]
    keys = {b.proto.id for b in at.get("download_button")}
    assert len(keys) >= 6  # policy, privacy policy, measures, Table 1, CDF, release, code map, steps
    # the utility policy editor holds the Table 1 diseases
    assert len(at.get("arrow_data_frame")) >= 1 or frames


@SAMPLE_MISSING
def test_anonymize_tab_exports_with_visits_only_for_single_visit_knowledge() -> None:
    """Issue 12, finding 1: the page offers both export structures, says which one the release has,
    and verifies that one; keeping visits is offered against single-visit knowledge only."""
    at = _app("anonymize", adversary_knowledge="all_visits", profiles_method="ACLIP", k=10)
    assert at.radio(key="profiles_export").disabled
    assert any("Export: one set of codes per patient" in c.value for c in at.caption)
    at = _app(
        "anonymize",
        adversary_knowledge="single_visit",
        profiles_method="ACLIP",
        k=10,
        profiles_export="Keep visits",
    )
    assert not at.exception, [e.value for e in at.exception]
    assert any("Export: visits kept" in c.value for c in at.caption)
    assert "Verified" in _text(at)


@SAMPLE_MISSING
def test_tradeoffs_tab_figure_2_and_a_small_sweep() -> None:
    at = _app("tradeoffs", profiles_sweep_ks=[25], profiles_sweep_conds=["all_visits"])
    assert len(at.get("plotly_chart")) >= 1  # Figure 2
    at.button(key="profiles_sweep_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) >= 4  # Figures 2, 3, 4 and suppression
    sweep = next(d.value for d in at.dataframe if "Relative error, mean" in d.value.columns)
    assert sweep["Method"].tolist() == ["UGACLIP", "ACLIP"]
    assert sweep["Verified"].all()
    assert set(sweep["Attacker knowledge"]) == {"all visits"}  # words, not identifiers (issue 16)
    from apptest_support import raw_chart_titles

    assert not raw_chart_titles(at), raw_chart_titles(at)


def test_release_download_is_gzip_csv_of_the_release() -> None:
    """The tab's download holds the gate's files, gzip-compressed: exactly the rows verified."""
    import gzip

    from engine.adversary import Adversary
    from engine.anonymize.policy import extract_policy
    from engine.anonymize.profiles import ugaclip
    from engine.io.export import RELEASE_FILE, release_files
    from engine.risk import verify
    from tests.pseudonym_support import source_frame
    from tests.test_profiles import UTILITY, mary_dataset
    from ui.downloads import release_file_bytes, session_pseudonyms

    r = mary_dataset()
    rel = ugaclip(r, extract_policy(r, 5, "single_visit"), 5, UTILITY)
    adversary = Adversary("cohort", "single_visit")
    v = verify(rel, adversary, 5)
    files = release_file_bytes(rel, v, adversary, 5, compress=True)
    plain = {name: gzip.decompress(data) for name, data in files.items()}
    assert plain == release_files(rel, v, adversary, 5, pseudonyms=session_pseudonyms())
    assert source_frame(rel, plain[RELEASE_FILE], session_pseudonyms()).values.tolist() == (
        rel.exported_frame().astype(str).values.tolist()
    )
