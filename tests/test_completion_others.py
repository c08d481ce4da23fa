"""Heatherly's completion pass at the paper's scale (issue 36): the records that are not targets (the
biobank's or the population's others) are recoded after a merge round with their item sets derived
from the sets before it (`engine.anonymize.merged_sets`), not rebuilt from every event; the releases
equal those of the pool as it was (tests/reference_completion_pool.py) byte for byte."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.anonymize.merged_sets import merged_item_sets
from engine.anonymize.population import anonymize
from engine.records import Records
from tests.reference_completion_pool import reference_pool
from tests.test_population_fast import result_state
from tests.test_population_properties import CONSTRAINTS, to_records
from tests.test_population_properties import population as populations


def _sets_state(m) -> tuple:
    return (m.shape, m.dtype, m.indptr.tolist(), m.indices.tolist(), m.data.tolist())


@settings(max_examples=80, deadline=None)
@given(recs=populations, data=st.data())
@example(recs=[[["401.0", "401.1"]], [["401.1"], ["401.0"]]], data=None)
def test_merged_item_sets_are_those_of_the_recoded_records(recs, data):
    """After a random merge of representatives, the derived sets equal the recoded records' own."""
    group = to_records(recs)
    n = group.n_items
    if data is None:  # the example: both codes merged into the first, one record holds both
        comp = np.zeros(n, dtype=np.int64)
    else:
        comp = np.asarray(data.draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=n)))
    smallest = np.full(n, n, dtype=np.int64)
    np.minimum.at(smallest, comp, np.arange(n))
    item_of_code = smallest[comp]
    merged = np.bincount(comp, minlength=n)[comp] >= 2
    before = group.patient_item_sets
    derived = merged_item_sets(before, item_of_code, merged)
    recoded = Records(
        patient_ids=group.patient_ids,
        items=group.items,
        visit_ptr=group.visit_ptr,
        visit_ids=group.visit_ids,
        event_ptr=group.event_ptr,
        event_item=item_of_code[group.event_item].astype(np.int32),
        event_age=None,
        has_visits=group.has_visits,
    )
    assert _sets_state(derived) == _sets_state(recoded.patient_item_sets)
    assert _sets_state(before) == _sets_state(group.patient_item_sets)  # left as it was


@settings(max_examples=60, deadline=None)
@given(
    recs=populations,
    k=st.integers(2, 5),
    constraints=st.sampled_from(CONSTRAINTS),
    with_visits=st.booleans(),
    completion=st.sampled_from(["rarest", "phewas"]),
    data=st.data(),
)
def test_completion_pass_equals_the_pool_as_it_was(recs, k, constraints, with_visits, completion, data):
    group = to_records(recs)
    cohort_ids = group.patient_ids[: data.draw(st.integers(1, group.n_patients))]

    def run():
        return anonymize(
            group,
            cohort_ids,
            k,
            scope="population",
            constraints=constraints,
            complete=True,
            with_visits=with_visits,
            completion=completion,
        )

    fast = run()
    with reference_pool():
        slow = run()
    assert result_state(fast) == result_state(slow)


@pytest.mark.parametrize("completion", ["phewas", "rarest"])
@pytest.mark.parametrize("with_visits", [False, True], ids=["records", "visits"])
def test_sample_scopes_equal_the_pool_as_it_was(sample_dataset, completion, with_visits):
    from engine.study.runs import biobank_between

    population, cohort = sample_dataset.events, sample_dataset.group_records("cohort")
    biobank = biobank_between(sample_dataset, "population", "cohort", cohort, population)
    assert biobank is not None
    for scope, group in (("biobank", biobank), ("population", population)):

        def run(scope=scope, group=group):
            return anonymize(
                group,
                cohort.patient_ids,
                5,
                scope=scope,
                complete=True,
                with_visits=with_visits,
                completion=completion,
            )

        fast = run()
        with reference_pool():
            slow = run()
        assert result_state(fast) == result_state(slow), scope
        assert fast.release.loss["completion merges"] > 0  # merge rounds ran: the derived sets were used
        assert fast.verification.ok


def test_merge_rounds_do_not_rebuild_the_others_item_sets_from_their_events(sample_dataset, monkeypatch):
    """The finding: every merge round rebuilt the others' (record x item) sets from all their events
    (27,300 records at the sample's population scope, built 4 times; 1,360,991 at the paper's, 13
    times). Now they are built once, when the pass starts."""
    population, cohort = sample_dataset.events, sample_dataset.group_records("cohort")
    n_others = population.n_patients - cohort.n_patients
    built: list[int] = []
    original = Records.patient_item_counts.func

    def counting(self):
        if self.n_patients == n_others:
            built.append(self.n_events)
        return original(self)

    monkeypatch.setattr(Records, "patient_item_counts", property(counting))
    res = anonymize(population, cohort.patient_ids, 5, scope="population", complete=True, completion="phewas")
    assert res.release.loss["completion merges"] > 0
    assert len(built) == 1


@pytest.mark.parametrize("with_visits", [False, True], ids=["records", "visits"])
def test_the_others_index_is_built_once_per_merge_round(sample_dataset, monkeypatch, with_visits):
    """The finding (issue 36): every count of the others' supports rebuilt the risk engine's index of
    the others (their projection onto the release's items, `engine.risk._projected_candidates`),
    about 22 times a pass at the paper's population scope though the others change only in a merge
    round. Now it is built once per state of the others: never twice for the same records, and at
    most once per merge round and once at the start."""
    from engine import risk

    population, cohort = sample_dataset.events, sample_dataset.group_records("cohort")
    n_others = population.n_patients - cohort.n_patients
    projected: list[Records] = []
    original = risk._projected_candidates

    def counting(target_items, candidates, *args, **kwargs):
        if candidates.n_patients == n_others:
            projected.append(candidates)  # the records themselves: ids are not reused while kept
        return original(target_items, candidates, *args, **kwargs)

    monkeypatch.setattr(risk, "_projected_candidates", counting)
    res = anonymize(
        population,
        cohort.patient_ids,
        5,
        scope="population",
        complete=True,
        completion="phewas",
        with_visits=with_visits,
        verify_now=False,
    )
    loss = res.release.loss
    rounds = len(loss["completion visits below k by round"]) - 1  # the last one found none failing
    merge_rounds = rounds - loss["completion suppression rounds"]
    assert merge_rounds > 0
    assert len(projected) == len({id(r) for r in projected}), f"{len(projected)} builds"
    assert len(projected) <= merge_rounds + 1
