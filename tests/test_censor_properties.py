"""Property tests: on random small populations and samples, every GCCens release meets k under the
risk engine whenever k is reachable, the fast kernel equals the risk-engine kernel, and the faithful
variant equals a literal, plain-Python transcription of Algorithm 1 (thesis chapter III)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import risk
from engine.adversary import Adversary
from engine.anonymize.censor import DominanceCounter, gccens, gccens_run, prepare
from engine.records import Records

CODES = ["250", "272", "401", "724", "V45"]


@st.composite
def cohorts(draw):
    """A population (1-14 patients, 1-5 codes, 0-4 repeats, optionally with visits), a sample of it."""
    n = draw(st.integers(1, 14))
    d = draw(st.integers(1, len(CODES)))
    counts = draw(st.lists(st.lists(st.integers(0, 4), min_size=d, max_size=d), min_size=n, max_size=n))
    with_visits = draw(st.booleans())
    rows = []
    for i, row in enumerate(counts):
        for j, c in enumerate(row):
            rows += [(f"p{i:02d}", CODES[j], (i + j + r) % 3) for r in range(c)]
        if sum(row) == 0:
            rows.append((f"p{i:02d}", CODES[0], 0))
    df = pd.DataFrame(rows, columns=["patient_id", "code", "visit"])
    if not with_visits:
        df = df.drop(columns="visit")
    pop = Records.from_frame(df)
    chosen = draw(st.lists(st.sampled_from(list(pop.patient_ids)), min_size=1, unique=True))
    k = draw(st.integers(1, 6))
    cap = draw(st.one_of(st.none(), st.integers(0, 4)))
    return pop, pop.subset(chosen), k, cap


def literal_gccens(pop: Records, sample: Records, k: int, cap: int | None, scope: str) -> list[Counter]:
    """Algorithm 1 word for word over Python multisets; a code at cap c holds exactly c instances in
    a record; codes whose r is empty are skipped; the working cap drops to the largest count present;
    ties go to the first code in sorted order."""
    y = [Counter(sample.patient_codes(i)) for i in range(sample.n_patients)]
    population = [Counter(pop.patient_codes(i)) for i in range(pop.n_patients)]
    codes = sorted({c for r in y for c in r})
    caps = {c: max(r[c] for r in y) if cap is None else min(cap, max(r[c] for r in y)) for c in codes}
    y = [Counter({c: min(n, caps[c]) for c, n in r.items() if min(n, caps[c]) > 0}) for r in y]

    def dis(r: Counter) -> int:
        cands = y if scope == "cohort" else population
        return sum(all(cand[c] >= n for c, n in r.items()) for cand in cands)

    while any(dis(r) < k for r in y):
        for c in codes:  # working cap: the largest count present
            caps[c] = min(caps[c], max(r[c] for r in y))
        sets = {c: [i for i, r in enumerate(y) if caps[c] > 0 and r[c] == caps[c]] for c in codes}
        sizes = {c: len(v) for c, v in sets.items() if v}
        if not sizes:
            break
        o = min(sizes, key=lambda c: (sizes[c], c))
        for i in sets[o]:
            y[i][o] -= 1
        caps[o] -= 1
    return [+r for r in y]


def _released(release) -> list[Counter]:
    recs = release.records
    return [Counter(recs.patient_codes(i)) for i in range(recs.n_patients)]


@settings(max_examples=50, deadline=None)
@given(cohorts(), st.sampled_from(["population", "cohort"]), st.sampled_from(["faithful", "targeted"]))
def test_every_release_meets_k_under_the_risk_engine(case, scope, variant):
    pop, sample, k, cap = case
    population = pop if scope == "population" else None
    release = gccens(sample, population, k, cap=cap, scope=scope, variant=variant)
    verification = risk.verify(release, Adversary(scope, "all_visits"), k, population)
    n_candidates = pop.n_patients if scope == "population" else sample.n_patients
    assert release.loss["k_reached"] == (n_candidates >= k)
    assert verification.ok == (n_candidates >= k)
    # never more than the caps, never more than the original
    orig = [Counter(sample.patient_codes(i)) for i in range(sample.n_patients)]
    for before, after in zip(orig, _released(release), strict=True):
        for c, n in after.items():
            assert n <= before[c]
            assert cap is None or n <= cap


@settings(max_examples=40, deadline=None)
@given(cohorts(), st.sampled_from(["population", "cohort"]), st.sampled_from(["faithful", "targeted"]))
def test_fast_kernel_equals_risk_engine_kernel(case, scope, variant):
    pop, sample, k, cap = case
    population = pop if scope == "population" else None
    problem = prepare(sample, population, scope)
    fast = gccens_run(problem, k, cap=cap, variant=variant)
    ref = gccens_run(problem, k, cap=cap, variant=variant, kernel="risk")
    assert fast.records.fingerprint == ref.records.fingerprint
    assert fast.loss["steps"] == ref.loss["steps"]


@settings(max_examples=50, deadline=None)
@given(cohorts(), st.sampled_from(["population", "cohort"]))
def test_faithful_equals_literal_algorithm_1(case, scope):
    pop, sample, k, cap = case
    population = pop if scope == "population" else None
    release = gccens(sample, population, k, cap=cap, scope=scope)
    assert _released(release) == literal_gccens(pop, sample, k, cap, scope)


@settings(max_examples=40, deadline=None)
@given(cohorts())
def test_targeted_never_censors_records_that_meet_k_population_scope(case):
    """Under k-map a record's distinguishability depends on that record alone, so the targeted
    variant leaves every record that meets k after capping untouched. (It does not always retain
    more than the faithful variant: with sample {250, 272}, {250} and 272 unique in P, k = 2, its
    tie on one record each goes to 250 by code order and then 272 must go too.)"""
    pop, sample, k, cap = case
    problem = prepare(sample, pop)
    targeted = gccens_run(problem, k, cap=cap, variant="targeted")
    capped = gccens_run(problem, 1, cap=cap)  # k = 1: capping only
    dis_capped = risk.release_distinguishability(capped, Adversary("population", "all_visits"), pop)
    meets = np.flatnonzero(dis_capped >= k)
    for i in meets:
        assert targeted.records.patient_codes(i) == capped.records.patient_codes(i)
    assert risk.verify(targeted, Adversary("population", "all_visits"), k, pop).ok == (pop.n_patients >= k)


def _many_codes_case(seed: int, n_codes: int = 40):
    """A population of 150 records over `n_codes` codes (0-3 repeats, most codes rare), a sample of 40."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 4, size=(150, n_codes)) * (rng.random((150, n_codes)) < 0.15)
    rows = [
        (f"p{i:03d}", f"C{j:03d}") for i in range(150) for j in range(n_codes) for _ in range(counts[i, j])
    ]
    rows += [(f"p{i:03d}", "C000") for i in range(150) if counts[i].sum() == 0]
    pop = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "code"]))
    chosen = sorted(rng.choice(pop.patient_ids, size=40, replace=False).tolist())
    return pop, pop.subset(chosen)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("scope", ["population", "cohort"])
@pytest.mark.parametrize("variant", ["faithful", "targeted"])
def test_fast_kernel_equals_reference_with_many_codes(seed, scope, variant):
    """Issue 16: the sparse, early-stopping bitset path (too many codes for the dense histogram) gives
    the release and the steps of the risk-engine reference, with and without a universal cap."""
    pop, sample = _many_codes_case(seed)
    problem = prepare(sample, pop if scope == "population" else None, scope)
    assert problem.counter is None or not problem.counter.dense
    for k, cap in ((2, None), (3, 2), (5, None)):
        fast = gccens_run(problem, k, cap=cap, variant=variant)
        ref = gccens_run(problem, k, cap=cap, variant=variant, kernel="risk")
        assert fast.records.fingerprint == ref.records.fingerprint
        assert fast.loss["steps"] == ref.loss["steps"]
        assert fast.loss["steps"], "the case must exercise the loop"


@pytest.mark.parametrize("seed", range(4))
def test_dominance_below_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    cands = rng.integers(0, 3, size=(300, 90)) * (rng.random((300, 90)) < 0.3)
    top = cands.max(axis=0)
    counter = DominanceCounter(cands, top)
    assert not counter.dense
    targets = np.minimum(rng.integers(0, 3, size=(80, 90)) * (rng.random((80, 90)) < 0.05), top)
    targets[0] = 0  # no code: every candidate dominates
    brute = np.array([(cands >= t).all(axis=1).sum() for t in targets])
    for k in (1, 2, 3, 10, 301):
        np.testing.assert_array_equal(counter.below(targets, k), brute < k)
    np.testing.assert_array_equal(counter.count(targets), brute)


@settings(max_examples=60, deadline=None)
@given(cohorts(), st.sampled_from(["population", "cohort"]), st.sampled_from(["faithful", "targeted"]))
def test_default_kernel_equals_the_stepwise_loop(case, scope, variant):
    """Issue 16: the faithful k-map run by exit-step binary search over the precomputed step sequence
    gives the stepwise loop's capped counts, released counts, steps and k_reached exactly (and the
    other variants and scopes, which still step, are unchanged)."""
    from engine.anonymize.censor import censor_counts

    pop, sample, k, cap = case
    problem = prepare(sample, pop if scope == "population" else None, scope)
    caps = problem.cap_vector(cap)
    fast = censor_counts(problem, k, caps, variant, "dominance")
    plain = censor_counts(problem, k, caps, variant, "stepwise")
    assert np.array_equal(fast[0], plain[0])
    assert np.array_equal(fast[1], plain[1])
    assert fast[2] == plain[2]
    assert [list(s) for s in fast[2]] == [list(s) for s in plain[2]]  # key order: byte-identical JSON
    assert fast[3] == plain[3]


@pytest.mark.parametrize("seed", range(6))
def test_exit_step_search_equals_stepwise_loop_with_many_codes(seed):
    """The bitset (non-dense) counter under the exit-step search, k reachable and not (k > population)."""
    from engine.anonymize.censor import censor_counts

    pop, sample = _many_codes_case(seed)
    problem = prepare(sample, pop)
    for k, cap in ((2, None), (5, 2), (9, None), (151, None)):
        caps = problem.cap_vector(cap)
        fast = censor_counts(problem, k, caps, "faithful", "dominance")
        plain = censor_counts(problem, k, caps, "faithful", "stepwise")
        assert np.array_equal(fast[1], plain[1]) and fast[2] == plain[2] and fast[3] == plain[3]
        assert fast[2], "the case must exercise the loop"
    assert not fast[3], "k above the population size cannot be reached"
