"""Issue 36: the explanation's counts at the paper's scale, on the candidates' inverted index.

- `risk.Postings.holding` (the candidates holding one atom of every group, capped or not) equals a
  brute force over Python sets, in chunks of any size, with and without masks, atom by atom or at once;
- `risk.distinguishability_among_holders` (the arbiter's recount run on the holders of the known
  sets only) equals the plain reference (tests/reference_risk.py) for both knowledges, repeats,
  generalized items of a release, within-visit matching and caps, whatever the share that makes a set
  "few" (down to every set counted on a part of its holders, where records fall back to the full count);
- the explanations (`engine.estimate.explain`) equal those of the counts before issue 36
  (tests/reference_support.py: Python frozensets, every arbiter count against every candidate), at
  any k, with the index's tuning forced to its small-data paths.
"""

from __future__ import annotations

import contextlib
from unittest import mock

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engine import risk
from engine.adversary import ALL_ADVERSARIES
from engine.estimate import explain
from engine.records import Records
from tests.reference_risk import reference_distinguishability
from tests.reference_support import ReferenceSupport
from tests.test_explain import data
from tests.test_risk_properties import SETTINGS, cases, populations


@contextlib.contextmanager
def holders_tuning(chunk: int, share: int):
    """`Postings.holding` in chunks from `chunk` candidates; a known set "few" below n / `share`
    candidates (at least `chunk`): share 1 with chunk 1 makes every set with a holder "many"."""
    with (
        mock.patch.object(risk, "_HOLDING_CHUNK", chunk),
        mock.patch.object(risk, "_HOLDERS_SHARE", share),
        mock.patch.object(risk, "_HOLDERS_MIN_POOL", 0),  # small pools too: the paths of 1.37 M
        mock.patch.object(risk, "_HOLDING_FEW", 4),
    ):
        yield


def brute_holding(pop: Records, groups: list[list[int]], members: dict[int, set[int]]) -> list[int]:
    held = [set(pop.items[pop.patient_item_sets[q].indices].astype(str)) for q in range(pop.n_patients)]
    names = pop.items.astype(str)

    def holds(q: int, atom: int) -> bool:
        if atom < pop.n_items:
            return names[atom] in held[q]
        return any(names[i] in held[q] for i in members[atom])

    return [q for q in range(pop.n_patients) if all(any(holds(q, a) for a in g) for g in groups)]


@SETTINGS
@given(
    pop=populations(),
    picks=st.data(),
    cap=st.none() | st.integers(1, 5),
    chunk=st.integers(1, 3),
    masks=st.booleans(),
    few=st.sampled_from([0, 1 << 20]),
)
def test_holding_equals_brute_force(pop, picks, cap, chunk, masks, few) -> None:
    """`few`: 0 filters the candidates atom by atom, 2**20 checks them against every further atom at
    once (`Postings._holds_all`)."""
    n = pop.n_items
    group_items = picks.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3, unique=True))
    post = risk.item_postings(pop, {"g": pop.items[group_items].astype(str).tolist()})
    members = {n: set(group_items)}
    groups = picks.draw(
        st.lists(st.lists(st.integers(0, n), min_size=0, max_size=3, unique=True), min_size=1, max_size=6)
    )
    want = brute_holding(pop, groups, members)
    cache: dict[int, np.ndarray] | None = {} if masks else None
    with (
        mock.patch.object(risk, "_HOLDING_CHUNK", chunk),
        mock.patch.object(risk, "_BITMAP_MIN_POSTING", 1),
        mock.patch.object(risk, "_HOLDING_FEW", few),
    ):
        got = post.holding([np.array(g, dtype=np.int64) for g in groups], cap, cache).tolist()
    assert got == sorted(got)
    if cap is None or len(want) < cap:
        assert got == want
    else:
        assert set(got) <= set(want) and len(got) >= cap


@SETTINGS
@given(
    case=cases(),
    cap=st.none() | st.integers(1, 6),
    chunk=st.integers(1, 3),
    share=st.sampled_from([1, 2, 4, 1 << 20]),
    built=st.booleans(),
)
def test_recount_among_holders_equals_the_reference(case, cap, chunk, share, built) -> None:
    pop, cohort, release = case
    for knowledge, within in (("single_visit", False), ("all_visits", False), ("single_visit", True)):
        for targets, cands, codes, repeats in (
            (cohort, pop, None, True),
            (cohort, pop, None, False),
            (release.records, pop, release.item_codes, release.counts_repeats),
        ):
            matching = risk.Matching(item_codes=codes, count_repeats=repeats, within_visits=within, cap=cap)
            postings = risk.item_postings(cands, {"x": ["250", "401"]}) if built else None
            with holders_tuning(chunk, share):
                got = risk.distinguishability_among_holders(targets, cands, knowledge, matching, postings)
            want = reference_distinguishability(
                targets, cands, knowledge, item_codes=codes, count_repeats=repeats, within_visits=within
            )
            assert got.tolist() == [w if cap is None else min(w, cap) for w in want], (knowledge, within)


@SETTINGS
@given(d=data(), adv=st.sampled_from(ALL_ADVERSARIES), chunk=st.integers(1, 3), share=st.sampled_from([1, 3]))
def test_explanations_equal_those_of_the_counts_before(d, adv, chunk, share) -> None:
    cohort, population = Records.from_frame(d[0]), Records.from_frame(d[1])
    with holders_tuning(chunk, share), mock.patch.object(risk, "_BITMAP_MIN_POSTING", 1):
        ready = explain.prepare(cohort, adv, population)
        new = {k: explain.explain_records(cohort, adv, k, population, prepared=ready) for k in (2, 3, 4)}
    full = risk.distinguishability
    with (
        mock.patch.object(explain, "_Support", ReferenceSupport),
        mock.patch.object(
            risk, "distinguishability_among_holders", lambda t, c, kn, m, p=None: full(t, c, kn, m)
        ),
    ):
        ready = explain.prepare(cohort, adv, population)
        old = {k: explain.explain_records(cohort, adv, k, population, prepared=ready) for k in (2, 3, 4)}
    assert new == old
