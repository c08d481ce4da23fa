"""The sensitive-code suppression (issue 39, method option): after it no rule exceeds rho under any
adversary asked for, by the brute force of tests/reference_sensitive.py; k is re-checked and a broken
k is said."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.adversary import Adversary
from engine.anonymize.sensitive_suppress import PriorAboveRho, suppress_sensitive
from engine.disclosure.sensitive import load_categories
from engine.records import Records
from engine.release import Release
from tests.reference_sensitive import brute_force
from tests.test_sensitive_properties import SENSITIVE, _frame, record

CATEGORIES = load_categories().select(["hiv", "reproductive_health"])  # rare: most priors below rho
RARE = {name: SENSITIVE[name] for name in CATEGORIES.names}
ROWS = [
    ("P1", 1, "401.1"),
    ("P1", 1, "296.20"),
    ("P2", 1, "401.1"),
    ("P2", 2, "296.20"),
    ("P3", 1, "250.00"),
    ("P4", 1, "250.00"),
    ("P4", 1, "401.1"),
]


def _release(frame: pd.DataFrame) -> Release:
    records = Records.from_frame(frame)
    return Release("original", records, source=records)


def test_suppresses_the_implying_code_and_verifies_k():
    release = _release(pd.DataFrame(ROWS, columns=["patient_id", "visit", "code"]))
    adv = Adversary("cohort", "all_visits")
    got = suppress_sensitive(release, [adv], load_categories().select(["mental_health"]), rho=0.5, k=2)
    assert got.suppressed_items == ("401.1",) and got.events_suppressed == 3
    assert not got.before[adv].ok and got.rho_verified
    assert sorted(got.release.suppressed["code"]) == ["401.1"] * 3
    # P1 and P2 keep 296.20 only, P3 250.00, P4 250.00: every record has a twin, so k = 2 holds
    assert got.k_verified and got.message().endswith("k verified.")
    three = suppress_sensitive(release, [adv], load_categories().select(["mental_health"]), rho=0.5, k=3)
    assert not three.k_verified
    assert "k NOT verified: Not verified: 4 of 4 records have distinguishability < 3" in three.message()


def test_prior_above_rho_is_refused_by_name():
    release = _release(pd.DataFrame(ROWS, columns=["patient_id", "visit", "code"]))
    with pytest.raises(
        PriorAboveRho, match=r"mental_health is held by 50.0% of the candidates, above rho = 0.4"
    ):
        suppress_sensitive(release, [Adversary()], load_categories().select(["mental_health"]), rho=0.4, k=2)


@given(
    cohort=st.lists(record, min_size=3, max_size=8),
    others=st.lists(record, max_size=5),
    rho=st.sampled_from([0.5, 0.8]),
    m=st.integers(1, 3),
)
def test_no_rule_above_rho_after_it_by_brute_force(cohort, others, rho, m):
    frame = _frame(cohort)
    population = Records.from_frame(pd.concat([frame, _frame(others, first=len(cohort))]))
    release = _release(frame)
    advs = [Adversary(s, k) for s in ("cohort", "population") for k in ("single_visit", "all_visits")]
    try:
        got = suppress_sensitive(release, advs, CATEGORIES, rho=rho, k=1, m=m, population=population)
    except PriorAboveRho:
        return
    assert got.rho_verified
    for adv in advs:  # global suppression never lowers a distinguishability (module docstring)
        assert (got.k_checks[adv].distinguishability >= got.k_before[adv].distinguishability).all()
    assert not set(got.suppressed_items) & set().union(*RARE.values())
    for adv in advs:
        conf, _, _ = brute_force(
            got.release.records,
            RARE,
            single_visit=adv.knowledge == "single_visit",
            m=m,
            population=population if adv.scope == "population" else None,
        )
        assert max(conf.values(), default=0.0) <= rho
