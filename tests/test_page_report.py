"""AppTest of the Report page (pages/report.py) on the shipped sample: the report and the bundle are
built from the session's releases, each verified again under the sidebar's adversary and k."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
from apptest_support import add_release, download_labels, page_app
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from engine.release import Release
from engine.report.bundle import BUNDLE_ROOT, check_bundle, make_bundle, verify_bundle
from engine.report.signing import office_public_pem

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "events.parquet").exists(), reason="the shipped sample is not there yet"
)


def _with_releases(**choices):
    """The Report page with two releases in the study (cohort / single visit): every code suppressed
    (verified at any k), and the cohort unchanged (verified at no k)."""
    at = page_app("pages/report.py", state=choices)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    ctx = at.session_state["context"]
    empty = Release("suppress all", ctx.cohort.keep_events(np.zeros(ctx.cohort.n_events, dtype=bool)))
    same = Release("unchanged", ctx.cohort)
    add_release(at, "Suppress all", empty)
    add_release(at, "Unchanged", same)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_report_page_builds_the_report_and_the_bundle_under_the_sidebar_k():
    at = _with_releases(k=10)
    assert any("Build the report" in i.value for i in at.info)
    at.button(key="report_build").click().run()
    assert not at.exception, [e.value for e in at.exception]
    _, report, _ = at.session_state["report_built"]
    pdf, bundle = report.to_pdf(), make_bundle(report)  # what the PDF and bundle downloads serve on click
    assert pdf.startswith(b"%PDF")
    rows = {r["name"]: r for r in report.data["releases"]}
    # verified under the sidebar's k (10)
    assert {r["verification"]["k"] for r in rows.values()} == {10}
    assert (
        rows["Suppress all"]["verification"]["verified"] and not rows["Unchanged"]["verification"]["verified"]
    )
    assert any("Unchanged" in w.value for w in at.warning)
    listed = check_bundle(bundle)
    assert "releases/suppress-all/release.csv" in listed
    assert not any(p.startswith("releases/unchanged/") for p in listed)
    with zipfile.ZipFile(io.BytesIO(bundle)) as zf:
        assert f"{BUNDLE_ROOT}/report.html" in zf.namelist()
    # the study file; bundle, PDF, HTML, JSON, and the Markdown rendering (issue 16)
    assert download_labels(at) == [
        "Download the study file (JSON)",
        "Suppress all: crosswalk (CSV, IDENTIFYING)",  # the steward's, beside the report (issue 23)
        "Release bundle (zip: verified files, report, manifest)",
        "IRB report (PDF)",
        "IRB report (HTML)",
        "IRB report (JSON)",
        "IRB report (Markdown)",
        "Office public key (PEM, for verify)",  # issue 39: what a recipient checks the bundle with
    ]
    # the key the download serves on click checks the bundle the page serves
    assert verify_bundle(bundle, load_pem_public_key(office_public_pem())).ok
    assert "Every release side by side" in report.to_markdown().decode("utf-8")
    # issue 23: the release's figures are its files' (rows, patients, pairs retained)
    row = rows["Suppress all"]
    assert (row["rows"], row["patients"], row["pairs_retained"]["kept"]) == (0, 0, 0)
    assert rows["Unchanged"]["pairs_retained"]["kept"] == rows["Unchanged"]["pairs_retained"]["of"] > 0
    # the verification matrix names the failing release under every adversary
    matrix = at.dataframe[0].value
    assert set(matrix.loc[~matrix["verified"], "release"]) == {"Unchanged"}
