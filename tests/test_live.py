"""Issue 24 ("Live means live"): what a change of k or a page's opening reuses is what it would compute.

`risk.attacker_known_visits` is memoized per release content (it depends on neither k nor scope); the
biobank between cohort and population is the engine's rule (`engine.study.runs.biobank_between`).
Speed is measured in bench/ui.py, never here.
"""

from __future__ import annotations

import numpy as np

from engine import risk
from engine.adversary import Adversary
from engine.io.loaders import load_sample_checked
from engine.study.runs import HeatherlySettings, RunInputs, biobank_between


def _sample():
    ds = load_sample_checked().data
    return ds, ds.events, ds.group_records("cohort")


def test_attacker_known_visits_is_memoized_and_equal_to_the_computation() -> None:
    _ds, population, cohort = _sample()
    release = HeatherlySettings(k=4).run(RunInputs(population, cohort))
    first = risk.attacker_known_visits(release)
    assert first is not None
    assert risk.attacker_known_visits(release) is first  # memoized on the release's content
    fresh = risk._attacker_known_visits(release)
    assert fresh is not None and fresh.fingerprint == first.fingerprint
    for scope in ("cohort", "population"):
        adv = Adversary(scope, "single_visit")
        a, b = (risk.verify(release, adv, k, population) for k in (3, 9))
        assert np.array_equal(a.distinguishability, b.distinguishability)


def test_biobank_between_follows_the_rule() -> None:
    ds, population, cohort = _sample()
    got = biobank_between(ds, "population", "cohort", cohort, population)
    if "biobank" not in ds.groups:
        assert got is None
        return
    assert got is not None and got.fingerprint == ds.group_records("biobank").fingerprint
    assert biobank_between(ds, "biobank", "cohort", cohort, population) is None  # chosen as a group
    assert biobank_between(ds, "population", "cohort", population, population) is None  # not within


def test_gccens_from_one_preparation_equals_the_run() -> None:
    """The GCCens view prepares once per data and selection and makes every release from it
    (`release_of`): the same release as `run`, for both variants and two k."""
    from dataclasses import replace

    from engine.study.runs import CodeSelection, GCCensSettings

    _ds, population, cohort = _sample()
    inputs = RunInputs(population, cohort)
    base = GCCensSettings(k=3, codes=CodeSelection("top", top_n=12))
    prepared = base.prepare_input(inputs)
    for k in (3, 7):
        for variant in ("faithful", "targeted"):
            s = replace(base, k=k, variant=variant)
            made = s.release_of(prepared, cohort)
            assert made.content_fingerprint == s.run(inputs).content_fingerprint
