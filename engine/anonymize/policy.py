"""Privacy policies: privacy policy extraction (PPE) and policy satisfaction (Loukides et al. 2010, PNAS).

A privacy constraint is a set of ICD codes an attacker may know; a privacy policy is a set of them.

Satisfaction ("Policies", PNAS p. 2): a supported constraint (its codes appear together in some
released record) is satisfied when every nonempty subset of its codes appears in at least k released
records; a nonsupported one when every nonempty subset appears in at least k records or in none.
Convention (stated, the paper leaves it open): "supported" means the constraint's codes appear
*together* in a record, i.e. its released image has support >= 1. The two cases then read as one rule:
every nonempty subset has support 0 or >= k. By anti-monotonicity of support a supported constraint
needs one count (the whole set >= k); only constraints of support 0 need a level-wise (Apriori) search
of their subsets, which stops at subsets of support 0 or below k.

Support in a release: a subset S of codes "appears" in a released record when the record holds, for
every code of S, the anonymized item containing it (a released item stands for any combination of its
codes); a suppressed code appears nowhere. That is exactly `engine.risk`'s consistency rule, so
supports are counted by `engine.risk.distinguishability` on pseudo-records holding the itemsets.

Export structure: when the release keeps the visit grouping (`Release.shows_visits`), a subset
"appears" in a released record only when one of its released visits holds it, and its support is the
number of distinct records with such a visit (`within_visits`); PPE's "already protected" count and
the policy check then count the same way, so the policy and the risk engine still agree.

Relation to the risk engine (cohort scope): with the single_visit (all_visits) filtering condition,
the full policy is every visit's (record's) code set; its image in the release is that visit's
(record's) released item set, which is supported by its own record. So the policy is satisfied iff
every visit's (record's) released item set is shared by >= k records, i.e. iff
`risk.verify(release, Adversary("cohort", knowledge), k)` passes. PPE's pruning keeps this: dropped
constraints are already protected in D (supports only grow under generalization and suppression of
other codes) or are subsets of a kept constraint.

PPE (PNAS "Privacy policy extraction"): collect the constraints of the filtering condition, drop those
already satisfied in D, then drop those contained in another kept constraint. Mary's example (k = 5,
single visit): {157.0, 185} is shared by five records and dropped; {157.1, 157.2, 157.3} is kept.
Convention: "already satisfied" means supported by >= k records. A nonsupported constraint (support 0;
only a user's custom policy has them) is satisfied in D when no subset is shared by 1..k-1 records,
but a later merge can break that (patients {157.0}, {157.0,157.1}, {157.1,157.2}, {157.2}, constraint
{157.0,157.2}, k = 2: merging 157.0 with 157.1 makes the image supported once), so it is kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from engine.memo import memo
from engine.records import Records
from engine.release import Release, released_item_of
from engine.risk import Matching, distinguishability

FilteringCondition = Literal["single_visit", "all_visits", "custom"]
FILTERING_CONDITIONS: tuple[str, ...] = ("single_visit", "all_visits", "custom")

Itemset = frozenset[str]


# ------------------------------------------------------------------------------------ support
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


def violating_subset(
    itemset: Iterable[str],
    records: Records,
    k: int,
    item_codes: Mapping[str, frozenset[str]] | None = None,
    *,
    within_visits: bool = False,
) -> frozenset[str] | None:
    """A nonempty subset of `itemset` with support in [1, k) in `records`, or None when every nonempty
    subset has support 0 or >= k (the constraint is satisfied). Level-wise: the whole set first, then,
    only when it has support 0, subsets grown from those of support >= k (Apriori). Supports are
    counted within visits when `within_visits` (see `supports`)."""
    items = sorted(set(itemset))
    if not items:
        return None
    whole = int(supports([items], records, item_codes, within_visits=within_visits)[0])
    if whole >= k:
        return None
    if whole > 0:
        return frozenset(items)
    level = [frozenset((c,)) for c in items]
    while level:
        sup = supports(level, records, item_codes, within_visits=within_visits)
        bad = [s for s, v in zip(level, sup, strict=True) if 0 < v < k]
        if bad:
            return min(bad, key=lambda s: (len(s), sorted(s)))
        frequent = {s for s, v in zip(level, sup, strict=True) if v >= k}
        level = _apriori_gen(frequent)
    return None


def _apriori_gen(frequent: set[frozenset[str]]) -> list[frozenset[str]]:
    """Candidates one larger whose every subset one smaller is frequent (Agrawal & Srikant 1994)."""
    fl = sorted(frequent, key=sorted)
    out: set[frozenset[str]] = set()
    for i, a in enumerate(fl):
        for b in fl[i + 1 :]:
            u = a | b
            if len(u) == len(a) + 1 and u not in out and all(u - {x} in frequent for x in u):
                out.add(u)
    return sorted(out, key=sorted)


# --------------------------------------------------------------------------------------- PPE
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


def maximal_sets(sets: Sequence[Itemset]) -> list[int]:
    """Indexes of the sets not contained in another (distinct) set of the list, in input order.
    Inverted index from code to kept sets, intersected from the rarest code."""
    order = sorted(range(len(sets)), key=lambda i: (-len(sets[i]), i))
    posting: dict[str, set[int]] = {}
    kept: list[int] = []
    for i in order:
        s = sets[i]
        lists = sorted((posting.get(c, set()) for c in s), key=len)
        cover = set(lists[0]) if lists else set()
        for lst in lists[1:]:
            if not cover:
                break
            cover &= lst
        if cover:
            continue
        kept.append(i)
        for c in s:
            posting.setdefault(c, set()).add(i)
    return sorted(kept)


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


_PROTECTION_KEPT = 4  # cohorts whose protection is kept (`engine.memo`, "policy protection")


def _protection(
    records: Records,
    condition: FilteringCondition,
    code_sets: Iterable[Iterable[str]] | None,
    within_visits: bool,
) -> tuple[list[Itemset], np.ndarray, np.ndarray]:
    """What PPE needs that does not depend on k: the filtering condition's constraints, their support
    in the records and the least support of a constraint containing each (`least_superset_support`).
    Memoized per the records' content (`Records.fingerprint`) for the visit and record conditions,
    where the caller's scope says (`engine.memo`: the app's session)."""

    def make() -> tuple[list[Itemset], np.ndarray, np.ndarray]:
        collected = collect_constraints(records, condition, code_sets)
        sup = supports(collected, records, within_visits=within_visits)
        return collected, sup, least_superset_support(collected, sup)

    if condition == "custom":
        return make()
    key = (records.fingerprint, condition, bool(within_visits))
    return memo("policy protection", key, make, size=_PROTECTION_KEPT)


@dataclass(frozen=True)
class PrivacyPolicy:
    """PPE's output: the constraints needing protection, with their support in the original data."""

    k: int
    condition: str
    constraints: tuple[Itemset, ...]
    support: np.ndarray  # support of each constraint in the original cohort
    n_collected: int  # distinct constraints of the filtering condition
    n_already_protected: int  # dropped: the whole constraint already shared by >= k records
    n_covered: int  # dropped: contained in a kept constraint
    within_visits: bool = False  # supports counted within one visit (a release that shows visits)

    def __len__(self) -> int:
        return len(self.constraints)

    def to_frame(self) -> pd.DataFrame:
        """One row per constraint: codes (space-separated, sorted), size, support in the original data."""
        return pd.DataFrame(
            {
                "constraint": [" ".join(sorted(c)) for c in self.constraints],
                "size": [len(c) for c in self.constraints],
                "support": self.support.astype(int),
            }
        )


def extract_policy(
    records: Records,
    k: int,
    condition: FilteringCondition,
    code_sets: Iterable[Iterable[str]] | None = None,
    *,
    within_visits: bool = False,
) -> PrivacyPolicy:
    """PPE (PNAS, "Privacy policy extraction"): the constraints of the filtering condition that need
    protection for `k`, minimal: already-protected ones and subsets of kept ones are dropped.

    `within_visits`: the release will show its visits, so "already protected" means held within one
    visit by at least k records (every visit of an all-visits attacker is known: refused)."""
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    if within_visits and condition == "all_visits":
        raise ValueError(
            "a release that shows its visits is protected here against single-visit knowledge only; "
            "an attacker who knows every visit could match them one by one: export without visits"
        )
    collected, sup, superset = _protection(records, condition, code_sets, within_visits)
    # A constraint of support >= k stays protected (supports only grow under generalization, and a
    # suppressed code drops out of every subset). A nonsupported constraint (support 0: only user
    # constraints can be) is kept even when no subset violates it yet: a later merge can make its
    # codes appear together in fewer than k records (e.g. {157.0} + {157.1} merged under k = 2).
    # Of those, the ones inside another kept constraint (one of support < k) are covered by it.
    need = sup < k
    keep = np.flatnonzero(need & (superset >= k))
    return PrivacyPolicy(
        k=k,
        condition=condition,
        constraints=tuple(collected[i] for i in keep.tolist()),
        support=sup[keep],
        n_collected=len(collected),
        n_already_protected=len(collected) - int(need.sum()),
        n_covered=int(need.sum()) - len(keep),
        within_visits=bool(within_visits),
    )


# --------------------------------------------------------------------------- policy checking
def constraint_image(constraint: Iterable[str], item_of: Mapping[str, str]) -> frozenset[str]:
    """The released items a constraint's codes map to (suppressed or absent codes drop out: every
    subset holding one has support 0)."""
    return frozenset(item_of[c] for c in constraint if c in item_of)


@dataclass(frozen=True)
class PolicyCheck:
    """The policy check of a release: per constraint, its released support and a violating subset."""

    k: int
    constraints: tuple[Itemset, ...]
    released_support: np.ndarray
    violations: tuple[frozenset[str] | None, ...]  # a violating subset of released items, or None

    @property
    def ok(self) -> bool:
        return all(v is None for v in self.violations)

    @property
    def n_violated(self) -> int:
        return sum(v is not None for v in self.violations)

    def message(self) -> str:
        n = len(self.constraints)
        if self.ok:
            return f"Privacy policy satisfied: all {n} constraints protected for k = {self.k}."
        return f"Privacy policy NOT satisfied: {self.n_violated} of {n} constraints have a subset shared by 1..{self.k - 1} records."

    def failing(self) -> pd.DataFrame:
        rows = [
            (" ".join(sorted(c)), int(s), " ".join(sorted(v)))
            for c, s, v in zip(self.constraints, self.released_support, self.violations, strict=True)
            if v is not None
        ]
        return pd.DataFrame(rows, columns=["constraint", "released_support", "violating_items"])


def check_policy(constraints: Sequence[Iterable[str]], release: Release, k: int) -> PolicyCheck:
    """Check a privacy policy against a release, from the release alone (PNAS "Policies"); supports
    are counted within visits when the release shows them (`Release.shows_visits`)."""
    within = release.shows_visits
    item_of = released_item_of(release)
    cons = tuple(frozenset(c) for c in constraints)
    images = [constraint_image(c, item_of) for c in cons]
    # mutually exclusive items match only themselves: count on the released items directly, under
    # short aliases that keep the vocabulary's order (labels of large items are long strings)
    records = release.records
    ic: dict[str, frozenset[str]] | None = release.item_codes  # None: items counted as themselves
    exclusive = len(item_of) == sum(len(release.codes_of(str(t))) for t in records.items.tolist())
    alias = {str(t): str(t) for t in records.items.tolist()}
    if exclusive:
        alias = {str(t): f"i{n:09d}" for n, t in enumerate(records.items.tolist())}
        records = dataclasses.replace(records, items=np.array(list(alias.values()), dtype=object))
        ic = None
    back = {v: u for u, v in alias.items()}
    aliased = [frozenset(alias[t] for t in img) for img in images]
    sup = supports(aliased, records, ic, within_visits=within)
    violations: list[frozenset[str] | None] = []
    for img, s in zip(aliased, sup, strict=True):
        if not img or s >= k:
            violations.append(None)
        else:
            bad = img if s > 0 else violating_subset(img, records, k, ic, within_visits=within)
            violations.append(None if bad is None else frozenset(back[t] for t in bad))
    return PolicyCheck(k, cons, sup, tuple(violations))
