"""The cohort scope's batched dominance counts (`engine.anonymize.censor._cohort_below`) against the
loop as it was (tests/reference_censor.py, the live bitset counter): same capped and released counts,
same steps (order, sizes, tie-breaks by code order), same release, on the shipped sample and on
small random cohorts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.anonymize.censor import censor_counts, gccens_run, prepare
from engine.records import Records
from tests.reference_censor import reference_censor_counts


def _same(problem, k, caps, variant):
    new = censor_counts(problem, k, caps, variant)
    old = reference_censor_counts(problem, k, caps, variant)
    np.testing.assert_array_equal(new[0], old[0])
    np.testing.assert_array_equal(new[1], old[1])
    assert new[2] == old[2]
    assert new[3] == old[3]
    return new


@pytest.fixture(scope="module")
def sample_problem():
    from engine.io.loaders import load_sample_checked
    from engine.study.runs import CodeSelection, GCCensSettings, RunInputs

    ds = load_sample_checked().data
    s = GCCensSettings(k=5, scope="cohort", codes=CodeSelection("all"))
    return s.prepare_input(RunInputs(ds.events, ds.group_records("cohort"))).problem


@pytest.mark.parametrize("k", [3, 7])
def test_sample_cohort_scope_all_codes_equals_reference(sample_problem, k):
    caps = sample_problem.cap_vector()
    _, _, steps, _ = _same(sample_problem, k, caps, "faithful")
    assert len(steps) > 100  # the step loop ran (thousands of steps on the sample)


def test_sample_release_bytes_equal_reference(sample_problem, monkeypatch):
    import engine.anonymize.censor as censor

    new = gccens_run(sample_problem, 4)
    monkeypatch.setattr(censor, "censor_counts", reference_censor_counts)
    old = gccens_run(sample_problem, 4)
    assert (
        new.exported_frame().to_csv(index=False).encode() == old.exported_frame().to_csv(index=False).encode()
    )
    assert new.fingerprint == old.fingerprint
    pd.testing.assert_frame_equal(new.suppressed, old.suppressed)
    assert new.loss == old.loss and new.params == old.params


@st.composite
def cohorts(draw):
    n = draw(st.integers(1, 14))
    rows = []
    for p in range(n):
        for _ in range(draw(st.integers(0, 7))):
            rows.append({"patient_id": f"p{p:02d}", "code": draw(st.sampled_from(["a", "b", "c", "d", "e"]))})
    if not rows:
        rows.append({"patient_id": "p00", "code": "a"})
    return Records.from_frame(pd.DataFrame(rows))


@given(
    cohorts(),
    st.integers(1, 5),
    st.sampled_from(["faithful", "targeted"]),
    st.one_of(st.none(), st.integers(0, 4)),
)
def test_random_cohorts_equal_reference(cohort, k, variant, cap):
    problem = prepare(cohort, None, "cohort")
    _same(problem, k, problem.cap_vector(cap), variant)
