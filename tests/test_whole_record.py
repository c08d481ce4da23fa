"""Issue 39, second bullet: the attacker who knows the whole record (which codes a record holds and
which it does not). The kernel equals the brute force (tests/reference_risk.py) on random small data,
original and released, both scopes; on the sample's top-10 codes it gives the flat-table figure."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engine import risk
from engine.adversary import WHOLE_RECORD_ADVERSARIES, Adversary
from tests.reference_risk import reference_distinguishability
from tests.test_risk_properties import MODES, SETTINGS, cases, tuning


@SETTINGS
@given(case=cases(), mode=st.sampled_from(MODES), cap=st.sampled_from([None, 1, 2, 4]))
def test_whole_record_equals_reference(case, mode, cap):
    """Original cohort against cohort and population, and the release (generalized items, suppressed
    events, repeats, released population) under both whole-record adversaries, capped or not."""
    pop, cohort, release = case
    for cands in (cohort, pop):
        with tuning(mode):
            got = risk.distinguishability(
                cohort, cands, "whole_record", risk.Matching(count_repeats=True, cap=cap)
            )
        want = reference_distinguishability(cohort, cands, "whole_record")
        assert got.tolist() == [w if cap is None else min(w, cap) for w in want]
    with tuning(mode):
        got_rel = risk.release_all_adversaries(release.with_visits(True), pop, WHOLE_RECORD_ADVERSARIES)
    for adv in WHOLE_RECORD_ADVERSARIES:
        cands = risk.candidates_for(adv, release.records, pop, release.population)
        want = reference_distinguishability(
            release.records, cands, "whole_record", item_codes=release.item_codes
        )
        assert got_rel[adv].tolist() == want, adv
        assert risk.verify(release, adv, 2, pop).ok == all(d >= 2 for d in want)


@SETTINGS
@given(case=cases())
def test_whole_record_never_more_than_all_visits(case):
    """Knowing also what a record lacks never leaves more candidates than knowing what it holds."""
    pop, cohort, _ = case
    for cands in (cohort, pop):
        whole = risk.distinguishability(cohort, cands, "whole_record")
        papers = risk.distinguishability(cohort, cands, "all_visits")
        assert (whole <= papers).all()
    assert (risk.distinguishability(cohort, cohort, "whole_record") >= 1).all()  # a record matches itself


def test_sample_top10_flat_table_figure(sample_dataset):
    """The issue's figure: on the sample cohort restricted to its 10 most frequent codes, 42% of the
    records are below k = 5 for the whole-record attacker, 1.3% for the papers' (all codes known)."""
    cohort = sample_dataset.events.subset(sample_dataset.group_ids("cohort"))
    held = np.asarray(cohort.patient_item_sets.sum(axis=0)).ravel()
    top = cohort.items[np.argsort(-held, kind="stable")[:10]]
    top10 = cohort.keep_events(np.isin(cohort.items[cohort.event_item], top))
    whole = risk.original_distinguishability(top10, Adversary("cohort", "whole_record"))
    papers = risk.original_distinguishability(top10, Adversary("cohort", "all_visits"))
    assert round(float(np.mean(whole < 5)), 3) == 0.421
    assert round(float(np.mean(papers < 5)), 3) == 0.013


def test_a_release_that_shows_no_code_is_verified_under_the_whole_record(sample_dataset):
    """Every code suppressed: every record shows the empty set, as does every population patient
    projected onto the release's columns (none). It failed when the vocabulary the release kept of its
    dropped codes counted as columns (tests/test_page_report.py's 'Suppress all' release)."""
    from engine.release import Release

    cohort = sample_dataset.group_records("cohort")
    empty = Release("suppress all", cohort.keep_events(np.zeros(cohort.n_events, dtype=bool)))
    for adv in WHOLE_RECORD_ADVERSARIES:
        v = risk.verify(empty, adv, 5, sample_dataset.events)
        assert v.ok and int(v.distinguishability.min()) >= cohort.n_patients


@SETTINGS
@given(case=cases(), n_shards=st.integers(1, 4))
def test_whole_record_sharded_equals_in_process(case, n_shards):
    """`risk --shards` under whole-record knowledge: class sizes counted shard by shard add up."""
    import tempfile

    from engine.scale import shards

    pop, cohort, release = case
    with tempfile.TemporaryDirectory() as d:
        paths = shards.write_shards(pop, d, n_shards)
        for targets, codes in ((cohort, None), (release.records, release.item_codes)):
            m = risk.Matching(item_codes=codes)
            want = risk.distinguishability(targets, pop, "whole_record", m)
            assert (
                shards.sharded_distinguishability(targets, paths, "whole_record", m).tolist() == want.tolist()
            )


def test_an_empty_record_on_shards_matches_only_patients_showing_nothing(tmp_path):
    """The kind of counterexample hypothesis found (sharded [3, 3, 3] against [3, 3, 0]): a record left
    with no code matches only the patients who show no column (here c, whose 401 no record shows),
    shard by shard too, not every patient of a shard."""
    import pandas as pd

    from engine.records import Records
    from engine.scale import shards

    frame = pd.DataFrame(
        {"patient_id": ["a", "b", "c", "d"], "visit": [1, 1, 1, 1], "code": ["250", "250", "401", "250"]}
    )
    pop = Records.from_frame(frame)
    targets = pop.keep_events(np.array([True, True, False, False]))  # c's and d's only code suppressed
    paths = shards.write_shards(pop, tmp_path, 2)
    want = risk.distinguishability(targets, pop, "whole_record")
    assert want.tolist() == [3, 3, 1, 1]
    assert shards.sharded_distinguishability(targets, paths, "whole_record").tolist() == [3, 3, 1, 1]
