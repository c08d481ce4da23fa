"""PPE's k-independent part as it was before issue 24 (engine/anonymize/policy.py `policy_protection`'s
`make`: `collect_constraints`, `supports`, `least_superset_support`, copied verbatim), the reference
tests/test_policy_fast.py and bench/policy.py compare the vectorized version against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from engine.anonymize.policy import FILTERING_CONDITIONS, FilteringCondition, Itemset
from engine.records import Records
from engine.risk import Matching, distinguishability


def supports(
    itemsets: Sequence[Iterable[str]],
    records: Records,
    item_codes: Mapping[str, frozenset[str]] | None = None,
    *,
    within_visits: bool = False,
) -> np.ndarray:
    """Number of `records` holding every item of each itemset (items in `records`' vocabulary; an item
    not in it has support 0; the empty itemset is held by every record). `within_visits`: records
    with one visit holding every item (the matching of a release that shows its visits).

    Counted by `engine.risk.distinguishability` with each itemset as one pseudo-record (all-visits
    knowledge, or the single visit matched within visits), so the policy check and the risk engine
    share one counting rule.
    """
    sets = [sorted(set(s)) for s in itemsets]
    if not sets:
        return np.zeros(0, dtype=np.int64)
    rows = [(str(i), c) for i, s in enumerate(sets) for c in s]
    frame = pd.DataFrame(rows, columns=["patient_id", "code"])
    known = set(map(str, records.items.tolist()))
    same_vocab = item_codes is None or not item_codes
    if same_vocab and all(c in known for _, c in rows):
        vocab = records.items
    else:
        vocab = np.array(sorted(known | set(frame["code"])), dtype=object)
    out = np.full(len(sets), records.n_patients, dtype=np.int64)
    nonempty = np.array([bool(s) for s in sets])
    if frame.empty:
        return out
    targets = Records.from_frame(frame, items=vocab)
    if within_visits:
        dis = distinguishability(
            targets, records, "single_visit", Matching(item_codes or None, within_visits=True)
        )
    else:
        dis = distinguishability(targets, records, "all_visits", Matching(item_codes or None))
    ids = targets.patient_ids.astype(int)
    out[ids] = dis
    out[~nonempty] = records.n_patients
    return out


def collect_constraints(
    records: Records, condition: FilteringCondition, code_sets: Iterable[Iterable[str]] | None = None
) -> list[Itemset]:
    """The filtering condition's constraints, distinct, in order of first appearance: each visit's code
    set (`single_visit`, visits by service date as `Records` orders them), each record's code set
    (`all_visits`), or the user's `code_sets` (`custom`). Empty sets are skipped."""
    if condition == "custom":
        if code_sets is None:
            raise ValueError("the custom filtering condition needs a list of code sets")
        raw: Iterable[Iterable[str]] = code_sets
    elif condition == "single_visit":
        m = records.visit_item_sets
        raw = (records.items[m.indices[m.indptr[v] : m.indptr[v + 1]]] for v in range(m.shape[0]))
    elif condition == "all_visits":
        m = records.patient_item_sets
        raw = (records.items[m.indices[m.indptr[p] : m.indptr[p + 1]]] for p in range(m.shape[0]))
    else:
        raise ValueError(f"filtering condition must be one of {FILTERING_CONDITIONS}, not {condition!r}")
    seen: dict[Itemset, None] = {}
    for s in raw:
        fs = frozenset(str(c) for c in s)
        if fs:
            seen.setdefault(fs, None)
    return list(seen)


def least_superset_support(sets: Sequence[Itemset], support: np.ndarray) -> np.ndarray:
    """For each set of the list (distinct sets), the least support among the other sets that contain
    it (int64 max when none does). With it, the sets not contained in another set of support < k
    (`maximal_sets` over those of support < k) are read off for every k at once."""
    posting: dict[str, set[int]] = {}
    for i, s in enumerate(sets):
        for c in s:
            posting.setdefault(c, set()).add(i)
    out = np.full(len(sets), np.iinfo(np.int64).max, dtype=np.int64)
    for i, s in enumerate(sets):
        lists = sorted((posting[c] for c in s), key=len)
        if not lists or len(lists[0]) == 1:
            continue  # no other set holds its rarest code
        holders = set(lists[0])
        for lst in lists[1:]:
            holders &= lst
            if len(holders) == 1:
                break
        holders.discard(i)
        if holders:
            out[i] = min(int(support[j]) for j in holders)
    return out


def reference_protection(
    records: Records,
    condition: FilteringCondition,
    code_sets: Iterable[Iterable[str]] | None,
    within_visits: bool,
) -> tuple[list[Itemset], np.ndarray, np.ndarray]:
    """`policy_protection`'s `make` before issue 24 (unmemoized), verbatim."""
    collected = collect_constraints(records, condition, code_sets)
    sup = supports(collected, records, within_visits=within_visits)
    return collected, sup, least_superset_support(collected, sup)
