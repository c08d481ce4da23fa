"""GCCens' fast paths against the loop as it was (tests/reference_censor.py, the live bitset counter
in the cohort scope): the cohort scope's compiled loop (`engine.anonymize.censor_kernel`, issue 24)
and the population scope's exit-step search and dominance counts give the same capped and released
counts, the same steps (order, sizes, tie-breaks by code order) and the same release, on the shipped
sample and on small random cohorts, in both scopes and both variants."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

import engine.anonymize.censor as censor
from engine.anonymize.censor import censor_counts, gccens_run, prepare
from engine.records import Records
from tests.reference_censor import reference_censor_counts


def _same(problem, k, caps, variant, progress=None):
    new = censor_counts(problem, k, caps, variant, progress=progress)
    old = reference_censor_counts(problem, k, caps, variant)
    np.testing.assert_array_equal(new[0], old[0])
    np.testing.assert_array_equal(new[1], old[1])
    assert new[2] == old[2]
    assert new[3] == old[3]
    return new


@pytest.fixture(scope="module")
def sample_problems():
    """The app's prepared problems on the shipped sample, per (scope, code selection)."""
    from engine.io.loaders import load_sample_checked
    from engine.study.runs import CodeSelection, GCCensSettings, RunInputs

    ds = load_sample_checked().data
    inputs = RunInputs(ds.events, ds.group_records("cohort"), ds.group_records("biobank"))
    return {
        (scope, mode): GCCensSettings(k=5, scope=scope, codes=CodeSelection(mode))
        .prepare_input(inputs)
        .problem
        for scope in ("cohort", "population")
        for mode in ("all", "paper")
    }


@pytest.mark.parametrize("k", [3, 5, 7])
@pytest.mark.parametrize("mode", ["all", "paper"])
@pytest.mark.parametrize("scope", ["cohort", "population"])
def test_sample_equals_reference(sample_problems, scope, mode, k):
    problem = sample_problems[scope, mode]
    _, _, steps, reached = _same(problem, k, problem.cap_vector(), "faithful")
    assert reached
    assert len(steps) > (1000 if mode == "all" else 10)  # the step loop ran (thousands on all codes)


@pytest.mark.parametrize("bitsets", [200, None], ids=["200-bitsets", "all-bitsets"])
def test_sample_population_bitset_budget_equals_reference(sample_problems, monkeypatch, bitsets):
    """The population scope's exit-step search gives the same counts whether every record is counted
    by intersecting bitsets or, when only the widest features have one, some by checking the holders
    of their rarest feature (no bitset at all: the hypothesis test below)."""
    problem = sample_problems["population", "all"]
    if bitsets is not None:
        words = (problem.projected.shape[0] + 63) // 64
        monkeypatch.setattr(censor, "BITSET_BYTES", bitsets * words * 8)
    _same(problem, 5, problem.cap_vector(), "faithful")


@pytest.mark.parametrize("variant", ["faithful", "targeted"])
def test_sample_cohort_without_bitsets_equals_reference(sample_problems, monkeypatch, variant):
    """The cohort scope's loop counting each record among the holders of its rarest code (the
    feature bitsets over the budget) gives the same counts as with them."""
    monkeypatch.setattr(censor, "BITSET_BYTES", 0)
    problem = sample_problems["cohort", "all"]
    _same(problem, 5, problem.cap_vector(), variant)


@pytest.mark.parametrize("scope", ["cohort", "population"])
def test_sample_targeted_equals_reference(sample_problems, scope):
    problem = sample_problems[scope, "all"]
    _, _, steps, _ = _same(problem, 5, problem.cap_vector(), "targeted")
    assert len(steps) > 1000


@pytest.mark.parametrize("variant", ["faithful", "targeted"])
def test_sample_resumed_every_step_equals_one_run(sample_problems, monkeypatch, variant):
    """The compiled loop returning to Python (progress, cancellation) after every step resumes
    exactly where it stopped (the run without progress, in one call, is compared with the reference
    above); progress is called once per return, before the loop goes on."""
    problem = sample_problems["cohort", "all"]
    caps = problem.cap_vector()
    whole = censor_counts(problem, 5, caps, variant)
    monkeypatch.setattr(censor, "STEP_BUDGET", 1)
    calls: list[tuple[float, str]] = []
    resumed = censor_counts(problem, 5, caps, variant, progress=lambda f, m: calls.append((f, m)))
    np.testing.assert_array_equal(resumed[1], whole[1])
    assert resumed[2:] == whole[2:]
    steps = resumed[2]
    assert len(calls) == len(steps) + 2  # the start, one per step, the last check (every record meets k)
    assert calls[-1][0] == 1.0 and f"(step {len(steps) + 1})" in calls[-1][1]


def test_sample_release_bytes_equal_reference(sample_problems, monkeypatch):
    problem = sample_problems["cohort", "all"]
    new = gccens_run(problem, 4)
    monkeypatch.setattr(censor, "_censor", reference_censor_counts)  # gccens_run's loop: dense counts
    old = gccens_run(problem, 4)
    assert (
        new.exported_frame().to_csv(index=False).encode() == old.exported_frame().to_csv(index=False).encode()
    )
    assert new.fingerprint == old.fingerprint
    pd.testing.assert_frame_equal(new.suppressed, old.suppressed)
    assert new.loss == old.loss and new.params == old.params


@st.composite
def cohorts(draw, extra: int = 0):
    """Small records over five codes; with `extra`, up to that many more records after them (the
    population of which the first n are the cohort)."""
    n = draw(st.integers(1, 14))
    total = n + draw(st.integers(0, extra))
    rows = []
    for p in range(total):
        for _ in range(draw(st.integers(0, 7))):
            rows.append({"patient_id": f"p{p:02d}", "code": draw(st.sampled_from(["a", "b", "c", "d", "e"]))})
    if not rows:
        rows.append({"patient_id": "p00", "code": "a"})
    records = Records.from_frame(pd.DataFrame(rows))
    if not extra:
        return records
    ids = [str(x) for x in records.patient_ids]
    return records.subset(ids[: max(1, min(n, len(ids)))]), records


@given(
    cohorts(),
    st.integers(1, 5),
    st.sampled_from(["faithful", "targeted"]),
    st.one_of(st.none(), st.integers(0, 4)),
    st.booleans(),
)
def test_random_cohorts_equal_reference(cohort, k, variant, cap, bitsets):
    problem = prepare(cohort, None, "cohort")
    with pytest.MonkeyPatch.context() as mp:
        if not bitsets:  # the holders of each record's rarest code checked one by one
            mp.setattr(censor, "BITSET_BYTES", 0)
        _same(problem, k, problem.cap_vector(cap), variant)
    _sparse_counts_agree(problem)


def _sparse_counts_agree(problem):
    """`held` (read from the cohort) and `maxima` are the dense counts' own."""
    dense = sp.csr_matrix(problem.counts)
    assert problem.held.shape == dense.shape and problem.held.has_sorted_indices
    np.testing.assert_array_equal(problem.held.indptr, dense.indptr)
    np.testing.assert_array_equal(problem.held.indices, dense.indices)
    np.testing.assert_array_equal(problem.held.data, dense.data)
    np.testing.assert_array_equal(problem.maxima, problem.counts.max(axis=0))


def test_sample_sparse_counts_agree(sample_problems):
    for problem in sample_problems.values():
        _sparse_counts_agree(problem)


@given(
    cohorts(extra=10),
    st.integers(1, 5),
    st.sampled_from(["faithful", "targeted"]),
    st.one_of(st.none(), st.integers(0, 4)),
)
def test_random_populations_equal_reference(drawn, k, variant, cap):
    cohort, population = drawn
    problem = prepare(cohort, population, "population")
    _same(problem, k, problem.cap_vector(cap), variant)


@given(cohorts(extra=10), st.integers(1, 5), st.one_of(st.none(), st.integers(0, 4)), st.integers(0, 3))
def test_random_populations_any_bitset_budget_equal_reference(drawn, k, cap, bitsets):
    cohort, population = drawn
    problem = prepare(cohort, population, "population")
    words = (population.n_patients + 63) // 64
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(censor, "BITSET_BYTES", bitsets * words * 8)
        _same(problem, k, problem.cap_vector(cap), "faithful")


def test_sample_per_code_caps_by_label(sample_problems):
    """`cap_vector` with a cap named for every code (as the GCCens view passes them), some lowered,
    plus codes the sample does not hold: each code's cap, found by its label."""
    problem = sample_problems["cohort", "all"]
    labels = problem.code_labels
    caps = {c: int(v) - (j % 3 == 0) for j, (c, v) in enumerate(problem.default_caps().items())}
    got = problem.cap_vector(caps={**caps, "not a code": 0, "also absent": 1})
    expected = np.array([min(int(problem.maxima[j]), caps[c]) for j, c in enumerate(labels)])
    np.testing.assert_array_equal(got, expected)
    assert (got < problem.maxima).sum() == len(range(0, len(labels), 3))
    np.testing.assert_array_equal(problem.cap_vector(2, caps={labels[0]: 1})[:1], [min(1, problem.maxima[0])])


def _sparse_problem(scope: str):
    """2,000 records over 3,001 codes, four instances each (a dense count matrix of 48 MB): each
    record holds a code of its own, one of 1,000 shared by two records, and code c0 twice."""
    rows = []
    for p in range(2000):
        pid = f"p{p:04d}"
        rows += [(pid, f"u{p:04d}"), (pid, f"s{p % 1000:03d}"), (pid, "c0"), (pid, "c0")]
    cohort = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "code"]))
    return prepare(cohort, cohort if scope == "population" else None, scope)


@pytest.mark.parametrize("scope", ["cohort", "population"])
@pytest.mark.parametrize("k", [1, 2])
def test_a_run_does_not_copy_the_dense_counts(scope, k):
    """Bug report (issue 36): at paper scale (5,795 records, all codes) 2.65 s of the GCCens Run's
    caps-only baseline went to one copy of the records x codes count matrix (`censor_counts`:
    `np.array(capped, order="F")`); the faithful k-map path made another (`np.minimum(capped, ...)`).
    The run now keeps its counts sparse: the memory it allocates is far below the dense matrix's."""
    import tracemalloc

    problem = _sparse_problem(scope)
    dense = problem.counts.nbytes
    gccens_run(problem, k)  # the compiled loops loaded, the problem's cached parts built
    tracemalloc.start()
    try:
        release = gccens_run(problem, k)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < dense / 8, f"{peak / 1e6:.1f} MB allocated, the dense counts are {dense / 1e6:.1f} MB"
    _, released, _, _ = reference_censor_counts(problem, k, problem.cap_vector())
    kept = release.records.patient_item_counts[:, problem.codes].toarray()
    np.testing.assert_array_equal(kept, released)
