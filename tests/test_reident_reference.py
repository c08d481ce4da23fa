"""engine/labs/reident.py after issue 24's speed-ups (patient-days without ranking integer days or
sorting sorted files, restriction that keeps every lab returned as it is, the candidates' similarities
gathered by flat position) against the code as it was (tests/reference_reident.py): the same
patient-days, restrictions, similarities, ranks and Recall@n, bit for bit, on random lab orders and on
the shipped sample."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import reference_reident as R
import scipy.sparse as sp
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.labs import reident as L


def same_days(a: L.PatientDays, b: L.PatientDays) -> None:
    """Every field equal, dtypes and the matrix's stored structure included."""
    for name in ("patient_ids", "labs", "patient_ptr", "day_labels"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert np.array_equal(x, y), name
    assert type(a.matrix) is type(b.matrix) and a.matrix.shape == b.matrix.shape
    for name in ("data", "indices", "indptr"):
        x, y = getattr(a.matrix, name), getattr(b.matrix, name)
        assert x.dtype == y.dtype, name
        assert np.array_equal(x, y), name


def _frame(rows, day_kind: str) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["patient_id", "day", "lab"])
    if day_kind == "int32":
        df["day"] = df["day"].astype(np.int32)
    elif day_kind == "uint16":
        df["day"] = df["day"].astype(np.uint16)
    elif day_kind == "text":
        df["day"] = df["day"].map(lambda d: f"2020-01-{d + 1:02d}")
    elif day_kind == "date":
        df["day"] = pd.to_datetime("2020-01-01") + pd.to_timedelta(df["day"], unit="D")
    elif day_kind == "float":
        df["day"] = df["day"].astype(float)
    elif day_kind == "category":
        df["lab"] = df["lab"].astype("category")
    return df


rows = st.lists(
    st.tuples(st.integers(0, 9), st.integers(0, 12), st.integers(0, 6)), min_size=1, max_size=80
).map(lambda rs: [(f"p{p}", d * 7 - 20, f"L{lab}") for p, d, lab in rs])
day_kinds = st.sampled_from(["int64", "int32", "uint16", "text", "date", "float", "category"])


@settings(max_examples=150)
@given(rows, day_kinds, st.booleans())
@example([("p1", 5, "L1"), ("p1", 5, "L2"), ("p2", 1, "L1")], "int64", True)  # sorted, no repeat
@example([("p1", 5, "L1"), ("p1", 5, "L1"), ("p2", 1, "L1")], "int64", True)  # a same-day repeat
def test_patient_days_equal_the_reference(rs, day_kind, sort_first):
    df = _frame(rs, day_kind if day_kind != "uint16" else "int64")
    if day_kind == "uint16":
        df["day"] = (df["day"] + 20).astype(np.uint16)
    if sort_first:  # as the loaders and the sample give them: by patient, day and lab
        df = df.sort_values(["patient_id", "day", "lab"], kind="stable").reset_index(drop=True)
    new, old = L.patient_days(df), R.patient_days(df)
    same_days(new, old)
    for min_orders in (1, 2, 3, 5):
        same_days(new.restrict_labs(min_orders), R.restrict_labs(old, min_orders))


def test_integer_days_too_far_apart_to_offset_are_ranked():
    """A span of days times patients beyond int64 takes the ranking path: the same patient-days."""
    df = pd.DataFrame({"patient_id": ["a", "a", "b"], "day": [-(2**62), 2**62, 0], "lab": ["K", "Na", "K"]})
    same_days(L.patient_days(df), R.patient_days(df))


def test_a_restriction_that_drops_nothing_is_the_patient_days_themselves():
    df = pd.DataFrame({"patient_id": ["a", "a", "b"], "day": [1, 2, 1], "lab": ["K", "K", "K"]})
    days = L.patient_days(df)
    assert days.restrict_labs(1) is days
    kept = days.restrict_labs(3)  # K is ordered on 3 patient-days: kept, nothing dropped
    assert kept is days
    same_days(days.restrict_labs(4), R.restrict_labs(days, 4))  # K dropped: nothing left


def _draws_cases(days: L.PatientDays, seed: int):
    for against in ("99", "population"):
        for query in ("one_day", "all_days"):
            try:
                draws = L.draw_queries(days, 7, 3, against, query, seed)
            except L.LabDataError:
                continue
            yield draws
            yield draws.shuffled_identities(seed + 1, days.n_patients)


@settings(max_examples=60)
@given(rows, st.integers(0, 3), st.booleans())
def test_ranks_and_recall_equal_the_reference(rs, seed, latent):
    days = L.patient_days(_frame(rs, "int64"))
    vectors = None
    if latent:  # dense vectors of any sign, as the autoencoder's
        vectors = np.random.default_rng(seed).normal(size=(days.n_days, 3))
    prof_new, prof_old = L.profiles(days, vectors), R.profiles(days, vectors)
    for draws in _draws_cases(days, seed):
        got = L.true_patient_ranks(prof_new, draws)
        want = R.true_patient_ranks(prof_old, draws)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        new = L.recall_at_n(days, draws, vectors)
        old = R.recall_at_n(days, draws, vectors)
        assert np.array_equal(new.per_simulation, old.per_simulation)
        assert new.n_candidates == old.n_candidates


@settings(max_examples=60)
@given(st.integers(1, 40), st.integers(1, 12), st.integers(0, 5))
def test_candidate_similarities_equal_the_reference_bit_for_bit(m, dim, seed):
    rng = np.random.default_rng(seed)
    centroid = rng.normal(size=(30, dim))
    cand = rng.integers(0, 30, size=(m, 5))
    q = sp.random(m, dim, density=0.4, format="csr", random_state=seed)
    q.data = q.data.astype(np.float64)
    assert np.array_equal(L._candidate_sims(centroid, cand, q), R._candidate_sims(centroid, cand, q))


@pytest.fixture(scope="module")
def sample_labs(sample_dataset):
    if sample_dataset.labs is None:
        pytest.skip("the shipped sample has no lab orders")
    return sample_dataset.labs


def test_the_samples_patient_days_and_raw_recall_equal_the_reference(sample_labs):
    from engine.study.runs import LabRecallSettings

    new, old = L.patient_days(sample_labs), R.patient_days(sample_labs)
    same_days(new, old)
    settings_ = LabRecallSettings(simulations=20)
    kept_new = settings_.restricted(new)
    kept_old = R.restrict_labs(old, settings_.min_orders_for(old))
    same_days(kept_new, kept_old)
    draws = settings_.draws(kept_new)
    assert np.array_equal(
        settings_.raw_recall(kept_new, draws).per_simulation, R.recall_at_n(kept_old, draws).per_simulation
    )
