"""The ledger read per file (issue 24, engine/study/ledger.py) against the ledger as it was
(tests/reference_ledger.py): the same linked records, candidate pool and combined release, the same
figure for every patient of a pair under all four adversaries, the same pairs on a ledger, and the
same error (message included) where `combine`'s invariant fails. Hypothesis (derandomized) on small
random populations with releases of codes (generalized items, repeats, visits shown or not, a source
or none, a released pool), LDA-like `code|age` releases and broken ones; LDA + GCCens made by the
methods; and the sample's three releases of the report (bench/report.py's study)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.adversary import ALL_ADVERSARIES, Adversary
from engine.records import Records
from engine.release import Release, ReleaseInvariantError
from engine.study.ledger import (
    LedgerRelease,
    PairCache,
    candidate_pool,
    combine,
    ledger,
    pair_distinguishability,
)
from tests.reference_ledger import (
    reference_candidate_pool,
    reference_combine,
    reference_ledger,
    reference_pair_distinguishability,
)

CODES = ["a", "b", "c", "d", "e"]
GROUPS = {"a": "{a,b}", "b": "{a,b}", "c": "{c,d}", "d": "{c,d}"}  # generalized items, e stays itself
KINDS = ("codes", "generalized", "pool", "lda", "lda, no source", "no source", "broken")


def population_of(rng: np.random.Generator, n: int) -> Records:
    """n patients, 1-3 visits (labels 1, 2, 3 or dates as text) of 1-3 codes each, an age per event."""
    dated = bool(rng.integers(0, 2))
    rows = []
    for p in range(n):
        for v in range(int(rng.integers(1, 4))):
            for c in rng.choice(CODES, size=int(rng.integers(1, 4))):
                visit: Any = f"2020-0{v + 1}-01" if dated else v + 1
                rows.append({"patient_id": f"P{p}", "visit": visit, "code": str(c), "age": int(40 + 3 * v)})
    return Records.from_frame(pd.DataFrame(rows))


def _kept(rng: np.random.Generator, r: Records, share: float = 0.7) -> Records:
    return r.keep_events(rng.random(r.n_events) < share)


def release_of(kind: str, rng: np.random.Generator, pop: Records, cohort: Records) -> Release:
    """A release of the given kind over `cohort` (the first patients of `pop`)."""
    repeats, shows = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
    if kind.startswith(
        "lda"
    ):  # items code|decade standing for the code|age pairs of the cohort in that decade
        f = cohort.to_frame()
        pairs = pd.DataFrame({"patient_id": f["patient_id"], "code": f["code"] + "|" + f["age"].astype(str)})
        source = Records.from_frame(pairs)
        kept = _kept(rng, source)
        labels = np.array([f"{c.split('|')[0]}|[{int(c.split('|')[1]) // 10 * 10}-]" for c in source.items])
        wide = bool(rng.integers(0, 2))
        recs = kept.relabel(labels) if wide else kept
        codes = {
            str(item): frozenset(str(c) for c, lab in zip(source.items, labels, strict=True) if lab == item)
            for item in recs.items
            if wide
        }
        rel = Release("LDA-like", recs, codes, counts_repeats=True, age_pairs=True)
        return rel if kind.endswith("no source") else rel.checked(source)
    recs = _kept(rng, cohort)
    codes: dict[str, frozenset[str]] = {}
    if kind in ("generalized", "pool"):
        labels = np.array([GROUPS.get(str(c), str(c)) for c in recs.items], dtype=object)
        codes = {g: frozenset(c for c, x in GROUPS.items() if x == g) for g in set(GROUPS.values())}
        recs = recs.relabel(labels)
        codes = {k: v for k, v in codes.items() if k in set(recs.items)}
    if kind == "broken":  # an item standing for a code the patient never had, or a patient unknown
        f = recs.to_frame()
        extra = {"patient_id": f"Q{int(rng.integers(0, 2))}" if rng.integers(0, 2) else "P0", "visit": 1}
        recs = Records.from_frame(pd.concat([f, pd.DataFrame([extra | {"code": "z", "age": 50}])]))
    pool = None
    if kind == "pool":  # a released population (Heatherly's DEMO_B / DEMO_S): the same generalization
        pool = _kept(rng, pop, 0.8)
        pool = pool.relabel([GROUPS.get(str(c), str(c)) for c in pool.items])
    rel = Release(kind, recs, codes, population=pool, counts_repeats=repeats, shows_visits=shows)
    return rel if kind in ("no source", "broken") else rel.checked(cohort)


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except ReleaseInvariantError as exc:
        return "error", str(exc)


def records_fields(r: Records) -> tuple:
    """Everything a Records holds, values and types (what `Records.from_frame` would have built)."""
    return (
        [(type(x), x) for x in r.patient_ids.tolist()],
        [(type(x), x) for x in r.items.tolist()],
        r.visit_ptr.dtype,
        r.visit_ptr.tolist(),
        [(type(x), x) for x in r.visit_ids.tolist()],
        r.event_ptr.dtype,
        r.event_ptr.tolist(),
        r.event_item.dtype,
        r.event_item.tolist(),
        None if r.event_age is None else r.event_age.tolist(),
        r.has_visits,
    )


def release_fields(rel: Release) -> tuple:
    return (
        records_fields(rel.records),
        sorted((k, sorted(v)) for k, v in rel.item_codes.items()),
        None if rel.source is None else records_fields(rel.source),
        rel.counts_repeats,
        rel.params,
        rel.method,
    )


def assert_same_as_reference(a: Release, b: Release, pop: Records, k: int) -> None:
    assert outcome(lambda: release_fields(combine(a, b, pop))) == outcome(
        lambda: release_fields(reference_combine(a, b, pop))
    )
    assert records_fields(candidate_pool(a, b, pop)) == records_fields(reference_candidate_pool(a, b, pop))
    cache = PairCache()  # shared over adversaries, as over a ledger's pairs
    for adv in ALL_ADVERSARIES:
        got = outcome(lambda adv=adv: pair_distinguishability(a, b, adv, pop, cache))
        want = outcome(lambda adv=adv: reference_pair_distinguishability(a, b, adv, pop))
        assert got == want, adv
        if got[0] == "ok":
            assert list(got[1]) == list(want[1])  # patients in the same order too


@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    n=st.integers(2, 9),
    kinds=st.tuples(st.sampled_from(KINDS), st.sampled_from(KINDS)),
    k=st.integers(2, 3),
)
def test_a_pair_read_per_file_equals_the_reference(seed, n, kinds, k):
    rng = np.random.default_rng(seed)
    pop = population_of(rng, n + 3)
    cohort = pop.take(np.arange(n))
    a, b = (release_of(kind, rng, pop, cohort) for kind in kinds)
    assert_same_as_reference(a, b, pop, k)


@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), n=st.integers(3, 8), adv=st.sampled_from(ALL_ADVERSARIES))
def test_a_ledger_of_three_equals_the_reference(seed, n, adv):
    """Three releases (one cache over the three pairs): the same pairs, figures and messages."""
    rng = np.random.default_rng(seed)
    pop = population_of(rng, n + 2)
    cohort = pop.take(np.arange(n))
    kinds = rng.choice([k for k in KINDS if k != "broken"], size=3)  # a pair that fails: test above
    held = [
        LedgerRelease("s", f"R{i}", "x", release_of(str(kind), rng, pop, cohort))
        for i, kind in enumerate(kinds)
    ]
    got = [(p.to_dict(), p.message()) for p in ledger(held, adv, 2, pop)]
    want = [(p.to_dict(), p.message()) for p in reference_ledger(held, adv, 2, pop)]
    assert got == want


@pytest.mark.parametrize("seed", [29, 3, 11])
def test_lda_and_gccens_made_by_the_methods_equal_the_reference(seed):
    from tests.test_ledger_lda import lda_and_gccens, world

    pop = world(seed)
    lda, gc = lda_and_gccens(pop)
    assert_same_as_reference(lda, gc, pop, 2)
    assert_same_as_reference(gc, lda, pop, 2)
    assert_same_as_reference(lda, lda, pop, 2)


def test_the_sample_report_ledger_equals_the_reference(sample_dataset):
    """bench/report.py's study: GCCens on the paper's codes, Heatherly DEMO_D and LDA on the top 10
    codes, cohort / single visit at k = 5 (the report's ledger), and one pair under the others."""
    from engine.study.runs import CodeSelection, GCCensSettings, HeatherlySettings, LDASettings, RunInputs

    ds = sample_dataset
    inputs = RunInputs(
        ds.group_records("population"), ds.group_records("cohort"), ds.group_records("biobank")
    )
    held = [
        LedgerRelease("s", name, "team", s.run(inputs))
        for name, s in [
            ("GCCens", GCCensSettings(k=5, scope="cohort", codes=CodeSelection("paper"))),
            ("Heatherly", HeatherlySettings(k=5)),
            ("LDA", LDASettings(k=5, codes=CodeSelection("top", 10), age_low=0, age_high=127)),
        ]
    ]
    adv, pop = Adversary("cohort", "single_visit"), inputs.population
    got = [(p.to_dict(), p.message()) for p in ledger(held, adv, 5, pop)]
    assert got == [(p.to_dict(), p.message()) for p in reference_ledger(held, adv, 5, pop)]
    gc, lda = held[0].release, held[2].release
    for other in (a for a in ALL_ADVERSARIES if a != adv):
        assert pair_distinguishability(gc, lda, other, pop) == reference_pair_distinguishability(
            gc, lda, other, pop
        )
