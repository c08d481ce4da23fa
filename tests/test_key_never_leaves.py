"""Issue 23: the secret behind the release ids lives in the steward's study file only. It is never in
the report (JSON, HTML, Markdown, PDF), the bundle (its study.json included) or a release file, and
the crosswalk (release id -> source id) is never part of the bundle."""

from __future__ import annotations

import io
import json
import zipfile

import pypdf
import pytest

from engine import risk
from engine.adversary import Adversary
from engine.report.bundle import bundle_files, zip_bytes
from engine.report.report import ReleaseInput, build_report
from engine.study.runs import GCCensSettings, HeatherlySettings, RunInputs
from engine.study.study import Study, data_ref, make_release
from engine.synth.generator import write_sample
from tests.pseudonym_support import KEY, PSEUDONYMS


@pytest.fixture(scope="module")
def bundle():
    from engine.commands.inputs import load_groups

    paths = write_sample(
        __import__("pathlib").Path(__import__("tempfile").mkdtemp()), 400, seed=5, labs=False
    )
    g = load_groups(str(paths["events"]), cohort=str(paths["cohort"]))
    inputs = RunInputs(g.population, g.cohort)
    data = data_ref("small", g.events, inputs, sources=g.sources)
    adv = Adversary("cohort", "single_visit")
    study = Study(data, adv, 3, pseudonym_key=KEY)
    made = {}
    for name, s in [("GCCens", GCCensSettings(k=3, scope="cohort")), ("DEMO_D", HeatherlySettings(k=3))]:
        m = make_release(name, s, inputs, data, adv, 3, pseudonyms=PSEUDONYMS)
        assert m.verification.ok, m.verification.message()
        study, made[name] = study.add(m.entry), m
    report = build_report(
        study,
        {
            n: ReleaseInput(m.release, risk.verify(m.release, adv, 3, inputs.population))
            for n, m in made.items()
        },
        inputs.population,
        inputs.cohort,
        reproducible=True,
    )
    # every file the bundle holds (`make_bundle` refuses this pair, which fails jointly: issue 35)
    return study, report, zip_bytes(bundle_files(report)), g


def test_the_key_is_in_no_report_and_no_bundle(bundle):
    study, report, zipped, _ = bundle
    assert json.loads(study.to_json())["pseudonym_key"] == KEY  # the steward's file has it
    text = pypdf.PdfReader(io.BytesIO(report.to_pdf()))
    pdf_text = "".join(p.extract_text() for p in text.pages)
    for out in (report.to_json(), report.to_html(), report.to_markdown(), pdf_text.encode()):
        assert KEY.encode() not in out
    with zipfile.ZipFile(io.BytesIO(zipped)) as z:
        names = z.namelist()
        for n in names:
            data = z.read(n)
            assert KEY.encode() not in data, n
            assert b"pseudonym_key" not in data, n
        assert not [n for n in names if "crosswalk" in n.lower()]
        released = [n for n in names if n.endswith("release.csv")]
        assert len(released) == 2


def test_bundle_release_files_name_release_ids_only(bundle):
    _, _, zipped, g = bundle
    sources = set(map(str, g.events.patient_ids))
    with zipfile.ZipFile(io.BytesIO(zipped)) as z:
        for n in [n for n in z.namelist() if n.endswith("release.csv")]:
            lines = z.read(n).decode().splitlines()
            ids = [line.split(",", 1)[0] for line in lines[1:]]
            assert ids and all(i.startswith("R") for i in ids) and not set(ids) & sources
            assert ids == sorted(ids)  # rows in release-id order
