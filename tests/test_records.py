"""The data model: Records round-trips, orders deterministically, subsets and edits without loss."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.adversary import ALL_ADVERSARIES, Adversary
from engine.records import Records
from engine.release import Release, codes_of, set_item_label

CODES = ["250.00", "272.4", "401.1", "401.9", "724.2", "V45.81", "E849.0"]


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "patient_id": ["b", "a", "a", "b", "a", "c"],
            "visit": [2, 3, 1, 1, 1, 5],
            "code": ["401.1", "250.00", "272.4", "401.1", "272.4", "V45.81"],
            "age": [61, 45, 43, 60, 43, 30],
        }
    )


def test_order_rules_and_round_trip():
    r = Records.from_frame(_frame())
    assert list(r.patient_ids) == ["b", "a", "c"]  # first appearance
    assert r.patient_visits(1) == [["272.4", "272.4"], ["250.00"]]  # visits sorted, input order kept
    assert list(r.items) == sorted(set(_frame()["code"]))
    out = r.to_frame()
    key = ["patient_id", "visit", "code", "age"]
    assert sorted(map(tuple, out[key].to_numpy().tolist())) == sorted(
        map(tuple, _frame()[key].to_numpy().tolist())
    )
    assert (r.n_patients, r.n_visits, r.n_events) == (3, 5, 6)


def test_counts_and_sets():
    r = Records.from_frame(_frame())
    a = list(r.patient_ids).index("a")
    j = list(r.items).index("272.4")
    assert r.patient_item_counts[a, j] == 2
    assert r.patient_item_sets[a, j] == 1
    assert r.visit_item_sets.sum() == 5  # the repeated 272.4 in one visit counts once


def test_without_visits_one_visit_per_patient_and_repeats_kept():
    df = _frame().drop(columns=["visit", "age"])
    r = Records.from_frame(df)
    assert not r.has_visits and r.n_visits == r.n_patients
    assert r.patient_item_counts.sum() == len(df)
    assert "visit" not in r.to_frame().columns


def test_subset_keeps_given_order_and_names_missing():
    r = Records.from_frame(_frame())
    s = r.subset(["c", "b"])
    assert list(s.patient_ids) == ["c", "b"]
    assert s.patient_codes(1) == r.patient_codes(0)
    with pytest.raises(KeyError, match="not in these records"):
        r.subset(["a", "zz"])


def test_keep_events_keeps_empty_visits():
    r = Records.from_frame(_frame())
    mask = np.array([code != "401.1" for code in r.items[r.event_item]])
    k = r.keep_events(mask)
    assert k.n_visits == r.n_visits and k.n_events == r.n_events - 2
    assert k.patient_visits(0) == [[], []]


def test_fingerprint_tracks_content():
    a, b = Records.from_frame(_frame()), Records.from_frame(_frame())
    assert a.fingerprint == b.fingerprint
    c = Records.from_frame(_frame().assign(age=_frame()["age"] + 1))
    assert c.fingerprint != a.fingerprint


events = st.lists(
    st.tuples(st.sampled_from("pqrstu"), st.integers(1, 4), st.sampled_from(CODES)), min_size=1, max_size=40
)


@settings(max_examples=60, deadline=None)
@given(events)
def test_round_trip_property(rows):
    df = pd.DataFrame(rows, columns=["patient_id", "visit", "code"])
    r = Records.from_frame(df)
    back = r.to_frame()
    assert sorted(map(tuple, back.to_numpy().tolist())) == sorted(map(tuple, df.to_numpy().tolist()))
    ids = list(r.patient_ids)[::-1]
    s = r.subset(ids)
    for i, pid in enumerate(ids):
        assert s.patient_visits(i) == r.patient_visits(list(r.patient_ids).index(pid))


def test_release_labels_and_code_map():
    assert set_item_label(["401.1", "401.0", "401.1"]) == "{401.0,401.1}"
    assert set_item_label(["401.1"]) == "401.1"
    item = "{401.0,401.1}"
    rel = Release(
        "m",
        Records.from_frame(pd.DataFrame({"patient_id": ["a", "b"], "code": [item, "250.00"]})),
        item_codes={item: frozenset({"401.0", "401.1"})},
    )
    assert codes_of("250.00", rel.item_codes) == {"250.00"}
    cm = rel.code_map()
    assert cm.to_dict("records") == [
        {"released_item": "250.00", "original_code": "250.00"},
        {"released_item": item, "original_code": "401.0"},
        {"released_item": item, "original_code": "401.1"},
    ]


def test_adversaries_described_and_validated():
    assert len({a.describe() for a in ALL_ADVERSARIES}) == 4
    with pytest.raises(ValueError, match="scope"):
        Adversary("institution", "single_visit")


def test_keep_events_with_empty_visits_anywhere():
    r = Records.from_frame(_frame())
    # drop everything, then keep nothing of an already empty record: trailing empty visits are fine
    none = r.keep_events(np.zeros(r.n_events, dtype=bool))
    assert none.n_events == 0 and none.n_visits == r.n_visits
    again = none.keep_events(np.zeros(0, dtype=bool))
    assert again.n_visits == r.n_visits and again.patient_visits(2) == [[]]
    last = r.keep_events(np.arange(r.n_events) < r.n_events - 1)  # empties the last visit
    assert last.patient_visits(2) == [[]] and last.patient_codes(0) == r.patient_codes(0)
    with pytest.raises(ValueError, match="mask"):
        r.keep_events(np.ones(3, dtype=bool))


def test_large_set_labels_are_short_and_unique():
    many = [f"250.{i:02d}" for i in range(40)]
    label = set_item_label(many)
    assert label.startswith("{250.00,250.01,250.02,…+37}#") and len(label) < 40
    assert set_item_label(reversed(many)) == label  # order does not matter
    assert set_item_label(many[:-1]) != label  # a different set gets a different label
    assert set_item_label(many[:8]) == "{" + ",".join(many[:8]) + "}"


def test_relabel_merges_items_and_keeps_events():
    r = Records.from_frame(_frame())
    labels = ["{272.4,401.1}" if c in ("272.4", "401.1") else c for c in r.items]
    m = r.relabel(labels)
    assert list(m.items) == ["250.00", "V45.81", "{272.4,401.1}"]
    assert m.n_events == r.n_events and m.patient_visits(0) == [["{272.4,401.1}"], ["{272.4,401.1}"]]
    assert (m.to_frame()["code"].to_numpy() == np.asarray(labels, dtype=object)[r.event_item]).all()
    with pytest.raises(ValueError, match="labels"):
        r.relabel(["x"])


def _records_by_rules(df: pd.DataFrame) -> list[tuple[str, list[tuple[object, list[str], list[int]]]]]:
    """The module docstring's ordering rules, row by row in plain Python: patients by first
    appearance, visits by key (numeric or text), events of a visit in input order."""
    numeric = pd.api.types.is_numeric_dtype(df["visit"])
    out: dict[str, dict[object, list[int]]] = {}
    for i, (pid, visit) in enumerate(zip(df["patient_id"].astype(str), df["visit"], strict=True)):
        out.setdefault(pid, {}).setdefault(visit, []).append(i)
    return [
        (
            pid,
            [
                (v, [str(df["code"][i]) for i in rows], [int(df["age"][i]) for i in rows])
                for v, rows in sorted(visits.items(), key=lambda kv: kv[0] if numeric else str(kv[0]))
            ],
        )
        for pid, visits in out.items()
    ]


labelled = st.lists(
    st.tuples(
        st.sampled_from(["p", "q", "r10", "r9", "Ω", "s t"]),
        st.integers(-3, 40),
        st.sampled_from(CODES),
        st.integers(0, 99),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(labelled, st.booleans(), st.booleans())
def test_from_frame_follows_the_ordering_rules(rows, text_visits, arrow_text):
    """Issue 36: `from_frame` factorizes columns and sorts one combined key (the paper-scale load);
    its records are the ordering rules' exactly, for text or numeric visits, object or Arrow text."""
    df = pd.DataFrame(rows, columns=["patient_id", "visit", "code", "age"])
    if text_visits:  # sorted as text: "10" before "9", "-3" before "0"
        df["visit"] = df["visit"].astype(str)
    dtype = "str" if arrow_text else object
    df = df.astype({"patient_id": dtype, "code": dtype})
    r = Records.from_frame(df)
    assert list(r.items) == sorted(set(df["code"]))
    got = [
        (
            str(r.patient_ids[p]),
            [
                (
                    r.visit_ids[v],
                    [str(x) for x in r.items[r.event_item[r.event_ptr[v] : r.event_ptr[v + 1]]]],
                    [int(a) for a in r.event_age[r.event_ptr[v] : r.event_ptr[v + 1]]],
                )
                for v in range(r.visit_ptr[p], r.visit_ptr[p + 1])
            ],
        )
        for p in range(r.n_patients)
    ]
    assert got == _records_by_rules(df)
    given = Records.from_frame(df, items=CODES)  # a fixed vocabulary: the same events under its indexes
    assert list(given.items) == CODES
    assert [str(x) for x in given.items[given.event_item]] == [str(x) for x in r.items[r.event_item]]
