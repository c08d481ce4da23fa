"""rho-uncertainty (issue #39): `engine.disclosure.sensitive` equals the brute force of
tests/reference_sensitive.py on random small data, both knowledge models, both scopes, visits shown or
not."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from engine.adversary import Adversary
from engine.disclosure.sensitive import load_categories, rho_uncertainty
from engine.records import Records
from tests.reference_sensitive import brute_force

# codes of the shipped categories, assigned by hand (an independent check of `Categories.of_code`)
SENSITIVE = {
    "hiv": {"042", "V08"},
    "mental_health": {"296.20", "305.1", "F32.9"},
    "substance_use": {"305.1"},
    "reproductive_health": {"650"},
}
PLAIN = ["401.1", "250.00", "714.0", "427.31", "E11.9", "V45.81"]
CODES = sorted(set().union(*SENSITIVE.values())) + PLAIN

visit = st.lists(st.sampled_from(CODES), min_size=1, max_size=4)
record = st.lists(visit, min_size=1, max_size=3)


def _frame(records: list[list[list[str]]], first: int = 0) -> pd.DataFrame:
    rows = [
        (f"P{first + p}", v + 1, code)
        for p, visits in enumerate(records)
        for v, codes in enumerate(visits)
        for code in codes
    ]
    return pd.DataFrame(rows, columns=["patient_id", "visit", "code"])


def test_shipped_categories_hold_the_hand_assigned_codes():
    cats = load_categories()
    for code in CODES:
        expected = {s for s, codes in SENSITIVE.items() if code in codes}
        assert cats.of_code(code) == expected, code


@given(
    cohort=st.lists(record, min_size=1, max_size=7),
    others=st.lists(record, max_size=6),
    scope=st.sampled_from(["cohort", "population"]),
    knowledge=st.sampled_from(["single_visit", "all_visits"]),
    within_visits=st.booleans(),
    m=st.integers(1, 3),
    rho=st.sampled_from([0.0, 0.3, 0.5, 0.8]),
)
def test_equals_brute_force(cohort, others, scope, knowledge, within_visits, m, rho):
    records = Records.from_frame(_frame(cohort))
    population = Records.from_frame(pd.concat([_frame(cohort), _frame(others, first=len(cohort))]))
    got = rho_uncertainty(
        records,
        Adversary(scope, knowledge),
        load_categories(),
        rho=rho,
        m=m,
        within_visits=within_visits,
        candidates=population,
    )
    conf, best, held = brute_force(
        records,
        SENSITIVE,
        single_visit=knowledge == "single_visit",
        m=m,
        within_visits=within_visits,
        population=population if scope == "population" else None,
    )
    names = list(got.categories)
    expected_best = np.array([[b[s] for s in names] for b in best])
    np.testing.assert_allclose(got.confidence, expected_best)
    assert got.holds.tolist() == [[s in h for s in names] for h in held]
    expected_rules = {
        (s, " + ".join(q) if q else "(nothing: the prior)") for (s, q), c in conf.items() if c > rho
    }
    assert set(zip(got.rules["category"], got.rules["known codes"], strict=True)) == expected_rules
    by_rule = {(s, " + ".join(q) if q else "(nothing: the prior)"): c for (s, q), c in conf.items()}
    for s, q, c in zip(got.rules["category"], got.rules["known codes"], got.rules["confidence"], strict=True):
        assert c == by_rule[(s, q)]


GENERAL = {"401": frozenset({"401.1", "401.9"}), "{296.20,714.0}": frozenset({"296.20", "714.0"})}
GENERAL_CODES = [*CODES, "401.9"]


def _recode(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every code replaced by the released item standing for it (`GENERAL`)."""
    item_of = {code: item for item, codes in GENERAL.items() for code in codes}
    return frame.assign(code=frame["code"].map(lambda c: item_of.get(c, c)))


@given(
    cohort=st.lists(
        st.lists(st.lists(st.sampled_from(GENERAL_CODES), min_size=1, max_size=4), min_size=1, max_size=3),
        min_size=1,
        max_size=6,
    ),
    others=st.lists(
        st.lists(st.lists(st.sampled_from(GENERAL_CODES), min_size=1, max_size=4), min_size=1, max_size=3),
        max_size=5,
    ),
    knowledge=st.sampled_from(["single_visit", "all_visits"]),
    m=st.integers(1, 2),
)
def test_generalized_items_read_through_their_codes(cohort, others, knowledge, m):
    """A released item stands for its codes: `401` is held by a population patient holding 401.1 or
    401.9; `{296.20,714.0}` counts as mental health (it may be 296.20). Equal to the brute force on the
    data recoded by hand."""
    released = Records.from_frame(_recode(_frame(cohort)))
    population = Records.from_frame(pd.concat([_frame(cohort), _frame(others, first=len(cohort))]))
    got = rho_uncertainty(
        released,
        Adversary("population", knowledge),
        load_categories(),
        rho=0.5,
        m=m,
        item_codes=GENERAL,
        candidates=population,
    )
    sensitive = {**SENSITIVE, "mental_health": SENSITIVE["mental_health"] | {"{296.20,714.0}"}}
    _, best, held = brute_force(
        released,
        sensitive,
        single_visit=knowledge == "single_visit",
        m=m,
        population=Records.from_frame(_recode(population.to_frame())),
    )
    names = list(got.categories)
    np.testing.assert_allclose(got.confidence, np.array([[b[s] for s in names] for b in best]))
    assert got.holds.tolist() == [[s in h for s in names] for h in held]
