"""k-map without the population (engine/estimate/kmap.py, issue 27) against a brute force: the sample
counts of every record's known sets from the plain reference (tests/reference_risk.py), and each model's
probabilities by their formulas in plain Python (math, one population count at a time), on random small
cohorts. Also: at f = 1 the estimate is the exact count; the gamma prior's fit recovers a known prior."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.estimate import kmap
from engine.records import Records
from tests.reference_risk import consistent, known_sets

CODES = ["250", "272", "401", "724", "427.31"]
SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def cohorts(draw, max_patients: int = 9) -> Records:
    rows = []
    for p in range(draw(st.integers(1, max_patients))):
        for v in range(draw(st.integers(1, 3))):
            for c in draw(st.lists(st.sampled_from(CODES), min_size=1, max_size=4)):
                rows.append((f"p{p}", v, c))
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))


def sample_counts(cohort: Records, knowledge: str) -> list[list[int]]:
    """Per record, the cohort count of each of its DISTINCT known sets, by brute force."""
    cands = [Counter(cohort.patient_codes(q)) for q in range(cohort.n_patients)]
    out = []
    for sets in known_sets(cohort, knowledge, False):
        distinct = []
        for s in sets:
            if s not in distinct:
                distinct.append(s)
        out.append([sum(consistent(s, c, None) for c in cands) for s in distinct])
    return out


def brute_set(c: int, f: float, k: int, model: str, upper: int, prior) -> tuple[float, float, float]:
    """P(F = 1), P(F < k), E[F] of one set seen c times, from the model's definition."""
    if f == 1.0:
        return float(c == 1), float(c < k), float(c)
    if model == "poisson":
        lam = c * (1 - f) / f
        pk = sum(math.exp(-lam) * lam**x / math.factorial(x) for x in range(k - c)) if c < k else 0.0
        return (math.exp(-lam) if c == 1 else 0.0), pk, c / f
    if model == "zero_truncated_poisson":
        weights = {
            F: math.exp(c * math.log(f * F) - f * F) / (1 - math.exp(-f * F)) for F in range(c, upper + c + 1)
        }
        total = math.fsum(weights.values())
        pk = math.fsum(w for pop_n, w in weights.items() if pop_n < k) / total
        mean = math.fsum(pop_n * w for pop_n, w in weights.items()) / total
        return (weights[c] / total if c == 1 else 0.0), pk, mean
    r, q = prior.shape + c - 1, (prior.rate + f) / (prior.rate + 1)

    def pmf(u: int) -> float:
        return (
            math.exp(math.lgamma(r + u) - math.lgamma(r) - math.lgamma(u + 1) + r * math.log(q))
            * (1 - q) ** u
        )

    pk = math.fsum(pmf(u) for u in range(k - c)) if c < k else 0.0
    return (pmf(0) if c == 1 else 0.0), pk, c + r * (1 - q) / q


@given(
    cohort=cohorts(),
    extra=st.integers(0, 40),
    k=st.integers(1, 6),
    knowledge=st.sampled_from(["single_visit", "all_visits"]),
    model=st.sampled_from(kmap.MODELS),
    combine=st.sampled_from(kmap.COMBINES),
)
@SETTINGS
def test_estimate_equals_brute_force(cohort, extra, k, knowledge, model, combine) -> None:
    n = cohort.n_patients
    N = n + extra
    f = n / N
    est = kmap.estimate_kmap(cohort, N, knowledge, k, model=model, combine=combine)
    counts = sample_counts(cohort, knowledge)
    assert est.sample_distinguishability.tolist() == [min(cs) for cs in counts]
    assert est.sampling_fraction == f
    if model == "negative_binomial" and f < 1:
        assert est.prior == kmap.fit_prior(np.array([c for cs in counts for c in cs]), f)
    for p, cs in enumerate(counts):
        per_set = [brute_set(c, f, k, model, N - n, est.prior) for c in cs]
        if combine == "riskiest":
            p1, pk = max(s[0] for s in per_set), max(s[1] for s in per_set)
        else:
            p1 = 1 - math.prod(1 - s[0] for s in per_set)
            pk = 1 - math.prod(1 - s[1] for s in per_set)
        expected = min(zip(cs, [s[2] for s in per_set], strict=True))[1]
        assert est.p_unique[p] == pytest.approx(p1, abs=1e-9)
        assert est.p_below_k[p] == pytest.approx(pk, abs=1e-9)
        assert est.expected_population[p] == pytest.approx(expected, rel=1e-6)
    share = est.share_below_k
    assert share.estimate == pytest.approx(float(np.mean(est.p_below_k)))
    assert 0.0 <= share.low <= share.estimate <= share.high <= 1.0


@given(cohort=cohorts(), k=st.integers(1, 6), model=st.sampled_from(kmap.MODELS))
@SETTINGS
def test_the_whole_population_is_exact(cohort, k, model) -> None:
    """f = 1: the cohort is the population; the estimate is the cohort-scope count, with certainty."""
    for knowledge in ("single_visit", "all_visits"):
        est = kmap.estimate_kmap(cohort, cohort.n_patients, knowledge, k, model=model)
        d = np.array([min(cs) for cs in sample_counts(cohort, knowledge)])
        assert est.p_below_k.tolist() == (d < k).astype(float).tolist()
        assert est.p_unique.tolist() == (d == 1).astype(float).tolist()
        assert est.share_below_k.low == est.share_below_k.high == float(np.mean(d < k))


def test_the_prior_fit_recovers_a_known_gamma() -> None:
    rng = np.random.default_rng(7)
    f, shape, rate = 0.1, 0.4, 0.02  # mean F - 1 of 20, most sets rare
    lam = rng.gamma(shape, 1 / rate, size=40_000)
    counts = 1 + rng.poisson(f * lam)
    prior = kmap.fit_prior(counts, f)
    assert prior.shape == pytest.approx(shape, rel=0.1)
    assert prior.rate == pytest.approx(rate, rel=0.15)


def test_estimates_say_what_they_assume_and_refuse_bad_sizes() -> None:
    cohort = Records.from_frame(
        pd.DataFrame({"patient_id": ["a", "b"], "visit": [1, 1], "code": ["250", "401"]})
    )
    est = kmap.estimate_kmap(cohort, 100, "all_visits", 5)
    assert "random sample" in est.warning and "underestimated" in est.warning
    assert "SIMPLE RANDOM SAMPLE" in (kmap.__doc__ or "")
    with pytest.raises(ValueError, match="smaller than the cohort"):
        kmap.estimate_kmap(cohort, 1, "all_visits", 5)
    with pytest.raises(ValueError, match="model must be"):
        kmap.estimate_kmap(cohort, 10, "all_visits", 5, model="binomial")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k must be"):
        kmap.estimate_kmap(cohort, 10, "all_visits", 0)
