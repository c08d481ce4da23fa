"""AppTests of the study in the app (issue 13): releases only by "Add to study", unchanged by page
switches, re-verified at the sidebar's k on every page, the report and bundle from the study, the
study file reopened with every release rebuilt byte-identical."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from apptest_support import full_app, page_path, reopen_in_new_session, shown
from streamlit.testing.v1 import AppTest

from engine.report.bundle import make_bundle

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)

# page -> a second interaction after its first render (widget kind, key, new value)
SECOND = {
    "pages/cohort.py": ("slider", "cohort_top_n", 30),
    "pages/risk.py": ("slider", "risk_n_patterns", 30),
    "pages/anonymize.py": ("radio", "gcc_variant", "targeted"),
    "pages/phewas.py": ("radio", "phewas_correction", "bonferroni"),
    "pages/report.py": ("text_input", "report_recipient", "Study team"),
}


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _go(at: AppTest, page: str) -> None:
    at.switch_page(page_path(page)).run()
    _ok(at)


def _releases(at: AppTest) -> dict[str, tuple]:
    return {r.name: r.files for r in at.session_state["study"].releases}


@pytest.fixture(scope="module")
def walked() -> tuple[AppTest, dict[str, tuple]]:
    """Two GCCens releases added on the Anonymize page (per-code caps, then a universal cap 3)."""
    at = full_app()
    at.run()
    _ok(at)
    _go(at, "pages/anonymize.py")
    assert at.session_state["study"].releases == ()  # viewing adds nothing
    at.button(key="gcc_study_add").click().run()
    _ok(at)
    at.radio(key="gcc_capmode").set_value("Universal cap").run()
    _ok(at)
    assert at.number_input(key="gcc_cap").value == 3  # the registered default (ui/persist.py)
    at.button(key="gcc_study_add").click().run()
    _ok(at)
    return at, _releases(at)


def test_two_releases_are_added_by_the_button_only(walked):
    at, made = walked
    assert list(made) == ["GCCens k=5", "GCCens k=5 (2)"]
    study = at.session_state["study"]
    assert [r.settings.cap for r in study.releases] == [None, 3]
    for r in study.releases:  # verified at k = 5 (cohort, single visit): the gate wrote both files
        assert r.verification.ok and {"release.csv", "code_map.csv"} <= dict(r.files).keys()
    assert made["GCCens k=5"] != made["GCCens k=5 (2)"]
    # the files kept for the downloads are the files hashed in the study
    from engine.study.study import sha256_of

    for name, files in made.items():
        held = at.session_state["study_made"][name].files
        assert {f: sha256_of(b) for f, b in held.items()} == dict(files)


def test_page_switches_keep_releases_and_settings_and_every_page_takes_a_second_interaction(walked):
    at, made = walked
    for page in (*SECOND, "pages/anonymize.py", "pages/risk.py", "pages/report.py", "pages/anonymize.py"):
        _go(at, page)
        assert _releases(at) == made, page
        if page in SECOND:
            kind, key, value = SECOND[page]
            getattr(at, kind)(key=key).set_value(value).run()
            _ok(at)
            assert _releases(at) == made, page
    # back on Anonymize: the method view's settings survived the switches (cap mode, variant)
    assert at.radio(key="gcc_capmode").value == "Universal cap"
    assert at.radio(key="gcc_variant").value == "targeted"
    assert at.session_state["method_render_anonymize"] == "GCCens (censoring)"
    # the PheWAS page's Heatherly comparison (on by default) never entered the study
    assert list(_releases(at)) == ["GCCens k=5", "GCCens k=5 (2)"]


def test_changing_k_reverifies_on_risk_and_report(walked):
    at, made = walked
    _go(at, "pages/risk.py")
    at.sidebar.number_input(key="k").set_value(10).run()
    _ok(at)
    status = next(d.value for d in at.dataframe if "release" in d.value.columns)
    col = next(c for c in status.columns if c.startswith("verified here"))
    assert "k=10" in col and status["release"].tolist() == list(made)
    _go(at, "pages/report.py")
    assert any("k = 10" in s.value for s in at.subheader)
    matrix = at.dataframe[0].value
    assert (
        set(matrix["release"]) == set(made) and len(matrix) == 12
    )  # the four and the whole-record two, each
    at.button(key="report_build").click().run()
    _ok(at)
    _, report, _ = at.session_state["report_built"]
    pdf, bundle = report.to_pdf(), make_bundle(report)  # what the PDF and bundle downloads serve on click
    assert pdf.startswith(b"%PDF") and bundle.startswith(b"PK")
    assert {r["verification"]["k"] for r in report.data["releases"]} == {10}
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Release bundle (zip: verified files, report, manifest)" in labels
    assert _releases(at) == made  # re-verification changes nothing recorded
    at.sidebar.number_input(key="k").set_value(5).run()
    _ok(at)


def test_the_study_file_reopens_with_the_same_hashes(walked):
    at, made = walked
    text = at.session_state["study"].to_json()
    fresh = reopen_in_new_session("study.json", text.encode())
    assert _releases(fresh) == made
    said = [shown(s.value) for s in fresh.success]
    for name in made:
        assert any(f"{name}: rebuilt byte-identical" in s for s in said), said
    # a second interaction after the reopen
    fresh.text_input(key="report_recipient").set_value("IRB").run()
    _ok(fresh)
    assert _releases(fresh) == made


def test_a_forged_verdict_shows_an_error_and_is_never_exportable(walked):
    """Issue 23, finding 3: a release failing k with its recorded verdict edited to `ok: true`
    reopened as "rebuilt byte-identical", the report said "verified", and saving kept the forgery."""
    at, _made = walked
    study = json.loads(at.session_state["study"].to_json())
    # against the whole record at k = 40 the GCCens releases fail...
    study.update(k=40, adversary={"scope": "cohort", "knowledge": "all_visits"})
    for r in study["releases"]:  # ...and their recorded verdicts are edited to say they pass
        r["verification"].update(k=40, ok=True, below_k=0, knowledge="all_visits")
    fresh = reopen_in_new_session("forged.json", json.dumps(study).encode())
    errors = [shown(e.value) for e in fresh.error]
    for r in study["releases"]:
        assert any(
            f"Release {r['name']!r} is not exportable" in e and "changed or is stale" in e for e in errors
        )
    assert not any("rebuilt byte-identical" in shown(s.value) for s in fresh.success)
    reopened = fresh.session_state["study"]
    assert all(not r.exportable and not r.verification.ok for r in reopened.releases)
    saved = json.loads(reopened.to_json())  # saving writes the verdict just computed, never the forgery
    assert all(r["verification"]["ok"] is False and r["files"] == {} for r in saved["releases"])
    assert not [b for b in fresh.get("download_button") if "crosswalk" in b.proto.label]


def test_the_crosswalk_is_offered_labelled_identifying_and_never_in_the_bundle(walked):
    at, made = walked
    _go(at, "pages/report.py")
    labels = [b.proto.label for b in at.get("download_button")]
    crosswalks = [lab for lab in labels if "crosswalk" in lab]
    assert len(crosswalks) == len(made) and all("IDENTIFYING" in lab for lab in crosswalks)


def test_a_study_of_other_data_is_refused_by_name():
    other = json.loads(_minimal_study())
    at = reopen_in_new_session("other.json", json.dumps(other).encode())
    assert any("other data or groups" in shown(e.value) for e in at.error)
    assert at.session_state["study"].releases == ()


def _minimal_study() -> str:
    from engine.study.study import DataRef, Study

    return Study(DataRef("elsewhere", "0" * 64)).to_json()


def test_releases_of_other_groups_are_kept_but_not_shown(walked):
    at, made = walked
    _go(at, "pages/risk.py")
    at.sidebar.selectbox(key="cohort_group").set_value("population").run()
    _ok(at)
    assert any("2 release(s) of this study were made from other data" in shown(i.value) for i in at.info)
    assert not any("release" in d.value.columns for d in at.dataframe)
    assert _releases(at) == made
    at.sidebar.selectbox(key="cohort_group").set_value("cohort").run()
    _ok(at)
