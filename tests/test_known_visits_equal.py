"""Issue 24 ("Live means live"): the integer-coded `risk._attacker_known_visits` against the
text-keyed merge it replaced (tests/reference_known_visits.py): the same `Records`, array by array
(patient order, visits and their labels, events and their order, items, dtypes), on random cohorts
and releases (generalized items standing for several codes, a code standing in several items,
suppressed codes, patients with nothing left or absent from the release, repeated codes in a visit,
numeric-looking id text, cohorts without visits) and on the shipped sample's releases of every method.
Speed is measured in bench/known_visits.py, never here."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import risk
from engine.records import Records
from engine.release import Release
from tests.reference_known_visits import reference_attacker_known_visits

ARRAYS = ("patient_ids", "items", "visit_ptr", "visit_ids", "event_ptr", "event_item")
CODES = ["a", "b", "c", "d", "e", "10", "010"]
# items a release may use instead of a code: groups, overlapping groups (b is in two), one whose
# other code no cohort has, and a numeric-looking code kept as itself
ITEM_CODES = {
    "{a,b}": frozenset({"a", "b"}),
    "{b,c}": frozenset({"b", "c"}),
    "{c,d}": frozenset({"c", "d"}),
    "{e,x}": frozenset({"e", "x"}),
    "{010,10}": frozenset({"10", "010"}),
}
GROUPS_OF = {c: [g for g, cs in ITEM_CODES.items() if c in cs] for c in CODES}
PATIENTS = ["p", "q", "1", "01", "1.0", "007", "7", "a"]
LABELS: list[Any] = [1, 2, 3, "1", "2020-01-01", 10]


def assert_same_records(got: Records | None, want: Records | None) -> None:
    """Equal arrays with equal dtypes; object arrays element by element, types included (a Python
    int and a numpy integer label compare equal but print and hash apart)."""
    assert (got is None) == (want is None)
    if got is None or want is None:
        return
    for name in ARRAYS:
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype, name
        assert a.shape == b.shape, name
        assert np.array_equal(a, b), name
        if a.dtype == object:
            assert [type(x) for x in a.tolist()] == [type(x) for x in b.tolist()], name
    assert (got.event_age is None) == (want.event_age is None)
    if got.event_age is not None and want.event_age is not None:
        assert np.array_equal(got.event_age, want.event_age)
    assert got.has_visits == want.has_visits
    assert got.fingerprint == want.fingerprint


def assert_equal_to_reference(release: Release) -> Records | None:
    got = risk._attacker_known_visits(release)
    assert_same_records(got, reference_attacker_known_visits(release))
    return got


def frame(rows: list[tuple], visits: bool) -> pd.DataFrame:
    f = pd.DataFrame(rows, columns=["patient_id", "visit", "code"]).astype({"visit": object})
    return f if visits else f.drop(columns="visit")


row = st.tuples(st.sampled_from(PATIENTS), st.sampled_from(LABELS), st.sampled_from(CODES))
# what becomes of a cohort event in the release: kept, suppressed, or one of its code's groups
fate = st.tuples(st.sampled_from(["keep", "suppress", "generalize"]), st.integers(0, 3))


@settings(derandomize=True, database=None, max_examples=400, deadline=None)
@given(
    cohort_rows=st.lists(row, min_size=0, max_size=24),
    fates=st.lists(fate, min_size=24, max_size=24),
    absent=st.sets(st.sampled_from(PATIENTS), max_size=3),
    cohort_visits=st.booleans(),
    release_visits=st.booleans(),
    extra_items=st.booleans(),
    shows_visits=st.booleans(),
)
def test_equal_to_the_text_keyed_merge(
    cohort_rows, fates, absent, cohort_visits, release_visits, extra_items, shows_visits
):
    """Each release row is a cohort row kept, dropped or generalized, patients in `absent` left out
    of the release; the vocabulary may hold items no event uses. Every valid release of the cohort
    gets the same known visits (None when the visits are shown)."""
    cohort = Records.from_frame(frame(cohort_rows, cohort_visits))
    out = []
    for (p, v, c), (how, g) in zip(cohort_rows, fates, strict=False):
        if how == "suppress" or p in absent:
            continue
        groups = GROUPS_OF[c]
        out.append((p, v, groups[g % len(groups)] if how == "generalize" and groups else c))
    used = {c for _, _, c in out}
    vocab = sorted(used | (set(ITEM_CODES) | {"b", "zz"} if extra_items else set()))
    records = Records.from_frame(frame(out, release_visits), items=vocab)
    shows = shows_visits and release_visits
    release = Release("m", records, dict(ITEM_CODES), shows_visits=shows, source=cohort)
    got = assert_equal_to_reference(release)
    assert (got is None) == shows


def test_nothing_left_and_no_source():
    """A release with no events at all (every patient with nothing left) gives an empty Records like
    the reference's; without a source both give None."""
    cohort = Records.from_frame(frame([("1", 1, "a"), ("01", 2, "b")], True))
    empty = Records.from_frame(frame([], True), items=["a"])
    got = assert_equal_to_reference(Release("m", empty, source=cohort))
    assert got is not None and got.n_patients == 0
    assert risk._attacker_known_visits(Release("m", cohort)) is None


def test_a_code_kept_in_another_visit_stays_known():
    """Patient 1 had `a` in visits 1 and 2; the release suppressed it in visit 2 only. One set per
    patient still shows `a`, so both original visits know it; patient 01's only code is gone."""
    cohort = Records.from_frame(frame([("1", 1, "a"), ("1", 2, "a"), ("1", 2, "b"), ("01", 1, "c")], True))
    released = Records.from_frame(frame([("1", 1, "a"), ("1", 2, "b")], True))
    got = assert_equal_to_reference(Release("m", released, source=cohort))
    assert got is not None
    assert got.patient_ids.tolist() == ["1"]
    assert got.patient_visits(0) == [["a"], ["a", "b"]]


def test_the_sample_releases(sample_dataset):
    """GCCens, Heatherly (cohort and population scope), PPE/UGACLIP and ACLIP, and LDA releases of the
    sample, and a release with codes suppressed and generalized by hand, give the same known visits."""
    from engine.study.runs import (
        CodeSelection,
        GCCensSettings,
        HeatherlySettings,
        LDASettings,
        ProfilesSettings,
        RunInputs,
    )

    ds = sample_dataset
    cohort = ds.group_records("cohort")
    inputs = RunInputs(ds.group_records("population"), cohort)
    rng = np.random.default_rng(11)
    kept = cohort.keep_events(rng.random(cohort.n_events) < 0.6)
    groups = np.array([f"{{{c[:3]}}}" if i % 3 else str(c) for i, c in enumerate(cohort.items)], dtype=object)
    generalized = kept.relabel(groups)
    item_codes = {
        str(g): frozenset(str(c) for c, x in zip(cohort.items, groups, strict=True) if x == g)
        for g in set(generalized.items.tolist())
        if str(g).startswith("{")
    }
    lda = LDASettings(k=5, codes=CodeSelection("top", 10), age_low=0, age_high=127).run_result(inputs)
    made = [
        (GCCensSettings(k=5, scope="cohort", codes=CodeSelection("paper")).run(inputs), cohort),
        (GCCensSettings(k=3, codes=CodeSelection("top", top_n=12)).run(inputs), cohort),
        (HeatherlySettings(k=4).run(inputs), cohort),
        (HeatherlySettings(k=10, scope="population").run(inputs), cohort),
        (ProfilesSettings(k=5).run(inputs), cohort),
        (ProfilesSettings(algorithm="ACLIP", k=3).run(inputs), cohort),
        (lda.release(), lda.source_pairs()),
        (Release("generalized", generalized, item_codes), cohort),
    ]
    for rel, source in made:
        rel = rel.with_visits(False)
        got = assert_equal_to_reference(rel if rel.source is source else rel.checked(source))
        assert got is not None and got.n_events > 0, rel.method
