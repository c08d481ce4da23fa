"""Sensitive categories and the measure's refusals (issue #39): the officer's file is checked with file,
row and column named; a run above the combination limit is refused by name."""

from __future__ import annotations

import pandas as pd
import pytest

from engine.adversary import Adversary
from engine.disclosure.sensitive import (
    TooManyCombinations,
    category_argument,
    load_categories,
    rho_uncertainty,
)
from engine.io.errors import UserError
from engine.records import Records


def test_shipped_list_names_its_source_for_every_range():
    cats = load_categories()
    assert cats.names == ("hiv", "mental_health", "substance_use", "reproductive_health")
    assert cats.ranges["source"].str.len().min() > 20
    assert set(cats.ranges["vocabulary"]) == {"ICD9CM", "ICD10CM", "phecode"}


def test_icd10cm_v_code_is_not_read_as_icd9_hiv():
    cats = load_categories()
    assert cats.of_code("V08") == {"hiv"}
    assert cats.of_code("ICD10CM:V08") == frozenset()  # pedestrian injured, in ICD-10-CM
    assert cats.of_code("B20") == {"hiv"} and cats.of_code("O03.9") == {"reproductive_health"}


def test_officer_file_and_names(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("category,vocabulary,first,last,source\ndiabetes,ICD9CM,250,250,local policy\n")
    cats = category_argument(str(path))
    assert cats.names == ("diabetes",) and cats.of_code("250.01") == {"diabetes"}
    assert category_argument("hiv,substance_use").names == ("hiv", "substance_use")
    with pytest.raises(UserError, match="no sensitive category 'hvi'"):
        category_argument("hvi")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("x,ICD11,250,250,s", r"mine.csv, row 2, column 'vocabulary': 'ICD11'"),
        ("x,ICD9CM,251,250,s", r"mine.csv, row 2: the range '251'-'250' is empty"),
        ("x,phecode,abc,250,s", r"mine.csv, row 2: phecodes 'abc'-'250' are not numbers"),
        ("x,ICD9CM,250,250,", r"mine.csv, row 2, column 'source': empty"),
    ],
)
def test_bad_officer_file_names_row_and_column(tmp_path, row, message):
    path = tmp_path / "mine.csv"
    path.write_text("category,vocabulary,first,last,source\n" + row + "\n")
    with pytest.raises(UserError, match=message):
        load_categories(path)


def test_too_many_combinations_refused_by_name():
    codes = [f"{400 + i}" for i in range(30)] + ["042"]
    records = Records.from_frame(pd.DataFrame({"patient_id": "P1", "visit": 1, "code": codes}))
    with pytest.raises(TooManyCombinations, match=r"930 combinations of up to 2 known codes \(limit 100\)"):
        rho_uncertainty(
            records, Adversary("cohort", "all_visits"), load_categories(), rho=0.5, m=2, max_combinations=100
        )


def test_rho_and_m_checked():
    records = Records.from_frame(pd.DataFrame({"patient_id": ["P1"], "code": ["042"]}))
    for bad in ({"rho": 1.0}, {"rho": -0.1}, {"rho": 0.5, "m": 0}, {"rho": 0.5, "m": 9}):
        with pytest.raises(UserError):
            rho_uncertainty(records, Adversary(), load_categories(), **bad)


def test_a_code_suppressed_in_one_visit_but_kept_in_another_is_still_known():
    """P1's first visit held 250.00 and 401.1; the release drops 401.1 there but keeps it in the second
    visit, so a single-visit attacker who knows the first visit still finds both in P1's released record
    ({250.00, 401.1} -> mental health: 1 of 1), as engine.risk reads it (attacker_known_visits)."""
    from engine.disclosure.sensitive import release_rho_uncertainty
    from engine.release import Release

    rows = [("P1", 1, "250.00"), ("P1", 1, "401.1"), ("P1", 2, "401.1"), ("P1", 2, "296.20")]
    rows += [("P2", 1, "250.00"), ("P3", 1, "401.1"), ("P4", 1, "250.00"), ("P5", 1, "401.1")]
    frame = pd.DataFrame(rows, columns=["patient_id", "visit", "code"])
    source = Records.from_frame(frame)
    released = Records.from_frame(frame.drop(index=1), items=source.items)
    release = Release("local suppression", released, source=source)
    cats = load_categories().select(["mental_health"])
    got = release_rho_uncertainty(release, Adversary("cohort", "single_visit"), cats, rho=0.5)
    assert got.confidence[0, 0] == 1.0 and got.inferred[:, 0].tolist() == [True, False, False, False, False]
    assert got.rules["known codes"].tolist() == ["250.00 + 401.1"]
    # the released visits alone would not show it
    alone = rho_uncertainty(released, Adversary("cohort", "single_visit"), cats, rho=0.5)
    assert alone.confidence[0, 0] == pytest.approx(1 / 3) and alone.ok
