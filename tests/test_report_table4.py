"""Heatherly's Table 4 with the guarantee in the report and on the page's table (issue 36, finding 1):
a completed Heatherly release is shown beside the paper's procedure at its settings, with the records
that procedure leaves below k (counted by the arbiter) and the words 'fails the guarantee'."""

from __future__ import annotations

import html
import json

import pandas as pd

from engine.adversary import Adversary
from engine.anonymize.population import anonymize, records_below_k
from engine.records import Records
from engine.report.report import build_report
from engine.report.table4 import NOT_REPRODUCED, Table4Release, guarantee_table
from engine.study.runs import HeatherlySettings, RunInputs
from engine.study.study import Study, data_ref
from tests.test_report import KEY, _entry
from tests.test_report_schema import _validator

ADV = Adversary("cohort", "single_visit")


def _single_codes_pass_visits_fail() -> Records:
    """Every code is held by 2 records, but a's visit {401.1, 250.00} by a alone: the paper's
    procedure (single codes at k = 2) leaves a below k."""
    rows = [("a", 1, "401.1"), ("a", 1, "250.00"), ("b", 1, "401.1"), ("c", 1, "250.00")]
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))


def test_report_shows_the_paper_procedure_beside_a_completed_release():
    cohort = _single_codes_pass_visits_fail()
    inputs = RunInputs(cohort, cohort)
    settings = HeatherlySettings(k=2, scope="cohort", complete=True, completion="phewas")
    release = settings.run(inputs)
    data = data_ref("toy", cohort, inputs, sources={"events.csv": "abc"}, load_options={})
    entry, inp = _entry("Heatherly DEMO_D", release, settings, data, cohort, adv=ADV, k=2)
    study = Study(data, ADV, 2, pseudonym_key=KEY).add(entry)
    genotypes = pd.DataFrame({"patient_id": ["a", "b", "c"], "rs1": [0, 1, 2]})
    rep = build_report(
        study,
        {"Heatherly DEMO_D": inp},
        cohort,
        cohort,
        genotypes=genotypes,
        membership=False,
        reproducible=True,
    )
    (row,) = rep.data["releases"]
    assert row["verified"]
    paper = row["phewas, the paper's procedure"]
    expected = records_below_k(anonymize(cohort, cohort.patient_ids, 2).verification)
    assert expected == 1 and paper["records below k"] == expected and not paper["verified"]
    assert paper["guarantee"] == "records below k: 1 — fails the guarantee"
    page = rep.to_html().decode()
    assert "PheWAS under the paper&#x27;s procedure (Heatherly 2013)" in page or (
        "PheWAS under the paper's procedure (Heatherly 2013)" in page
    )
    assert "fails the guarantee" in page
    # said plainly beside it: the paper's Table 4 is not reproduced with the guarantee (issue 36)
    assert html.escape(NOT_REPRODUCED) in page
    _validator().validate(json.loads(rep.to_json()))  # docs/report.schema.json names the new field


def test_guarantee_table_counts_lost_and_false_and_the_target():
    """The page's table: lost / false of each side from the PheWAS tables, the arbiter's verdict, and
    whether the verified release keeps within 2% of the original associations."""
    cohort = _single_codes_pass_visits_fail()
    paper = anonymize(cohort, cohort.patient_ids, 2).verification
    verified = anonymize(cohort, cohort.patient_ids, 2, complete=True, completion="phewas").verification
    original = pd.DataFrame({"snp": ["s"] * 3, "phecode": ["1", "2", "3"], "p": [0.01, 0.2, 0.03]})
    released = pd.DataFrame({"snp": ["s"] * 3, "phecode": ["1", "2", "3"], "p": [0.01, 0.04, 0.5]})
    table = guarantee_table(
        original,
        {"DEMO_D": Table4Release(original, paper)},
        {"DEMO_D": Table4Release(released, verified)},
    )
    row = table.iloc[0]
    assert row["original"] == 2
    assert (row["paper's procedure: lost"], row["paper's procedure: false"]) == (0, 0)
    assert row["paper's procedure: guarantee"] == "records below k: 1 — fails the guarantee"
    assert (row["verified: lost"], row["verified: false"]) == (1, 1)
    assert row["verified: guarantee"] == "met (verified)"
    assert row["verified within 2%"] == "no (50% lost, 50% false)"
    assert row["paper (1.37 M, unverified) lost / false"] == "13 / 9 of 192"


def test_report_shows_the_paper_procedure_of_a_biobank_release():
    """Issue 36 (the report's open point 3): a completed DEMO_B release had no paper's-procedure line,
    the report not being given the biobank group; given it, the line is that of the biobank scope."""
    rows = [
        ("a", 1, "401.1"),
        ("a", 1, "250.00"),
        ("b", 1, "401.1"),
        ("c", 1, "250.00"),
        ("d", 1, "272.4"),
        ("e", 1, "272.4"),
    ]
    population = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))
    biobank = population.subset(["a", "b", "c", "d"])
    cohort = population.subset(["a", "b", "c"])
    inputs = RunInputs(population, cohort, biobank)
    settings = HeatherlySettings(k=2, scope="biobank", complete=True, completion="phewas")
    release = settings.run(inputs)
    data = data_ref("toy", population, inputs, biobank="biobank", sources={"e.csv": "abc"}, load_options={})
    entry, inp = _entry("Heatherly DEMO_B", release, settings, data, population, adv=ADV, k=2)
    study = Study(data, ADV, 2, pseudonym_key=KEY).add(entry)
    genotypes = pd.DataFrame({"patient_id": list("abcde"), "rs1": [0, 1, 2, 0, 1]})
    rep = build_report(
        study,
        {"Heatherly DEMO_B": inp},
        population,
        cohort,
        biobank=biobank,
        genotypes=genotypes,
        membership=False,
        reproducible=True,
    )
    (row,) = rep.data["releases"]
    paper = row["phewas, the paper's procedure"]
    expected = anonymize(biobank, cohort.patient_ids, 2, scope="biobank").verification
    assert paper is not None and paper["records below k"] == records_below_k(expected) == 1
    assert paper["guarantee"] == "records below k: 1 — fails the guarantee"
