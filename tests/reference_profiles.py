"""The plain reference for UGACLIP / ACLIP: `engine.anonymize.profiles.anonymize_profiles` as it was
before its greedy was compiled (issue 24), vectorized with numpy, one step at a time in Python.

Kept verbatim so that tests/test_profiles_kernel.py and bench/profiles.py can check that the compiled
greedy gives the same release (records, code map, trace, loss figures) for the same inputs.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from engine.anonymize.policy import PrivacyPolicy
from engine.anonymize.profiles import OUTSIDE_RULES, SuppressionLimitExceeded, UtilityPolicy
from engine.records import Records, concat_ranges, item_bitsets
from engine.release import Release, set_item_label


@dataclass
class _State:
    """Anonymized items over the cohort's codes: bitsets of records per item (rows of `bits`).

    Item g lives in the row of one of its codes; `group[c]` is the item of code c (-1: suppressed).
    """

    bits: np.ndarray  # (n_codes, n_words) uint64, valid for active rows
    active: np.ndarray  # (n_codes,) bool
    size: np.ndarray  # (n_codes,) codes per item
    sup: np.ndarray  # (n_codes,) records per item
    group: np.ndarray  # (n_codes,) code -> item row, -1 suppressed
    members: dict[int, list[int]]
    container: np.ndarray  # (n_codes, n_words_u) uint64: utility constraints holding the whole item
    outside: np.ndarray  # (n_codes,) bool: item touches no utility constraint
    first: np.ndarray  # (n_codes,) smallest code index of each item (text order of its first code)
    log2_2m1: np.ndarray  # log2(2^m - 1) for m = 0..n_codes
    n_records: int = 0
    trace: list[tuple[str, str, str]] = field(default_factory=list)
    # with visits exported: (n_codes, n_visit_words) bitsets over visits, and each visit's record
    vbits: np.ndarray | None = None
    visit_owner: np.ndarray | None = None

    def support(self, items: Iterable[int]) -> int:
        """Records holding every item: in the whole record, or in one visit when visits are exported
        (distinct records owning a visit that holds them all)."""
        rows = list(items)
        if not rows:
            return self.n_records
        if self.vbits is None or self.visit_owner is None:
            acc = np.bitwise_and.reduce(self.bits[rows], axis=0)
            return int(np.bitwise_count(acc).sum())
        acc = np.bitwise_and.reduce(self.vbits[rows], axis=0)
        words = np.flatnonzero(acc)
        if len(words) == 0:
            return 0
        bits = np.unpackbits(acc[words].view(np.uint8), bitorder="little").reshape(len(words), 64)
        w, b = np.nonzero(bits)
        owners = self.visit_owner[words[w] * 64 + b]  # visits ascend, so owners are nondecreasing
        return int(1 + np.count_nonzero(owners[1:] != owners[:-1]))

    def label(self, g: int, codes: np.ndarray) -> str:
        return set_item_label(codes[self.members[g]].tolist())

    def describe(self, g: int, codes: np.ndarray) -> str:
        """The item's label, shortened for items of more than 6 codes (for the trace)."""
        mem = sorted(self.members[g])
        if len(mem) <= 6:
            return self.label(g, codes)
        return "{" + ",".join(codes[mem[:3]].tolist()) + f",... ({len(mem)} codes)}}"


def _utility_masks(codes: np.ndarray, utility: UtilityPolicy | None) -> tuple[np.ndarray, np.ndarray]:
    diseases = list(utility or {})
    n_words = max(1, (len(diseases) + 63) // 64)
    container = np.zeros((len(codes), n_words), dtype=np.uint64)
    pos = {str(c): i for i, c in enumerate(codes.tolist())}
    for d, name in enumerate(diseases):
        for c in utility[name]:  # type: ignore[index]
            i = pos.get(c)
            if i is not None:
                container[i, d // 64] |= np.uint64(1) << np.uint64(d % 64)
    outside = np.asarray(~container.any(axis=1))
    return container, outside


def _state(records: Records, utility: UtilityPolicy | None, within_visits: bool = False) -> _State:
    bits = item_bitsets(records.patient_item_sets)
    n = records.n_items
    container, outside = _utility_masks(records.items, utility)
    return _State(
        bits=bits,
        active=np.ones(n, dtype=bool),
        size=np.ones(n, dtype=np.int64),
        sup=np.bitwise_count(bits).sum(axis=1).astype(np.int64),
        group=np.arange(n, dtype=np.int64),
        members={i: [i] for i in range(n)},
        container=container,
        outside=outside,
        first=np.arange(n, dtype=np.int64),
        log2_2m1=_log2_ul(np.arange(n + 2), np.ones(n + 2)),
        n_records=records.n_patients,
        vbits=item_bitsets(records.visit_item_sets) if within_visits else None,
        visit_owner=records.visit_patient if within_visits else None,
    )


def _records_of(st: _State, i: int) -> np.ndarray:
    """Record indexes holding item i (unpacked from its bitset)."""
    bits = np.unpackbits(st.bits[i].view(np.uint8), bitorder="little")
    return np.flatnonzero(bits[: st.n_records])


def _best_partner(
    st: _State, i: int, use_utility: bool, holdings: sp.csr_matrix, outside: str = "group"
) -> int | None:
    """The item that generalizes with item i at the least COAT utility loss (module docstring).

    The merged item's support is sup(i) + sup(j) - co(i, j), with co(i, j) counted only for the items
    found in the records holding i (sparse), so the cost follows sup(i), not the number of items.
    """
    cand = st.active.copy()
    cand[i] = False
    if use_utility:
        inside = (
            (st.container & st.container[i]).any(axis=1)
            if st.container.shape[1] > 1
            else ((st.container[:, 0] & st.container[i, 0]) != 0)
        )
        cand &= inside | (st.outside & st.outside[i]) if outside == "group" else inside
    rows = np.flatnonzero(cand)
    if len(rows) == 0:
        return None
    recs = _records_of(st, i)
    ptr = holdings.indptr
    codes = holdings.indices[concat_ranges(ptr[recs], ptr[recs + 1] - ptr[recs])]
    seen = np.zeros(len(st.group) + 1, dtype=bool)
    seen[st.group[codes]] = True  # -1 (suppressed) lands on the spare last slot
    seen[i] = False
    touching = np.flatnonzero(seen[:-1])
    union_sup = st.sup[rows] + st.sup[i]
    if len(touching):
        co = np.bitwise_count(st.bits[touching] & st.bits[i]).sum(axis=1).astype(np.int64)
        at = np.searchsorted(rows, touching)
        hit = (at < len(rows)) & (rows[np.minimum(at, len(rows) - 1)] == touching)
        union_sup[at[hit]] -= co[hit]
    ul = st.log2_2m1[st.size[rows] + st.size[i]] + np.log2(union_sup)
    tie = np.flatnonzero(ul == ul.min())
    if len(tie) > 1:
        tie = tie[union_sup[tie] == union_sup[tie].min()]
        tie = tie[[int(np.argmin(st.first[rows[tie]]))]]
    return int(rows[tie[0]])


def _log2_ul(size: np.ndarray, sup: np.ndarray) -> np.ndarray:
    """log2((2^size - 1) * sup): the COAT utility loss up to its constant, overflow-free."""
    size = np.asarray(size, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return size + np.log2(-np.expm1(-size * np.log(2.0))) + np.log2(sup)


def _merge(st: _State, i: int, j: int) -> int:
    """Merge items i and j into the row of the larger one (fewer codes to relabel); returns it."""
    keep, drop = (i, j) if (st.size[i], -i) > (st.size[j], -j) else (j, i)
    st.bits[keep] |= st.bits[drop]
    if st.vbits is not None:
        st.vbits[keep] |= st.vbits[drop]
    st.sup[keep] = int(np.bitwise_count(st.bits[keep]).sum())
    st.size[keep] += st.size[drop]
    st.first[keep] = min(st.first[keep], st.first[drop])
    st.container[keep] &= st.container[drop]
    st.outside[keep] &= st.outside[drop]
    st.active[drop] = False
    moved = st.members.pop(drop)
    st.members[keep].extend(moved)
    st.group[moved] = keep
    return keep


def _suppress(st: _State, i: int) -> list[int]:
    st.active[i] = False
    codes = st.members.pop(i)
    st.group[codes] = -1
    return codes


def _image(st: _State, constraint: np.ndarray) -> list[int]:
    g = st.group[constraint]
    return sorted(set(g[g >= 0].tolist()))


def _violation(st: _State, image: list[int], k: int) -> list[int] | None:
    """A subset of the items of a constraint's image with support in [1, k), or None (satisfied).
    The whole set first; Apriori over its subsets only when it has support 0."""
    if not image:
        return None
    s = st.support(image)
    if s >= k:
        return None
    if s > 0:
        return image
    level: list[tuple[int, ...]] = [(g,) for g in image]
    while level:
        frequent: set[tuple[int, ...]] = set()
        for t in level:
            v = st.support(t)
            if 0 < v < k:
                return list(t)
            if v >= k:
                frequent.add(t)
        nxt: set[tuple[int, ...]] = set()
        fl = sorted(frequent)
        for a_i, a in enumerate(fl):
            for b in fl[a_i + 1 :]:
                if a[:-1] == b[:-1]:
                    u = (*a, b[-1])
                    if all(u[:x] + u[x + 1 :] in frequent for x in range(len(u))):
                        nxt.add(u)
        level = sorted(nxt)
    return None


def reference_anonymize_profiles(
    cohort: Records,
    policy: PrivacyPolicy | Sequence[Iterable[str]],
    k: int,
    utility: UtilityPolicy | None,
    *,
    method: str = "UGACLIP",
    max_suppressed: int | None = None,
    with_visits: bool = False,
    outside: str = "group",
    progress: Callable[[float, str], None] | None = None,
) -> Release:
    """UGACLIP (`utility` given) or ACLIP (`utility` None) on a cohort, for a privacy policy and k.
    `progress(fraction, message)` is called in this thread before each privacy constraint is
    protected (constraints done / total); it may raise to cancel the run.
    `outside` (UGACLIP): "group" (default) lets codes outside every utility constraint be grouped
    among themselves, "suppress" never generalizes them (module docstring).

    Returns a `Release` whose items are code sets labelled by `set_item_label`; `loss` holds the COAT
    utility loss, NCP, suppressed codes and events; `params["trace"]` the generalizations in order.
    `with_visits`: the release shows its visits and supports are counted within visits (module
    docstring); default: one set of items per patient.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    if outside not in OUTSIDE_RULES:
        raise ValueError(f"outside must be one of {', '.join(OUTSIDE_RULES)}, not {outside!r}")
    if with_visits and not cohort.has_visits:
        raise ValueError("with_visits: the events have no visit column, so there are no visits to keep")
    constraints = (
        policy.constraints if isinstance(policy, PrivacyPolicy) else tuple(frozenset(c) for c in policy)
    )
    use_utility = utility is not None
    st = _state(cohort, utility, with_visits)
    codes = cohort.items
    pos = {str(c): i for i, c in enumerate(codes.tolist())}
    cons = [np.asarray(sorted(pos[c] for c in con if c in pos), dtype=np.int64) for con in constraints]
    holdings = cohort.patient_item_sets
    n_suppressed = 0
    done = 0
    pending = list(range(len(cons)))
    while pending:
        # supports only grow (merges widen items, suppression drops items from images), so stored
        # values are lower bounds: refresh the top lazily until it is current.
        heap = [(-st.support(_image(st, cons[ci])), ci) for ci in pending]
        heapq.heapify(heap)
        while heap:
            neg, ci = heapq.heappop(heap)
            if progress is not None:
                progress(
                    min(done / max(len(cons), 1), 1.0),
                    f"{min(done, len(cons)):,} of {len(cons):,} privacy constraints protected",
                )
            now = st.support(_image(st, cons[ci]))
            if now != -neg:
                heapq.heappush(heap, (-now, ci))
                continue
            while (bad := _violation(st, _image(st, cons[ci]), k)) is not None:
                # the least frequent item that can still be generalized; when none can, the
                # constraint cannot be protected by generalization: suppress its least frequent item
                order = sorted(bad, key=lambda g: (st.sup[g], st.first[g]))
                i, j = order[0], None
                for g in order:
                    j = _best_partner(st, g, use_utility, holdings, outside)
                    if j is not None:
                        i = g
                        break
                if j is None:
                    n_new = len(st.members[i])
                    if max_suppressed is not None and n_suppressed + n_new > max_suppressed:
                        raise SuppressionLimitExceeded(
                            method, max_suppressed, n_suppressed + n_new, constraints[ci], done, len(cons)
                        )
                    st.trace.append(("suppress", st.describe(i, codes), ""))
                    _suppress(st, i)
                    n_suppressed += n_new
                else:
                    a, b = st.describe(i, codes), st.describe(j, codes)
                    _merge(st, i, j)
                    st.trace.append(("generalize", a, b))
            done += 1
        # constraints of support 0 (user-supplied) can be broken by later merges: sweep again
        pending = [ci for ci, c in enumerate(cons) if _violation(st, _image(st, c), k) is not None]
    return _release(cohort, st, method, k, utility, max_suppressed, with_visits, outside)


def _release(
    cohort: Records,
    st: _State,
    method: str,
    k: int,
    utility: UtilityPolicy | None,
    max_suppressed: int | None,
    with_visits: bool = False,
    outside: str = "group",
) -> Release:
    codes = cohort.items
    labels = np.empty(len(codes), dtype=object)
    item_codes: dict[str, frozenset[str]] = {}
    for g, mem in st.members.items():
        lab = st.label(g, codes)
        labels[mem] = lab
        if len(mem) > 1:
            item_codes[lab] = frozenset(codes[mem].tolist())
    ev_group = st.group[cohort.event_item]
    kept = ev_group >= 0
    removed = cohort.keep_events(~kept).to_frame()
    released = cohort.keep_events(kept).relabel(labels)
    # one event per (visit, item): repeats of an item within a visit would tell how many of its codes
    # the visit had (Loukides' records are sets)
    first = np.ones(released.n_events, dtype=bool)
    if released.n_events:
        key = released.event_visit.astype(np.int64) * released.n_items + released.event_item
        _, at = np.unique(key, return_index=True)
        first[:] = False
        first[at] = True
    merged_events = int((~first).sum())
    released = released.keep_events(first)
    n = max(cohort.n_patients, 1)
    domain = max(len(codes), 1)
    gen_rows = [g for g in st.members if st.size[g] > 1]
    log_ul = _log2_ul(st.size[gen_rows], st.sup[gen_rows]) - np.log2(n) if gen_rows else np.zeros(0)
    ul_log2 = float(np.logaddexp2.reduce(log_ul)) if len(log_ul) else float("-inf")
    occ = np.asarray(cohort.patient_item_sets.sum(axis=0)).ravel()
    held = occ[kept_codes] if (kept_codes := np.flatnonzero(st.group >= 0)).size else np.zeros(0)
    size_of_code = st.size[st.group[kept_codes]] if kept_codes.size else np.zeros(0)
    gen = size_of_code > 1
    ncp = float((held[gen] * size_of_code[gen] / domain).sum() / max(occ.sum(), 1))
    suppressed_codes = int((st.group < 0).sum())
    loss = {
        "ul_log2": ul_log2,  # log2 of sum over generalized items of (2^m - 1) sup / N
        "largest_item": int(max((st.size[g] for g in gen_rows), default=1)),
        "ncp": ncp,
        "generalized_items": len(item_codes),
        "suppressed_codes": suppressed_codes,
        "suppressed_events": len(removed),
        "share_suppressed_events": float(len(removed) / max(cohort.n_events, 1)),
        "share_suppressed_codes": float(suppressed_codes / domain),
        "merged_events": merged_events,  # repeats of an item within a visit, released once
    }
    params = {
        "k": k,
        "utility_policy": sorted(utility) if utility is not None else None,
        "max_suppressed": max_suppressed,
        "with_visits": bool(with_visits),
        **({"outside": outside} if outside != "group" else {}),
        "trace": list(st.trace),
    }
    return Release(
        method=method,
        records=released,
        item_codes=item_codes,
        suppressed=removed.reset_index(drop=True),
        params=params,
        loss=loss,
        shows_visits=bool(with_visits),
    )


def reference_extract_policy(
    records: Records,
    k: int,
    condition: str,
    code_sets: Iterable[Iterable[str]] | None = None,
    *,
    within_visits: bool = False,
) -> PrivacyPolicy:
    """PPE as it was before its k-independent part was memoized: constraints of support < k, then
    `maximal_sets` among them."""
    from engine.anonymize.policy import collect_constraints, maximal_sets, supports

    collected = collect_constraints(records, condition, code_sets)  # type: ignore[arg-type]
    sup = supports(collected, records, within_visits=within_visits)
    need = [i for i, s in enumerate(sup) if s < k]
    keep = [need[j] for j in maximal_sets([collected[i] for i in need])]
    return PrivacyPolicy(
        k=k,
        condition=condition,
        constraints=tuple(collected[i] for i in keep),
        support=sup[keep] if keep else np.zeros(0, dtype=np.int64),
        n_collected=len(collected),
        n_already_protected=len(collected) - len(need),
        n_covered=len(need) - len(keep),
        within_visits=bool(within_visits),
    )
