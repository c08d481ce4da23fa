"""Maximum and average risk and the records at risk (`risk.risk_measures`, issue 27), against a plain
brute force over Python floats, on random distinguishability vectors and on random small cohorts counted
by the plain reference (tests/reference_risk.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine import risk
from engine.adversary import ALL_ADVERSARIES
from engine.records import Records
from tests.reference_risk import reference_distinguishability

CODES = ["250", "272", "401", "724", "427.31"]
SETTINGS = settings(max_examples=60, deadline=None)


def brute(dis: list[int], threshold: float) -> dict[str, float]:
    """The figures by their definitions, one record at a time."""
    risks = [1 / d for d in dis]
    at = sum(1 for r in risks if r > threshold)
    return {
        "max": max(risks),
        "average": math.fsum(risks) / len(risks),
        "at": at,
        "share": at / len(dis),
    }


@given(dis=st.lists(st.integers(1, 40), min_size=1, max_size=60), threshold=st.floats(1e-3, 1.0))
@example(dis=[11, 10, 12], threshold=0.09)  # 1/11 = 0.0909 exceeds the cited 0.09
@example(dis=[49, 48, 50], threshold=1 / 49)  # 49 * (1/49) < 1 in floats: compare 1/d, never d * t
@SETTINGS
def test_measures_equal_brute_force(dis: list[int], threshold: float) -> None:
    m = risk.risk_measures(np.array(dis), threshold)
    b = brute(dis, threshold)
    assert m.records == len(dis)
    assert m.prosecutor_max == pytest.approx(b["max"], rel=1e-12)
    assert m.average == pytest.approx(b["average"], rel=1e-12)
    assert m.records_at_risk == b["at"]
    assert m.share_at_risk == pytest.approx(b["share"])


@given(dis=st.lists(st.integers(1, 300), min_size=1, max_size=60), k=st.integers(1, 300))
@example(dis=[49, 48, 50], k=49)
@SETTINGS
def test_threshold_of_k_is_below_k(dis: list[int], k: int) -> None:
    m = risk.risk_measures(np.array(dis), risk.threshold_of_k(k))
    assert m.records_at_risk == sum(1 for d in dis if d < k)
    assert m.records_at_risk == int(risk.summarize(np.array(dis), k).share_below_k * len(dis) + 0.5)


@st.composite
def cohorts(draw, max_patients: int = 10) -> Records:
    rows = []
    for p in range(draw(st.integers(1, max_patients))):
        for v in range(draw(st.integers(1, 3))):
            for c in draw(st.lists(st.sampled_from(CODES), min_size=1, max_size=4)):
                rows.append((f"p{p}", v, c))
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))


@given(cohort=cohorts(), k=st.integers(1, 6))
@SETTINGS
def test_measures_of_a_cohort_equal_brute_force(cohort: Records, k: int) -> None:
    """From the kernel's distinguishability, every adversary of the cohort scope (and the population
    scope with the cohort as its own population): the figures of the plain reference's counts."""
    for adv in ALL_ADVERSARIES:
        dis = risk.original_distinguishability(cohort, adv, cohort)
        ref = reference_distinguishability(cohort, cohort, adv.knowledge)
        m = risk.risk_measures(dis, risk.threshold_of_k(k))
        b = brute(ref, 1 / k)
        assert (m.prosecutor_max, m.records_at_risk) == (b["max"], b["at"])
        assert m.average == pytest.approx(b["average"], rel=1e-12)


def test_a_record_no_candidate_matches_counts_at_the_highest_risk() -> None:
    """LDA's code|age items against a population of plain codes match no candidate (d = 0): the
    measure cannot vouch for such records, so they count at risk 1 (found by the report of an LDA
    release under a population adversary, which raised)."""
    m = risk.risk_measures(np.array([3, 0, 1, 0]), 0.2)
    assert (m.unmatched, m.records_at_risk, m.prosecutor_max) == (2, 4, 1.0)
    assert m.average == pytest.approx((1 / 3 + 1 + 1 + 1) / 4)
    with pytest.raises(ValueError, match="1 of 2 records have a negative or missing"):
        risk.risk_measures(np.array([np.nan, 2.0]), 0.2)


def test_threshold_and_empty_inputs() -> None:
    assert risk.risk_measures(np.array([], dtype=np.int64), 0.2) == risk.RiskMeasures(
        0, 0.2, 0.0, 0.0, 0, 0.0
    )
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="risk threshold"):
            risk.risk_measures(np.array([1, 2]), bad)
    for bad_k in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="k must be"):
            risk.threshold_of_k(bad_k)  # type: ignore[arg-type]
    m = risk.risk_measures(np.array([1, 2, 4, 4]), risk.threshold_of_k(3))
    assert (m.prosecutor_max, m.average, m.records_at_risk, m.share_at_risk) == (1.0, 0.5, 2, 0.5)
    assert m.as_dict()["records at risk"] == 2


def test_el_emam_precedents() -> None:
    table = {p.name: (p.stated, p.k, p.threshold) for p in risk.RISK_THRESHOLD_PRECEDENTS}
    assert table["public release"] == (0.09, 11, 1 / 11)
    assert table["controlled access under a data use agreement"] == (0.2, 5, 0.2)
    assert {p.k for p in risk.RISK_THRESHOLD_PRECEDENTS} == {20, 11, 5, 3}
    for p in risk.RISK_THRESHOLD_PRECEDENTS:
        assert abs(p.stated - 1 / p.k) < 0.005  # the cited figure is 1/k rounded
        dis = np.arange(1, 30)
        assert risk.risk_measures(dis, p.threshold).records_at_risk == p.k - 1
