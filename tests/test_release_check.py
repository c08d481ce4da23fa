"""The release's construction invariant on integer units (issue 24, engine/release.py
`check_invariant`) against the text-keyed check it replaced (tests/reference_release.py): the same
verdict, and the same error type and message, on random cohorts and releases (visit labels of mixed
types, ids and labels holding the text check's separator, generalized items, patients outside the
cohort, codes moved between visits or invented, a release or a cohort without visits) and on the
sample's releases, broken ones included. And `Release.checked` checks a release once per cohort."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine.release as release_module
from engine.records import Records
from engine.release import Release, check_invariant
from tests.reference_release import reference_check_invariant

CODES = ["a", "b", "c", "d", "e"]
GROUPS = {"a": "{a,b}", "b": "{a,b}", "c": "{c,d}", "d": "{c,d}"}
ITEM_CODES = {"{a,b}": frozenset({"a", "b"}), "{c,d}": frozenset({"c", "d"}), "{x,e}": frozenset({"x", "e"})}
# visit labels whose texts meet across types (1, "1"; 1.0 is "1.0") or hold the separator "\x1f"
LABELS: list[Any] = [1, 2, "1", "2", 1.0, "2020-01-01", "c", "b\x1fc", "\x1f"]
PATIENTS = ["p", "q", "r", "a", "a\x1fb", "1"]


def outcome(fn: Callable[[], Any]) -> tuple[str, str]:
    """("ok", "") or (the error's type, its message)."""
    try:
        fn()
    except Exception as exc:  # the same error, whatever it is
        return type(exc).__name__, str(exc)
    return "ok", ""


def assert_same_verdict(release: Release, cohort: Records) -> tuple[str, str]:
    got = outcome(lambda: check_invariant(release, cohort))
    assert got == outcome(lambda: reference_check_invariant(release, cohort))
    return got


def records(rows: list[tuple], visits: bool) -> Records:
    cols = ["patient_id", "visit", "code"]
    frame = pd.DataFrame(rows, columns=cols).astype({"visit": object})
    return Records.from_frame(frame if visits else frame.drop(columns="visit"))


row = st.tuples(st.sampled_from(PATIENTS), st.sampled_from(LABELS), st.sampled_from(CODES))
edit = st.tuples(
    st.sampled_from(["keep", "drop", "patient", "visit", "code", "as text", "generalize"]),
    st.sampled_from([*PATIENTS, "zz"]),
    st.sampled_from(LABELS),
    st.sampled_from([*CODES, "{a,b}", "{c,d}", "{x,e}"]),
)


@given(
    cohort_rows=st.lists(row, min_size=1, max_size=14),
    edits=st.lists(edit, min_size=1, max_size=14),
    cohort_visits=st.booleans(),
    release_visits=st.booleans(),
    generalized=st.booleans(),
)
def test_the_check_equals_the_text_keyed_check(
    cohort_rows, edits, cohort_visits, release_visits, generalized
):
    """Each release row is a cohort row kept, dropped or edited (another patient, one outside the
    cohort, another visit label, the label as text, another code, a generalized item): valid and
    broken releases alike get the same verdict and message."""
    cohort = records(cohort_rows, cohort_visits)
    out = []
    for (p, v, c), (how, p2, v2, c2) in zip(cohort_rows, edits, strict=False):
        if how == "drop":
            continue
        new = {
            "keep": (p, v, c),
            "patient": (p2, v, c),
            "visit": (p, v2, c),
            "code": (p, v, c2),
            "as text": (p, str(v), c),
            "generalize": (p, v, GROUPS.get(c, c)),
        }[how]
        out.append(new)
    if not out:
        out = [cohort_rows[0]]
    rel = Release("m", records(out, release_visits), ITEM_CODES if generalized else {})
    assert_same_verdict(rel, cohort)


def test_the_separator_in_ids_and_labels():
    """Patient `a` visit `b\\x1fc` and patient `a\\x1fb` visit `c` join to one text in the text
    check: the integer check keeps that reading (same verdicts), and separates the pairs otherwise."""
    cohort = records([("a\x1fb", "c", "a"), ("a", "1", "b")], True)
    joined = Release("m", records([("a", "b\x1fc", "a")], True))  # found through the joined text
    assert assert_same_verdict(joined, cohort) == ("ok", "")
    other = Release("m", records([("a", "2", "a")], True))
    assert assert_same_verdict(other, cohort)[0] == "ReleaseInvariantError"
    plain = records([("p", 1, "a"), ("q", 2, "b")], True)
    assert assert_same_verdict(Release("m", records([("p", "1", "a")], True)), plain) == ("ok", "")
    assert assert_same_verdict(Release("m", records([("p", 2, "a")], True)), plain)[0] != "ok"


def test_the_sample_releases_and_broken_ones(sample_dataset):
    """GCCens, Heatherly and LDA releases of the sample and profiles-like releases (codes suppressed,
    generalized, visits kept or not) pass both checks; the same with one event moved to another
    visit, one patient outside the cohort, or an invented code fail both with the same message."""
    from engine.study.runs import CodeSelection, GCCensSettings, HeatherlySettings, LDASettings, RunInputs

    ds = sample_dataset
    cohort = ds.group_records("cohort")
    inputs = RunInputs(ds.group_records("population"), cohort)
    rng = np.random.default_rng(7)
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
        (HeatherlySettings(k=5).run_result(inputs).release, cohort),
        (lda.release(), lda.source_pairs()),
        (Release("kept", kept), cohort),
        (Release("generalized", generalized, item_codes), cohort),
        (Release("generalized, visits shown", generalized, item_codes, shows_visits=True), cohort),
    ]
    for rel, source in made:
        rel = Release(rel.method, rel.records, rel.item_codes, shows_visits=rel.shows_visits)
        assert assert_same_verdict(rel, source) == ("ok", "")
        f = rel.records.to_frame()
        broken = []
        if "visit" in f.columns:
            moved = f.copy()
            moved.loc[len(moved) // 2, "visit"] = -1
            broken.append(moved)
        outside = f.copy()
        outside.loc[3, "patient_id"] = "not a patient"
        invented = f.copy()
        invented.loc[len(invented) - 1, "code"] = "999.99"
        broken += [outside, invented]
        for frame in broken:
            bad = Release(rel.method, Records.from_frame(frame), rel.item_codes)
            assert assert_same_verdict(bad, source)[0] == "ReleaseInvariantError"


def test_checked_checks_once_per_cohort(monkeypatch):
    """Issue 24: a page and the study each asked `release.checked(cohort)` of one run, and each ran
    the whole check (0.36 s each on the sample under load). Now the second asking, and asking a
    release already made from that cohort, reuse the first check."""
    calls: list[int] = []
    real = release_module.check_invariant
    monkeypatch.setattr(release_module, "check_invariant", lambda r, c: calls.append(1) or real(r, c))
    cohort = records([("p", 1, "a"), ("q", 2, "b")], True)
    rel = Release("m", records([("p", 1, "a")], True))
    first = rel.checked(cohort)
    assert first.source is cohort and rel.source is None
    assert rel.checked(cohort) is first and first.checked(cohort) is first
    assert len(calls) == 1
    same = records([("p", 1, "a"), ("q", 2, "b")], True)  # another object, the same content (a worker's)
    assert rel.checked(same).source is same
    assert len(calls) == 1  # checked once per cohort content
    other = records([("p", 1, "a"), ("q", 2, "c")], True)  # other content: checked again
    assert rel.checked(other).source is other
    assert len(calls) == 2


def test_checked_still_refuses_every_time():
    cohort = records([("p", 1, "a")], True)
    rel = Release("m", records([("p", 1, "b")], True))
    for _ in range(2):
        with pytest.raises(release_module.ReleaseInvariantError, match="stand for no code"):
            rel.checked(cohort)
