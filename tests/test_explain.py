"""Why a record is at risk and what would fix it (`engine.estimate.explain`, issue 27).

The property: for every record below k of a random small cohort, under each of the four adversaries,
applying the suggested change to that record only and counting again with `engine.risk` gives that
record distinguishability >= k (and the figure the explanation states); the subset said to single it
out has fewer than k candidates and no code of it can be left out (brute force over Python sets)."""

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


def check(cohort_frame: pd.DataFrame, pop_frame: pd.DataFrame, adversary: Adversary, k: int) -> int:
    cohort = Records.from_frame(cohort_frame)
    population = Records.from_frame(pop_frame)
    dis = risk.original_distinguishability(cohort, adversary, population)
    out = explain.explain_records(cohort, adversary, k, population)
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
        changed, item_codes = explain.apply_changes(cohort, e, population)
        target = Records.from_frame(changed)
        if adversary.scope == "cohort":
            cands = target
        else:
            others = pop_frame[pop_frame["patient_id"] != e.patient_id]
            cands = Records.from_frame(
                pd.concat([others, changed[changed["patient_id"] == e.patient_id]], ignore_index=True)
            )
        after = risk.distinguishability(
            target, cands, adversary.knowledge, risk.Matching(item_codes=item_codes)
        )
        if e.patient_id not in set(target.patient_ids.astype(str)):  # every code suppressed
            assert e.removes_record and "leaves the release" in e.change_text()
            continue
        value = int(after[target.index_of([e.patient_id])[0]])
        assert value >= k
        assert value == e.distinguishability_after
        assert e.pairs_lost == sum(1 for c in e.changes if c.action == explain.SUPPRESS)
    return len(out)


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
)  # generalizing 250.01 to 250 reaches 3 candidates: no pair lost
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
)  # P2's only code suppressed: the record leaves the release
@SETTINGS
def test_suggested_change_brings_the_record_to_k(d, adv: Adversary, k: int) -> None:
    check(d[0], d[1], adv, k)


def test_generalizing_is_preferred_to_suppressing() -> None:
    pop = pd.DataFrame(
        {"patient_id": ["P0", "P1", "P2"], "visit": ["v0"] * 3, "code": ["250.01", "250.02", "250.00"]}
    )
    cohort = Records.from_frame(pop)
    (e,) = explain.explain_records(cohort, Adversary("cohort", "single_visit"), 3, rows=[0])
    assert [c.text() for c in e.changes] == ["generalize 250.01 to 250"]
    assert e.pairs_lost == 0 and e.distinguishability_after == 3
    assert e.singling_out == ("250.01",) and "diabetes" in e.descriptions["250.01"].lower()


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
