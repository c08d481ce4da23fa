"""UGACLIP / ACLIP's compiled greedy and PPE's memoized extraction give the releases and policies of
the step-by-step versions they replaced (tests/reference_profiles.py), byte for byte: records, code
map, trace, loss figures, suppressed rows, and the same SuppressionLimitExceeded (issue 24)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.anonymize.policy import collect_constraints, extract_policy, least_superset_support
from engine.anonymize.profiles import SuppressionLimitExceeded, anonymize_profiles
from engine.records import Records
from engine.release import Release
from tests.reference_profiles import reference_anonymize_profiles, reference_extract_policy

CODES = ["157.0", "157.1", "157.2", "185", "493.00", "493.01", "250.00", "250.02", "401.9", "V45.81"]
UNUSED = ["157.3", "493.02", "999.9"]  # in the vocabulary, held by nobody (support 0)
UTILITY = {
    "Pancreatic cancer": frozenset({"157.0", "157.1", "157.2", "157.3"}),
    "Asthma": frozenset({"493.00", "493.01", "493.02"}),
    "Diabetes mellitus type 2": frozenset({"250.00", "250.02"}),
    "Overlapping": frozenset({"157.2", "185"}),
}


@st.composite
def cohorts(draw) -> Records:
    n = draw(st.integers(1, 16))
    rows = []
    for p in range(n):
        for v in range(draw(st.integers(1, 3))):
            codes = draw(st.lists(st.sampled_from(CODES), min_size=1, max_size=5, unique=True))
            rows.extend((f"p{p}", v, c) for c in codes)
    frame = pd.DataFrame(rows, columns=["patient_id", "visit", "code"])
    vocab = sorted(set(frame["code"]) | set(draw(st.lists(st.sampled_from(UNUSED), unique=True))))
    return Records.from_frame(frame, items=vocab)


def same_release(a: Release, b: Release) -> None:
    assert a.fingerprint == b.fingerprint
    assert a.content_fingerprint == b.content_fingerprint
    assert a.item_codes == b.item_codes
    assert list(a.item_codes) == list(b.item_codes)
    assert a.params == b.params
    assert a.loss == b.loss
    assert a.records.fingerprint == b.records.fingerprint
    pd.testing.assert_frame_equal(a.suppressed, b.suppressed)


def same_policy(a, b) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y)
        else:
            assert x == y, f.name


def both(fn):
    """The result of `fn(anonymize)` for the engine and the reference: a Release, or the
    SuppressionLimitExceeded raised (compared by its fields)."""
    out = []
    for run in (anonymize_profiles, reference_anonymize_profiles):
        try:
            out.append(fn(run))
        except SuppressionLimitExceeded as exc:
            out.append((exc.method, exc.limit, exc.needed, exc.constraint, exc.done, exc.total))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cohorts(),
    st.integers(1, 5),
    st.sampled_from(["single_visit", "all_visits", "custom"]),
    st.lists(st.lists(st.sampled_from([*CODES, *UNUSED, "999.8"]), min_size=1, max_size=4), max_size=6),
    st.sampled_from(["UGACLIP", "ACLIP"]),
    st.sampled_from(["group", "suppress"]),
    st.booleans(),
    st.one_of(st.none(), st.integers(0, 3)),
)
def test_the_compiled_greedy_gives_the_reference_release(
    r, k, condition, code_sets, method, outside, with_visits, limit
):
    with_visits = with_visits and condition != "all_visits"
    policy = extract_policy(
        r, k, condition, code_sets if condition == "custom" else None, within_visits=with_visits
    )  # type: ignore[arg-type]
    utility = UTILITY if method == "UGACLIP" else None
    new, old = both(
        lambda run: run(
            r,
            policy,
            k,
            utility,
            method=method,
            max_suppressed=limit,
            with_visits=with_visits,
            outside=outside,
        )
    )
    if isinstance(old, Release):
        same_release(new, old)
    else:
        assert new == old


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cohorts(),
    st.integers(2, 4),
    st.lists(st.lists(st.sampled_from(CODES), min_size=2, max_size=4, unique=True), min_size=1, max_size=10),
    st.sampled_from(["UGACLIP", "ACLIP"]),
)
def test_custom_policies_with_unsupported_constraints_take_the_same_steps(r, k, code_sets, method):
    """Constraints no record holds whole (support 0) go back to Python for their violating subset
    (Apriori) and are swept again after the heap: the same release as the reference."""
    policy = extract_policy(r, k, "custom", code_sets)
    utility = UTILITY if method == "UGACLIP" else None
    new, old = both(lambda run: run(r, policy, k, utility, method=method))
    same_release(new, old)


@settings(max_examples=100, deadline=None)
@given(
    cohorts(),
    st.lists(st.integers(1, 6), min_size=1, max_size=4),
    st.sampled_from(["single_visit", "all_visits", "custom"]),
    st.lists(st.lists(st.sampled_from([*CODES, "999.8"]), min_size=1, max_size=4), max_size=8),
    st.booleans(),
)
def test_ppe_at_every_k_is_the_reference_extraction(r, ks, condition, code_sets, within_visits):
    """The k-independent part is computed once per cohort and reused: each k's policy is still the
    one extracted from scratch (constraints in order, supports, counts)."""
    within_visits = within_visits and condition != "all_visits"
    sets = code_sets if condition == "custom" else None
    for k in ks:
        a = extract_policy(r, k, condition, sets, within_visits=within_visits)  # type: ignore[arg-type]
        same_policy(a, reference_extract_policy(r, k, condition, sets, within_visits=within_visits))


@given(st.lists(st.frozensets(st.sampled_from("abcdef"), min_size=1), unique=True, max_size=12), st.data())
def test_least_superset_support_against_brute_force(sets, data):
    sup = np.asarray(
        data.draw(st.lists(st.integers(0, 9), min_size=len(sets), max_size=len(sets))), dtype=np.int64
    )
    want = [
        min((int(sup[j]) for j, d in enumerate(sets) if d > s), default=np.iinfo(np.int64).max) for s in sets
    ]
    assert least_superset_support(sets, sup).tolist() == want


@pytest.fixture(scope="module")
def sample_cohort() -> Records:
    from engine.io.loaders import load_sample_checked

    return load_sample_checked().data.group_records("cohort")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("method", "knowledge", "with_visits"),
    [("UGACLIP", "single_visit", False), ("ACLIP", "single_visit", False), ("UGACLIP", "single_visit", True)],
)
def test_the_sample_release_is_the_reference_release(sample_cohort, method, knowledge, with_visits):
    """The shipped sample at k = 5, where the reference takes seconds: the same release, trace included
    (5,000 generalizations, the catch-all item of issue 16 among them)."""
    from engine.study.runs import ProfilesSettings

    r = sample_cohort
    policy = extract_policy(r, 5, knowledge, within_visits=with_visits)  # type: ignore[arg-type]
    same_policy(policy, reference_extract_policy(r, 5, knowledge, within_visits=with_visits))
    utility = (
        ProfilesSettings().utility_policy([str(x) for x in r.items]).as_mapping()
        if method == "UGACLIP"
        else None
    )
    new, old = both(lambda run: run(r, policy, 5, utility, method=method, with_visits=with_visits))
    assert len(new.params["trace"]) > 1000
    same_release(new, old)


def test_ppe_memo_follows_the_records_content(sample_cohort):
    """The memo is keyed on the records' content: a cohort that differs by one patient, asked for
    after the full one, gets its own constraints and supports."""
    extract_policy(sample_cohort, 5, "all_visits")
    fewer = sample_cohort.take(np.arange(sample_cohort.n_patients - 1))
    policy = extract_policy(fewer, 5, "all_visits")
    assert policy.n_collected == len(collect_constraints(fewer, "all_visits"))
    assert policy.n_collected < len(collect_constraints(sample_cohort, "all_visits"))
    same_policy(policy, reference_extract_policy(fewer, 5, "all_visits"))
