"""The Release as the arbiter reads it (engine/release.py): its export structure, its fingerprint,
the construction invariant against the source cohort, and reading an export back."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import risk
from engine.adversary import ALL_ADVERSARIES, Adversary
from engine.records import Records
from engine.release import Release, ReleaseInvariantError, release_from_frames, set_item_label

G = set_item_label(["401.0", "401.1"])
ITEM_CODES = {G: frozenset({"401.0", "401.1"})}


def frame(rows, cols=("patient_id", "visit", "code")) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(cols))


COHORT = Records.from_frame(
    frame(
        [
            ("a", 1, "401.0"),
            ("a", 1, "250"),
            ("a", 2, "401.1"),
            ("b", 1, "401.1"),
            ("b", 2, "250"),
            ("c", 1, "272"),
        ]
    )
)


def released(rows) -> Records:
    return Records.from_frame(frame(rows))


# --------------------------------------------------------------------------------- invariant
def test_invariant_accepts_a_release_that_stands_for_its_cohort():
    rel = Release("ok", released([("a", 1, G), ("a", 1, "250"), ("a", 2, G), ("b", 2, "250")]), ITEM_CODES)
    checked = rel.checked(COHORT)
    assert checked.source is COHORT
    Release("ok", rel.records, ITEM_CODES, source=COHORT, shows_visits=True)


def test_invariant_refuses_a_patient_outside_the_cohort():
    """Issue 12, finding 2: a release can never contain a patient outside the cohort."""
    rel = Release("outside", released([("a", 1, "250"), ("zz", 1, "250")]))
    with pytest.raises(ReleaseInvariantError, match=r"not in the cohort, e\.g\. zz"):
        rel.checked(COHORT)
    assert issubclass(ReleaseInvariantError, ValueError)


def test_invariant_refuses_an_item_for_a_code_the_patient_never_had():
    rel = Release("invented", released([("c", 1, "272"), ("c", 1, "250")]))
    with pytest.raises(ReleaseInvariantError, match="'250' in visit 1 of patient c"):
        rel.checked(COHORT)
    # a generalized item needs one of its codes in the patient's visit: c had neither 401.0 nor 401.1
    with pytest.raises(ReleaseInvariantError):
        Release("gen", released([("c", 1, G)]), ITEM_CODES, source=COHORT)


def test_invariant_is_checked_within_the_visit():
    """b had 250 in visit 2 only: 250 released in b's visit 1 moves a code between visits."""
    rel = Release("moved", released([("b", 1, "250")]))
    with pytest.raises(ReleaseInvariantError, match="in that visit"):
        rel.checked(COHORT)
    # and a visit the patient never had
    with pytest.raises(ReleaseInvariantError):
        Release("new visit", released([("b", 7, "250")]), source=COHORT)


def test_invariant_follows_replace():
    rel = Release("ok", released([("a", 1, "250")]), source=COHORT)
    with pytest.raises(ReleaseInvariantError):
        dataclasses.replace(rel, records=released([("c", 1, "250")]))


def test_shows_visits_needs_visits():
    no_visits = Records.from_frame(frame([("a", "250")], ("patient_id", "code")))
    with pytest.raises(ValueError, match="no visits to show"):
        Release("x", no_visits, shows_visits=True)


# --------------------------------------------------------------------------- export structure
REL = Release(
    "x",
    released([("a", 1, G), ("a", 1, "250"), ("a", 2, G), ("a", 2, G), ("b", 2, "250")]),
    ITEM_CODES,
)


def test_exported_frame_without_visits_is_one_row_per_patient_item():
    out = REL.exported_frame()
    assert list(out.columns) == ["patient_id", "code"]
    assert out.values.tolist() == [["a", G], ["a", "250"], ["b", "250"]]


def test_exported_frame_with_visits_is_one_row_per_visit_item():
    out = REL.with_visits(True).exported_frame()
    assert list(out.columns) == ["patient_id", "visit", "code"]
    assert out.astype(str).values.tolist() == [
        ["a", "1", G],
        ["a", "1", "250"],
        ["a", "2", G],
        ["b", "2", "250"],
    ]


def test_exported_frame_with_repeats_is_one_row_per_occurrence():
    rep = dataclasses.replace(REL, counts_repeats=True)
    assert rep.exported_frame()["code"].tolist() == [G, "250", G, G, "250"]


def test_exported_frame_of_age_pairs_writes_code_and_age():
    recs = Records.from_frame(frame([("a", "401|[30-34]"), ("a", "250.00|41")], ("patient_id", "code")))
    rel = Release("LDA", recs, counts_repeats=True, age_pairs=True)
    out = rel.exported_frame()
    assert out.values.tolist() == [["a", "401", "[30-34]"], ["a", "250.00", "41"]]
    back = release_from_frames(out, rel.exported_code_map())
    assert back.age_pairs and back.counts_repeats and back.fingerprint == rel.fingerprint


def test_fingerprint_is_what_is_written():
    """Two releases that write the same files share a fingerprint; the structure changes it."""
    other_visits = dataclasses.replace(
        REL, records=released([("a", 5, G), ("a", 6, "250"), ("b", 9, "250")]), params={"p": 1}
    )
    assert other_visits.fingerprint == REL.fingerprint
    assert REL.with_visits(True).fingerprint != REL.fingerprint
    assert other_visits.with_visits(True).fingerprint != REL.with_visits(True).fingerprint
    wider = dataclasses.replace(REL, item_codes={G: frozenset({"401.0", "401.1", "401.9"})})
    assert wider.fingerprint != REL.fingerprint
    assert REL.with_visits(False) is REL


def test_code_map_of_the_export_lists_present_items_only():
    rel = Release(
        "x", REL.records.keep_events(REL.records.event_item != REL.records.item_index([G])[0]), ITEM_CODES
    )
    assert rel.exported_code_map()["released_item"].tolist() == ["250"]


# ------------------------------------------------------------------------------- read back
def test_release_from_frames_reads_the_structure_back():
    shown = REL.with_visits(True)
    back = release_from_frames(shown.exported_frame(), shown.exported_code_map())
    assert back.shows_visits and not back.counts_repeats
    assert back.fingerprint == shown.fingerprint
    hidden = release_from_frames(REL.exported_frame(), REL.exported_code_map())
    assert not hidden.shows_visits and hidden.fingerprint == REL.fingerprint


VISITS = st.lists(
    st.lists(st.sampled_from(["250", "272", "401.0", "401.1", G]), min_size=1, max_size=3),
    min_size=1,
    max_size=3,
)


@settings(max_examples=40, deadline=None)
@given(patients=st.lists(VISITS, min_size=1, max_size=8))
def test_exported_release_with_visits_reads_back_to_the_same_verification(patients):
    rows = [
        (f"p{i}", v, c) for i, visits in enumerate(patients) for v, codes in enumerate(visits) for c in codes
    ]
    rel = Release("x", released(rows), ITEM_CODES, shows_visits=True)
    back = release_from_frames(rel.exported_frame(), rel.exported_code_map())
    assert back.fingerprint == rel.fingerprint
    for adv in ALL_ADVERSARIES:
        if adv.scope == "cohort":
            a, b = risk.verify(rel, adv, 2), risk.verify(back, adv, 2)
            assert a.distinguishability.tolist() == b.distinguishability.tolist()
            assert a.release_fingerprint == b.release_fingerprint


def test_verification_carries_the_release_fingerprint():
    v = risk.verify(REL, Adversary("cohort", "single_visit"), 2)
    assert v.release_fingerprint == REL.fingerprint
    assert np.array_equal(v.patient_ids, REL.records.patient_ids)


def _suppressed_in_one_visit_only() -> tuple[Records, Release]:
    """P1's 250.00 is removed from visit 1 but kept in visit 2; a file of one set per patient still
    shows it, so an attacker who knows visit 1 ({401.1, 250.00}) finds P1 alone."""
    rows = [
        ("P1", 1, "401.1"),
        ("P1", 1, "250.00"),
        ("P1", 2, "250.00"),
        ("P1", 2, "272.4"),
        ("P2", 1, "401.1"),
        ("P3", 1, "401.1"),
        ("P5", 1, "250.00"),
        ("P5", 1, "272.4"),
    ]
    cohort = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))
    drop = (cohort.patient_ids[cohort.event_patient] == "P1") & (cohort.event_visit == 0)
    drop &= cohort.items[cohort.event_item] == "250.00"
    return cohort, Release("per-visit suppression", cohort.keep_events(~drop))


def test_a_code_suppressed_in_one_visit_but_kept_in_another_is_seen_by_the_arbiter():
    """H2's finding: without visits, the released visit alone understates what a single-visit
    attacker can use. With the release's source the arbiter takes each original visit's codes that
    stay visible anywhere in the target's record."""
    cohort, release = _suppressed_in_one_visit_only()
    adv = Adversary("cohort", "single_visit")
    blind = risk.verify(release, adv, 2)  # no source: the released visits are the known sets
    assert blind.ok
    seen = risk.verify(release.checked(cohort), adv, 2)
    assert not seen.ok
    assert seen.failing["patient_id"].tolist() == ["P1"]
    assert seen.failing["distinguishability"].tolist() == [1]
    # with visits shown the attacker must find both codes in one released visit, and none holds both:
    # {401.1} is shared by P1-P3 and {250.00} by P1 and P5
    shown = risk.verify(release.checked(cohort).with_visits(True), adv, 2)
    assert shown.ok and shown.distinguishability.tolist() == [2, 3, 3, 2]


def test_content_fingerprint_covers_what_the_export_fingerprint_does_not():
    """Caches of what is computed on a release key on `content_fingerprint` (ui.fingerprints.release_key):
    two releases exporting the same rows differ in it when their suppressions or sources differ."""
    records = released([("a", 1, "250"), ("b", 1, "401.1")])
    base = Release("m", records)
    censored = Release("m", records, suppressed=frame([("a", "272")], ("patient_id", "code")))
    with_source = Release("m", records, source=COHORT)
    assert base.fingerprint == censored.fingerprint == with_source.fingerprint
    keys = {base.content_fingerprint, censored.content_fingerprint, with_source.content_fingerprint}
    assert len(keys) == 3
    assert (
        Release("m", released([("a", 1, "250"), ("b", 1, "401.1")])).content_fingerprint
        == base.content_fingerprint
    )
