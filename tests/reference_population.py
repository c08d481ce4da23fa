"""The completion pass of Heatherly's method (engine/anonymize/population.py) as it was before issue 24's
speed work, kept verbatim as the plain reference the fast pass must equal byte for byte: per failing
visit a Python loop of posting-list intersections, supports counted by full (uncapped) risk-engine
calls on pseudo-records, the released group rebuilt with its labels every round.

`reference_pass()` swaps it into `engine.anonymize.population` for the duration of a `with` block, so
`anonymize` / `compare_scopes` run the reference end to end (tests/test_population_fast.py,
bench/population.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import numpy as np

from engine.anonymize import population
from engine.anonymize.population import COMPLETION_GENERALIZE_ROUNDS, _State
from engine.io.progress import Progress
from engine.records import Records, concat_ranges
from engine.release import set_item_label
from engine.risk import Matching, distinguishability


@contextmanager
def reference_pass() -> Iterator[None]:
    """Within the block, the engine's completion pass and release building are the reference's."""
    with (
        mock.patch.object(population, "_complete", reference_complete),
        mock.patch.object(population, "_released", reference_released),
    ):
        yield


def reference_released(state: _State) -> tuple[Records, dict[str, frozenset[str]], np.ndarray]:
    """The released group from the state: events recoded to their items, suppressed events removed,
    a generalized item kept once per visit; vocabulary compacted to the items present, sorted.
    Also returns the item map and, per released item, its representative code index."""
    g = state.group
    codes = g.items
    ev_rep = state.item_of_code[g.event_item]
    keep = state.keep & (ev_rep >= 0)
    sizes = np.bincount(state.item_of_code[state.item_of_code >= 0], minlength=g.n_items)
    generalized_ev = keep & (sizes[np.maximum(ev_rep, 0)] >= 2)
    if generalized_ev.any():
        idx = np.flatnonzero(generalized_ev)
        key = g.event_visit[idx].astype(np.int64) * g.n_items + ev_rep[idx]
        _, first = np.unique(key, return_index=True)
        dup = np.ones(len(idx), dtype=bool)
        dup[first] = False
        keep = keep.copy()
        keep[idx[dup]] = False
    reps = np.unique(ev_rep[keep])
    members: dict[int, list[str]] = {}
    gen_codes = np.flatnonzero((state.item_of_code >= 0) & (sizes[np.maximum(state.item_of_code, 0)] >= 2))
    for c in gen_codes.tolist():
        members.setdefault(int(state.item_of_code[c]), []).append(str(codes[c]))
    labels = np.array(
        [set_item_label(members[r]) if r in members else str(codes[r]) for r in reps.tolist()], dtype=object
    )
    order = np.argsort(labels, kind="stable")
    rep_to_item = np.zeros(g.n_items, dtype=np.int32)
    rep_to_item[reps[order]] = np.arange(len(reps), dtype=np.int32)
    recoded = Records(
        patient_ids=g.patient_ids,
        items=labels[order],
        visit_ptr=g.visit_ptr,
        visit_ids=g.visit_ids,
        event_ptr=g.event_ptr,
        event_item=rep_to_item[np.maximum(ev_rep, 0)],
        event_age=g.event_age,
        has_visits=g.has_visits,
    ).keep_events(keep)
    present = set(reps.tolist())
    item_codes = {set_item_label(m): frozenset(m) for r, m in members.items() if r in present}
    return recoded, item_codes, reps[order]


def _support_of_visits(
    released: Records, visits: np.ndarray, candidates: Records | None = None, within_visits: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    cand = released if candidates is None else candidates
    lengths = np.diff(released.event_ptr)[visits]
    visits, lengths = visits[lengths > 0], lengths[lengths > 0]
    if len(visits) == 0:
        return visits, np.zeros(0, dtype=np.int64)
    as_records = Records(
        patient_ids=np.arange(len(visits)).astype(str).astype(object),
        items=released.items,
        visit_ptr=np.arange(len(visits) + 1, dtype=np.int64),
        visit_ids=np.zeros(len(visits), dtype=object),
        event_ptr=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        event_item=released.event_item[concat_ranges(released.event_ptr[visits], lengths)],
    )
    if within_visits:  # each pseudo-record is one visit: its single-visit set is the whole visit
        return visits, distinguishability(as_records, cand, "single_visit", Matching(within_visits=True))
    return visits, distinguishability(as_records, cand, "all_visits")


def _unit_item_count(released: Records, within_visits: bool) -> np.ndarray:
    """Per released item, the units holding it: visits (`within_visits`) or records."""
    units = released.visit_item_sets if within_visits else released.patient_item_sets
    return np.bincount(units.indices, minlength=released.n_items)


def reference_complete(
    state: _State,
    targets: np.ndarray,
    k: int,
    progress: Progress | None = None,
    within_visits: bool = False,
    completion: str = "rarest",
) -> None:
    """The completion pass (beyond the paper; module docstring): until every visit of the `targets`
    records is held by at least k records of the released group (within one visit when
    `within_visits`), generalize further (at most COMPLETION_GENERALIZE_ROUNDS rounds), then suppress
    items of failing visits, rarest first (ties by item label): from the visit alone when visits are
    exported, else from the target's whole record.

    Only visits that can have changed are recounted: after a generalization round the failing ones
    (merging items never lowers a visit's count), after a suppression round the failing ones and the
    visits holding an item that lost holding units (records, or visits when `within_visits`).
    The first strategy ("rarest") only: the reference of the engine's pass as it was."""
    assert completion == "rarest", "the reference is of the 'rarest' completion only"
    gen_rounds = suppress_rounds = merges = 0
    events_before = int(state.keep.sum())
    failing_by_round: list[int] = []
    targets = np.asarray(targets, dtype=np.int64)
    target_visits = concat_ranges(state.group.visit_ptr[targets], np.diff(state.group.visit_ptr)[targets])
    check = target_visits
    released, _, rep_arr = reference_released(state)
    while True:
        visits, sup = _support_of_visits(released, check, None, within_visits)
        failing = visits[sup < k]
        failing_by_round.append(len(failing))
        if len(failing) == 0:
            break
        item_support = np.bincount(released.patient_item_sets.indices, minlength=released.n_items)
        if gen_rounds < COMPLETION_GENERALIZE_ROUNDS:
            done = _generalize_failing(state, released, rep_arr, failing, item_support)
            if done:
                gen_rounds += 1
                merges += done
                if progress:
                    progress(
                        0.7, f"completion: generalization round {gen_rounds}, {len(failing)} visits below k"
                    )
                released, _, rep_arr = reference_released(state)
                check = failing
                continue
            gen_rounds = COMPLETION_GENERALIZE_ROUNDS  # nothing left to generalize: go on to suppression
        suppress_rounds += 1
        if progress:
            progress(0.8, f"completion: suppression round {suppress_rounds}, {len(failing)} visits below k")
        _suppress_failing(state, released, rep_arr, failing, item_support, k, within_visits)
        before = np.zeros(state.group.n_items, dtype=np.int64)
        before[rep_arr] = _unit_item_count(released, within_visits)
        released, _, rep_arr = reference_released(state)
        after = _unit_item_count(released, within_visits)
        lost = (before[rep_arr] > after).astype(np.int8)
        touched = (released.visit_item_sets[target_visits] @ lost) > 0
        check = np.union1d(failing, target_visits[touched])
    state.stats.update(
        {
            "completion visits below k by round": failing_by_round,
            "completion merges": merges,
            "completion suppression rounds": suppress_rounds,
            "completion events suppressed": events_before - int(state.keep.sum()),
        }
    )


def _generalize_failing(
    state: _State, released: Records, rep_arr: np.ndarray, failing: np.ndarray, item_support: np.ndarray
) -> int:
    """One completion generalization round: for each failing visit, merge its rarest item (ties by
    label) that has a partner in its constraint group with that group's most frequent other released
    item (ties by label). Returns the number of merges (0 when no failing visit has such an item)."""
    util_of_item = state.utility[rep_arr]
    order = np.lexsort((np.arange(released.n_items), -item_support, util_of_item))
    top_two: dict[int, list[int]] = {}
    for i in order.tolist():
        lst = top_two.setdefault(int(util_of_item[i]), [])
        if len(lst) < 2:
            lst.append(i)
    vis = released.visit_item_sets
    parent = np.arange(released.n_items)

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return int(x)

    merges = 0
    for v in failing.tolist():
        items = vis.indices[vis.indptr[v] : vis.indptr[v + 1]].tolist()
        for i in sorted(items, key=lambda x: (item_support[x], x)):
            partner = next((j for j in top_two[int(util_of_item[i])] if j != i), None)
            if partner is not None:
                ra, rb = find(i), find(partner)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
                    merges += 1
                break
    if merges == 0:
        return 0
    roots = np.array([find(i) for i in range(released.n_items)], dtype=np.int64)
    new_rep = np.full(released.n_items, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(new_rep, roots, rep_arr)
    old_to_new = np.arange(state.group.n_items)
    old_to_new[rep_arr] = new_rep[roots]
    ok = state.item_of_code >= 0
    state.item_of_code[ok] = old_to_new[state.item_of_code[ok]]
    return merges


def _suppress_failing(
    state: _State,
    released: Records,
    rep_arr: np.ndarray,
    failing: np.ndarray,
    item_support: np.ndarray,
    k: int,
    within_visits: bool = False,
) -> None:
    """One completion suppression round: in each failing visit drop items, rarest first (ties by item
    label), until the records holding all remaining items (in one visit, `within_visits`) number at
    least k (a visit with nothing left is consistent with every record). An item is dropped from the
    failing visit when visits are exported, else from every visit of its record."""
    vis = released.visit_item_sets
    csc = (vis if within_visits else released.patient_item_sets).tocsc()
    owner = released.visit_patient if within_visits else None
    drop_visits: list[int] = []
    drop_items: list[int] = []
    for v in failing.tolist():
        items = sorted(
            vis.indices[vis.indptr[v] : vis.indptr[v + 1]].tolist(), key=lambda x: (item_support[x], x)
        )
        while items:
            drop_visits.append(v)
            drop_items.append(items.pop(0))
            if not items or _holders(csc, items, owner) >= k:
                break
    g = state.group
    # released visits keep the group's visit indexes; released item of each group event
    rep_to_item = np.full(g.n_items, -1, dtype=np.int64)
    rep_to_item[rep_arr] = np.arange(released.n_items)
    ev_rep = state.item_of_code[g.event_item]
    ev_item = np.where(ev_rep >= 0, rep_to_item[np.maximum(ev_rep, 0)], -1)
    drop_units = np.asarray(drop_visits, dtype=np.int64)
    if within_visits:
        ev_unit = g.event_visit.astype(np.int64)
    else:  # the whole record: a reader without visits would see the item in another visit
        ev_unit = g.event_patient.astype(np.int64)
        drop_units = released.visit_patient[drop_units].astype(np.int64)
    key_ev = ev_unit * released.n_items + ev_item
    key_drop = drop_units * released.n_items + np.asarray(drop_items, dtype=np.int64)
    state.keep &= ~((ev_item >= 0) & np.isin(key_ev, key_drop))


def _holders(csc, items: list[int], owner: np.ndarray | None = None) -> int:
    """Records holding every item (sorted posting lists intersected from the shortest); with `owner`
    the rows are visits and the count is of distinct owning records."""
    rows = None
    for i in sorted(items, key=lambda x: csc.indptr[x + 1] - csc.indptr[x]):
        r = csc.indices[csc.indptr[i] : csc.indptr[i + 1]]
        if rows is None:
            rows = r
        else:
            pos = np.minimum(np.searchsorted(r, rows), len(r) - 1)
            rows = rows[r[pos] == rows] if len(r) else rows[:0]
        if len(rows) == 0:
            return 0
    if rows is None:
        return 0
    return len(np.unique(owner[rows])) if owner is not None else len(rows)
