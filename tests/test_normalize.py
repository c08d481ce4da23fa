"""engine/io/normalize.py: vocabulary per event and the opt-in, reported normalization of spellings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.io.normalize import normalize_codes
from engine.io.validation import FileCheck, ValidationReport
from engine.vocab import phecode_map, phecode_map_icd10cm


def _norm(codes, **kw):
    return normalize_codes(pd.DataFrame({"code": codes}), **kw)


def test_undotted_codes_get_their_dot() -> None:
    n = _norm(["25000", "E8490", "V4581", "I500", "E119", "4011"], rewrite=True)
    assert n.frame["code"].tolist() == ["250.00", "E849.0", "V45.81", "I50.0", "E11.9", "401.1"]
    assert n.vocabulary.tolist() == ["ICD9CM", "ICD9CM", "ICD9CM", "ICD10CM", "ICD10CM", "ICD9CM"]
    # E8490 and V4581 read in both vocabularies; only the ICD-9-CM reading is a code
    assert n.report.rules["known code"] >= 2
    dot = {r.kind: r for r in n.report.rewrites}["dot"]
    assert dot.rows == 6 and dot.distinct == 6 and ("25000", "250.00") in dot.examples


def test_prefixes_case_and_spaces_are_stripped_and_counted() -> None:
    codes = ["ICD9:250.00", "ICD9CM/250.00", "ICD//9//25000", "ICD10CM:E11.9", " icd10cm:e11.9 ", "E11.9"]
    n = _norm(codes, rewrite=True)
    assert n.frame["code"].tolist() == ["250.00", "250.00", "250.00", "E11.9", "E11.9", "E11.9"]
    assert n.vocabulary.tolist() == ["ICD9CM"] * 3 + ["ICD10CM"] * 3
    kinds = {r.kind: r.rows for r in n.report.rewrites}
    assert kinds == {"spaces": 1, "case": 1, "prefix": 5, "dot": 1}
    assert n.report.rules["explicit"] == 5 and n.report.rules["syntax"] == 1
    frame = n.report.to_frame()
    assert list(frame["rewrite"]) == ["spaces", "case", "prefix", "dot"]
    assert "'ICD//9//25000' -> '250.00'" in frame.set_index("rewrite").loc["dot", "examples"]
    # the original spelling stays for the code map of an export
    assert n.original.tolist() == codes
    sp = n.spellings()
    assert set(sp.loc[sp["item"] == "250.00", "original"]) == {
        "ICD9:250.00",
        "ICD9CM/250.00",
        "ICD//9//25000",
    }


def test_meds_diagnosis_prefix() -> None:
    n = _norm(["DIAGNOSIS//ICD//10//E119", "DIAGNOSIS//ICD//9//4280"], rewrite=True)
    assert n.frame["code"].tolist() == ["E11.9", "428.0"]


def test_without_rewrite_nothing_changes() -> None:
    codes = ["25000", " 401.1", "ICD9:250.00", "e11.9", "E11.9", "250.00"]
    n = _norm(codes)
    assert n.frame["code"].tolist() == codes
    assert n.report.rewrites == ()
    assert n.vocabulary.tolist() == ["", "", "", "", "ICD10CM", "ICD9CM"]
    assert n.report.unrecognized == {"25000": 1, " 401.1": 1, "ICD9:250.00": 1, "e11.9": 1}


def test_a_spelling_with_no_valid_reading_is_left_alone() -> None:
    n = _norm(["xyz", "25O.00", "ICD9:E11.9"], rewrite=True)
    assert n.frame["code"].tolist() == ["xyz", "25O.00", "ICD9:E11.9"]
    assert n.vocabulary.tolist() == ["", "", ""]
    assert n.report.rewrites == ()


def test_icd10cm_v_codes_ICD9_could_read_carry_the_prefix() -> None:
    n = _norm(["ICD10CM:V45.5", "V45.5XXA", "ICD10:V455"], rewrite=True)
    assert n.frame["code"].tolist() == ["ICD10CM:V45.5", "V45.5XXA", "ICD10CM:V45.5"]
    assert n.vocabulary.tolist() == ["ICD10CM"] * 3
    assert {r.kind for r in n.report.rewrites} == {"prefix", "dot"}  # our own label is no rewrite


def test_ambiguous_codes_follow_the_source_then_the_date() -> None:
    # a pure ICD-9-CM source: V45.5 is ICD-9-CM without asking for dates
    pure = _norm(["401.1", "V45.5"])
    assert pure.vocabulary.tolist() == ["ICD9CM", "ICD9CM"] and pure.report.rules["file"] == 1
    # a mixed source: V45.5 and E849 read in both and are codes in both: the event date decides
    frame = pd.DataFrame(
        {
            "code": ["401.1", "E11.9", "V45.5", "V45.5", "E849", "V45.5"],
            "visit": ["2014-03-01", "2016-03-01", "2015-09-30", "2015-10-01", "2017-01-05", ""],
        }
    )
    report = ValidationReport()
    fc = FileCheck("mixed.csv", np.arange(len(frame)) + 2, report)
    n = normalize_codes(frame, date="visit", rewrite=True, fc=fc)
    assert n.vocabulary.tolist() == ["ICD9CM", "ICD10CM", "ICD9CM", "ICD10CM", "ICD10CM", ""]
    assert n.frame["code"].tolist() == ["401.1", "E11.9", "V45.5", "ICD10CM:V45.5", "E84.9", "V45.5"]
    assert n.report.rules["date"] == 3 and n.report.ambiguous == {"V45.5": 1}
    assert n.undecided.tolist() == [False] * 5 + [True]
    (err,) = report.errors
    assert err.kind == "ambiguous_vocabulary" and err.rows == (7,) and err.column == "code"
    assert "mixed.csv" in str(err) and "'V45.5'" in str(err)


def test_ambiguous_without_dates_is_reported() -> None:
    report = ValidationReport()
    fc = FileCheck("mixed.csv", np.arange(3) + 2, report)
    n = normalize_codes(pd.DataFrame({"code": ["401.1", "E11.9", "V45.5"]}), fc=fc)
    assert n.vocabulary.tolist() == ["ICD9CM", "ICD10CM", ""]
    assert report.errors[0].rows == (4,) and "no event date" in report.errors[0].message


def test_vocabulary_column() -> None:
    frame = pd.DataFrame(
        {
            "code": ["V45.5", "V45.5", "25000", "ICD9:250.00", "E11.9", "V4581"],
            "vocabulary_id": ["ICD10CM", "icd9cm", "ICD9CM", "ICD10CM", "SNOMED", ""],
        }
    )
    report = ValidationReport()
    fc = FileCheck("conditions.csv", np.arange(len(frame)) + 2, report)
    n = normalize_codes(frame, vocabulary="vocabulary_id", rewrite=True, fc=fc)
    assert n.frame["code"].tolist()[:3] == ["ICD10CM:V45.5", "V45.5", "250.00"]
    assert n.vocabulary.tolist()[:4] == ["ICD10CM", "ICD9CM", "ICD9CM", ""]
    kinds = {e.kind: e for e in report.errors}
    assert kinds["vocabulary_conflict"].rows == (5,)
    assert kinds["vocabulary_value"].rows == (6,) and kinds["vocabulary_value"].column == "vocabulary_id"
    assert "'SNOMED'" in kinds["vocabulary_value"].message


def test_default_vocabulary_for_the_whole_source() -> None:
    n = _norm(["V4581", "V455"], default_vocabulary="ICD10CM", rewrite=True)
    # V45.81 is no ICD-10-CM code but the source says ICD-10-CM: dotted, kept, left to the code checks
    assert n.frame["code"].tolist() == ["ICD10CM:V45.81", "ICD10CM:V45.5"]


def test_rewrites_are_reported_to_the_file_check() -> None:
    report = ValidationReport()
    fc = FileCheck("claims.csv", np.arange(4) + 2, report)
    normalize_codes(
        pd.DataFrame({"dx": ["25000", "250.00", "25000", "I500"]}), code="dx", rewrite=True, fc=fc
    )
    (w,) = report.warnings
    assert w.kind == "normalized_dot" and w.rows == (2, 4, 5) and w.column == "dx"
    assert "'25000' -> '250.00'" in w.message and report.ok


_ICD9 = sorted(set(phecode_map()["icd9"]))
_ICD10 = sorted(
    set(phecode_map_icd10cm()["icd10cm"]) - {c for c in phecode_map_icd10cm()["icd10cm"] if "-" in c}
)


@settings(max_examples=200, deadline=None)
@given(
    code=st.one_of(
        st.sampled_from(_ICD9).map(lambda c: ("ICD9CM", c)),
        st.sampled_from(_ICD10).map(lambda c: ("ICD10CM", c)),
    ),
    style=st.sampled_from(["undotted", "lower", "i2b2", "slash", "meds", "spaces"]),
)
def test_any_spelling_of_a_mapped_code_normalizes_back(code, style) -> None:
    vocab, dotted = code
    bare = dotted.replace(".", "")
    num = "9" if vocab == "ICD9CM" else "10"
    spelled = {
        "undotted": bare,
        "lower": dotted.lower(),
        "i2b2": f"ICD{num}:{dotted}",
        "slash": f"ICD{num}CM/{dotted}",
        "meds": f"ICD//{num}//{bare}",
        "spaces": f"  {dotted} ",
    }[style]
    n = _norm([spelled], default_vocabulary=vocab, rewrite=True)
    from engine.vocab import item_label

    assert n.frame["code"].tolist() == [item_label(vocab, dotted)]
    assert n.vocabulary.tolist() == [vocab]


@pytest.mark.parametrize("n_rows", [0, 1])
def test_empty_and_single_row_frames(n_rows) -> None:
    n = _norm(["250.00"] * n_rows, rewrite=True)
    assert len(n.frame) == n_rows and len(n.vocabulary) == n_rows
