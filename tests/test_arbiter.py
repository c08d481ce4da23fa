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
