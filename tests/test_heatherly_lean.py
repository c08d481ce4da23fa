"""ui.views.heatherly._lean (issue 24): the comparison a worker hands back holds the same content
as the engine's, without the released groups' derived arrays."""

from __future__ import annotations

import pickle

import numpy as np

from engine.anonymize.population import compare_scopes, scope_summary
from engine.io.loaders import load_sample_checked
from engine.study.runs import biobank_between


def test_lean_comparison_keeps_every_content_and_drops_derived_arrays() -> None:
    from ui.views.heatherly import _lean

    ds = load_sample_checked().data
    pop, coh = ds.events, ds.group_records("cohort")
    groups = {"cohort": coh, "population": pop}
    bio = biobank_between(ds, "population", "cohort", coh, pop)
    if bio is not None:
        groups["biobank"] = bio
    full = compare_scopes(groups, coh.patient_ids, 6, complete=True)
    lean = _lean(full)
    assert list(lean.results) == list(full.results)
    for scope, res in full.results.items():
        got = lean.results[scope]
        assert got.verification is res.verification
        assert got.release.fingerprint == res.release.fingerprint
        assert got.release.content_fingerprint == res.release.content_fingerprint
        assert got.released_group.fingerprint == res.released_group.fingerprint
        for f in ("patient_ids", "items", "visit_ptr", "event_ptr", "event_item"):
            np.testing.assert_array_equal(getattr(got.released_group, f), getattr(res.released_group, f))
        assert got.release.records.fingerprint == res.release.records.fingerprint
        for f in ("patient_ids", "items", "visit_ptr", "event_ptr", "event_item"):
            np.testing.assert_array_equal(getattr(got.release.records, f), getattr(res.release.records, f))
        if res.release.population is not None:
            assert got.release.population is got.released_group
    assert scope_summary(lean).equals(scope_summary(full))
    assert lean.table1().equals(full.table1()) and lean.table2().equals(full.table2())
    # fresh content hashes, derived again from the bare copies, agree with the kept ones
    res = lean.results["population"]
    again = type(res.released_group)(
        **{f: getattr(res.released_group, f) for f in res.released_group.__dataclass_fields__}
    )
    assert again.fingerprint == res.released_group.fingerprint
    assert len(pickle.dumps(lean)) < len(pickle.dumps(full))
