"""AppTests of reopening a study with its data (issue 13, "Save and reopen"): a study made on uploaded
files saved with them (a zip) reopens in a new session without uploading them again, every release
rebuilt byte-identical; a study of a sample variant reopens on that variant; a package whose input
was changed is refused with the file named."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from apptest_support import full_app, page_path, reopen_in_new_session, shown
from streamlit.testing.v1 import AppTest

from engine.study.package import StudyInput, write_package

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _go(at: AppTest, page: str) -> None:
    at.switch_page(page_path(page)).run()
    _ok(at)


@pytest.fixture(scope="module")
def uploaded() -> tuple[AppTest, dict[str, StudyInput]]:
    """A session on uploaded files (events as CSV, a cohort list) with one GCCens release."""
    from engine.synth.generator import generate

    data = generate(400, 5, labs=False)
    files = {
        "events": StudyInput("events", "events.csv", data.events.to_csv(index=False).encode()),
        "cohort": StudyInput("cohort", "cohort.csv", data.cohort.to_csv(index=False).encode()),
    }
    at = full_app()
    at.run()
    at.sidebar.radio(key="dataset_choice").set_value("Upload files").run()
    for role, f in files.items():
        at.sidebar.file_uploader(key=f"upload_{role}").upload(f.name, f.data, "text/csv")
    at.run()
    _ok(at)
    _go(at, "pages/anonymize.py")
    at.button(key="gcc_study_add").click().run()
    _ok(at)
    assert len(at.session_state["study"].releases) == 1
    return at, files


def test_the_report_page_offers_the_study_with_its_input_files(uploaded):
    at, _files = uploaded
    _go(at, "pages/report.py")
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Download the study file (JSON)" in labels
    at.checkbox(key="study_include_data").check().run()
    _ok(at)
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Download the study with its input files (zip)" in labels
    assert any("Includes patient data: events.csv, cohort.csv" in shown(c.value) for c in at.caption)
    # the zip offered is the session's study with the uploaded files, byte for byte
    from engine.study.package import read_study_file
    from ui.cache import PREFIX

    offered = next(reversed(at.session_state[PREFIX + "study package"].values()))  # ui.study's memo
    study, inputs = read_study_file(offered, "offered.zip")
    session = at.session_state["study"]
    assert (study.data, study.pseudonym_key, study.k) == (session.data, session.pseudonym_key, session.k)
    # the package's verdicts are read back as claims, never believed (issue 23)
    assert [(r.name, r.files, r.claimed, r.verification) for r in study.releases] == [
        (r.name, r.files, r.verification, None) for r in session.releases
    ]
    assert {r: (i.name, i.data) for r, i in inputs.items()} == {
        r: (f.name, f.data) for r, f in _files.items()
    }
    # a rerun that changes nothing of the study reuses the zip built once (the recipient is part of
    # the study since issue 27: it would change the zip)
    at.run()
    assert next(reversed(at.session_state[PREFIX + "study package"].values())) is offered


def test_a_study_package_reopens_without_uploading_the_files_again(uploaded):
    at, files = uploaded
    study = at.session_state["study"]
    made = {r.name: r.files for r in study.releases}
    package = write_package(study, files)
    fresh = reopen_in_new_session("study.zip", package, "application/zip")  # a session on the sample
    assert fresh.session_state["dataset_choice"] == "Upload files"
    assert any(
        "Restored from the study file: events.csv, cohort.csv" in shown(c.value)
        for c in fresh.sidebar.caption
    )
    assert {r.name: r.files for r in fresh.session_state["study"].releases} == made
    said = [shown(s.value) for s in fresh.success]
    assert any(f"{name}: rebuilt byte-identical" in s for name in made for s in said), said
    # a second interaction, then forgetting the restored files unloads the data
    fresh.text_input(key="report_recipient").set_value("IRB").run()
    _ok(fresh)
    fresh.sidebar.button(key="forget_restored").click().run()
    _ok(fresh)
    assert "context" not in fresh.session_state


def test_a_package_with_a_changed_input_is_refused_by_name(uploaded):
    at, files = uploaded
    package = write_package(at.session_state["study"], files)
    src = zipfile.ZipFile(io.BytesIO(package))
    manifest = json.loads(src.read("manifest.json"))
    member = next(m["member"] for m in manifest["inputs"] if m["role"] == "events")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            dst.writestr(info, body + b"p_new,250.00,1,40\n" if info.filename == member else body)
    fresh = reopen_in_new_session("changed.zip", out.getvalue(), "application/zip")
    assert any("changed.zip: the input 'events.csv' (events) differs" in shown(e.value) for e in fresh.error)
    assert fresh.session_state["dataset_choice"] == "Shipped sample"
    assert fresh.session_state["study"].releases == ()


def test_a_study_of_a_sample_variant_reopens_on_that_variant():
    at = full_app()
    at.run()
    at.sidebar.selectbox(key="sample_variant").set_value("icd10cm").run()
    _go(at, "pages/report.py")
    text = at.session_state["study"].to_json()
    assert json.loads(text)["data"]["load_options"]["sample_variant"] == "icd10cm"
    fresh = reopen_in_new_session("variant.json", text.encode())
    assert fresh.session_state["sample_variant"] == "icd10cm"
    assert not fresh.error, [e.value for e in fresh.error]
    assert any("holds no release of the data loaded now" in i.value for i in fresh.info)
