"""PPE's k-independent part (`engine.anonymize.policy.policy_protection`, vectorized for issue 24) gives
exactly what the per-item version it replaced gave (tests/reference_policy.py): the same constraints
in the same order, the same supports and least superset supports, on random small cohorts, random
custom policies and the shipped sample."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import example, given
from hypothesis import strategies as st

from engine.anonymize import policy
from engine.anonymize.policy import collect_constraints, least_superset_support, supports
from engine.records import Records
from tests.reference_policy import collect_constraints as ref_collect
from tests.reference_policy import least_superset_support as ref_least_superset
from tests.reference_policy import reference_protection

CODES = ["157.0", "157.1", "157.2", "185", "493.00", "493.01", "250.00", "250.02", "401.9", "V45.81"]
UNUSED = ["157.3", "493.02", "999.9"]  # in the vocabulary, held by nobody
CONDITIONS = [("single_visit", False), ("single_visit", True), ("all_visits", False), ("all_visits", True)]


@st.composite
def cohorts(draw) -> Records:
    n = draw(st.integers(1, 16))
    rows = []
    for p in range(n):
        for v in range(draw(st.integers(1, 4))):
            codes = draw(st.lists(st.sampled_from(CODES), min_size=1, max_size=6, unique=True))
            rows.extend((f"p{p}", v, c) for c in codes)
    frame = pd.DataFrame(rows, columns=["patient_id", "visit", "code"])
    vocab = sorted(set(frame["code"]) | set(draw(st.lists(st.sampled_from(UNUSED), unique=True))))
    return Records.from_frame(frame, items=vocab)


def unmemoized(records: Records, condition: str, code_sets, within: bool):
    """`_protection` without the memo (a fresh computation every time)."""
    if condition == "custom":
        return policy.policy_protection(records, condition, code_sets, within)  # type: ignore[arg-type]
    collected, rows, group = policy._condition_constraints(records, condition)  # type: ignore[arg-type]
    pairs = policy._superset_pairs(rows)
    if within and condition == "single_visit":
        sup = policy._visit_set_supports(rows, group, records, pairs)
    else:
        sup = policy._support_rows(rows, records, within)
    return collected, sup, policy._least_superset(rows, sup, pairs)


def same_protection(records: Records, condition: str, code_sets=None, within: bool = False) -> None:
    new = unmemoized(records, condition, code_sets, within)
    old = reference_protection(records, condition, code_sets, within)  # type: ignore[arg-type]
    assert new[0] == old[0]
    assert [list(s) for s in new[0]] == [list(s) for s in old[0]]  # same sets, same iteration order
    for a, b in zip(new[1:], old[1:], strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert len(new[0]) > 0 or condition == "custom"  # the cohorts have events


@given(cohorts(), st.sampled_from(CONDITIONS))
def test_protection_same_as_reference(records, condition):
    same_protection(records, condition[0], within=condition[1])


@given(
    cohorts(),
    st.lists(st.lists(st.sampled_from(CODES + UNUSED + ["X1"]), max_size=4), max_size=10),
    st.booleans(),
)
def test_custom_protection_same_as_reference(records, code_sets, within):
    same_protection(records, "custom", code_sets, within)


@given(cohorts(), st.sampled_from(["single_visit", "all_visits"]))
def test_collect_constraints_same_as_reference(records, condition):
    assert collect_constraints(records, condition) == ref_collect(records, condition)


@given(st.lists(st.frozensets(st.sampled_from("abcdefgh"), min_size=0, max_size=8), max_size=14), st.data())
@example([frozenset("a"), frozenset("a")], None)  # duplicates: the hashed lookup falls back
def test_least_superset_same_as_reference(sets, data):
    n = len(sets)
    sup = np.arange(n, dtype=np.int64)[::-1] % 5
    if data is not None:
        sup = np.asarray(data.draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)), dtype=np.int64)
    assert least_superset_support(sets, sup).tolist() == ref_least_superset(sets, sup).tolist()


def test_long_sets_fall_back_to_candidate_pairs(monkeypatch):
    """Sets too long to enumerate their subsets take `_contained_pairs`: same answer."""
    sets = [frozenset(range(i, i + 5)) for i in range(6)] + [frozenset(range(12))] + [frozenset({3})]
    sets = [frozenset(map(str, s)) for s in sets]
    sup = np.arange(len(sets), dtype=np.int64)
    want = ref_least_superset(sets, sup).tolist()
    assert least_superset_support(sets, sup).tolist() == want
    monkeypatch.setattr(policy, "_SUBSETS_MAX", 0)
    assert least_superset_support(sets, sup).tolist() == want


def test_hash_collision_falls_back_to_exact_grouping(monkeypatch):
    """Every row hashed alike: rows are still grouped exactly (first appearances)."""
    monkeypatch.setattr(
        policy, "_hash_weights", lambda n: (np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=np.uint64))
    )
    m = sp.csr_matrix(np.array([[1, 1, 0], [0, 0, 0], [0, 1, 0], [1, 1, 0], [0, 1, 0], [0, 0, 1]]))
    firsts, group = policy._distinct_rows(m)
    assert firsts.tolist() == [0, 2, 5]
    assert group.tolist() == [0, -1, 1, 0, 1, 2]


def test_record_supports_fallback(monkeypatch):
    """Without bitsets (a large cohort), counts of contained pairs: same supports."""
    r = Records.from_frame(
        pd.DataFrame(
            [("p0", 0, "a"), ("p0", 1, "b"), ("p1", 0, "a"), ("p1", 0, "b"), ("p2", 0, "c")],
            columns=["patient_id", "visit", "code"],
        )
    )
    _, rows, _ = policy._condition_constraints(r, "single_visit")
    want = policy._record_supports(rows, r).tolist()
    monkeypatch.setattr(policy, "_BITSETS_MAX", 0)
    assert policy._record_supports(rows, r).tolist() == want == [2, 2, 2, 1]
    assert supports([{"a"}, {"b"}, {"a", "b"}, {"c"}], r).tolist() == want


@pytest.fixture(scope="module")
def sample_cohort() -> Records:
    from engine.io.loaders import load_sample_checked

    return load_sample_checked().data.group_records("cohort")


@pytest.mark.parametrize("condition", CONDITIONS)
def test_sample_protection_same_as_reference(sample_cohort, condition):
    same_protection(sample_cohort, condition[0], within=condition[1])
