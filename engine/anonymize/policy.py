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
import scipy.sparse as sp

from engine.memo import memo
from engine.records import Records, concat_ranges, item_bitsets
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


# ------------------------------------------------------------------- vectorized set algebra
def _row_ids(m: sp.csr_matrix) -> np.ndarray:
    """The row of each stored entry of a CSR matrix."""
    return np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))


def _hash_weights(n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Two fixed random 64-bit weights per column: a set's hash is the (wrapping) sum over its columns."""
    w = np.random.default_rng(20100215).integers(1, 2**63, size=(2, n_cols), dtype=np.int64)
    return w[0].astype(np.uint64), w[1].astype(np.uint64)


def _distinct_rows(m: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """The nonempty rows of a 0/1 CSR matrix (sorted indices) whose column set differs from every
    earlier row's, ascending (first appearances), and each row's position among them (-1: empty).
    Rows are grouped by a 64-bit hash (`_hash_weights`), and every row is then compared with its
    group's first row (same length, same columns); should two different rows ever share a group, they are grouped exactly by
    their bytes instead."""
    n = m.shape[0]
    lengths = np.diff(m.indptr).astype(np.int64)
    group = np.full(n, -1, dtype=np.int64)
    nonempty = np.flatnonzero(lengths)
    if not len(nonempty):
        return np.zeros(0, dtype=np.int64), group
    w1, _ = _hash_weights(m.shape[1])
    cols = m.indices.astype(np.int64)
    starts = m.indptr[:-1].astype(np.int64)[nonempty]
    key = np.add.reduceat(w1[cols], starts)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    rep = nonempty[first][inverse]  # each nonempty row's group representative
    same = np.array_equal(lengths[rep], lengths[nonempty]) and np.array_equal(
        cols[concat_ranges(starts, lengths[nonempty])],
        cols[concat_ranges(m.indptr[rep], lengths[nonempty])],
    )
    if same:
        firsts = nonempty[first]
        rank = np.empty(len(firsts), dtype=np.int64)
        rank[np.argsort(firsts)] = np.arange(len(firsts))
        group[nonempty] = rank[inverse]
        return np.sort(firsts), group
    seen: dict[bytes, int] = {}  # a hash collision (never seen): exact grouping
    for r in nonempty.tolist():
        group[r] = seen.setdefault(m.indices[m.indptr[r] : m.indptr[r + 1]].tobytes(), len(seen))
    firsts = np.full(len(seen), -1, dtype=np.int64)
    for r in nonempty.tolist()[::-1]:
        firsts[group[r]] = r
    return firsts, group


_SUBSETS_MAX = 1 << 22  # proper subsets enumerated by `_superset_pairs` (else `_contained_pairs`)


def _superset_pairs(m: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i, j) of rows of a 0/1 CSR matrix of distinct nonempty rows (sorted indices) with
    row i's columns a proper subset of row j's, ordered by i then j. Each row's proper subsets are
    enumerated (short rows: 2 ** length - 2 of them), hashed (`_hash_weights`), looked up among the
    rows' hashes and checked column by column; long rows fall back to `_contained_pairs`."""
    lengths = np.diff(m.indptr).astype(np.int64)
    n_cols = m.shape[1]
    cols = m.indices.astype(np.int64)
    w1, _ = _hash_weights(n_cols)
    top = int(lengths.max(initial=0))
    hashes = np.add.reduceat(w1[cols], m.indptr[:-1]) if len(cols) and lengths.all() else None
    big = top > 22 or int((np.left_shift(1, lengths) - 2).sum()) > _SUBSETS_MAX
    table = np.sort(hashes) if hashes is not None else None
    if hashes is None or big or table is None or (len(table) > 1 and not np.all(table[1:] != table[:-1])):
        q, h = _contained_pairs(m, m)
        other = q != h
        return q[other], h[other]
    by_hash = np.argsort(hashes)
    out_i: list[np.ndarray] = []
    out_j: list[np.ndarray] = []
    for size in np.unique(lengths[lengths > 1]).tolist():
        rows = np.flatnonzero(lengths == size)
        c = cols[m.indptr[rows][:, None] + np.arange(size)]  # (rows, size)
        masks = np.arange(1, (1 << size) - 1, dtype=np.int64)
        bits = (masks[:, None] >> np.arange(size)) & 1  # (masks, size)
        sub = w1[c] @ bits.T.astype(np.uint64)  # (rows, masks): each proper subset's hash
        at = np.minimum(np.searchsorted(table, sub), len(table) - 1)
        hit_r, hit_m = np.nonzero(table[at] == sub)
        i = by_hash[at[hit_r, hit_m]]
        # check: row i's columns are exactly row j's columns under the mask
        n_sel = bits[hit_m].sum(1)
        sel = np.where(bits[hit_m] == 1, c[hit_r], n_cols)
        sel.sort(axis=1)
        pos = m.indptr[i][:, None] + np.arange(size)
        ok_len = lengths[i] == n_sel
        mine = np.where(np.arange(size) < lengths[i][:, None], cols[np.minimum(pos, len(cols) - 1)], n_cols)
        ok = ok_len & (mine == sel).all(1)
        out_i.append(i[ok])
        out_j.append(rows[hit_r[ok]])
    if not out_i:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    i_all, j_all = np.concatenate(out_i), np.concatenate(out_j)
    order = np.lexsort((j_all, i_all))
    return i_all[order], j_all[order]


def _contained_pairs(queries: sp.csr_matrix, hosts: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (q, h) of a nonempty query row and a host row (0/1 CSR matrices, sorted indices, same
    columns) whose column set contains the query's, ordered by q then h. Candidates are the hosts of
    each query's rarest column (fewest hosts), filtered by its other columns from the rarest up."""
    n_cols = queries.shape[1]
    counts = np.bincount(hosts.indices, minlength=n_cols).astype(np.int64)
    q_rows = _row_ids(queries)
    q_cols = queries.indices.astype(np.int64)
    order = np.lexsort((q_cols, counts[q_cols], q_rows))  # each query's columns, rarest first
    q_cols = q_cols[order]
    lengths = np.diff(queries.indptr).astype(np.int64)
    starts = queries.indptr[:-1].astype(np.int64)
    q = np.flatnonzero(lengths)
    rarest = q_cols[starts[q]]
    csc = hosts.tocsc()
    csc.sort_indices()
    n_cand = counts[rarest]
    pair_q = np.repeat(q, n_cand)
    pair_h = csc.indices[concat_ranges(csc.indptr[rarest], n_cand)].astype(np.int64)
    host_keys = _row_ids(hosts) * n_cols + hosts.indices.astype(np.int64)  # ascending
    for t in range(1, int(lengths.max(initial=0))):
        if not len(pair_q):
            break
        open_ = lengths[pair_q] > t
        if not open_.any():
            break
        col = q_cols[starts[pair_q[open_]] + t]
        wanted = pair_h[open_] * n_cols + col
        at = np.minimum(np.searchsorted(host_keys, wanted), len(host_keys) - 1)
        keep = np.ones(len(pair_q), dtype=bool)
        keep[open_] = host_keys[at] == wanted
        pair_q, pair_h = pair_q[keep], pair_h[keep]
    return pair_q, pair_h


def _indicator(sets: Sequence[Itemset]) -> tuple[sp.csr_matrix, list[str]]:
    """0/1 CSR matrix of a list of code sets over their own sorted vocabulary, and that vocabulary."""
    vocab = sorted(set().union(*sets)) if sets else []
    index = {c: i for i, c in enumerate(vocab)}
    cols = [sorted(index[c] for c in s) for s in sets]
    indptr = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in cols], out=indptr[1:])
    flat = np.fromiter((c for row in cols for c in row), dtype=np.int64, count=int(indptr[-1]))
    m = sp.csr_matrix((np.ones(len(flat), dtype=np.int8), flat, indptr), shape=(len(sets), len(vocab)))
    return m, vocab


def _least_superset(
    matrix: sp.csr_matrix, support: np.ndarray, pairs: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """`least_superset_support` on the sets' 0/1 matrix (distinct rows); `pairs`: its
    `_superset_pairs`, when already known."""
    out = np.full(matrix.shape[0], np.iinfo(np.int64).max, dtype=np.int64)
    q, h = _superset_pairs(matrix) if pairs is None else pairs
    values = np.asarray(support, dtype=np.int64)[h]
    if len(q):  # pairs come ordered by q: one minimum per run
        first = np.flatnonzero(np.concatenate([[True], q[1:] != q[:-1]]))
        out[q[first]] = np.minimum.reduceat(values, first)
    return out


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
        seen: dict[Itemset, None] = {}
        for s in code_sets:
            fs = frozenset(str(c) for c in s)
            if fs:
                seen.setdefault(fs, None)
        return list(seen)
    return _condition_constraints(records, condition)[0]


def _condition_constraints(
    records: Records, condition: FilteringCondition
) -> tuple[list[Itemset], sp.csr_matrix, np.ndarray]:
    """The visit (`single_visit`) or record (`all_visits`) condition's constraints, distinct, in order
    of first appearance, their 0/1 matrix over the records' items (one row per constraint) and each
    visit's (record's) constraint (-1: empty)."""
    if condition == "single_visit":
        m = records.visit_item_sets
    elif condition == "all_visits":
        m = records.patient_item_sets
    else:
        raise ValueError(f"filtering condition must be one of {FILTERING_CONDITIONS}, not {condition!r}")
    firsts, group = _distinct_rows(m)
    rows = m[firsts]
    rows.sort_indices()
    names = [str(c) for c in records.items.tolist()]
    ind, ptr = rows.indices.tolist(), rows.indptr.tolist()
    sets = [frozenset([names[c] for c in ind[ptr[r] : ptr[r + 1]]]) for r in range(rows.shape[0])]
    return sets, rows, group


_BITSETS_MAX = 1 << 28  # bytes of item -> record bitsets `_record_supports` may build


def _record_supports(queries: sp.csr_matrix, records: Records) -> np.ndarray:
    """`supports` of the code sets of a 0/1 matrix over the records' items (records holding every
    item): popcounts of ANDs of the items' record bitsets (`item_bitsets`), or, when those would be
    large, counts of `_contained_pairs`."""
    holders = records.patient_item_sets
    n_words = max(1, (records.n_patients + 63) // 64)
    if records.n_items * n_words * 8 > _BITSETS_MAX:
        q, _ = _contained_pairs(queries, holders)
        return np.bincount(q, minlength=queries.shape[0]).astype(np.int64)
    bits = item_bitsets(holders)
    lengths = np.diff(queries.indptr).astype(np.int64)
    starts = queries.indptr[:-1].astype(np.int64)
    out = np.full(queries.shape[0], records.n_patients, dtype=np.int64)
    live = np.flatnonzero(lengths)
    if not len(live):
        return out
    acc = bits[queries.indices[starts[live]]]
    for t in range(1, int(lengths.max())):
        sel = np.flatnonzero(lengths[live] > t)
        acc[sel] &= bits[queries.indices[starts[live[sel]] + t]]
    out[live] = np.bitwise_count(acc).sum(axis=1, dtype=np.int64)
    return out


def _visit_set_supports(
    sets: sp.csr_matrix, group: np.ndarray, records: Records, pairs: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """`supports` within visits of the records' distinct visit code sets (`sets`, each visit's set in
    `group`, `pairs` = `_superset_pairs(sets)`): the distinct records of the visits whose set is the
    set itself or one of its supersets."""
    n = sets.shape[0]
    q = np.concatenate([np.arange(n, dtype=np.int64), pairs[0]])
    h = np.concatenate([np.arange(n, dtype=np.int64), pairs[1]])
    visits = np.flatnonzero(group >= 0)
    visits = visits[np.argsort(group[visits], kind="stable")]
    count = np.bincount(group[visits], minlength=n).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    per = count[h]
    patient = records.visit_patient[visits[concat_ranges(start[h], per)]].astype(np.int64)
    n_p = max(records.n_patients, 1)
    distinct = np.unique(np.repeat(q, per) * n_p + patient)
    return np.bincount(distinct // n_p, minlength=n).astype(np.int64)


def _support_rows(queries: sp.csr_matrix, records: Records, within_visits: bool) -> np.ndarray:
    """`supports` of the code sets of a 0/1 matrix over the records' items: records holding every
    item (`within_visits`: records with one visit holding every item)."""
    if not within_visits:
        return _record_supports(queries, records)
    q, v = _contained_pairs(queries, records.visit_item_sets)
    n = max(records.n_patients, 1)
    distinct = np.unique(q * n + records.visit_patient[v].astype(np.int64))
    return np.bincount(distinct // n, minlength=queries.shape[0]).astype(np.int64)


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
    return _least_superset(_indicator(sets)[0], support)


_PROTECTION_KEPT = 4  # cohorts whose protection is kept (`engine.memo`, "policy protection")


Protection = tuple[list[Itemset], np.ndarray, np.ndarray]  # `policy_protection`'s


def policy_protection(
    records: Records,
    condition: FilteringCondition,
    code_sets: Iterable[Iterable[str]] | None = None,
    within_visits: bool = False,
) -> Protection:
    """What PPE needs that does not depend on k: the filtering condition's constraints, their support
    in the records and the least support of a constraint containing each (`least_superset_support`).
    Memoized per the records' content (`Records.fingerprint`) for the visit and record conditions,
    where the caller's scope says (`engine.memo`: the app's session); a caller that shares it wider
    (the app's view on the shipped sample, issue 36) passes it to `extract_policy`."""

    def make() -> Protection:
        collected, rows, group = _condition_constraints(records, condition)
        pairs = _superset_pairs(rows)
        if within_visits and condition == "single_visit":
            sup = _visit_set_supports(rows, group, records, pairs)
        else:
            sup = _support_rows(rows, records, within_visits)
        return collected, sup, _least_superset(rows, sup, pairs)

    if condition == "custom":
        collected = collect_constraints(records, condition, code_sets)
        sup = supports(collected, records, within_visits=within_visits)
        return collected, sup, least_superset_support(collected, sup)
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
    protection: Protection | None = None,
) -> PrivacyPolicy:
    """PPE (PNAS, "Privacy policy extraction"): the constraints of the filtering condition that need
    protection for `k`, minimal: already-protected ones and subsets of kept ones are dropped.

    `within_visits`: the release will show its visits, so "already protected" means held within one
    visit by at least k records (every visit of an all-visits attacker is known: refused).
    `protection`: `policy_protection` of the same records, condition, code sets and `within_visits`,
    when the caller holds it (it does not depend on k); computed here otherwise."""
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    if within_visits and condition == "all_visits":
        raise ValueError(
            "a release that shows its visits is protected here against single-visit knowledge only; "
            "an attacker who knows every visit could match them one by one: export without visits"
        )
    if protection is None:
        protection = policy_protection(records, condition, code_sets, within_visits)
    collected, sup, superset = protection
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
    # each constraint's image under the aliases in one pass over its codes (issue 36: 64,000 constraints
    # at paper scale, imaged then aliased in two passes, 0.55 s)
    code_alias = {c: alias[t] for c, t in item_of.items()}
    aliased = [constraint_image(c, code_alias) for c in cons]
    sup = supports(aliased, records, ic, within_visits=within)
    violations: list[frozenset[str] | None] = []
    for img, s in zip(aliased, sup, strict=True):
        if not img or s >= k:
            violations.append(None)
        else:
            bad = img if s > 0 else violating_subset(img, records, k, ic, within_visits=within)
            violations.append(None if bad is None else frozenset(back[t] for t in bad))
    return PolicyCheck(k, cons, sup, tuple(violations))
