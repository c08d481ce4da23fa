"""What a worker or a fan-out process hands back (issue 24; issue 38, engine/scale/pool.py): a pickled
`Records` keeps its content and content hash and leaves out what was derived from it
(`Records.__getstate__`), and the Heatherly comparison made with its scopes fanned out is the one
made in this process."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from engine.anonymize.population import compare_scopes, scope_summary
from engine.records import Records
from engine.scale import pool

_FIELDS = ("patient_ids", "items", "visit_ptr", "visit_ids", "event_ptr", "event_item", "event_age")


def _same_records(a: Records, b: Records) -> None:
    for f in _FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert (x is None) == (y is None), f
        if x is not None:
            np.testing.assert_array_equal(x, y, err_msg=f)
    assert a.has_visits == b.has_visits


@pytest.fixture(scope="module")
def groups(sample_groups) -> dict[str, Records]:
    return sample_groups


def test_a_pickled_records_leaves_out_derived_arrays_and_keeps_its_content(groups) -> None:
    r = groups["population"]
    derived = (r.patient_item_sets, r.visit_item_sets, r.event_patient, r.fingerprint)
    assert "patient_item_sets" in r.__dict__
    back = pickle.loads(pickle.dumps(r))
    assert "patient_item_sets" not in back.__dict__ and "event_patient" not in back.__dict__
    assert back.__dict__["fingerprint"] == r.fingerprint  # kept, not hashed again
    _same_records(back, r)
    assert (back.patient_item_sets != derived[0]).nnz == 0  # derived again, the same
    assert (back.visit_item_sets != derived[1]).nnz == 0
    np.testing.assert_array_equal(back.event_patient, derived[2])
    fresh = Records(**{f: getattr(back, f) for f in back.__dataclass_fields__})
    assert fresh.fingerprint == r.fingerprint
    assert len(pickle.dumps(r)) < 0.6 * len(pickle.dumps(r.__dict__))  # the arrays did not go


def _same_comparison(a, b) -> None:
    assert list(a.results) == list(b.results)
    for scope, res in b.results.items():
        got = a.results[scope]
        assert got.release.content_fingerprint == res.release.content_fingerprint
        _same_records(got.released_group, res.released_group)
        _same_records(got.release.records, res.release.records)
        np.testing.assert_array_equal(
            got.verification.distinguishability, res.verification.distinguishability
        )
        assert got.release.loss == res.release.loss
    assert scope_summary(a).equals(scope_summary(b))
    for table in ("table1", "table2", "table3"):
        assert getattr(a, table)().equals(getattr(b, table)())


@pytest.mark.parametrize("complete", [False, True])
def test_scopes_fanned_out_give_the_comparison_made_here(groups, complete: bool) -> None:
    coh = groups["cohort"]
    here = compare_scopes(groups, coh.patient_ids, 6, complete=complete)
    assert pool.fan_out_enabled()  # the comparison below is made in pool workers
    fanned = compare_scopes(groups, coh.patient_ids, 6, complete=complete, parallel=True)
    _same_comparison(fanned, here)
    _same_comparison(pickle.loads(pickle.dumps(fanned)), here)  # as a worker hands it back


def test_while_waiting_gets_the_cohorts_result_here_while_the_others_are_made(groups) -> None:
    import os

    coh = groups["cohort"]
    seen: list[tuple[int, str]] = []
    fanned = compare_scopes(
        groups,
        coh.patient_ids,
        7,
        parallel=True,
        while_waiting=lambda res: seen.append((os.getpid(), res.release.content_fingerprint)),
    )
    assert seen == [(os.getpid(), fanned.results["cohort"].release.content_fingerprint)]
    plain: list[object] = []
    compare_scopes(groups, coh.patient_ids, 7, while_waiting=plain.append)  # nothing to wait for
    assert plain == []


def test_a_release_checked_in_a_worker_is_not_checked_again_for_the_same_cohort_content(
    groups, monkeypatch
) -> None:
    import engine.release as rel
    from engine.anonymize.population import anonymize

    coh = groups["cohort"]
    res = anonymize(coh, coh.patient_ids, 5, scope="cohort")
    in_worker = res.release.checked(coh)
    back = pickle.loads(pickle.dumps(res.release))  # as a worker hands it back
    assert "_checked" not in back.__dict__ and back.__dict__["_checked_against"] == coh.fingerprint
    calls: list[int] = []
    real = rel.check_invariant
    monkeypatch.setattr(rel, "check_invariant", lambda r, c: calls.append(1) or real(r, c))
    same_content = pickle.loads(pickle.dumps(coh))  # another object, the same cohort
    here = back.checked(same_content)
    assert calls == [] and here.source is same_content
    assert here.fingerprint == in_worker.fingerprint
    assert here.content_fingerprint == in_worker.content_fingerprint  # the source's content is the same
    fresh = rel.Release(**{f: getattr(here, f) for f in here.__dataclass_fields__})  # nothing carried
    assert fresh.fingerprint == here.fingerprint and fresh.content_fingerprint == here.content_fingerprint
    calls.clear()  # (making `fresh` checked it)
    # another cohort's content: checked, and refused when the release does not stand for it
    other = coh.take(np.arange(coh.n_patients // 2))
    with pytest.raises(rel.ReleaseInvariantError):
        back.checked(other)
    assert calls == [1]
