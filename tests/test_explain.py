"""Why a record is at risk and what would fix it (`engine.estimate.explain`, issues 27 and 35).

The property: for every record below k of a random small cohort, under each of the four adversaries,
the suggested change applied to the release as a method would (each generalized category recoded in
EVERY record, each suppressed code removed from the record) and counted again by the one arbiter,
`engine.risk.release_distinguishability`, gives that record distinguishability >= k (and the figure
the explanation states, and the cost it states); the subset said to single it out has fewer than k
candidates and no code of it can be left out (brute force over Python sets).

Issue 35 finding 5: the change was checked on its record alone with the released item standing for
every code of its category, which no release does: "generalize 746.83 to 746.8" in one record leaves
it unique against an attacker who knows 746.83 while every other record keeps its specific code.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine import risk
from engine.adversary import ALL_ADVERSARIES, Adversary
from engine.estimate import explain
from engine.records import Records
from engine.release import Release

# codes sharing ICD-9-CM 3-digit codes (250, 401, 272, 724) and one with no finer code than its own
CODES = ["250.00", "250.01", "250.02", "401.1", "401.9", "272.0", "272.4", "724.2", "724.5", "042"]
SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def data(draw) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(cohort events, population events): the population holds the cohort and a few more patients."""
    n_cohort = draw(st.integers(2, 8))
    n_extra = draw(st.integers(0, 5))
    rows = []
    for p in range(n_cohort + n_extra):
        for v in range(draw(st.integers(1, 3))):
            for c in draw(st.lists(st.sampled_from(CODES), min_size=1, max_size=3, unique=True)):
                rows.append((f"P{p}", f"v{v}", c))
    frame = pd.DataFrame(rows, columns=["patient_id", "visit", "code"])
    cohort = frame[frame["patient_id"].isin([f"P{p}" for p in range(n_cohort)])]
    return cohort.reset_index(drop=True), frame


def support(records: dict[str, set[str]], codes) -> int:
    return sum(1 for held in records.values() if set(codes) <= held)


def released(cohort: Records, e: explain.Explanation) -> Release:
    """The release with `e`'s change applied as a method would: every code a generalization recodes
    becomes `<category>*` in EVERY record (the item stands for exactly those codes), every suppressed
    code leaves the record (all its visits). Independent of `explain`'s own bookkeeping."""
    labels = cohort.items.astype(str).astype(object)
    item_codes: dict[str, frozenset[str]] = {}
    for ch in e.changes:
        if ch.action == explain.GENERALIZE:
            codes = frozenset(ch.codes)
            labels[np.isin(labels, list(codes))] = f"{ch.to}*"
            item_codes[f"{ch.to}*"] = codes | item_codes.get(f"{ch.to}*", frozenset())
    gone = [ch.held[0] for ch in e.changes if ch.action == explain.SUPPRESS]
    code = cohort.items.astype(str)[cohort.event_item]
    drop = (cohort.event_patient == e.row) & np.isin(code, gone)
    return Release("explain", cohort.keep_events(~drop).relabel(labels), item_codes, source=cohort)


def check(
    cohort_frame: pd.DataFrame, pop_frame: pd.DataFrame, adversary: Adversary, k: int, concepts=None
) -> int:
    """The property (module docstring); `concepts`: a CDM's hierarchy (tests/test_explain_cdm.py)."""
    cohort = Records.from_frame(cohort_frame)
    population = Records.from_frame(pop_frame)
    dis = risk.original_distinguishability(cohort, adversary, population)
    out = explain.explain_records(cohort, adversary, k, population, concepts=concepts)
    assert [e.row for e in out] == np.flatnonzero(dis < k).tolist()
    pool = cohort_frame if adversary.scope == "cohort" else pop_frame
    held = pool.groupby("patient_id")["code"].agg(set).to_dict()
    for e in out:
        assert e.distinguishability == dis[e.row]
        assert support(held, e.known_set) == e.distinguishability  # the riskiest known set
        assert set(e.singling_out) <= set(e.known_set)
        assert support(held, e.singling_out) == e.singling_out_support < k
        for c in e.singling_out:  # minimal: no code can be left out
            assert support(held, [x for x in e.singling_out if x != c]) >= k
        if not e.fixable:
            assert len(held) < k
            continue
        check_fix(cohort, population, adversary, e)
    return len(out)


def check_fix(cohort: Records, population: Records, adversary: Adversary, e: explain.Explanation) -> None:
    """`e`'s change, applied to the whole release, brings its record to k by `engine.risk`, with the
    figure and the cost stated."""
    assert e.verified
    check_cost(cohort.to_frame(), e)
    release = released(cohort, e)
    if e.removes_record:  # every code suppressed: nothing of the record is released
        assert "leaves the release" in e.change_text()
        assert release.records.patient_codes(e.row) == []
        return
    after = risk.release_distinguishability(release, adversary, population)
    value = int(after[release.records.index_of([e.patient_id])[0]])
    assert value >= e.k, (e.row, e.change_text(), value)
    assert value == e.distinguishability_after


def check_cost(cohort_frame: pd.DataFrame, e: explain.Explanation) -> None:
    """The cost stated is the release's: the record's suppressed pairs and events, and every record,
    pair and event of the cohort a generalization recodes (the suppressed ones lost, not recoded)."""
    gone = {ch.held[0] for ch in e.changes if ch.action == explain.SUPPRESS}
    recoded = {c for ch in e.changes if ch.action == explain.GENERALIZE for c in ch.codes}
    mine = cohort_frame["patient_id"] == e.patient_id
    lost = mine & cohort_frame["code"].isin(gone)
    moved = cohort_frame[cohort_frame["code"].isin(recoded) & ~lost]
    assert (e.pairs_lost, e.events_lost) == (len(gone), int(lost.sum()))
    assert e.records_recoded == moved["patient_id"].nunique()
    assert e.pairs_recoded == len(moved[["patient_id", "code"]].drop_duplicates())
    assert e.events_recoded == len(moved)


@given(d=data(), adv=st.sampled_from(ALL_ADVERSARIES), k=st.integers(2, 4))
@example(
    d=(
        pd.DataFrame({"patient_id": ["P0", "P1"], "visit": ["v0", "v0"], "code": ["250.01", "250.02"]}),
        pd.DataFrame(
            {
                "patient_id": ["P0", "P1", "P2"],
                "visit": ["v0", "v0", "v0"],
                "code": ["250.01", "250.02", "250.00"],
            }
        ),
    ),
    adv=Adversary("population", "single_visit"),
    k=3,
)  # 250 generalized in every record reaches 3 candidates, no pair lost (250.01 alone: 1)
@example(
    d=(
        pd.DataFrame(
            {"patient_id": ["P0", "P1", "P2"], "visit": ["v0"] * 3, "code": ["250.00", "250.00", "401.1"]}
        ),
        pd.DataFrame(
            {"patient_id": ["P0", "P1", "P2"], "visit": ["v0"] * 3, "code": ["250.00", "250.00", "401.1"]}
        ),
    ),
    adv=Adversary("cohort", "single_visit"),
    k=2,
)  # P2's only code suppressed: the record leaves the release (1 pair lost, no record recoded)
@example(
    d=(
        pd.DataFrame(
            {
                "patient_id": ["P0", "P0", "P0", "P1", "P2", "P3", "P4", "P5"],
                "visit": ["v0", "v1", "v1", "v0", "v0", "v0", "v0", "v0"],
                "code": ["250.01", "250.00", "724.5", "250.00", "250.00", "250.00", "250.00", "724.5"],
            }
        ),
    )
    * 2,
    adv=Adversary("cohort", "single_visit"),
    k=2,
)  # 250.00 suppressed stays known through P0's item 250* (for its 250.01): suppressing it fixes nothing
@example(
    d=(
        pd.DataFrame(
            {
                "patient_id": ["P0", "P1", "P1", "P1", "P1", "P2", "P3", "P4"],
                "visit": ["v0", "v0", "v1", "v1", "v1", "v0", "v0", "v0"],
                "code": ["401.1", "250.00", "250.00", "250.01", "250.02", "250.00", "250.00", "250.00"],
            }
        ),
    )
    * 2,
    adv=Adversary("cohort", "single_visit"),
    k=5,
)  # the riskiest visit's codes all suppressed, its category item still shown by the record's others
@SETTINGS
def test_suggested_change_brings_the_record_to_k(d, adv: Adversary, k: int) -> None:
    check(d[0], d[1], adv, k)


def test_generalizing_recodes_every_record_and_counts_them() -> None:
    pop = pd.DataFrame(
        {"patient_id": ["P0", "P1", "P2"], "visit": ["v0"] * 3, "code": ["250.01", "250.02", "250.00"]}
    )
    cohort = Records.from_frame(pop)
    (e,) = explain.explain_records(cohort, Adversary("cohort", "single_visit"), 3, rows=[0])
    assert [c.text() for c in e.changes] == [
        "generalize 250.01 to 250 in every record (every code under it: 250.00, 250.01, 250.02)"
    ]
    assert (e.pairs_lost, e.records_recoded, e.pairs_recoded, e.events_recoded) == (0, 3, 3, 3)
    assert e.distinguishability_after == 3 and e.verified
    assert e.singling_out == ("250.01",) and "diabetes" in e.descriptions["250.01"].lower()


def test_a_generalization_recoding_one_record_only_is_not_proposed_as_a_fix() -> None:
    """Issue 35 finding 5 on its own terms: recoding the record alone leaves it unique (the engine,
    given what the released item really stands for, agrees); the fix proposed recodes every record."""
    cohort = Records.from_frame(
        pd.DataFrame({"patient_id": ["P0", "P1", "P2"], "code": ["250.01", "250.02", "250.00"]})
    )
    alone = cohort.keep_events(np.ones(3, dtype=bool)).recode(["250*", "250.02", "250.00"])
    local = Release("local", alone, {"250*": frozenset({"250.01"})}, source=cohort)
    assert risk.release_distinguishability(local, Adversary("cohort", "all_visits"))[0] == 1
    (e,) = explain.explain_records(cohort, Adversary("cohort", "all_visits"), 3, rows=[0])
    after = risk.release_distinguishability(released(cohort, e), Adversary("cohort", "all_visits"))
    assert after[0] == e.distinguishability_after == 3


def test_the_sample_fixes_reach_k_once_applied_to_every_record(sample_dataset) -> None:
    """Issue 35 finding 5 on the sample (cohort / single visit, k = 5): record 16 holds 746.83 alone
    in a visit; "generalize 746.83 to 746.8" recoded that record only and left it unique. Its fix and
    those of every 100th record below k, applied to the whole release, re-verified by `engine.risk`."""
    cohort, population = sample_dataset.group_records("cohort"), sample_dataset.events
    adversary = Adversary("cohort", "single_visit")
    dis = risk.original_distinguishability(cohort, adversary, population)
    rows = [16, *np.flatnonzero(dis < 5)[::100].tolist()]
    out = explain.explain_records(cohort, adversary, 5, population, rows=rows, distinguishability=dis)
    (first, *_) = out
    assert first.known_set == ("746.83",) and first.distinguishability == 1
    assert first.change_text().startswith("generalize 746.83 to 746.8 in every record")
    assert first.distinguishability_after >= 5 and first.records_recoded >= 5
    for e in out:
        check_fix(cohort, population, adversary, e)


def test_unfixable_when_the_pool_is_smaller_than_k() -> None:
    cohort = Records.from_frame(pd.DataFrame({"patient_id": ["P0", "P1"], "code": ["401.1", "401.9"]}))
    out = explain.explain_records(cohort, Adversary("cohort", "all_visits"), 3)
    assert [e.fixable for e in out] == [False, False]
    assert "cannot be fixed" in out[0].change_text()


def test_frame_names_source_ids_only_when_asked() -> None:
    cohort = Records.from_frame(pd.DataFrame({"patient_id": ["MRN7", "MRN8"], "code": ["401.1", "401.9"]}))
    out = explain.explain_records(cohort, Adversary("cohort", "all_visits"), 2)
    assert "patient_id" not in explain.explanations_frame(out, with_ids=False).columns
    assert explain.explanations_frame(out, with_ids=True)["patient_id"].tolist() == ["MRN7", "MRN8"]


def test_k_must_be_whole() -> None:
    cohort = Records.from_frame(pd.DataFrame({"patient_id": ["P0"], "code": ["401.1"]}))
    with pytest.raises(ValueError, match="k must be"):
        explain.explain_records(cohort, Adversary("cohort", "all_visits"), 0)


@given(d=data(), adv=st.sampled_from(ALL_ADVERSARIES))
@SETTINGS
def test_one_preparation_serves_every_k_and_every_record(d, adv) -> None:
    """Issue 40, finding 7: the Risk page builds `explain.prepare` once per adversary and explains a
    record at each k from it (sessions share it). The explanations equal those built from nothing, at
    every k and in any order of k, so explaining never modifies what the preparation holds."""
    cohort, population = Records.from_frame(d[0]), Records.from_frame(d[1])
    ready = explain.prepare(cohort, adv, population)
    for k in (4, 2, 3):
        fresh = explain.explain_records(cohort, adv, k, population)
        assert explain.explain_records(cohort, adv, k, population, prepared=ready) == fresh
        for e in fresh:  # one record at a time, from the same preparation: its explanation alone
            assert explain.explain_records(cohort, adv, k, population, rows=[e.row], prepared=ready) == [e]
