"""Heatherly's completion pool (`engine.anonymize.population._Pool`) as it was before issue 36's speed
work on the others' part, kept verbatim as the reference the pool must equal byte for byte: the records
that are not targets rebuilt in code space after every merge round (their item supports recounted from
all their events), and the others' part of a set counted by the risk engine against every one of them.

`reference_pool()` swaps it into `engine.anonymize.population` for the duration of a `with` block, so
`anonymize` / `compare_scopes` run it end to end (tests/test_completion_others.py,
bench/completion.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from unittest import mock

import numpy as np
import scipy.sparse as sp

from engine.anonymize import population
from engine.anonymize.population import (
    MIN_TESTED_CASES,
    _holders,
    _item_phecodes,
    _item_sets,
    _label_rank,
    _original_support,
    _split_layout,
    _State,
)
from engine.records import Records


@contextmanager
def reference_pool() -> Iterator[None]:
    """Within the block, the completion pass runs with the reference pool."""
    with mock.patch.object(population, "_Pool", ReferencePool):
        yield


class ReferencePool:
    """The released group during the completion pass, in code space: each event's item is the
    representative code of its item (`_State.item_of_code`), suppressed events left out (a repeated
    generalized item within a visit changes no set, so it is not removed here). It is split into the
    target records (`targets`, rebuilt after every round: only they lose events) and the others
    (rebuilt only after merges). Supports over disjoint groups of records add up
    (`engine.risk.count_known_sets`), so a count is the targets' part plus the others' part, and the
    others' part of a target visit's set is kept until merges or a change of the visit's set.

    Item order is the release's: by label (`label_rank`), as `_released` sorts its vocabulary."""

    def __init__(self, state: _State, targets: np.ndarray, within_visits: bool):
        self.state, self.within_visits = state, within_visits
        layout = _split_layout(state.group, targets)
        self.visits, self.local, self.events = layout.visits, layout.local, layout.events
        self.other_events, self.target_base, self.other_base = (
            layout.other_events,
            layout.target_base,
            layout.other_base,
        )
        # per target visit, a lower bound of its support: the original visit's (generalizing never
        # lowers a support and the frequency bins suppress whole codes), then the last count, less the
        # records that lost events since
        self.lower = _original_support(state.group, targets, within_visits, layout).copy()
        # `lower` is the visit's support (or, counted up to k within visits, both are at least k)
        self.exact = np.zeros(len(self.visits), dtype=bool)
        self.other_count = np.full(len(self.visits), -1, dtype=np.int64)  # its others' part; -1 unknown
        self.target: Records  # the target records
        self.target_events: np.ndarray  # the group indexes of their events
        self.others: Records | None  # the other records (None: every record is a target)
        # per phecode, the weight of one case and of one control changing (`case_cost`)
        self.flip_weight: tuple[np.ndarray, np.ndarray] | None = None
        if state.phecodes is not None:
            sets = self.target_base.patient_item_sets.astype(np.int32)
            cases, excluded = (np.asarray(((sets @ m) > 0).sum(axis=0)).ravel() for m in state.phecodes)
            controls = self.target_base.n_patients - excluded
            w = np.ones(len(cases)) if state.phecode_weight is None else state.phecode_weight
            # a phecode with fewer cases than a PheWAS tests (`PhewasSettings.min_cases`) has no test a
            # changed status could move: the completion only lowers case counts, so it never will
            w = w * (cases >= MIN_TESTED_CASES)
            self.flip_weight = (w / np.maximum(cases, 1), w / np.maximum(controls, 1))
        self._rebuild()

    def _code_space(self, base: Records, events: np.ndarray) -> tuple[Records, np.ndarray]:
        """`base` (records whose events are the group's `events`) in code space, and the group
        indexes of the events it keeps."""
        rep = self.state.item_of_code[self.state.group.event_item[events]]
        alive = self.state.keep[events] & (rep >= 0)
        return replace(base, event_item=np.maximum(rep, 0).astype(np.int32)).keep_events(alive), events[alive]

    def merged(self, merged_reps: np.ndarray) -> None:
        """Items were merged (`merged_reps`: per code index, the representatives merged with others):
        both parts take the new representatives (merging removes no event). A visit holding none of
        them keeps its support (the holders of its items are unchanged), and its others' part."""
        old = self.target
        hit = np.bincount(old.event_visit, weights=merged_reps[old.event_item], minlength=old.n_visits) > 0
        self.exact[hit] = False
        self.other_count[hit] = -1
        ioc = self.state.item_of_code  # a representative is a code of its item: its new representative
        self.target = replace(old, event_item=ioc[old.event_item].astype(np.int32))
        if self.others is not None:
            self.others = replace(self.others, event_item=ioc[self.others.event_item].astype(np.int32))
        self._derived()

    def _rebuild(self) -> None:
        """Both parts from the state."""
        self.others = None
        if self.other_base is not None:
            self.others, _ = self._code_space(self.other_base, self.other_events)
        self.target, self.target_events = self._code_space(self.target_base, self.events)
        self._derived()

    def _derived(self) -> None:
        """The label order and the others' supports."""
        self.label_rank = _label_rank(self.state)
        n = self.state.group.n_items
        self.other_support = (
            np.zeros(n, dtype=np.int64)
            if self.others is None
            else np.bincount(self.others.patient_item_sets.indices, minlength=n)
        )

    def suppressed(self) -> np.ndarray:
        """Target events removed: rebuild the targets' part and return, per code index, whether its
        item lost holding units (target records, or visits when `within_visits`). The others' counts
        of changed visits are forgotten; a lower bound drops by at most the units that lost one of
        the visit's items (a record leaves a set's holders only by losing one of its items), and by
        at most the records that lost any event."""
        old, before = self.target, self.target_units()
        alive = self.state.keep[self.target_events]
        self.target, self.target_events = old.keep_events(alive), self.target_events[alive]
        lost = before - self.target_units()
        changed = np.diff(old.event_ptr) != np.diff(self.target.event_ptr)
        self.other_count[changed] = -1
        n_changed = len(np.unique(self.target.visit_patient[changed]))
        at_most = np.bincount(old.event_visit, weights=lost[old.event_item], minlength=old.n_visits)
        self.lower -= np.minimum(at_most.astype(np.int64), n_changed)
        self.exact &= (at_most == 0) & ~changed  # a visit holding no item that lost units keeps its support
        return lost > 0

    def _count(self, sets: sp.csr_matrix, candidates: Records | None, k: int) -> np.ndarray:
        """`_holders` of the pool's records: within visits counted only up to k (the compiled capped
        walk: 0.42 to 0.30 s for the sample's population scope; every decision here compares a
        support, or a sum of the targets' and the others' parts, with k, and min(a, k) + min(b, k)
        >= k exactly when a + b >= k, so the release is the same). Across a record's visits the full
        count is kept: there the bitmap intersections are faster than the capped walk."""
        cap = k if self.within_visits else None
        return _holders(self.target, sets, candidates, self.within_visits, cap)

    def held(self, sets: sp.csr_matrix, k: int) -> np.ndarray:
        """Per row of `sets` (over code indexes): is it held by at least k records of the released
        group? The others are counted only for the sets the targets alone leave below k."""
        count = self._count(sets, None, k)
        if self.others is not None:
            low = np.flatnonzero(count < k)
            count[low] += self._count(sets[low], self.others, k)
        return count >= k

    def below(self, visits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The non-empty target `visits` (group indexes) and whether fewer than k records of the
        released group hold each one's set. Only visits whose support is not known and whose lower
        bound is below k are counted; the others are counted only for the sets the targets alone
        leave below k, and their count is kept per visit (`other_count`) while it holds."""
        local = self.local[visits]
        keep = np.diff(self.target.event_ptr)[local] > 0
        visits, local = visits[keep], local[keep]
        need = ~self.exact[local] & (self.lower[local] < k)
        counted = local[need]
        sets = _item_sets(self.target, counted)
        count = self._count(sets, None, k)
        exact = np.full(len(counted), self.others is None)
        if self.others is not None:
            low = count < k
            unknown = np.flatnonzero(low & (self.other_count[counted] < 0))
            self.other_count[counted[unknown]] = self._count(sets[unknown], self.others, k)
            count[low] += self.other_count[counted[low]]
            exact = low
        self.lower[counted] = count
        self.exact[counted] = exact
        return visits, self.lower[local] < k

    def item_support(self) -> np.ndarray:
        """Per code index, the released group's records holding the item it represents."""
        n = self.state.group.n_items
        return self.other_support + np.bincount(self.target.patient_item_sets.indices, minlength=n)

    def target_units(self) -> np.ndarray:
        """Per code index, the target units (records, or visits when `within_visits`) holding it."""
        units = self.target.visit_item_sets if self.within_visits else self.target.patient_item_sets
        return np.bincount(units.indices, minlength=self.state.group.n_items)

    def rarest_first(self, visits: np.ndarray, item_support: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The distinct items of each target visit of `visits` (group indexes), rarest first, ties by
        label: (items, ptr), `items[ptr[i]:ptr[i + 1]]` those of `visits[i]`."""
        sets = _item_sets(self.target, self.local[visits])
        row = np.repeat(np.arange(len(visits), dtype=np.int64), np.diff(sets.indptr))
        order = np.lexsort((self.label_rank[sets.indices], item_support[sets.indices], row))
        return sets.indices[order].astype(np.int64), sets.indptr.astype(np.int64)

    def case_cost(self, local_visits: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Per (target visit, item) pair (target-local visit index, representative code), the PheWAS
        cost of dropping the item (issue #36): over the phecodes the item counts toward and its record
        holds through no other occurrence, 1 / (that phecode's cases among the target records in the
        original data) each (a case status it flips, weighted by how much one case moves that
        phecode's tests), plus over the phecodes whose controls the item alone keeps its record out
        of, 1 / (that phecode's controls) each (the record would become a control). An occurrence is
        a distinct item of the record (a (visit, item) pair when `within_visits`, as the item is then
        dropped from the visit alone). 0 when the record keeps every phecode of the item and every
        exclusion through another occurrence: no case or control status changes."""
        assert self.state.phecodes is not None and self.flip_weight is not None
        t = self.target
        if self.within_visits:
            units = t.visit_item_sets.astype(np.int32)
            owner = sp.csr_matrix(
                (np.ones(t.n_visits, np.int32), (t.visit_patient, np.arange(t.n_visits))),
                shape=(t.n_patients, t.n_visits),
            )
        else:
            units = t.patient_item_sets.astype(np.int32)
        patient_of = t.visit_patient[local_visits]
        cost = np.zeros(len(items))
        for phecodes, weight, any_code in zip(
            self.state.phecodes, self.flip_weight, (False, True), strict=True
        ):
            m = _item_phecodes(self.state.item_of_code, phecodes, any_code)
            held = (units @ m).tocsr()
            if self.within_visits:
                held = (owner @ held).tocsr()
            held.data = (held.data == 1).astype(np.float64)  # held through this occurrence only
            held.eliminate_zeros()
            cost += np.asarray(m[items].multiply(held[patient_of]) @ weight).ravel()
        return cost
