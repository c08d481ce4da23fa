"""The compiled walk (engine/scale/trie.py, issue 24) equals the plain reference (tests/reference_risk.py)
and the kernels it replaces for capped counts (`risk._SubsetCounter`, the vectorized walk).

Hypothesis on random small cohorts with up to 24 codes and visits of up to 9 (deep tries, nodes with many
children: both ways of meeting a node's children), capped and full counts, both knowledges, repeats,
generalized items of a release, within-visit matching, 1 or 3 threads, the compiled walk's buffers
started at one element (every table, array and stack grows) and each way of meeting a node's children
(bitmasks, merge, search) forced; then the shipped sample under the four
adversaries and a synthetic population against the vectorized walk."""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import risk
from engine.adversary import ALL_ADVERSARIES
from engine.records import Records
from engine.release import Release, set_item_label
from engine.scale import trie
from engine.synth.generator import generate
from tests.reference_risk import reference_distinguishability

CODES = [f"{c:03d}" for c in range(250, 274)]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextlib.contextmanager
def compiled(
    kernel: str = "auto",
    tiny: bool = False,
    parts: int | None = None,
    search: int | None = None,
    masks: int | None = None,
):
    """`kernel` "auto" (the compiled walk for capped counts) or "trie" (for full counts too); `tiny`:
    the compiled walk's node arrays, table and stack start at one element; `parts`: root parts per
    thread; `search`: 0 searches every node's children for each remaining atom, a large value merges
    (where no mask serves); `masks`: how many of the most common ranks' nodes meet the candidate's atoms
    as bitmasks (0: none; 3: a few, the others merged or searched; 64: every node here)."""
    saved = (
        risk._KERNEL,
        trie._SIZES,
        trie._PARTS_PER_THREAD,
        trie._SEARCH,
        trie._MASKED,
    )
    risk._KERNEL = kernel
    if masks is not None:
        trie._MASKED = masks
    if tiny:
        trie._SIZES = (1, 1, 1)
    if parts is not None:
        trie._PARTS_PER_THREAD = parts
    if search is not None:
        trie._SEARCH = search
    try:
        yield
    finally:
        (
            risk._KERNEL,
            trie._SIZES,
            trie._PARTS_PER_THREAD,
            trie._SEARCH,
            trie._MASKED,
        ) = saved


@st.composite
def populations(draw) -> Records:
    n = draw(st.integers(1, 16))
    codes = CODES[: draw(st.integers(2, len(CODES)))]
    rows = []
    for p in range(n):
        for v in range(draw(st.integers(1, 3))):
            for c in draw(st.lists(st.sampled_from(codes), min_size=1, max_size=9)):
                rows.append((f"p{p}", v, c))
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))


@st.composite
def cases(draw):
    """A population, a cohort drawn from it, and a release of the cohort: some codes grouped into
    set-valued items, some events suppressed, repeats counted or not."""
    pop = draw(populations())
    picks = draw(
        st.lists(st.integers(0, pop.n_patients - 1), min_size=1, max_size=pop.n_patients, unique=True)
    )
    cohort = pop.take(np.array(sorted(picks)))
    groups = draw(
        st.lists(st.lists(st.sampled_from(CODES[:8]), min_size=2, max_size=3, unique=True), max_size=2)
    )
    mapping: dict[str, str] = {}
    item_codes: dict[str, frozenset[str]] = {}
    for g in groups:
        free = [c for c in g if c not in mapping]
        if len(free) >= 2:
            label = set_item_label(free)
            item_codes[label] = frozenset(free)
            mapping.update(dict.fromkeys(free, label))
    keep = np.array(draw(st.lists(st.booleans(), min_size=cohort.n_events, max_size=cohort.n_events)))
    kept = cohort.keep_events(keep | (np.arange(cohort.n_events) % 3 == 0))
    released = kept.recode([mapping.get(str(x), str(x)) for x in kept.items[kept.event_item]])
    release = Release("test", released, item_codes=item_codes, counts_repeats=draw(st.booleans()))
    return pop, cohort, release


KNOWLEDGES = (("single_visit", False), ("all_visits", False), ("single_visit", True))


@SETTINGS
@given(
    case=cases(),
    cap=st.one_of(st.none(), st.integers(1, 6)),
    threads=st.sampled_from([1, 3]),
    tiny=st.booleans(),
    parts=st.sampled_from([None, 1]),
    search=st.sampled_from([None, 0, 10**6]),
    masks=st.sampled_from([None, 0, 3, 64]),
)
def test_compiled_walk_equals_the_reference(case, cap, threads, tiny, parts, search, masks):
    """min(distinguishability, cap) exactly (full counts with no cap), for the original cohort against
    the population and for the release (its items' codes, its repeats), every knowledge."""
    pop, cohort, release = case
    for knowledge, within in KNOWLEDGES:
        for targets, cands, codes, repeats in (
            (cohort, pop, None, True),
            (cohort, cohort, None, False),
            (release.records, pop, release.item_codes, release.counts_repeats),
        ):
            matching = risk.Matching(
                item_codes=codes, count_repeats=repeats, within_visits=within, threads=threads, cap=cap
            )
            with (
                compiled("trie" if cap is None else "auto", tiny, parts, search),
                risk.record_kernels() as ran,
            ):
                got = risk.distinguishability(targets, cands, knowledge, matching=matching)
            want = reference_distinguishability(
                targets, cands, knowledge, item_codes=codes, count_repeats=repeats, within_visits=within
            )
            full = len(cands.patient_ids)
            assert got.tolist() == [min(w, cap or full) for w in want], (knowledge, within, ran)
            capped = "" if cap is None else f", counts capped at {cap}"
            assert ran[0] in ("compiled walk" + capped, "posting lengths" + capped), ran


@pytest.fixture(scope="module")
def sample_groups(sample_dataset) -> tuple[Records, Records]:
    return sample_dataset.group_records("cohort"), sample_dataset.group_records("population")


@pytest.mark.parametrize("cap", [1, 2, 3, 5, 8, 11])
def test_capped_counts_on_the_sample_equal_full_counts_capped(sample_groups, cap) -> None:
    """The shipped sample under the four adversaries: the compiled walk's capped counts equal the full
    counts (the index and the vectorized walk, as `_kernel` chooses) capped, with 1 and 2 threads."""
    cohort, population = sample_groups
    full = risk.all_adversaries(cohort, population)
    for threads in (1, 2):
        with risk.record_kernels() as ran:
            got = risk.all_adversaries(cohort, population, risk.Matching(threads=threads, cap=cap))
        assert all(k.startswith("compiled walk") for k in ran), ran
        for adv in ALL_ADVERSARIES:
            assert got[adv].tolist() == np.minimum(full[adv], cap).tolist(), (adv, threads)


def test_full_counts_on_the_sample_equal_the_other_kernels(sample_groups) -> None:
    """Forced for full counts ("trie"), the compiled walk gives what the index and the vectorized walk
    give, within visits too."""
    cohort, population = sample_groups
    for within in (False, True):
        matching = risk.Matching(within_visits=within)
        want = risk.all_adversaries(cohort, population, matching)
        with compiled("trie"):
            got = risk.all_adversaries(cohort, population, matching)
        for adv in ALL_ADVERSARIES:
            assert got[adv].tolist() == want[adv].tolist(), (adv, within)


def test_capped_compiled_walk_equals_the_vectorized_walk() -> None:
    """A 4,000-patient synthetic population against itself: the compiled walk and the vectorized walk
    (`_KERNEL = "walk"`, the capped kernel before issue 24) give the same capped counts."""
    data = generate(4000, seed=11, labs=False)
    pop = Records.from_frame(data.events[["patient_id", "visit", "code"]])
    for knowledge, within in KNOWLEDGES:
        for cap in (2, 5):
            matching = risk.Matching(within_visits=within, cap=cap)
            with compiled("walk"):
                want = risk.distinguishability(pop, pop, knowledge, matching)
            got = risk.distinguishability(pop, pop, knowledge, matching)
            assert got.tolist() == want.tolist(), (knowledge, within, cap)
            assert (got >= 1).all()  # every record is its own candidate


def test_count_rows_steps_fall_with_the_cap() -> None:
    """The walk drops a set once decided: fewer steps at a lower cap, the same counts capped."""
    data = generate(1500, seed=3, labs=False)
    pop = Records.from_frame(data.events[["patient_id", "visit", "code"]])
    known, _ = risk.known_sets(pop, "single_visit")
    proj = risk._projected_candidates(pop.items, pop, None, False)
    post, entry_atom = risk._atoms(proj, known)
    rows = np.flatnonzero(np.diff(known.indptr) >= 2)
    args = (post.ptr, post.rows, post.length, post.n_cand, known.indptr, entry_atom, rows, None)
    full, full_steps = trie.count_rows(*args, None, 1)
    capped, capped_steps = trie.count_rows(*args, 3, 2)
    assert capped.tolist() == np.minimum(full, 3).tolist()
    assert capped_steps < full_steps
