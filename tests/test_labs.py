"""engine/labs/reident.py: patient-day vectors, uniqueness (Johnson 2018 section 2.2, Figure 3), one-day
re-identification and Recall@n (sections 2.4-2.6, Figure 4)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.labs import reident as L


def frame(rows: list[tuple[str, int, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["patient_id", "day", "lab"])


def structured_labs(
    n_patients: int, n_labs: int, max_days: int, seed: int, sharp: float = 4.0
) -> pd.DataFrame:
    """Each patient orders from a personal profile (so days of one patient resemble each other)."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_patients):
        profile = rng.random(n_labs) ** sharp
        for d in range(int(rng.integers(1, max_days + 1))):
            labs = np.flatnonzero(rng.random(n_labs) < profile)
            if len(labs) == 0:
                labs = [int(rng.integers(n_labs))]
            rows += [(f"p{p:04d}", 10 * d, f"L{lab:03d}") for lab in labs]
    return frame(rows)


# hypothesis: small random lab-order tables (few labs so that shared sets and ties are common)
lab_rows = st.lists(
    st.tuples(st.integers(0, 11), st.integers(0, 5), st.integers(0, 4)), min_size=1, max_size=70
).map(lambda rows: frame([(f"p{p}", d, f"L{lab}") for p, d, lab in rows]))


# ------------------------------------------------------------------------------------ patient-days
def test_patient_days_collapse_same_day_repeats_and_sort_days():
    df = frame(
        [
            ("b", 5, "K"),
            ("a", 3, "Na"),
            ("a", 1, "K"),
            ("a", 3, "Na"),
            ("a", 3, "K"),
            ("b", 5, "K"),
            ("b", 2, "Na"),
        ]
    )
    pdays = L.patient_days(df)
    assert list(pdays.patient_ids) == ["b", "a"]  # order of first appearance
    assert list(pdays.labs) == ["K", "Na"]
    assert pdays.patient_ptr.tolist() == [0, 2, 4]
    assert pdays.day_labels.tolist() == [2, 5, 1, 3]  # each patient's days in order
    assert pdays.matrix.toarray().tolist() == [[0, 1], [1, 0], [1, 0], [1, 1]]  # binary, repeats once
    assert pdays.lab_orders().tolist() == [3, 2]  # patient-days per lab


def test_patient_days_rejects_missing_columns():
    with pytest.raises(ValueError, match="missing"):
        L.patient_days(pd.DataFrame({"patient_id": ["a"], "lab": ["K"]}))


def test_restrict_labs_drops_rare_labs_then_empty_days_and_patients():
    df = frame([("a", 1, "K"), ("a", 2, "Rare"), ("b", 1, "K"), ("c", 1, "Rare"), ("b", 2, "K")])
    r = L.patient_days(df).restrict_labs(3)  # K on 3 patient-days, Rare on 2
    assert list(r.labs) == ["K"]
    assert list(r.patient_ids) == ["a", "b"]  # c had only the rare lab
    assert r.days_per_patient.tolist() == [1, 2]  # a's day 2 held only the rare lab
    assert r.matrix.sum() == 3


def test_default_min_orders_scales_the_papers_500():
    assert L.default_min_orders(L.PAPER_PATIENT_DAYS) == 500
    assert L.default_min_orders(L.PAPER_PATIENT_DAYS // 10) == 50
    assert L.default_min_orders(10) == 1


# ------------------------------------------------------------------------------------ uniqueness
def brute_uniqueness(df: pd.DataFrame) -> tuple[dict[str, bool], dict[str, int]]:
    sets = df.groupby("patient_id")["lab"].apply(frozenset)
    counts = Counter(sets.to_list())
    days = df.groupby("patient_id")["day"].nunique()
    return {p: counts[s] == 1 for p, s in sets.items()}, days.to_dict()


@settings(max_examples=60, deadline=None)
@given(lab_rows)
def test_uniqueness_matches_brute_force(df):
    u = L.uniqueness(L.patient_days(df))
    unique, days = brute_uniqueness(df)
    got = dict(zip(u.patient_ids, u.unique, strict=True))
    assert got == unique
    assert dict(zip(u.patient_ids, u.days.tolist(), strict=True)) == days
    table = u.by_days()
    for row in table.itertuples():
        ps = [p for p, d in days.items() if d >= row.days]
        assert row.patients == len(ps)
        assert row.unique == sum(unique[p] for p in ps)
    assert u.share_unique == pytest.approx(np.mean(list(unique.values())))


def test_uniqueness_with_more_than_64_labs_uses_every_word_of_the_bitset():
    # the two patients differ only in lab 100 (the second 64-bit word)
    df = frame([("a", 1, f"L{i:03d}") for i in range(101)] + [("b", 1, f"L{i:03d}") for i in range(100)])
    df = pd.concat([df, frame([("c", 1, f"L{i:03d}") for i in range(100)])])
    u = L.uniqueness(L.patient_days(df))
    assert dict(zip(u.patient_ids, u.unique, strict=True)) == {"a": True, "b": False, "c": False}
    assert u.class_size.tolist() == [1, 2, 2]


def test_uniqueness_blocks_give_the_same_keys():
    pdays = L.patient_days(structured_labs(50, 20, 4, seed=3))
    assert np.array_equal(L.lab_set_keys(pdays), L.lab_set_keys(pdays, block_bytes=20 * 7))


# ------------------------------------------------------------------------------------ Recall@n
def brute_check(pdays: L.PatientDays, draws: L.Draws) -> None:
    fast_b, fast_t = L.true_patient_ranks(L.profiles(pdays), draws)
    ref_b, ref_t = L.reference_ranks(pdays, draws)
    assert np.array_equal(fast_b, ref_b)
    assert np.array_equal(fast_t, ref_t)


@settings(max_examples=40, deadline=None)
@given(
    lab_rows,
    st.sampled_from(["99", "population"]),
    st.sampled_from(["one_day", "all_days"]),
    st.integers(0, 3),
    st.booleans(),
)
def test_centroid_ranking_equals_plain_pairwise_ranking(df, against, query, seed, shuffled):
    pdays = L.patient_days(df)
    if pdays.n_patients < 2 or (query == "one_day" and pdays.days_per_patient.max() < 2):
        with pytest.raises(ValueError):
            L.draw_queries(pdays, trials=3, simulations=2, against=against, query=query, seed=seed)
        return
    draws = L.draw_queries(pdays, trials=3, simulations=2, against=against, query=query, seed=seed)
    if shuffled:
        draws = draws.shuffled_identities(seed, pdays.n_patients)
    brute_check(pdays, draws)


def test_centroid_ranking_equals_pairwise_on_latent_like_dense_vectors():
    pdays = L.patient_days(structured_labs(120, 15, 5, seed=8))
    vectors = np.random.default_rng(0).normal(size=(pdays.n_days, 4))
    for against in ("99", "population"):
        draws = L.draw_queries(pdays, trials=5, simulations=2, against=against, seed=1)
        fast = L.true_patient_ranks(L.profiles(pdays, vectors), draws)
        ref = L.reference_ranks(pdays, draws, vectors)
        assert np.array_equal(fast[0], ref[0]) and np.array_equal(fast[1], ref[1])


def test_sparse_centroids_give_the_same_ranks_as_dense():
    pdays = L.patient_days(structured_labs(150, 20, 5, seed=2))
    draws = L.draw_queries(pdays, trials=20, simulations=2, seed=4)
    dense = L.true_patient_ranks(L.profiles(pdays), draws)
    sparse = L.true_patient_ranks(L.profiles(pdays, dense_limit=0), draws)
    assert np.array_equal(dense[0], sparse[0]) and np.array_equal(dense[1], sparse[1])


@pytest.mark.parametrize("against", ["99", "population"])
def test_shuffled_identities_recall_matches_random_line_within_sampling_error(against):
    pdays = L.patient_days(structured_labs(400, 30, 8, seed=5))
    draws = L.draw_queries(pdays, trials=500, simulations=8, against=against, seed=11)
    real = L.recall_at_n(pdays, draws)
    null = L.recall_at_n(pdays, draws.shuffled_identities(12, pdays.n_patients))
    trials = 500 * 8
    for n in (1, 5, 10, 25, 50, 90):
        p = null.random[n - 1]
        se = np.sqrt(p * (1 - p) / trials)  # the credit is in [0, 1] with mean p: variance <= p(1-p)
        assert abs(null.at(n) - p) <= 4 * se, (n, null.at(n), p)
    # and the real identities carry signal far above the line (the structured cohort is re-identifiable)
    assert real.at(1) > 10 * real.random[0]


def test_recall_at_n_shape_monotone_and_complete_at_100():
    pdays = L.patient_days(structured_labs(150, 20, 5, seed=1))
    draws = L.draw_queries(pdays, trials=30, simulations=4, seed=2)
    rec = L.recall_at_n(pdays, draws)
    assert rec.per_simulation.shape == (4, 100)
    assert np.all(np.diff(rec.per_simulation, axis=1) >= -1e-12)
    assert np.allclose(rec.per_simulation[:, -1], 1.0)  # the true patient is always among 100
    assert np.allclose(rec.random, np.arange(1, 101) / 100)
    frame_ = rec.to_frame()
    assert list(frame_.columns) == ["n", "recall", "random", "recall_low", "recall_high"]
    assert (frame_.recall_low <= frame_.recall + 1e-12).all() and (
        frame_.recall <= frame_.recall_high + 1e-12
    ).all()


def test_whole_population_random_line_uses_every_patient():
    pdays = L.patient_days(structured_labs(300, 20, 4, seed=1))
    rec = L.recall_at_n(pdays, L.draw_queries(pdays, trials=10, simulations=2, against="population"))
    assert rec.n_candidates == pdays.n_patients
    assert rec.random[9] == pytest.approx(10 / pdays.n_patients)


def test_draws_are_seeded_and_respect_the_rules():
    pdays = L.patient_days(structured_labs(200, 20, 5, seed=1))
    a = L.draw_queries(pdays, trials=50, simulations=3, seed=7)
    b = L.draw_queries(pdays, trials=50, simulations=3, seed=7)
    c = L.draw_queries(pdays, trials=50, simulations=3, seed=8)
    assert np.array_equal(a.breached_day, b.breached_day) and np.array_equal(a.candidates, b.candidates)
    assert not np.array_equal(a.breached_day, c.breached_day)
    assert np.array_equal(pdays.day_patient[a.breached_day], a.known)
    assert (pdays.days_per_patient[a.known] >= 2).all()  # the true patient keeps another day
    cands = a.candidates.reshape(-1, 99)
    assert all(len(set(row)) == 99 for row in cands)  # without replacement
    assert not (cands == a.known.reshape(-1, 1)).any()  # never the true patient
    r1 = L.recall_at_n(pdays, a)
    r2 = L.recall_at_n(pdays, b)
    assert np.array_equal(r1.per_simulation, r2.per_simulation)


def test_floyd_samples_are_uniform_subsets():
    rng = np.random.default_rng(0)
    s = L._floyd_samples(rng, 10, 3, 30_000)
    assert all(len(set(row)) == 3 for row in s[:2000])
    freq = np.bincount(s.ravel(), minlength=10) / s.size
    assert np.allclose(freq, 0.1, atol=0.01)


def test_tie_credit_is_the_expected_hit_under_random_tie_breaking():
    # 2 strictly closer, 3 tied: the true patient sits at position 3..6 with probability 1/4 each
    credit = L.recall_credit(np.array([2]), np.array([3]), np.arange(1, 8, dtype=float))
    assert credit.ravel().tolist() == [0, 0, 0.25, 0.5, 0.75, 1, 1]


def test_identical_patients_tie_and_share_the_credit():
    # every patient-day is the same single lab: all distances equal, Recall@n is exactly n / 100
    df = frame([(f"p{p}", d, "K") for p in range(150) for d in range(2)])
    pdays = L.patient_days(df)
    rec = L.recall_at_n(pdays, L.draw_queries(pdays, trials=5, simulations=2, seed=0))
    assert np.allclose(rec.mean, rec.random)


def test_paired_test_reports_per_n_and_nan_when_identical():
    pdays = L.patient_days(structured_labs(200, 20, 5, seed=1))
    draws = L.draw_queries(pdays, trials=20, simulations=6, seed=2)
    raw = L.recall_at_n(pdays, draws)
    noisy = L.recall_at_n(pdays, draws, vectors=np.random.default_rng(1).normal(size=(pdays.n_days, 3)))
    table = L.paired_test(raw, noisy)
    assert list(table.columns) == ["n", "recall_raw", "recall_latent", "t", "p"]
    assert table.p.iloc[0] < 0.05 and table.recall_raw.iloc[0] > table.recall_latent.iloc[0]
    same = L.paired_test(raw, raw)
    assert same.p.isna().all()


def test_concat_of_disjoint_parts_equals_building_the_whole():
    df = structured_labs(60, 12, 4, seed=6)
    first = df[df.patient_id < "p0030"]
    second = df[(df.patient_id >= "p0030") & (df.lab != "L000")]  # a lab missing from one part
    whole = L.patient_days(pd.concat([first, second]))
    joined = L.concat_patient_days([L.patient_days(first), L.patient_days(second)])
    assert list(joined.patient_ids) == list(whole.patient_ids) and list(joined.labs) == list(whole.labs)
    assert np.array_equal(joined.patient_ptr, whole.patient_ptr)
    assert (joined.matrix != whole.matrix).nnz == 0
    with pytest.raises(ValueError, match="share patients"):
        L.concat_patient_days([L.patient_days(first), L.patient_days(first)])


def test_iso_date_days_and_categorical_columns_give_the_same_vectors():
    df = pd.DataFrame(
        {
            "patient_id": ["a", "a", "b", "a"],
            "day": pd.to_datetime(["2010-03-02", "2010-01-05", "2010-01-05", "2010-03-02"]),
            "lab": ["K", "Na", "K", "Cl"],
        }
    )
    plain = L.patient_days(df)
    assert [str(d)[:10] for d in plain.day_labels] == ["2010-01-05", "2010-03-02", "2010-01-05"]
    cat = L.patient_days(df.astype({"patient_id": "category", "lab": "category"}))
    assert list(cat.labs) == list(plain.labs) == ["Cl", "K", "Na"]
    assert (cat.matrix != plain.matrix).nnz == 0
