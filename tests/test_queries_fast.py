"""Utility constraint satisfaction counted in one product (issue 24, engine/utility/queries.py)
against the per-disease count it replaced (tests/reference_queries.py): the same table (values and
dtypes) on random records, generalized items (an empty one, one reaching outside every disease),
random policies (none, overlapping diseases) and on the sample with the shipped policy; and the
original cohort's counts computed once per cohort and policy."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

import engine.utility.queries as queries
from engine.records import Records
from engine.release import Release
from engine.utility.queries import default_utility_policy, disease_counts, utility_satisfaction
from tests.reference_queries import reference_disease_counts, reference_utility_satisfaction

CODES = ["a", "b", "c", "d", "e", "f"]
ITEMS = [*CODES, "{a,b}", "{c,d}", "{e,z}", "{}", "{a,b,c,d,e,f}"]
ITEM_CODES = {
    "{a,b}": frozenset({"a", "b"}),
    "{c,d}": frozenset({"c", "d"}),
    "{e,z}": frozenset({"e", "z"}),
    "{}": frozenset(),
    "{a,b,c,d,e,f}": frozenset(CODES),
}


def records(rows: list[tuple[int, str]]) -> Records:
    return Records.from_frame(pd.DataFrame([(f"p{p}", c) for p, c in rows], columns=["patient_id", "code"]))


@given(
    original=st.lists(st.tuples(st.integers(0, 6), st.sampled_from(CODES)), min_size=1, max_size=25),
    released=st.lists(st.tuples(st.integers(0, 6), st.sampled_from(ITEMS)), max_size=25),
    diseases=st.lists(st.frozensets(st.sampled_from([*CODES, "z"]), max_size=4), max_size=5),
    generalized=st.booleans(),
)
def test_satisfaction_equals_the_per_disease_count(original, released, diseases, generalized):
    cohort = records(original)
    rel = Release("m", records(released or [(0, "a")]), ITEM_CODES if generalized else {})
    policy = {f"disease {i}": codes for i, codes in enumerate(diseases)}
    pd.testing.assert_frame_equal(
        utility_satisfaction(cohort, rel, policy), reference_utility_satisfaction(cohort, rel, policy)
    )
    for codes in diseases:
        assert disease_counts(rel.records, codes, rel.item_codes) == reference_disease_counts(
            rel.records, codes, rel.item_codes
        )


def test_the_sample_with_the_shipped_policy(sample_dataset):
    cohort = sample_dataset.group_records("cohort")
    policy = default_utility_policy([str(x) for x in cohort.items])
    rng = np.random.default_rng(3)
    kept = cohort.keep_events(rng.random(cohort.n_events) < 0.5)
    groups = np.array([f"{{{c[:3]}}}" if i % 2 else str(c) for i, c in enumerate(cohort.items)], dtype=object)
    generalized = kept.relabel(groups)
    item_codes = {
        str(g): frozenset(str(c) for c, x in zip(cohort.items, groups, strict=True) if x == g)
        for g in set(generalized.items.tolist())
        if str(g).startswith("{")
    }
    for rel in (Release("kept", kept), Release("generalized", generalized, item_codes)):
        got = utility_satisfaction(cohort, rel, policy)
        pd.testing.assert_frame_equal(got, reference_utility_satisfaction(cohort, rel, policy))
        assert got["original_records"].sum() > 0


def test_the_original_counts_once_per_cohort_and_policy(monkeypatch):
    """Issue 24: every run at a new k recounted the original cohort's records per disease, though
    they depend on neither k nor the release; now once per cohort content and policy."""
    counted: list[Records] = []
    real = queries._disease_counts
    monkeypatch.setattr(queries, "_disease_counts", lambda r, d, i: counted.append(r) or real(r, d, i))
    cohort = records([(0, "once.1"), (1, "once.2"), (2, "once.3")])  # codes of this test alone
    policy = {"x": frozenset({"once.1", "once.2"}), "y": frozenset({"once.3"})}
    for kept in ([(0, "once.1")], [(1, "once.2"), (2, "once.3")]):
        utility_satisfaction(cohort, Release("m", records(kept)), policy)
    assert sum(r is cohort for r in counted) == 1
    another = {"x": frozenset({"once.1"})}
    utility_satisfaction(cohort, Release("m", records([(0, "once.1")])), another)
    assert sum(r is cohort for r in counted) == 2
