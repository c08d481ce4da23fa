"""Heatherly's completion pass (engine/anonymize/population.py) equals its plain reference
(tests/reference_population.py, the pass as it was before issue 24's speed work) byte for byte:
the same release (records, item map, suppressed rows, procedure figures), released group and
verification, on random small cohorts, on a generated population and on the shipped sample."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.anonymize.population import (
    GroupRelease,
    ScopeComparison,
    _plain_figures,
    anonymize,
    compare_scopes,
    suppress_rare,
    visit_support,
)
from engine.records import Records
from engine.utility.retention import figures
from tests.reference_population import _support_of_visits as reference_support
from tests.reference_population import reference_pass
from tests.test_population_properties import CONSTRAINTS, to_records
from tests.test_population_properties import population as populations


def _records_state(r: Records) -> tuple:
    return (
        r.patient_ids.tolist(),
        r.items.tolist(),
        r.visit_ptr.tolist(),
        r.visit_ids.tolist(),
        r.event_ptr.tolist(),
        r.event_item.tolist(),
        r.has_visits,
    )


def result_state(res: GroupRelease) -> tuple:
    """Everything a release, its released group and its verification hold, as comparable values."""
    rel = res.release
    return (
        rel.method,
        _records_state(rel.records),
        list(rel.item_codes.items()),  # the order too
        rel.suppressed.to_dict("list"),
        repr(rel.loss),
        rel.params,
        rel.shows_visits,
        None if rel.population is None else _records_state(rel.population),
        _records_state(res.released_group),
        res.verification.ok,
        res.verification.distinguishability.tolist(),
        rel.fingerprint,
    )


def comparison_state(cmp_: ScopeComparison) -> tuple:
    return (
        {s: result_state(r) for s, r in cmp_.results.items()},
        cmp_.table1().to_csv(),  # text: NaN equals NaN
        cmp_.table2().to_csv(),
        cmp_.table3().to_csv(),
    )


def both(fn):
    """(fast, reference) results of `fn()`."""
    fast = fn()
    with reference_pass():
        slow = fn()
    return fast, slow


@settings(max_examples=60, deadline=None)
@given(
    recs=populations,
    k=st.integers(2, 5),
    constraints=st.sampled_from(CONSTRAINTS),
    scope=st.sampled_from(["cohort", "population"]),
    with_visits=st.booleans(),
    data=st.data(),
)
def test_completion_pass_equals_reference(recs, k, constraints, scope, with_visits, data):
    group = to_records(recs)
    n_cohort = data.draw(st.integers(1, group.n_patients)) if scope != "cohort" else group.n_patients
    cohort_ids = group.patient_ids[:n_cohort]
    fast, slow = both(
        lambda: anonymize(
            group, cohort_ids, k, scope=scope, constraints=constraints, complete=True, with_visits=with_visits
        )
    )
    assert result_state(fast) == result_state(slow)


@settings(max_examples=40, deadline=None)
@given(recs=populations, with_visits=st.booleans(), data=st.data())
def test_visit_support_equals_reference(recs, with_visits, data):
    group = to_records(recs)
    patients = np.arange(data.draw(st.integers(1, group.n_patients)))
    visits = np.arange(group.visit_ptr[len(patients)])
    fast = visit_support(group, patients, within_visits=with_visits)
    slow = reference_support(group, visits, None, with_visits)
    assert fast[0].tolist() == slow[0].tolist() and fast[1].tolist() == slow[1].tolist()


@settings(max_examples=60, deadline=None)
@given(recs=populations, k=st.integers(1, 6), data=st.data())
def test_plain_figures_are_those_of_suppress_rare(recs, k, data):
    """Tables 1-3's "without generalization" figures, counted without building the records, equal
    `figures` of `suppress_rare`'s released group and extracted cohort."""
    group = to_records(recs)
    ids = data.draw(st.lists(st.sampled_from(group.patient_ids.tolist()), min_size=1, unique=True))
    plain_group, plain_cohort = suppress_rare(group, ids, k)
    assert _plain_figures(group, ids, k) == (figures(plain_group), figures(plain_cohort))


def test_plain_figures_on_the_sample(sample_dataset):
    population, cohort = sample_dataset.events, sample_dataset.group_records("cohort")
    for k in (2, 10):
        plain_group, plain_cohort = suppress_rare(population, cohort.patient_ids, k)
        assert _plain_figures(population, cohort.patient_ids, k) == (
            figures(plain_group),
            figures(plain_cohort),
        )


@pytest.fixture(scope="module")
def generated() -> dict[str, Records]:
    """A generated population of 1,500 records with its nested biobank and cohort."""
    from engine.synth.generator import generate

    data = generate(1_500, seed=3, labs=False)
    population = Records.from_frame(data.events)
    return {
        "population": population,
        "biobank": population.subset(data.biobank["patient_id"]),
        "cohort": population.subset(data.cohort["patient_id"]),
    }


@pytest.mark.parametrize("k", [2, 4, 9])
@pytest.mark.parametrize("with_visits", [False, True], ids=["records", "visits"])
@pytest.mark.parametrize("constraints", ["phecode", "icd9:3-digit", "none"])
def test_generated_population_equals_reference(generated, k, with_visits, constraints):
    fast, slow = both(
        lambda: compare_scopes(
            generated,
            generated["cohort"].patient_ids,
            k,
            constraints=constraints,
            complete=True,
            with_visits=with_visits,
        )
    )
    assert comparison_state(fast) == comparison_state(slow)


@pytest.mark.parametrize(("k", "with_visits"), [(5, False), (11, True)])
def test_sample_equals_reference(sample_dataset, k, with_visits):
    groups = {"cohort": sample_dataset.group_records("cohort"), "population": sample_dataset.events}
    fast, slow = both(
        lambda: compare_scopes(
            groups, groups["cohort"].patient_ids, k, complete=True, with_visits=with_visits
        )
    )
    assert comparison_state(fast) == comparison_state(slow)
    assert fast.results["cohort"].release.loss["completion suppression rounds"] > 0
