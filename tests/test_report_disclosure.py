"""Issue 28 in the report: the study's small-cell policy applied to the report's tables of patient
counts (JSON, Markdown, HTML, every bundle member), stated with what it suppressed; the ledger and
the membership attack in report.json. The suppression is checked by brute force: every number of
every count column of every table that leaves."""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from dataclasses import replace
from html.parser import HTMLParser

import pandas as pd
import pytest
from test_report import ADV, PSEUDONYMS, _entry

from engine.disclosure.cells import SUPPRESSED, SmallCellPolicy, count_columns
from engine.records import Records
from engine.release import Release
from engine.report.bundle import BUNDLE_ROOT, make_bundle
from engine.report.report import COUNT_TABLES, build_report
from engine.study.runs import ProfilesSettings, RunInputs
from engine.study.study import Study, data_ref

KEY = "5e" * 32
CMS = SmallCellPolicy.preset("cms")
# the report's columns of patient counts, as the JSON names them and as the tables head them
COUNT_KEYS = {c for cols in COUNT_TABLES.values() for c in cols}
COUNT_HEADERS = {c.lower() for c in COUNT_KEYS}


def _ugaclip_toy(policy: SmallCellPolicy) -> tuple[Study, dict, Records, Records]:
    """Twelve patients with hypertension, diabetes and lipid codes: the UGACLIP table's diabetes
    (a PNAS policy disease) has 4 patients in the cohort, 2 in the release (401.1 everywhere, 250.00
    of two patients: k = 2 holds)."""
    rows = []
    for i in range(12):
        rows.append((f"p{i:02d}", 1, "401.1"))
        if i < 4:
            rows.append((f"p{i:02d}", 1, "250.00"))
        if i < 2:
            rows.append((f"p{i:02d}", 2, "272.4"))
    pop = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))
    cohort = pop
    data = data_ref("toy", pop, RunInputs(pop, cohort), sources={"events.csv": "abc"})
    item = cohort.items[cohort.event_item]
    patient = cohort.patient_ids[cohort.event_patient]
    keep = (item == "401.1") | ((item == "250.00") & pd.Series(patient).isin(["p00", "p01"]).to_numpy())
    release = Release("UGACLIP", cohort.keep_events(keep)).checked(cohort)
    entry, inp = _entry("ugaclip", release, ProfilesSettings(k=2), data, pop)
    study = replace(Study(data, ADV, 2, pseudonym_key=KEY).add(entry), small_cells=policy)
    return study, {"ugaclip": inp}, pop, cohort


def _json_count_cells(data: dict) -> list:
    """Every cell of the report's JSON tables of patient counts (`COUNT_TABLES`)."""
    out = []
    for r in data["releases"]:
        c = r["utility constraints"]
        for row in (c or {}).get("diseases", []):
            out += [row[k] for k in COUNT_TABLES["releases[].utility constraints.diseases"]]
    return out


def _number(text: str) -> float | None:
    s = text.replace("\\", "").replace(",", "").strip()
    return float(s) if re.fullmatch(r"-?\d+(\.\d+)?", s) else None


def _markdown_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    tables, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            head = [h.strip() for h in lines[i].strip("|").split(" | ")]
            body, i = [], i + 2
            while i < len(lines) and lines[i].startswith("| "):
                body.append([c.strip() for c in lines[i].strip("| ").split(" | ")])
                i += 1
            tables.append((head, body))
        else:
            i += 1
    return tables


class _HtmlTables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def _small_in_tables(tables, policy: SmallCellPolicy) -> list[tuple[str, str]]:
    """(header, cell) of every count column's cell that holds a small count."""
    bad = []
    for head, body in tables:
        cols = [j for j, h in enumerate(head) if _plain(h).lower() in COUNT_HEADERS]
        for row in body:
            for j in cols:
                if j < len(row) and policy.is_small(_number(row[j])):
                    bad.append((head[j], row[j]))
    return bad


def _plain(text: str) -> str:
    return text.replace("\\", "").replace("\u2060", "")


def _counted_tables(markdown: str) -> int:
    return sum(1 for h, _ in _markdown_tables(markdown) if {_plain(x).lower() for x in h} & COUNT_HEADERS)


def test_without_a_policy_the_small_counts_are_there():
    """The construction: with no policy the UGACLIP table shows counts of 2 and 4 (so the brute force
    below has something to find)."""
    study, inputs, pop, cohort = _ugaclip_toy(SmallCellPolicy())
    rep = build_report(study, inputs, pop, cohort, reproducible=True)
    cells = _json_count_cells(rep.data)
    assert cells and any(CMS.is_small(x) for x in cells)
    assert _small_in_tables(_markdown_tables(rep.to_markdown().decode()), CMS)
    assert rep.data["small cells"]["suppressed"] == []


@pytest.mark.parametrize(
    "policy", [CMS, SmallCellPolicy.preset("ohdsi"), SmallCellPolicy.min_cell(3), SmallCellPolicy.min_cell(5)]
)
def test_no_small_count_in_any_table_of_the_report_or_the_bundle(policy):
    study, inputs, pop, cohort = _ugaclip_toy(policy)
    rep = build_report(study, inputs, pop, cohort, reproducible=True)
    d = rep.data
    cells = _json_count_cells(d)
    assert cells and not [x for x in cells if policy.is_small(x)]
    assert SUPPRESSED in cells  # something was suppressed, and the report says what
    sc = d["small cells"]
    assert sc["policy"] == policy.to_dict() and sc["description"] == policy.describe()
    assert sc["cells suppressed"] == sum(1 for x in cells if x == SUPPRESSED) > 0
    assert sc["suppressed"][0]["release"] == "ugaclip"
    # Markdown: every count column of every table
    markdown = rep.to_markdown().decode()
    assert _counted_tables(markdown) >= 1
    assert _small_in_tables(_markdown_tables(markdown), policy) == []
    assert policy.describe() in _plain(markdown)
    # the bundle: report.json, report.html tables, every CSV member's count columns
    with zipfile.ZipFile(io.BytesIO(make_bundle(rep))) as zf:
        members = {n.removeprefix(f"{BUNDLE_ROOT}/"): zf.read(n) for n in zf.namelist()}
    assert _json_count_cells(json.loads(members["report.json"])) == cells
    parser = _HtmlTables()
    parser.feed(members["report.html"].decode())
    html_tables = [(t[0], t[1:]) for t in parser.tables if t]
    assert any({h.lower() for h in head} & COUNT_HEADERS for head, _ in html_tables)
    assert _small_in_tables(html_tables, policy) == []
    for name, data in members.items():
        if name.endswith(".csv") and not name.startswith("releases/"):  # aggregate tables
            frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
            for col in count_columns(frame):
                assert not [v for v in frame[col] if policy.is_small(_number(v))], (name, col)
    assert json.loads(members["study.json"])["small_cells"] == policy.to_dict()
    assert json.loads(members["manifest.json"])["small cells"] == policy.describe()


def test_release_files_are_records_not_tables():
    """The release files in the bundle are the gate's records (one row per patient and code), never
    suppressed: the policy is for aggregate tables. Their bytes are the same under every policy."""
    files = []
    for policy in (SmallCellPolicy(), CMS):
        study, inputs, pop, cohort = _ugaclip_toy(policy)
        files.append(build_report(study, inputs, pop, cohort, reproducible=True).release_files)
    assert files[0] == files[1] and files[0]
    rows = list(csv.reader(io.StringIO(files[0]["ugaclip"]["release.csv"].decode())))
    assert rows[0][:2] == ["patient_id", "code"] and len(rows) == 15


def test_report_names_pseudonyms_only():
    study, inputs, pop, cohort = _ugaclip_toy(CMS)
    assert PSEUDONYMS is not None
    assert KEY not in build_report(study, inputs, pop, cohort, reproducible=True).to_json().decode()


@pytest.mark.slow
def test_sample_membership_ledger_and_small_cells(sample_dataset, capsys):
    """The shipped sample, cohort / single visit, k = 5: GCCens (cohort scope) and Heatherly DEMO_D,
    each verified, together not (the ledger); the membership attack on the original and released
    PheWAS tables; the report's figures under each small-cell preset."""
    from engine.study.runs import GCCensSettings, HeatherlySettings
    from engine.study.study import make_release

    ds = sample_dataset
    inputs = RunInputs(
        ds.group_records("population"), ds.group_records("cohort"), ds.group_records("biobank")
    )
    data = data_ref("sample", ds.events, inputs, biobank="biobank", sources=ds.sources)
    study = Study(data, ADV, 5, pseudonym_key=KEY, small_cells=CMS)
    given = {}
    for name, s in [
        ("GCCens", GCCensSettings(k=5, scope="cohort")),
        ("Heatherly DEMO_D", HeatherlySettings(k=5)),
    ]:
        made = make_release(name, s, inputs, data, ADV, 5, pseudonyms=PSEUDONYMS)
        study = study.add(made.entry)
        from engine.report.report import ReleaseInput

        given[name] = ReleaseInput(made.release, made.verification, made.files)
    rep = build_report(
        study, given, inputs.population, inputs.cohort, genotypes=ds.genotypes, reproducible=True
    )
    d = rep.data
    (pair,) = d["ledger"]
    assert not pair["verified"] and pair["below k"] > 0
    assert all(r["verification"]["verified"] for r in d["releases"])
    power = {
        name: {x["option"]: x["power"] for x in rows}
        for name, rows in [("original", d["membership"]["original"])]
        + [(r["name"], r["membership"]) for r in d["releases"]]
    }
    for rows in power.values():
        assert "as computed" in rows and "all options together" in rows
        assert any(o.startswith("small-cell policy") for o in rows)
    # the section's paragraph is a sentence (it began "a likelihood-ratio presence test")
    section = rep.to_markdown().decode().split("Membership attack on the released PheWAS statistics", 1)[1]
    first = section.strip().split("\n", 1)[0].replace("\\", "")  # markdown escapes
    assert first.startswith("A likelihood-ratio presence test"), first[:60]
    with capsys.disabled():
        print("\nledger:", pair["message"])
        for name, rows in power.items():
            print(name, {o.split(":")[0].split(" (")[0]: round(p, 4) for o, p in rows.items()})
        print("small cells suppressed in the report's tables (CMS):", d["small cells"]["cells suppressed"])
