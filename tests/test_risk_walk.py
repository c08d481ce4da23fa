"""The trie walk of the risk kernel (`risk._SubsetCounter`, issue 15): each candidate enumerates the
known sets it contains. It must give exactly the index's (`risk._Intersector`) and the plain
reference's counts, on a synthetic population as well as on the hypothesis cases of
tests/test_risk_properties.py (modes `walk`, `walk-one`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine import risk
from engine.adversary import ALL_ADVERSARIES
from engine.records import Records
from engine.synth.generator import generate
from tests.reference_risk import reference_distinguishability
from tests.test_risk_properties import tuning


@pytest.fixture(scope="module")
def synthetic() -> tuple[Records, Records]:
    data = generate(1500, 3, labs=False)
    pop = Records.from_frame(data.events[["patient_id", "visit", "code"]])
    cohort = pop.subset(data.cohort["patient_id"].astype(str).to_numpy()[:200])
    return pop, cohort


@pytest.mark.parametrize("repeats", [False, True])
def test_walk_equals_index_on_a_synthetic_population(synthetic, repeats) -> None:
    """All four adversaries and within-visit matching: the walk (chunks of 1,000 held atoms, sets of
    common atoms counted apart over merged rows) and the index give the same counts."""
    pop, cohort = synthetic
    for adv in ALL_ADVERSARIES:
        cands = pop if adv.scope == "population" else cohort
        for within in (False, True) if adv.knowledge == "single_visit" else (False,):
            got = {}
            for mode in ("walk", "pairs"):
                with tuning(mode):
                    risk._WALK_CHUNK, risk._COMMON_SHARE = 1000, 0.01
                    got[mode] = risk.known_set_distinguishability(
                        cohort,
                        cands,
                        adv.knowledge,
                        matching=risk.Matching(count_repeats=repeats, within_visits=within, threads=2),
                    ).values
            assert got["walk"].tolist() == got["pairs"].tolist(), (adv, within)


def test_walk_equals_reference_on_a_synthetic_sample(synthetic) -> None:
    pop, _ = synthetic
    small_pop = pop.take(np.arange(300))
    small = small_pop.take(np.arange(0, 300, 7))
    for knowledge in ("single_visit", "all_visits"):
        with tuning("walk"):
            got = risk.distinguishability(
                small, small_pop, knowledge, matching=risk.Matching(count_repeats=True)
            )
        assert got.tolist() == reference_distinguishability(small, small_pop, knowledge, count_repeats=True)


def test_merge_rows_counts_equal_rows() -> None:
    # rows: {0,2}, {1}, {0,2}, {}, {1}, {0,1,2}
    ptr = np.array([0, 2, 3, 5, 5, 6, 9])
    cols = np.array([0, 2, 1, 0, 2, 1, 0, 1, 2])
    new_ptr, new_cols, weight = risk._merge_rows(ptr, cols, 3)
    rows = [tuple(new_cols[new_ptr[i] : new_ptr[i + 1]].tolist()) for i in range(len(new_ptr) - 1)]
    assert rows == [(0, 2), (1,), (0, 1, 2)]  # first appearance order, the empty row dropped
    assert weight.tolist() == [2, 2, 1]


def test_within_visits_uses_the_walk(monkeypatch) -> None:
    """Counting distinct patients over visits goes to the walk (the index expands a pair per visit);
    `_KERNEL` overrides the choice."""
    used: list[str] = []
    real = risk._kernel

    def spy(*a):
        used.append(real(*a))
        return used[-1]

    monkeypatch.setattr(risk, "_kernel", spy)
    rows = [(f"p{p}", v, c) for p in range(20) for v in range(2) for c in ("250", "401", str(p % 3))]
    pop = Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "visit", "code"]))
    risk.distinguishability(pop, pop, "single_visit", matching=risk.Matching(within_visits=True))
    assert used == ["walk"]
    monkeypatch.setattr(risk, "_KERNEL", "index")
    risk.distinguishability(pop, pop, "single_visit", matching=risk.Matching(within_visits=True))
    assert used == ["walk", "index"]


@pytest.mark.parametrize(("within", "share"), [(False, 0.8), (True, 1.0)])
def test_capped_walk_drops_decided_sets(synthetic, monkeypatch, within, share) -> None:
    """With `cap` the walk stops counting a set once it has `cap` supporters (issue 15): values are
    min(full count, cap) for every thread count, and the walk takes fewer steps than uncapped (on
    1,500 patients most steps are the candidates' first atoms, which every walk takes; within visits,
    a visit holds few known sets besides its own)."""
    pop, _ = synthetic
    steps: list[int] = []
    real = risk._SubsetCounter.count

    def spy(self):
        out = real(self)
        steps.append(self.work[0])
        return out

    monkeypatch.setattr(risk._SubsetCounter, "count", spy)
    monkeypatch.setattr(risk, "_WALK_CHUNK", 1000)
    monkeypatch.setattr(risk, "_KERNEL", "walk")
    monkeypatch.setattr(risk, "_COMMON_SHARE", 2.0)  # one walk, no set counted apart
    full = risk.distinguishability(
        pop, pop, "single_visit", matching=risk.Matching(within_visits=within, threads=1)
    )
    uncapped_steps = steps[-1]
    for threads in (1, 2, 3):
        got = risk.distinguishability(
            pop, pop, "single_visit", matching=risk.Matching(within_visits=within, threads=threads, cap=5)
        )
        assert got.tolist() == np.minimum(full, 5).tolist(), threads
        assert steps[-1] < share * uncapped_steps, (threads, steps[-1], uncapped_steps)


def test_cap_must_be_a_positive_whole_number(synthetic) -> None:
    pop, cohort = synthetic
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="cap must be a positive whole number"):
            risk.distinguishability(cohort, pop, "single_visit", matching=risk.Matching(cap=bad))
