"""The IRB report of a study (issue 13) and the release bundle: contents, what each headline means,
records (version, commit, hashes, load options), reproducibility, the PDF read back, sizes on the
shipped sample, the bundle's manifest, and untrusted text escaped in HTML and neutralized in CSVs."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import tomllib
import zipfile
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pypdf
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import engine
from engine import risk
from engine.adversary import Adversary
from engine.io.export import FORMULA_START, pseudonymous_frame, release_ids, safe_csv_bytes
from engine.io.pseudonyms import Pseudonyms
from engine.records import Records
from engine.release import Release, set_item_label
from engine.report.bundle import (
    BUNDLE_ROOT,
    MANIFEST_JSON,
    MANIFEST_SHA256,
    BundleError,
    bundle_files,
    check_bundle,
    make_bundle,
    zip_bytes,
)
from engine.report.report import (
    HEADLINES,
    PHEWAS_CORRECTION,
    PhewasResults,
    ReleaseInput,
    ReportError,
    build_report,
    cdf_points,
    git_commit,
    phewas_significance_words,
)
from engine.study import compare
from engine.study.joint import JointRefused
from engine.study.runs import HeatherlySettings, ProfilesSettings, RunInputs
from engine.study.study import (
    Study,
    StudyRelease,
    VerificationRecord,
    data_ref,
    export_files,
    sha256_of,
)
from engine.utility.coverage import pairs_retained
from engine.utility.phewas import DEFAULT_CORRECTION

ROOT = Path(__file__).resolve().parent.parent
ADV = Adversary("cohort", "single_visit")
KEY = "5e" * 32  # the studies' pseudonym key (engine.io.pseudonyms): fixed, so reports are reproducible
PSEUDONYMS = Pseudonyms(KEY)


def _entry(name, release, settings, data, population, adv=ADV, k=2):
    """A study entry and the report input of a release made by hand (as `make_release` records it)."""
    v = risk.verify(release, adv, k, population)
    files = export_files(release, v, pseudonyms=PSEUDONYMS)
    entry = StudyRelease(
        name=name,
        settings=settings,
        data=data,
        verification=VerificationRecord.of(v),
        files=tuple(sorted((f, sha256_of(b)) for f, b in files.items())),
    )
    return entry, ReleaseInput(release, v, files or None)


def _toy(load_options=None):
    df = pd.DataFrame(
        {
            "patient_id": ["a", "a", "b", "c", "d"],
            "visit": [1, 2, 1, 1, 1],
            "code": ["401.1", "250.00", "401.1", "401.1", "272.4"],
        }
    )
    pop = Records.from_frame(df)
    cohort = pop.subset(["a", "b", "c"])
    inputs = RunInputs(pop, cohort)
    data = data_ref("toy", pop, inputs, sources={"events.csv": "abc"}, load_options=load_options or {})
    # a release that suppresses everything but 401.1, and the cohort released unchanged
    keep = cohort.items[cohort.event_item] == "401.1"
    good = Release("suppress", cohort.keep_events(keep), params={"k": 2})
    bad = Release("none", cohort)
    e1, i1 = _entry("good", good, HeatherlySettings(k=2), data, pop)
    e2, i2 = _entry("bad", bad, HeatherlySettings(k=2), data, pop)
    study = Study(data, ADV, 2, pseudonym_key=KEY).add(e1).add(e2)
    return study, {"good": i1, "bad": i2}, pop, cohort


def _pdf_text(data: bytes) -> tuple[int, str]:
    reader = pypdf.PdfReader(io.BytesIO(data))
    return len(reader.pages), "\n".join(p.extract_text() for p in reader.pages)


def _words(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------------------------ contents
def test_report_has_risk_verification_and_unverified_releases():
    study, inputs, pop, cohort = _toy()
    rep = build_report(study, inputs, pop, cohort, reproducible=True)
    d = rep.data
    assert [r["verification"]["verified"] for r in d["releases"]] == [True, False]
    bad = d["releases"][1]
    assert bad["verification"]["below k"] == 1  # patient a's {250.00} visit is unique
    assert bad["files"] == {} and not bad["exported"]
    assert bad["risk after"]["share below k"] == pytest.approx(1 / 3)  # its figures are still reported
    assert bad["fails under"]  # the matrix names the adversaries it fails under
    chosen = [r for r in d["risk before, every adversary"] if r["chosen"]]
    assert len(chosen) == 1 and chosen[0]["share unique"] == pytest.approx(1 / 3)
    assert d["risk before"]["share unique"] == pytest.approx(1 / 3)
    assert d["records"]["input files sha256"] == {"events.csv": "abc"}
    assert set(rep.release_files) == {"good"}  # only the verified release's files
    page = rep.to_html().decode()
    assert "NOT verified" in page and "Fails under: " in page
    assert json.loads(rep.to_json()) == d


def test_verification_matrix_names_the_failing_adversaries():
    study, inputs, pop, cohort = _toy()
    d = build_report(study, inputs, pop, cohort, reproducible=True).data
    for r in d["releases"]:
        assert [m["adversary"] for m in r["matrix"]] == [
            "cohort / single visit",
            "cohort / all visits",
            "population / single visit",
            "population / all visits",
            "cohort / whole record",
            "population / whole record",
        ]
        assert r["fails under"] == [m["adversary"] for m in r["matrix"] if not m["verified"]]


def test_every_headline_is_explained_in_html_and_pdf():
    study, inputs, pop, cohort = _toy()
    rep = build_report(study, inputs, pop, cohort, reproducible=True)
    page = rep.to_html().decode()
    _, text = _pdf_text(rep.to_pdf())
    text = _words(text)
    for name, meaning in HEADLINES.items():
        title = name[:1].upper() + name[1:]
        assert f"<dt>{html.escape(title)}</dt><dd>{html.escape(meaning)}</dd>" in page, name
        assert f"{title}: {_words(meaning)}" in text, name
    # the summary comes first and says what is released, to whom and under which attacker
    first = _words(pypdf.PdfReader(io.BytesIO(rep.to_pdf())).pages[0].extract_text())
    for words in ("What is released", "To whom", "Attacker assumption", ADV.describe(), "Utility kept"):
        assert _words(words) in first


def test_recipient_is_left_to_the_officer():
    study, inputs, pop, cohort = _toy()
    blank = build_report(study, inputs, pop, cohort, reproducible=True).to_html().decode()
    assert "to be filled in by the privacy officer" in blank
    named = build_report(study, inputs, pop, cohort, recipient="Dr. Smith's lab", reproducible=True)
    assert "Dr. Smith&#x27;s lab" in named.to_html().decode()


def test_no_genotypes_says_so():
    study, inputs, pop, cohort = _toy()
    d = build_report(study, inputs, pop, cohort, reproducible=True).data
    assert d["phewas"].startswith("no genotypes loaded")
    assert all(r["phewas"] is None for r in d["releases"])
    assert "no genotypes loaded" in build_report(study, inputs, pop, cohort).to_html().decode()


def test_phewas_counts_corrected_associations_and_says_so():
    """Issue 16: the report counted PheWAS associations at uncorrected p <= 0.05 over a whole scan
    (chance findings among them); it now counts Benjamini-Hochberg adjusted p, as the PheWAS page's
    default, and its text names the correction."""
    study, inputs, pop, cohort = _toy()
    orig = pd.DataFrame(
        {
            "snp": ["s"] * 3,
            "phecode": ["1", "2", "3"],
            "phenotype": ["a", "b", "c"],
            "n_cases": [30] * 3,
            "odds_ratio": [1.0] * 3,
            "p": [0.001, 0.04, 0.5],
            "p_bonferroni": [0.003, 0.12, 1.0],
            "p_bh": [0.003, 0.06, 0.5],
        }
    )
    given = PhewasResults(orig, {"good": orig, "bad": orig})
    rep = build_report(study, inputs, pop, cohort, phewas=given, reproducible=True)
    assert PHEWAS_CORRECTION == DEFAULT_CORRECTION == "bh"
    assert rep.data["phewas correction"] == "bh"
    assert [r["phewas"]["original"] for r in rep.data["releases"]] == [1, 1]  # 0.04 is not (BH 0.06)
    assert "Benjamini-Hochberg" in rep.data["phewas"] and "Table 4 counted uncorrected" in rep.data["phewas"]
    assert "Benjamini-Hochberg" in HEADLINES["PheWAS associations"]
    assert "without correction" not in HEADLINES["PheWAS associations"]
    page = rep.to_html().decode()
    assert "Benjamini-Hochberg adjusted p &lt;= 0.05" in page
    assert "without correction" in phewas_significance_words("heatherly2013")


# ------------------------------------------------------------------------------------- records
def test_version_is_pyprojects():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert engine.__version__ == meta["project"]["version"]


def test_records_version_commit_hashes_and_load_options():
    study, inputs, pop, cohort = _toy(load_options={"drop duplicates": "yes: 3 duplicate rows dropped"})
    rep = build_report(study, inputs, pop, cohort)
    rec = rep.data["records"]
    assert rec["cohortshield version"] == engine.__version__
    assert rec["commit"] == git_commit()
    assert rec["commit"] == "unknown" or re.fullmatch(
        r"[0-9a-f]{40}( \(uncommitted changes\))?", rec["commit"]
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", rec["generated at"])
    assert rec["load options"] == {"drop duplicates": "yes: 3 duplicate rows dropped"}
    assert rec["input files sha256"] == {"events.csv": "abc"}
    files = rep.release_files["good"]
    assert rec["released files sha256"] == {f"releases/good/{n}": sha256_of(b) for n, b in files.items()}
    page = rep.to_html().decode()
    assert "yes: 3 duplicate rows dropped" in page and rec["generated at"] in page


def test_reproducible_mode_is_byte_identical():
    study, inputs, pop, cohort = _toy()
    a = build_report(study, inputs, pop, cohort, reproducible=True)
    b = build_report(study, inputs, pop, cohort, reproducible=True)
    assert "generated at" not in a.data["records"]
    assert a.to_json() == b.to_json()
    assert a.to_html() == b.to_html()
    assert a.to_pdf() == b.to_pdf()
    assert make_bundle(a) == make_bundle(b)


def test_report_refuses_inconsistent_inputs():
    study, inputs, pop, cohort = _toy()
    good = inputs["good"]
    other = risk.verify(good.release, Adversary("population", "all_visits"), 2, pop)
    with pytest.raises(ReportError, match="study's attacker"):
        build_report(study, {"good": ReleaseInput(good.release, other)}, pop, cohort)
    with pytest.raises(ReportError, match="unknown"):
        build_report(study, {"nope": good}, pop, cohort)
    forged = dict(good.files or {}) | {"release.csv": b"patient_id,code\n"}
    with pytest.raises(ReportError, match="not the study's release files"):
        build_report(study, {"good": ReleaseInput(good.release, good.verification, forged)}, pop, cohort)
    bad = inputs["bad"]
    with pytest.raises(ReportError, match="not verified"):
        build_report(study, {"bad": ReleaseInput(bad.release, bad.verification, {"x": b""})}, pop, cohort)


# ----------------------------------------------------------------------------------- utility
def _pairs(cohort: Records, release: Release) -> tuple[int, int]:
    """`pairs_retained` of the files the gate writes for `release` (any verification: the count is
    the files', whoever verified them), read back with the crosswalk."""
    files = compare.measuring_files(release)
    return pairs_retained(cohort, files["release.csv"], files["code_map.csv"], None)


def test_pairs_retained_counts_codes_merged_into_one_item():
    """Issue 23: retention is (patient, original code) pairs, read from the files: a visit's two codes
    generalized into one released item are both retained; a suppressed code is not."""
    df = pd.DataFrame(
        {
            "patient_id": ["a", "a", "a", "b"],
            "visit": [1, 1, 2, 1],
            "code": ["401.0", "401.1", "250.00", "401.0"],
        }
    )
    cohort = Records.from_frame(df)
    label = set_item_label(["401.0", "401.1"])
    codes = cohort.items[cohort.event_item]
    merged = np.where(np.isin(codes, ["401.0", "401.1"]), label, codes)
    keep = codes != "250.00"  # 250.00 suppressed
    records = cohort.recode(merged).keep_events(keep)
    records = records.keep_events(np.r_[True, False, True])
    rel = Release("x", records, item_codes={label: frozenset({"401.0", "401.1"})})
    assert rel.records.n_events == 2  # what a count of released events would say
    assert _pairs(cohort, rel) == (3, 4)  # 401.0 and 401.1 of a, 401.0 of b; 250.00 is lost
    # the gate's own files, patients by release ids, read with the crosswalk: the same pairs
    files = {
        "release.csv": safe_csv_bytes(pseudonymous_frame(rel, PSEUDONYMS)),
        "code_map.csv": safe_csv_bytes(rel.exported_code_map()),
    }
    crosswalk = {r: s for s, r in release_ids(rel, PSEUDONYMS).items()}
    assert b"a," not in files["release.csv"]  # no source id leaves
    assert pairs_retained(cohort, files["release.csv"], files["code_map.csv"], crosswalk) == (3, 4)
    with pytest.raises(ValueError, match="not in the crosswalk"):
        pairs_retained(cohort, files["release.csv"], files["code_map.csv"], {})


def test_pairs_retained_reads_lda_categories_as_the_codes_under_them():
    """An LDA release of 3-digit categories (`250|45`) stands for the cohort's codes under them."""
    cohort = Records.from_frame(
        pd.DataFrame({"patient_id": ["a", "a", "b"], "code": ["250.01", "401.1", "250.00"]})
    )
    pairs = Records.from_frame(pd.DataFrame({"patient_id": ["a", "b"], "code": ["250|40", "250|50"]}))
    rel = Release("LDA", pairs, age_pairs=True, counts_repeats=True)
    assert _pairs(cohort, rel) == (2, 3)  # a's and b's 250.xx; a's 401.1 is not released


@given(st.lists(st.integers(1, 5000), min_size=1, max_size=2000), st.integers(2, 50))
@example([1] * 3 + list(range(2, 700)), 5)
def test_risk_curve_keeps_the_share_below_k(dis, k):
    dis = np.array(dis)
    pts = cdf_points(dis, k)
    assert len(pts) <= 201
    xs = np.array([p[0] for p in pts])
    ys = np.array([p[1] for p in pts])
    below = ys[xs < k]
    assert (below[-1] if len(below) else 0.0) == pytest.approx(np.mean(dis < k), abs=1e-6)
    assert (np.diff(ys) >= 0).all() and ys[-1] == pytest.approx(1.0)


# -------------------------------------------------------------------------------- PDF, bundle
def test_pdf_has_real_text_pages_and_release_hashes():
    study, inputs, pop, cohort = _toy()
    rep = build_report(study, inputs, pop, cohort, reproducible=True)
    pages, text = _pdf_text(rep.to_pdf())
    assert pages >= 2
    hashes = [sha for r in rep.data["releases"] for sha in r["files"].values()]
    assert hashes
    for sha in hashes:
        assert sha in text
    assert "CohortShield release report: toy" in text


def test_bundle_manifest_lists_every_file_with_its_sha256():
    study, inputs, pop, cohort = _toy()
    rep = build_report(study, inputs, pop, cohort, reproducible=True)
    data = make_bundle(rep)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = zf.infolist()
        contents = {i.filename.removeprefix(f"{BUNDLE_ROOT}/"): zf.read(i) for i in infos}
    assert all(i.date_time == (1980, 1, 1, 0, 0, 0) for i in infos)
    listed = dict(
        (path, sha)
        for sha, path in (line.split("  ", 1) for line in contents[MANIFEST_SHA256].decode().splitlines())
    )
    assert set(listed) == set(contents) - {MANIFEST_SHA256}
    for path, sha in listed.items():
        assert sha256_of(contents[path]) == sha, path
    manifest = json.loads(contents[MANIFEST_JSON])
    for f in manifest["files"]:
        assert sha256_of(contents[f["path"]]) == f["sha256"] and len(contents[f["path"]]) == f["bytes"]
    # only the verified release's files are in; the unverified one is reported, not bundled
    assert {p for p in contents if p.startswith("releases/")} == {
        "releases/good/release.csv",
        "releases/good/code_map.csv",
    }
    assert [(r["name"], r["verified"], r["folder"]) for r in manifest["releases"]] == [
        ("good", True, "releases/good"),
        ("bad", False, None),
    ]
    assert contents["releases/good/release.csv"] == inputs["good"].files["release.csv"]
    assert {"report.pdf", "report.html", "report.json", "study.json"} <= set(contents)
    # the study file without the steward's pseudonym key: the key is in no file of the bundle
    assert contents["study.json"].decode() == study.to_json(with_key=False)
    assert not any(KEY.encode() in data for data in contents.values())
    assert check_bundle(data) == listed


def test_check_bundle_names_a_tampered_file():
    study, inputs, pop, cohort = _toy()
    files = bundle_files(build_report(study, inputs, pop, cohort, reproducible=True))
    files["releases/good/release.csv"] += b"x,401.1\n"
    with pytest.raises(BundleError, match=r"releases/good/release.csv: changed \(sha256 .* differs"):
        check_bundle(zip_bytes(files))


# --------------------------------------------------------------------------------- untrusted text
SCRIPT = "<script>alert(1)</script>"
FORMULA = '=HYPERLINK("http://evil.example","x")'


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: set[str] = set()
        self.pairs: set[tuple[str, str | None]] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs |= {a for a, _ in attrs}
        self.pairs |= set(attrs)


def test_untrusted_text_is_escaped_in_html_and_neutralized_in_csvs():
    df = pd.DataFrame(
        {
            "patient_id": ["p1", "p1", "p2", "p2", "p3", "p3", "=cmd|'/C calc'!A0"],
            "visit": [1] * 7,
            "code": [SCRIPT, FORMULA, SCRIPT, FORMULA, SCRIPT, FORMULA, "401.1"],
        }
    )
    pop = Records.from_frame(df)
    cohort = pop.subset(["p1", "p2", "p3"])
    label = set_item_label([SCRIPT, FORMULA])
    records = cohort.recode([label] * cohort.n_events)
    trace = [["generalize", FORMULA, SCRIPT]] * 40  # long: goes to the appendix as CSV
    release = Release(
        "UGACLIP", records, item_codes={label: frozenset({SCRIPT, FORMULA})}, params={"trace": trace}
    )
    inputs = RunInputs(pop, cohort)
    data = data_ref(
        '"<b>bold</b>',
        pop,
        inputs,
        sources={"=cmd|' /C calc'!A0.csv": "abc"},
        load_options={"<i>": "<u>x</u>"},
    )
    # the policy reader refuses codes that are not ICD-9-CM; the disease name stays untrusted text
    policy = 'disease,icd9_codes\n"<img src=x onerror=alert(3)>",401.1\n'
    settings = ProfilesSettings(k=2, utility_policy_csv=policy)
    name = "<img src=x onerror=alert(2)>"
    entry, inp = _entry(name, release, settings, data, pop)
    assert inp.verification.ok
    study = Study(data, ADV, 2, pseudonym_key=KEY).add(entry)
    rep = build_report(
        study, {name: inp}, pop, cohort, recipient="<a href='http://x'>me</a>", reproducible=True
    )
    page = rep.to_html().decode()
    parser = _Tags()
    parser.feed(page)
    assert parser.tags <= {
        "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "dl", "dt", "dd", "table",
        "thead", "tbody", "tr", "th", "td", "figure", "figcaption", "div", "svg", "rect", "line", "path", "text",
    }  # fmt: skip
    assert not any(a.startswith("on") or a in ("src", "href") for a in parser.attrs)
    assert html.escape(SCRIPT) in page and html.escape(name) in page and "&lt;b&gt;bold" in page
    # no attribute points anywhere: the only URL in an attribute is the SVG namespace
    assert {v for a, v in parser.pairs if "http" in (v or "")} == {"http://www.w3.org/2000/svg"}
    assert "Content-Security-Policy" in page and "<script" not in page
    # every CSV of the bundle: no cell a spreadsheet would evaluate
    files = bundle_files(rep)
    csvs = [p for p in files if p.endswith(".csv")]
    assert any(p.startswith("appendix/") for p in csvs) and any(p.startswith("releases/") for p in csvs)
    for p in csvs:
        for row in csv.reader(io.StringIO(files[p].decode())):
            assert not any(cell[:1] in FORMULA_START for cell in row), (p, row)
    assert (
        f"'{FORMULA}".replace('"', '""')
        in files[next(p for p in csvs if p.endswith("code_map.csv"))].decode()
    )
    # the PDF shows the same text literally
    _, text = _pdf_text(rep.to_pdf())
    assert "<img src=x onerror=alert(2)>" in _words(text)


# --------------------------------------------------------------------------- the shipped sample
@pytest.mark.slow
def test_sample_report_with_ugaclip_and_heatherly_stays_small(sample_dataset, capsys):
    from engine.study.study import make_release

    ds = sample_dataset
    inputs = RunInputs(
        ds.group_records("population"), ds.group_records("cohort"), ds.group_records("biobank")
    )
    data = data_ref("sample", ds.events, inputs, biobank="biobank", sources=ds.sources)
    study = Study(data, ADV, 5, pseudonym_key=KEY)
    given_inputs = {}
    for name, s in [("UGACLIP", ProfilesSettings(k=5)), ("Heatherly DEMO_D", HeatherlySettings(k=5))]:
        made = make_release(name, s, inputs, data, ADV, 5, pseudonyms=PSEUDONYMS)
        study = study.add(made.entry)
        given_inputs[name] = ReleaseInput(made.release, made.verification, made.files)
    rep = build_report(
        study, given_inputs, inputs.population, inputs.cohort, genotypes=ds.genotypes, reproducible=True
    )
    js, page, pdf = rep.to_json(), rep.to_html(), rep.to_pdf()
    if rep.joint is not None and not rep.joint.ok:  # issue 35: the pair fails jointly, no bundle leaves
        with pytest.raises(JointRefused):
            make_bundle(rep)
    bundle = zip_bytes(bundle_files(rep))  # what it would hold, for its size
    with capsys.disabled():
        print(
            f"\nsample report (UGACLIP + Heatherly DEMO_D): JSON {len(js):,} B, HTML {len(page):,} B, "
            f"PDF {len(pdf):,} B, appendix {sum(map(len, rep.appendix.values())):,} B, bundle {len(bundle):,} B"
        )
    assert len(js) < 100_000 and len(page) < 100_000 and len(pdf) < 200_000
    ugaclip = rep.data["releases"][0]
    assert "trace" not in ugaclip["method parameters"]  # UGACLIP's trace is an appendix file
    assert ugaclip["parameters in the appendix"]["trace"].startswith("appendix/ugaclip/trace.csv")
    assert "appendix/ugaclip/trace.csv" in rep.appendix
    c = ugaclip["utility constraints"]
    assert c is not None and c["total"] == 18 and 0 <= c["met"] <= 18
    for r in rep.data["releases"]:
        p = r["phewas"]
        assert p is not None and p["original"] > 0
        assert p["lost"] == sum(x["lost"] for x in p["per snp"])
        assert p["lost"] + p["identical"] == p["original"]
        u = r["utility"]
        assert (
            0 < u["pairs retained"] <= u["pairs in the cohort"] and 0 < u["codes retained"] <= u["codes in"]
        )
    pages, text = _pdf_text(pdf)
    assert pages >= 2
    for r in rep.data["releases"]:
        for sha in r["files"].values():
            assert sha in text
    check_bundle(bundle)


def _pairs_reference(cohort: Records, release: Release) -> tuple[int, int]:
    """The definition, spelled out with sets of (patient, code): an item keeps the pairs of the cohort's
    codes it stands for when those codes lie in one phecode family (issue 35; a code without a phecode
    is a family of its own)."""
    from engine.vocab import phecode_map

    m = phecode_map()
    family = {str(c): str(p).split(".")[0] for c, p in zip(m["icd9"], m["phecode"], strict=True)}
    held = {str(c) for c in cohort.items}
    before = set(zip(cohort.patient_ids[cohort.event_patient], cohort.items[cohort.event_item], strict=True))
    rel = release.records

    def kept_by(item: str) -> set[str]:
        codes = set(release.codes_of(item)) & held
        return codes if len({family.get(c, "own: " + c) for c in codes}) <= 1 else set()

    after = {
        (p, c)
        for p, item in zip(rel.patient_ids[rel.event_patient], rel.items[rel.event_item], strict=True)
        for c in kept_by(str(item))
    }
    return len(before & after), len(before)


@given(
    st.lists(
        st.tuples(st.sampled_from("abcd"), st.integers(1, 3), st.sampled_from(["1", "2", "3", "4"])),
        min_size=1,
        max_size=30,
    ),
    st.lists(st.booleans(), min_size=30, max_size=30),
    st.sets(st.sampled_from(["1", "2", "3", "4"]), max_size=4),
)
def test_pairs_retained_matches_its_definition(events, keep, merged):
    cohort = Records.from_frame(pd.DataFrame(events, columns=["patient_id", "visit", "code"]))
    label = set_item_label(merged) if len(merged) > 1 else None
    codes = cohort.items[cohort.event_item].astype(str)
    recoded = [label if label and c in merged else c for c in codes]
    records = cohort.recode(recoded).keep_events(np.asarray(keep[: cohort.n_events]))
    rel = Release("x", records, item_codes={label: frozenset(merged)} if label else {})
    assert _pairs(cohort, rel) == _pairs_reference(cohort, rel)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 600-patient synthetic population with its biobank, cohort and genotypes, written as files."""
    from engine.commands.inputs import load_groups
    from engine.synth.generator import write_sample

    d = tmp_path_factory.mktemp("small")
    paths = write_sample(d, 600, seed=3, labs=False)
    g = load_groups(str(paths["events"]), cohort=str(paths["cohort"]), biobank=str(paths["biobank"]))
    inputs = RunInputs(g.population, g.cohort, g.biobank)
    data = data_ref("small", g.events, inputs, biobank="biobank", sources=g.sources)
    return inputs, data, pd.read_parquet(paths["genotypes"])


def test_report_of_every_method_under_an_all_visits_attacker(small):
    from engine.study.runs import CodeSelection, GCCensSettings, LDASettings
    from engine.study.study import make_release

    inputs, data, genotypes = small
    adv = Adversary("population", "all_visits")
    study, given_inputs = Study(data, adv, 3, pseudonym_key=KEY), {}
    for name, s in [
        ("GCCens", GCCensSettings(k=3)),
        ("DEMO_S", HeatherlySettings(k=3, scope="population")),
        ("ACLIP", ProfilesSettings(algorithm="ACLIP", knowledge="all_visits", k=3)),
        ("LDA", LDASettings(k=3, codes=CodeSelection("top", 5))),
    ]:
        made = make_release(name, s, inputs, data, adv, 3, pseudonyms=PSEUDONYMS)
        study = study.add(made.entry)
        given_inputs[name] = ReleaseInput(made.release, made.verification, made.files or None)
    rep = build_report(
        study, given_inputs, inputs.population, inputs.cohort, genotypes=genotypes, reproducible=True
    )
    rows = {r["name"]: r for r in rep.data["releases"]}
    # GCCens releases repeat counts: its "before" counts them too, with its own curve
    assert rows["GCCens"]["risk before"]["repeats counted"] and rows["GCCens"]["cdf before"]
    assert not rows["ACLIP"]["risk before"]["repeats counted"] and rows["ACLIP"]["cdf before"] is None
    assert rows["GCCens"]["settings"]["scope"] == "k-map against the population"
    for r in rows.values():
        u = r["utility"]
        assert (
            0 <= u["pairs retained"] <= u["pairs in the cohort"] and 0 <= u["codes retained"] <= u["codes in"]
        )
        assert r["phewas"] is not None
        assert (r["folder"] in rep.release_files) == r["verification"]["verified"]
    # LDA's code|age items are read by their code
    assert rows["LDA"]["utility"]["codes as themselves"] == 5
    with pytest.raises(JointRefused, match=r"GCCens \+ ACLIP: \d+ of 128 patients below k"):
        make_bundle(rep)  # issue 35: a pair of the releases fails jointly
    check_bundle(zip_bytes(bundle_files(rep)))  # what it would hold is well formed all the same


def test_long_method_figures_go_to_the_appendix_and_long_cells_fit_the_pdf():
    _, _, pop, cohort = _toy()
    data = data_ref("toy", pop, RunInputs(pop, cohort), sources={"events.csv": "abc"})
    keep = cohort.items[cohort.event_item] == "401.1"
    steps = [{"code": "401.1", "from_count": i, "records": 3} for i in range(100)]  # GCCens' loss["steps"]
    release = Release("GCCens", cohort.keep_events(keep), loss={"steps": steps, "iterations": 100})
    disease = "very long disease name " * 300  # a table row taller than a PDF page, if written whole
    policy = f"disease,icd9_codes\n{disease.strip()},401.1\n"
    entry, inp = _entry("r", release, ProfilesSettings(k=2, utility_policy_csv=policy), data, pop)
    rep = build_report(
        Study(data, ADV, 2, pseudonym_key=KEY).add(entry), {"r": inp}, pop, cohort, reproducible=True
    )
    r = rep.data["releases"][0]
    assert r["method loss figures"] == {"iterations": 100}
    assert r["loss figures in the appendix"] == {"steps": "appendix/r/steps.csv (100 entries)"}
    table = pd.read_csv(io.BytesIO(rep.appendix["appendix/r/steps.csv"]))
    assert list(table.columns) == ["code", "from_count", "records"] and len(table) == 100
    pages, text = _pdf_text(rep.to_pdf())
    assert pages >= 2 and "in full in the HTML and JSON report" in _words(text)
    assert disease.strip() in rep.to_html().decode()


def test_text_outside_latin1_is_written_visibly_in_the_pdf():
    study, inputs, pop, cohort = _toy()
    name = "Kohorte für 日本 ≥ k"
    entry = replace(study.get("good"), name=name)
    renamed = Study(study.data, ADV, 2, pseudonym_key=KEY).add(entry)
    rep = build_report(renamed, {name: inputs["good"]}, pop, cohort, reproducible=True)
    _, text = _pdf_text(rep.to_pdf())
    assert "Kohorte für [U+65E5][U+672C] >= k" in text
    assert html.escape(name) in rep.to_html().decode()


# --------------------------------------------------------------------- the comparison (issue 16)
def test_summary_compares_every_release_with_the_best_of_each_column_marked():
    """Issue 16: the report's summary holds the Compare page's table (engine.compare) of every release,
    in JSON, HTML, PDF and Markdown, the best of each column marked, computed from the report's own
    verifications."""
    from engine.report.render import BEST_MARK, comparison_rows
    from engine.study import compare

    study, inputs, pop, cohort = _toy()
    rep = build_report(study, inputs, pop, cohort, reproducible=True)
    c = rep.data["comparison"]
    assert [r["release"] for r in c["rows"]] == ["good", "bad"]
    good, bad = c["rows"]
    # good releases 401.1 only: 3 of 4 events; bad is the cohort unchanged
    assert good["verified"] is True and bad["verified"] is False
    assert good["pairs retained"] == pytest.approx(3 / 4) and bad["pairs retained"] == 1.0
    assert (good["pairs kept"], good["pairs in the cohort"]) == (3, 4)
    assert good["distinct codes kept"] == pytest.approx(1 / 2) and bad["records modified"] == 0.0
    assert good["records modified"] == pytest.approx(1 / 3)  # patient a lost 250.00
    assert c["best"]["share below k"] == ["good"]
    assert c["best"]["pairs retained"] == ["bad"] and c["best"]["records modified"] == ["bad"]
    assert "PheWAS associations lost" not in c["columns"]  # no genotypes: no PheWAS columns
    # the same figures as the Compare page's table
    table = compare.comparison_table({n: i.release for n, i in inputs.items()}, cohort, pop, ADV, 2)
    assert compare.comparison_data(table)["rows"] == c["rows"]
    # JSON round trip, and the table in every rendering with (best) marks
    assert json.loads(rep.to_json())["comparison"] == c
    header, rows = comparison_rows(c)
    assert header[:2] == ("Release", "Verified")
    assert rows[0][2] == "0%" + BEST_MARK and rows[1][3] == "4 of 4 (100%)" + BEST_MARK
    assert rows[0][1] == "yes" and rows[1][1] == "NO"
    page = rep.to_html().decode()
    assert "Every release side by side" in page
    assert f"<td>{html.escape('4 of 4 (100%)' + BEST_MARK)}</td>" in page
    _, text = _pdf_text(rep.to_pdf())
    assert "Every release side by side" in _words(text) and "(best)" in text
    md = rep.to_markdown().decode()
    assert "## Every release side by side" in md
    assert "| Release | Verified | Share below k |" in md
    from engine.report.markdown import escape

    assert f"| {escape('good')} | yes | {escape('0%' + BEST_MARK)} |" in md


def test_comparison_carries_phewas_lost_and_false_when_computed():
    study, inputs, pop, cohort = _toy()
    orig = pd.DataFrame(
        {
            "snp": ["s"] * 2,
            "phecode": ["1", "2"],
            "phenotype": ["a", "b"],
            "n_cases": [30] * 2,
            "odds_ratio": [1.0] * 2,
            "p": [0.001, 0.5],
            "p_bonferroni": [0.002, 1.0],
            "p_bh": [0.002, 0.5],
        }
    )
    lost = orig.assign(p=[0.5, 0.001], p_bonferroni=[1.0, 0.002], p_bh=[0.5, 0.002])
    given = PhewasResults(orig, {"good": lost, "bad": orig})
    c = build_report(study, inputs, pop, cohort, phewas=given, reproducible=True).data["comparison"]
    by = {r["release"]: r for r in c["rows"]}
    assert (by["good"]["PheWAS associations lost"], by["good"]["PheWAS associations false"]) == (1, 1)
    assert (by["bad"]["PheWAS associations lost"], by["bad"]["PheWAS associations false"]) == (0, 0)
    assert c["best"]["PheWAS associations lost"] == ["bad"]


def test_markdown_report_shows_untrusted_names_literally():
    study, inputs, pop, cohort = _toy()
    rep = build_report(
        study, inputs, pop, cohort, recipient="![x](http://127.0.0.1/leak.png)", reproducible=True
    )
    md = rep.to_markdown().decode()
    assert "![x](" not in md and "\\!\\[x\\]" in md
