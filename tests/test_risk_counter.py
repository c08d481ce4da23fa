"""`engine.risk.KnownSetCounter` (issue 36): the candidate index prepared once and reused by every
count gives `count_known_sets`' counts and the brute force's (tests/reference_risk.py), whatever the
kernel, knowledge, within-visit matching, repeats, generalized items and cap, and however the known
sets are split across counts."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engine import risk
from tests.reference_risk import reference_distinguishability
from tests.test_risk_properties import MODES, SETTINGS, cases, tuning


@SETTINGS
@given(
    case=cases(),
    mode=st.sampled_from(MODES),
    cap=st.one_of(st.none(), st.integers(1, 6)),
    split=st.integers(0, 40),
)
def test_prepared_counter_equals_count_known_sets_and_the_reference(case, mode, cap, split):
    """One counter per (candidates, knowledge, matching) counts the known sets in two calls (split at
    `split`), then all of them again: each equals `count_known_sets` on the same rows, and the
    per-record minimum equals the brute force (capped at `cap`; whole-record knowledge, which the
    counter hands to `_whole_record_counts`, is checked against `count_known_sets` only)."""
    pop, cohort, release = case
    for knowledge, within in (
        ("single_visit", False),
        ("all_visits", False),
        ("single_visit", True),
        ("whole_record", False),
    ):
        for targets, cands, codes, repeats in (
            (cohort, pop, None, True),
            (release.records, pop, release.item_codes, release.counts_repeats),
        ):
            matching = risk.Matching(item_codes=codes, count_repeats=repeats, within_visits=within, cap=cap)
            known, owner = risk.known_sets(targets, knowledge, matching.count_repeats)
            at = min(split, known.shape[0])
            with tuning(mode):
                counter = risk.KnownSetCounter(targets.items, cands, knowledge, matching)
                parts = [counter.count(known[:at]), counter.count(known[at:])]
                again = counter.count(known)
                plain = risk.count_known_sets(targets.items, known, cands, knowledge, matching)
            got = np.concatenate(parts)
            assert got.tolist() == plain.tolist() == again.tolist(), (knowledge, within)
            if knowledge == "whole_record":  # its records are not the minimum of known sets
                continue
            per_record = risk.KnownSets(known, owner, got, targets.n_patients, cands.n_patients, cap)
            want = reference_distinguishability(
                targets, cands, knowledge, item_codes=codes, count_repeats=repeats, within_visits=within
            )
            full = [w if cap is None else min(w, cap) for w in want]
            assert per_record.per_record().tolist() == full, (knowledge, within)
