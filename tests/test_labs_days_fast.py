"""Issue 36: the Lab orders page's first opening at the paper's scale. `patient_days` of lab orders
sorted by patient (the loaders' and the sample's) codes the patients from their runs instead of hashing
every row's id; the result is the same patient-days as before (`tests/reference_patient_days.py`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.io.loaders import SAMPLE_DIR, load_labs
from engine.labs import reident as L
from tests import reference_patient_days as ref

SETTINGS = settings(derandomize=True, database=None, max_examples=150, deadline=None)


def assert_same_days(got: L.PatientDays, want: L.PatientDays) -> None:
    for name in ("patient_ids", "labs", "patient_ptr", "day_labels"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    for name in ("indptr", "indices", "data"):
        a, b = getattr(got.matrix, name), getattr(want.matrix, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert got.matrix.shape == want.matrix.shape


@st.composite
def lab_frames(draw):
    n = draw(st.integers(1, 40))
    ids = draw(st.lists(st.sampled_from(["P1", "P2", "p10", "2", " x", "ÿ"]), min_size=n, max_size=n))
    days = draw(st.lists(st.integers(-3, 5), min_size=n, max_size=n))
    labs = draw(st.lists(st.sampled_from(["K", "Na", "a", "Z z"]), min_size=n, max_size=n))
    df = pd.DataFrame({"patient_id": ids, "day": np.array(days, dtype=np.int64), "lab": labs})
    if draw(st.booleans()):  # sorted by patient (runs), as the loaders' files usually are
        df = df.sort_values(["patient_id", "day", "lab"], kind="stable").reset_index(drop=True)
    if draw(st.booleans()):
        df = df.astype({"patient_id": "str", "lab": "str"})
    return df


@SETTINGS
@given(lab_frames())
@example(pd.DataFrame({"patient_id": ["a", "b", "a"], "day": [1, 1, 2], "lab": ["K", "K", "K"]}))
def test_patient_days_equal_reference(df):
    assert_same_days(L.patient_days(df), ref.patient_days(df))


def test_sample_patient_days_equal_reference():
    labs = load_labs(SAMPLE_DIR / "labs.parquet").data
    assert_same_days(L.patient_days(labs), ref.patient_days(labs))


def test_sorted_patients_are_not_hashed_row_by_row(monkeypatch):
    """A file sorted by patient: no factorization of its 9.5 million patient ids (0.2-0.6 s at the
    paper's scale); only the labs column (a few hundred values) is factorized."""
    labs = load_labs(SAMPLE_DIR / "labs.parquet").data
    seen: list[str] = []
    factorize = pd.factorize

    def spy(values, *args, **kwargs):
        seen.append(getattr(values, "name", None))
        return factorize(values, *args, **kwargs)

    monkeypatch.setattr(pd, "factorize", spy)
    L.patient_days(labs)
    assert "patient_id" not in seen


@pytest.mark.parametrize("ids", [["a", None, "a"], ["b", "a", "b"]])
def test_unsorted_or_missing_ids_equal_reference(ids):
    df = pd.DataFrame({"patient_id": pd.array(ids, dtype="str"), "day": [1, 2, 3], "lab": ["K"] * 3})
    if None in ids:  # a missing id: both fail alike or give the same days
        try:
            want = ref.patient_days(df)
        except Exception as exc:
            with pytest.raises(type(exc)):
                L.patient_days(df)
            return
        assert_same_days(L.patient_days(df), want)
    else:
        assert_same_days(L.patient_days(df), ref.patient_days(df))


@SETTINGS
@given(
    st.lists(st.sampled_from(["a", "b", "c", "1", ""]), unique=True),
    st.lists(st.sampled_from(["a", "b", "d", "1", "01", ""])),
)
def test_among_is_set_membership(patients, ids):
    """`population_days`' membership (ui/views/labs.py), as the Python set it replaces."""
    patient_ids = np.asarray(patients, dtype=object)
    want = np.array([p in set(ids) for p in patient_ids], dtype=bool)
    np.testing.assert_array_equal(L.among(patient_ids, tuple(ids)), want)
