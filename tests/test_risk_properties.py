"""Property tests: the fast kernel (engine/risk.py) equals the plain reference (tests/reference_risk.py)
on random small cohorts, for all four adversaries, with repeats, generalized items, suppressed events
and released populations. Each case runs with the kernel's default tuning and with a tuning that
forces each path (bitmap AND, pairs with key search, a mix in tiny chunks)."""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import risk
from engine.adversary import ALL_ADVERSARIES
from engine.records import Records
from engine.release import Release, set_item_label
from tests.reference_risk import reference_distinguishability

CODES = ["250", "272", "401", "724", "427.31", "810.03"]
MODES = ["default", "and", "pairs", "mixed", "walk", "walk-one"]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextlib.contextmanager
def tuning(mode: str):
    """`default` leaves the kernel as shipped; `and` gives every atom a bitmap and counts every set by
    AND-ing them; `pairs` gives no atom a bitmap (pairs and key search only); `mixed` gives bitmaps to
    atoms held by 3 or more candidates and expands pairs in tiny chunks (these three force the index,
    `_Intersector`, when it serves the call); `walk` and `walk-one` force the trie walk
    (`_SubsetCounter`), in tiny chunks with the sets of common atoms counted apart, or in one chunk."""
    names = (
        "_PAIR_CHUNK",
        "_PAIR_WEIGHT",
        "_AND_CHUNK_WORDS",
        "_AND_FULL_COLUMNS",
        "_BITMAP_MIN_POSTING",
        "_BITMAP_ALL_BYTES",
        "_KERNEL",
        "_WALK_CHUNK",
        "_COMMON_SHARE",
    )
    saved = {n: getattr(risk, n) for n in names}
    if mode in ("and", "pairs", "mixed"):
        risk._KERNEL = "index"
    if mode == "and":
        risk._BITMAP_MIN_POSTING, risk._PAIR_WEIGHT, risk._AND_CHUNK_WORDS, risk._AND_FULL_COLUMNS = (
            1,
            10**9,
            1,
            1,
        )
    elif mode == "pairs":
        risk._BITMAP_MIN_POSTING, risk._BITMAP_ALL_BYTES, risk._PAIR_CHUNK = 10**9, 0, 3
    elif mode == "mixed":
        risk._BITMAP_MIN_POSTING, risk._BITMAP_ALL_BYTES, risk._PAIR_WEIGHT, risk._PAIR_CHUNK = 3, 0, 1, 2
    elif mode == "walk":  # the trie walk in chunks of 1-3 candidates, sets of common atoms apart
        risk._KERNEL, risk._WALK_CHUNK, risk._COMMON_SHARE = "walk", 3, 0.3
    elif mode == "walk-one":  # the trie walk in one chunk, no set counted apart
        risk._KERNEL, risk._WALK_CHUNK, risk._COMMON_SHARE = "walk", 1 << 30, 2.0
    try:
        yield
    finally:
        for n, v in saved.items():
            setattr(risk, n, v)


@st.composite
def populations(draw, max_patients: int = 14) -> Records:
    n = draw(st.integers(1, max_patients))
    rows = []
    for p in range(n):
        for v in range(draw(st.integers(1, 3))):
            for c in draw(st.lists(st.sampled_from(CODES), min_size=1, max_size=5)):
                rows.append((f"p{p}", v, c))
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))


@st.composite
def cases(draw):
    """A population, a cohort drawn from it, and a release of the cohort (and maybe the population)."""
    pop = draw(populations())
    picks = draw(
        st.lists(st.integers(0, pop.n_patients - 1), min_size=1, max_size=pop.n_patients, unique=True)
    )
    cohort = pop.take(np.array(sorted(picks)))
    # generalization: some codes grouped into set-valued items
    groups = draw(st.lists(st.lists(st.sampled_from(CODES), min_size=2, max_size=3, unique=True), max_size=2))
    mapping: dict[str, str] = {}
    item_codes: dict[str, frozenset[str]] = {}
    for g in groups:
        free = [c for c in g if c not in mapping]
        if len(free) >= 2:
            label = set_item_label(free)
            item_codes[label] = frozenset(free)
            mapping.update(dict.fromkeys(free, label))

    def released(recs: Records) -> Records:
        keep = np.array(draw(st.lists(st.booleans(), min_size=recs.n_events, max_size=recs.n_events)))
        kept = recs.keep_events(keep | (np.arange(recs.n_events) % 3 == 0))  # suppress some events
        labels = [mapping.get(str(x), str(x)) for x in kept.items[kept.event_item]]
        return kept.recode(labels)

    rel_cohort = released(cohort)
    rel_pop = released(pop) if draw(st.booleans()) else None
    repeats = draw(st.booleans())
    release = Release("test", rel_cohort, item_codes=item_codes, population=rel_pop, counts_repeats=repeats)
    return pop, cohort, release


@SETTINGS
@given(case=cases(), mode=st.sampled_from(MODES))
def test_original_equals_reference_all_adversaries(case, mode):
    pop, cohort, _ = case
    for repeats in (False, True):
        with tuning(mode):
            got = risk.all_adversaries(cohort, pop, matching=risk.Matching(count_repeats=repeats))
        for adv in ALL_ADVERSARIES:
            cands = pop if adv.scope == "population" else cohort
            want = reference_distinguishability(cohort, cands, adv.knowledge, count_repeats=repeats)
            assert got[adv].tolist() == want, (adv, repeats)


@SETTINGS
@given(case=cases(), mode=st.sampled_from(MODES))
def test_release_equals_reference_all_adversaries(case, mode):
    """Generalized items, suppressed events, repeats and released populations, read from the release."""
    pop, _, release = case
    with tuning(mode):
        got = risk.release_all_adversaries(release, pop)
    for adv in ALL_ADVERSARIES:
        cands = risk.candidates_for(adv, release.records, pop, release.population)
        want = reference_distinguishability(
            release.records,
            cands,
            adv.knowledge,
            item_codes=release.item_codes,
            count_repeats=release.counts_repeats,
        )
        assert got[adv].tolist() == want, adv
        v = risk.verify(release, adv, 2, pop)
        assert v.ok == all(d >= 2 for d in want)
        assert len(v.failing) == sum(d < 2 for d in want)


@SETTINGS
@given(case=cases(), mode=st.sampled_from(MODES))
def test_within_visits_equals_reference(case, mode):
    """A release that shows its visits: a candidate is consistent when one of its visits holds every
    known item (counted as distinct patients), for the original data and the release, both scopes."""
    pop, cohort, release = case
    shown = release.with_visits(True)
    with tuning(mode):
        got_orig = risk.distinguishability(
            cohort, pop, "single_visit", matching=risk.Matching(within_visits=True)
        )
        got_rel = risk.release_all_adversaries(shown, pop)
    want = reference_distinguishability(cohort, pop, "single_visit", within_visits=True)
    assert got_orig.tolist() == want
    for adv in ALL_ADVERSARIES:
        cands = risk.candidates_for(adv, shown.records, pop, shown.population)
        want = reference_distinguishability(
            shown.records,
            cands,
            adv.knowledge,
            item_codes=shown.item_codes,
            count_repeats=shown.counts_repeats,
            within_visits=True,
        )
        assert got_rel[adv].tolist() == want, adv
        # within visits never finds more candidates than the whole record
        assert (got_rel[adv] <= risk.release_all_adversaries(release, pop)[adv]).all()


@SETTINGS
@given(case=cases())
def test_dedup_and_chunking_do_not_change_results(case):
    """The same records twice as many times: every distinguishability doubles (cohort scope)."""
    pop, _, _ = case
    doubled = Records.from_frame(
        pd.concat([pop.to_frame(), pop.to_frame().assign(patient_id=lambda f: f["patient_id"] + "b")])
    )
    for knowledge, within in (("single_visit", False), ("all_visits", False), ("single_visit", True)):
        with tuning("mixed"):
            once = risk.distinguishability(pop, pop, knowledge, matching=risk.Matching(within_visits=within))
            twice = risk.distinguishability(
                doubled, doubled, knowledge, matching=risk.Matching(within_visits=within)
            )
        assert twice.tolist() == (2 * np.concatenate([once, once])).tolist()


@SETTINGS
@given(case=cases())
def test_riskiest_patterns_cover_every_record(case):
    pop, cohort, _ = case
    for knowledge in ("single_visit", "all_visits"):
        dis = risk.distinguishability(cohort, pop, knowledge)
        table = risk.riskiest_patterns(cohort, pop, knowledge, n=10_000)
        assert table["records"].sum() == cohort.n_patients
        per_value = table.groupby("distinguishability")["records"].sum()
        values, counts = np.unique(dis, return_counts=True)
        assert per_value.to_dict() == dict(zip(values.tolist(), counts.tolist(), strict=True))


@SETTINGS
@given(
    case=cases(),
    mode=st.sampled_from(MODES),
    cap=st.integers(1, 6),
    threads=st.sampled_from([1, 3]),
)
def test_capped_counts_equal_the_reference_capped(case, mode, cap, threads):
    """`cap` (issue 15): min(distinguishability, cap) exactly, for both knowledges, repeats,
    generalized items of a release and within-visit matching, whatever the kernel and thread count
    (in mode `walk` the candidates come in chunks of 1-3, so sets are dropped between rounds)."""
    pop, cohort, release = case
    for knowledge, within in (("single_visit", False), ("all_visits", False), ("single_visit", True)):
        for targets, cands, codes, repeats in (
            (cohort, pop, None, True),
            (release.records, pop, release.item_codes, release.counts_repeats),
        ):
            with tuning(mode):
                got = risk.distinguishability(
                    targets,
                    cands,
                    knowledge,
                    matching=risk.Matching(
                        item_codes=codes,
                        count_repeats=repeats,
                        within_visits=within,
                        threads=threads,
                        cap=cap,
                    ),
                )
            want = reference_distinguishability(
                targets, cands, knowledge, item_codes=codes, count_repeats=repeats, within_visits=within
            )
            assert got.tolist() == [min(w, cap) for w in want], (knowledge, within)
