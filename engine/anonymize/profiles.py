"""UGACLIP and ACLIP: anonymization of clinical profiles (Loukides et al. 2010, PNAS).

UGACLIP ("Utility-guided anonymization of clinical profiles"): while the privacy policy is not
satisfied, take the unprotected privacy constraint currently associated with the most patients (ties:
PPE's order); while it is unprotected, take its least frequent anonymized item (ties: first code in
text order) and generalize it with the other item that keeps the new item inside one utility
constraint and has the least information loss. An item with no allowed partner is skipped for the
next least frequent one; when no item of the constraint can be generalized ("cannot be satisfied by
generalization"), its least frequent item is suppressed. Anonymized items
are sets of codes, mutually exclusive across the release (every code in exactly one item).
ACLIP, the baseline: the same, with any other item as partner (utility policy ignored).

Partners allowed by UGACLIP: the merged item lies inside one utility constraint, or touches none of
them (codes outside the utility policy may be grouped among themselves: they constrain no disease
count). Convention, since the supplement is not available.

What the paper says about codes outside every utility constraint (issue 16; seed 002, main text).
The algorithm generalizes "the most infrequent ICD code (or anonymized item) with another ICD code
(or anonymized item) in a way that satisfies the corresponding utility constraint while minimizing an
information loss measure. If a privacy constraint cannot be satisfied by generalization, the ICD code
(or anonymized item) is suppressed"; suppression is needed "when a constraint contains subsets of ICD
codes that appear fewer than k times in [the data] after applying all generalizations that satisfy
the utility policy". A code outside the policy has no "corresponding utility constraint", so the text
alone allows both readings: such codes may be grouped freely (any merge keeps every constraint
satisfied), or they have no allowed generalization and are suppressed. The Results settle that they
were generalized: on VNEC, "UGACLIP generalized other ICD codes slightly more to preserve the
distribution of these diseases", with relative errors "approximately within 1 SD" of ACLIP's, and
only 167 suppressions (0.19% of the codes). Nothing in the paper bounds how far they are grouped.
Finding on the shipped sample (k = 5, single visit, the default policy): 86% of the 50,000 released
rows are one item of 4,921 codes. That item is not prescribed by the paper: it follows from this
implementation's convention (outside codes may join any outside item, with no bound) meeting a
sparse cohort whose single-visit privacy constraints hold many rare codes that reach k only by
grouping, so the greedy keeps merging the remaining rare outside codes into the item that already
holds them. The paper's "slightly more" than ACLIP and its 0.19% suppressions describe a different
outcome on its data; the default is kept, as the paper does not forbid it, and the release says so
(`engine.utility.coverage.catch_all` flags an item holding over half of the released rows).
Option `outside="suppress"` takes the other reading: codes outside every utility constraint are
never generalized (no partner is allowed), so they are released as themselves or suppressed, and
never folded into a catch-all item.

Information loss: the utility loss of COAT (Loukides, Gkoulalas-Divanis & Malin 2011, "COAT:
COnstraint-based anonymization of transactions", Knowl. Inf. Syst. 28:251-282, with weights 1):
UL(item) = (2^|item| - 1) / (2^|I| - 1) * sup(item) / N for an item of |item| codes over a domain of
|I| codes in N records. The constant 1 / ((2^|I| - 1) N) does not change which partner is best, so
`Release.loss["ul_log2"]` reports log2 of the sum over generalized items of (2^|item| - 1) * sup(item)
/ N (log scale: items of hundreds of codes overflow floats); partners are compared on the same log. Ties:
smaller support of the merged item, then the partner's first code in text order. For comparison the
normalized certainty penalty of set-valued generalization (NCP; Terrovitis, Mamoulis & Kalnis 2008,
"Privacy-preserving anonymization of set-valued data", PVLDB 1(1)) is reported too: each original
(record, code) occurrence released inside an item of m > 1 codes costs m / |I|, averaged over all
occurrences (suppressed ones are counted separately, in the suppression figures).

Supports only grow during a run (merging widens items; suppression drops an item from the images
that held it), so constraint supports are refreshed lazily: the constraint popped from the max-heap
is re-counted and pushed back when its support rose, and is processed only when its stored support is
current (stale entries are lower bounds).

The release holds each visit's set of items: an item is released once per visit (repeats would tell
how many of its codes the visit had; the paper's records are sets), counted in `loss["merged_events"]`.

Export structure (`with_visits`): by default the release is exported as the paper's released profiles,
one set of items per patient (`Release.shows_visits` False), and an itemset's support is the number of
records holding it. With `with_visits=True` the file keeps the visit grouping, so an itemset is
supported by a record only when one of its visits holds it: PPE, the greedy and the policy check then
count distinct records owning such a visit (bitsets over visits, reduced to their records), which is
what the risk engine verifies for that export. Only single-visit (or custom) policies can be exported
with visits: an attacker who knows every visit could match them one by one.

Suppression is global (a suppressed code or item is removed from every record, as Xu et al. 2008).
`max_suppressed` bounds the number of distinct original codes suppressed; exceeding it raises
`SuppressionLimitExceeded` with what had been done.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, TextIO

import numpy as np
import pandas as pd

from engine.anonymize.policy import PolicyCheck, PrivacyPolicy, check_policy, extract_policy
from engine.io.errors import UserError
from engine.io.progress import Progress
from engine.records import Records, item_bitsets
from engine.release import Release, set_item_label
from engine.risk import Verification

if TYPE_CHECKING:
    from engine.utility.queries import RelativeError, Workload

UtilityPolicy = Mapping[str, frozenset[str]]  # disease -> ICD codes


class SuppressionLimitExceeded(UserError, RuntimeError):
    """The run needed more suppressed codes than the user allowed."""

    def __init__(
        self, method: str, limit: int, needed: int, constraint: frozenset[str], done: int, total: int
    ):
        self.method, self.limit, self.needed = method, limit, needed
        self.constraint, self.done, self.total = constraint, done, total
        super().__init__(
            f"{method}: suppression limit of {limit} codes exceeded (would need {needed}) while protecting "
            f"constraint {{{', '.join(sorted(constraint))}}}; {done} of {total} privacy constraints were "
            "protected so far. Raise the limit, lower k, or widen the utility policy."
        )


@dataclass
class _State:
    """Anonymized items over the cohort's codes, as the compiled greedy's arrays
    (`engine.anonymize.profiles_kernel`, whose docstring names them). Item g lives in the row of one
    of its codes; `group[c]` is the item of code c (-1: suppressed)."""

    arrays: tuple  # the kernel's state tuple: bits, vbits, jump, holdings, per-item arrays, scratch
    n_records: int
    use_visits: bool

    def _slot(self, name: str) -> np.ndarray:
        return self.arrays[getattr(_kernel(), name)]

    @property
    def active(self) -> np.ndarray:
        return self._slot("ACTIVE")

    @property
    def size(self) -> np.ndarray:
        return self._slot("SIZE")

    @property
    def sup(self) -> np.ndarray:
        return self._slot("SUP")

    @property
    def group(self) -> np.ndarray:
        return self._slot("GROUP")

    def support(self, items: Iterable[int], cap: int) -> int:
        """Records holding every item, counted up to `cap`: in the whole record, or in one visit when
        visits are exported (distinct records owning a visit that holds them all)."""
        K, a = _kernel(), self.arrays
        rows = np.asarray(list(items), dtype=np.int64)
        return int(
            K.support(rows, len(rows), a[K.BITS], a[K.VBITS], a[K.JUMP], self.use_visits, self.n_records, cap)
        )

    def members(self) -> dict[int, np.ndarray]:
        """Each item's code indexes, items in row order."""
        group = self.group
        codes = np.flatnonzero(group >= 0)
        codes = codes[np.argsort(group[codes], kind="stable")]
        rows, start = np.unique(group[codes], return_index=True)
        return dict(zip(rows.tolist(), np.split(codes, start[1:]), strict=True)) if len(codes) else {}


def _kernel():
    """The compiled loops, imported on first use (numba loads in about half a second)."""
    from engine.anonymize import profiles_kernel

    return profiles_kernel


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
    n = records.n_items
    holdings = records.patient_item_sets
    bits = item_bitsets(holdings)
    container, outside = _utility_masks(records.items, utility)
    if within_visits:  # and for each visit, the first visit of the next record
        vbits, jump = item_bitsets(records.visit_item_sets), records.visit_ptr[records.visit_patient + 1]
    else:
        vbits, jump = np.zeros((n, 0), dtype=np.uint64), np.zeros(0, dtype=np.int64)
    with np.errstate(divide="ignore"):  # log2 of every possible support (0 never looked up)
        log2tab = np.log2(np.arange(records.n_patients + 2, dtype=np.int64))
    rows = np.arange(n, dtype=np.int64)
    sup = np.bitwise_count(bits).sum(axis=1).astype(np.int64)
    cls_ptr, cls_idx = _class_lists(sup, container, outside, utility is not None, len(utility or {}))
    multi_pos = np.full(n + 1, -1, dtype=np.int64)
    multi_pos[-1] = 0  # the list's length
    arrays = (
        bits,
        vbits,
        jump.astype(np.int64),
        holdings.indptr.astype(np.int64),
        holdings.indices.astype(np.int64),
        np.ones(n, dtype=np.bool_),  # active
        np.ones(n, dtype=np.int64),  # size
        sup,
        rows.copy(),  # group
        rows.copy(),  # first
        container,
        outside,
        rows.copy(),  # head
        np.full(n, -1, dtype=np.int64),  # nxt
        rows.copy(),  # tail
        _log2_ul(np.arange(n + 2), np.ones(n + 2)),  # log2(2^m - 1), m = 0..n+1
        log2tab,
        np.zeros(n, dtype=np.int64),  # co (scratch)
        np.full(n, -1, dtype=np.int64),  # stamp (scratch)
        np.zeros(n, dtype=np.int64),  # touched (scratch)
        cls_ptr,
        cls_idx,
        np.arange(len(cls_idx), dtype=np.int64),  # parent: skips the codes merged away
        np.zeros(n, dtype=np.int64),  # multi: the items of several codes
        multi_pos,
    )
    return _State(arrays, records.n_patients, within_visits)


def _class_lists(
    sup: np.ndarray, container: np.ndarray, outside: np.ndarray, use_utility: bool, n_diseases: int
) -> tuple[np.ndarray, np.ndarray]:
    """The codes each item may pair with, sorted by (support, code), as CSR: ACLIP one list of every
    code; UGACLIP one list per utility constraint, then the codes outside every one."""
    order = np.lexsort((np.arange(len(sup)), sup))
    if not use_utility:
        lists = [order]
    else:
        c = container[order]
        lists = [order[(c[:, d // 64] >> np.uint64(d % 64)) & np.uint64(1) != 0] for d in range(n_diseases)]
        lists.append(order[outside[order]])
    ptr = np.concatenate([[0], np.cumsum([len(x) for x in lists])]).astype(np.int64)
    return ptr, np.concatenate(lists).astype(np.int64)


OUTSIDE_RULES = ("group", "suppress")  # codes outside every utility constraint (module docstring)


def _log2_ul(size: np.ndarray, sup: np.ndarray) -> np.ndarray:
    """log2((2^size - 1) * sup): the COAT utility loss up to its constant, overflow-free."""
    size = np.asarray(size, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return size + np.log2(-np.expm1(-size * np.log(2.0))) + np.log2(sup)


def _image(st: _State, codes: np.ndarray) -> list[int]:
    g = st.group[codes]
    return sorted(set(g[g >= 0].tolist()))


def _violation(st: _State, image: list[int], k: int) -> list[int] | None:
    """A subset of the items of a constraint's image with support in [1, k), or None (satisfied).
    The whole set first; Apriori over its subsets only when it has support 0."""
    if not image:
        return None
    s = st.support(image, k)
    if s >= k:
        return None
    if s > 0:
        return image
    level: list[tuple[int, ...]] = [(g,) for g in image]
    while level:
        frequent: set[tuple[int, ...]] = set()
        for t in level:
            v = st.support(t, k)
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


def _constraint_codes(
    codes: np.ndarray, constraints: Sequence[frozenset[str]]
) -> tuple[np.ndarray, np.ndarray]:
    """The constraints' code indexes as CSR (pointer, indexes); codes outside the cohort drop out."""
    pos = {str(c): i for i, c in enumerate(codes.tolist())}
    rows = [[pos[c] for c in con if c in pos] for con in constraints]
    ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=ptr[1:])
    return ptr, np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=int(ptr[-1]))


PROGRESS_CALLS = 50  # progress calls per pass over the constraints, about (each may cancel the run)


def anonymize_profiles(
    cohort: Records,
    policy: PrivacyPolicy | Sequence[Iterable[str]],
    k: int,
    utility: UtilityPolicy | None,
    *,
    method: str = "UGACLIP",
    max_suppressed: int | None = None,
    with_visits: bool = False,
    outside: str = "group",
    progress: Progress | None = None,
) -> Release:
    """UGACLIP (`utility` given) or ACLIP (`utility` None) on a cohort, for a privacy policy and k.
    `progress(fraction, message)` is called in this thread before the first privacy constraint and
    then about `PROGRESS_CALLS` times per pass over the heap (constraints done / total); it may
    raise to cancel the run.
    `outside` (UGACLIP): "group" (default) lets codes outside every utility constraint be grouped
    among themselves, "suppress" never generalizes them (module docstring).

    Returns a `Release` whose items are code sets labelled by `set_item_label`; `loss` holds the COAT
    utility loss, NCP, suppressed codes and events; `params["trace"]` the generalizations in order.
    `with_visits`: the release shows its visits and supports are counted within visits (module
    docstring); default: one set of items per patient.

    The greedy runs as compiled loops (`engine.anonymize.profiles_kernel`); tests/reference_profiles.py
    keeps the step-by-step numpy version it replaced, which gives the same releases.
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
    K = _kernel()
    st = _state(cohort, utility, with_visits)
    cons_ptr, cons_idx = _constraint_codes(cohort.items, constraints)
    n_cons = len(constraints)
    ctrl = np.zeros(K.N_CTRL, dtype=np.int64)
    ctrl[K.CUR] = ctrl[K.CO_ROW] = -1
    hkey, hci = np.zeros(n_cons + 1, dtype=np.int64), np.zeros(n_cons + 1, dtype=np.int64)
    trace = np.zeros((cohort.n_items + 1, 3), dtype=np.int64)
    buf = np.zeros(max(1, int(np.diff(cons_ptr).max(initial=0))) + 1, dtype=np.int64)
    flags = (  # within visits, UGACLIP's utility policy, its rule for outside codes, the limit
        bool(with_visits),
        utility is not None,
        outside == "group",
        -1 if max_suppressed is None else int(max_suppressed),
    )

    def supports(cis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return K.constraint_supports(cis, cons_ptr, cons_idx, st.arrays, st.n_records, flags[0], buf, k)

    pending = np.arange(n_cons, dtype=np.int64)
    while len(pending):
        # supports only grow (merges widen items, suppression drops items from images), so stored
        # values are lower bounds: the kernel refreshes the top lazily until it is current. They are
        # counted up to k: a constraint of support >= k stays protected, so taking it off the heap
        # changes nothing whenever it comes, and the order of the others is that of exact supports.
        sup, _ = supports(pending)
        K.heap_fill(hkey, hci, ctrl, pending, sup)
        while True:
            if progress is not None:
                done = int(ctrl[K.DONE_N])
                progress(
                    min(done / max(n_cons, 1), 1.0),
                    f"{min(done, n_cons):,} of {n_cons:,} privacy constraints protected",
                )
            status = K.run(
                st.arrays,
                ctrl,
                hkey,
                hci,
                cons_ptr,
                cons_idx,
                trace,
                buf,
                k,
                st.n_records,
                *flags,
                max(1, n_cons // PROGRESS_CALLS),
            )
            if status == K.ZERO:  # the image has support 0: Apriori over its subsets (user policies)
                ci = int(ctrl[K.CUR])
                bad = _violation(st, _image(st, cons_idx[cons_ptr[ci] : cons_ptr[ci + 1]]), k)
                if bad is None:
                    ctrl[K.DONE_N] += 1
                    ctrl[K.CUR] = -1
                    continue
                status = K.step(np.asarray(bad, dtype=np.int64), len(bad), st.arrays, ctrl, trace, *flags[1:])
            if status == K.LIMIT:
                ci = int(ctrl[K.CUR])
                raise SuppressionLimitExceeded(
                    method, flags[3], int(ctrl[K.NEEDED]), constraints[ci], int(ctrl[K.DONE_N]), n_cons
                )
            if status == K.DONE:
                break
        # constraints of support 0 (user-supplied) can be broken by later merges: sweep again
        every = np.arange(n_cons, dtype=np.int64)
        sup, size = supports(every)
        pending = every[(size > 0) & (sup < k) & (sup > 0)]
        zero = every[(size > 0) & (sup == 0)]
        again = [
            ci
            for ci in zero.tolist()
            if _violation(st, _image(st, cons_idx[cons_ptr[ci] : cons_ptr[ci + 1]]), k)
        ]
        pending = np.union1d(pending, np.asarray(again, dtype=np.int64)).astype(np.int64)
    steps = _trace(trace[: ctrl[K.TRACE_LEN]], cohort.items)
    return _release(cohort, st, steps, method, k, utility, max_suppressed, with_visits, outside)


def _trace(steps: np.ndarray, codes: np.ndarray) -> list[tuple[str, str, str]]:
    """The kernel's steps (kind, item row, partner row) in words, replayed from single codes: each
    item is described by its label, or its first three codes and size when it has more than 6."""
    K = _kernel()
    names = [str(c) for c in codes.tolist()]
    size = [1] * len(names)
    smallest: dict[int, list[int]] = {}  # row -> its (up to) 6 smallest code indexes

    def describe(g: int) -> str:
        if size[g] == 1:
            return names[g]
        mem = smallest[g]
        if size[g] <= 6:
            return set_item_label([names[m] for m in mem])
        return "{" + ",".join([names[m] for m in mem[:3]]) + f",... ({size[g]} codes)}}"

    out: list[tuple[str, str, str]] = []
    for kind, i, j in steps.tolist():
        if kind == K.SUPPRESS:
            out.append(("suppress", describe(i), ""))
            continue
        out.append(("generalize", describe(i), describe(j)))
        keep, drop = (i, j) if (size[i], -i) > (size[j], -j) else (j, i)
        smallest[keep] = sorted(smallest.get(keep, [keep]) + smallest.pop(drop, [drop]))[:6]
        size[keep] += size[drop]
    return out


def _release(
    cohort: Records,
    st: _State,
    trace: list[tuple[str, str, str]],
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
    for mem in st.members().values():
        lab = set_item_label(codes[mem].tolist())
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
    gen_rows = [g for g in st.members() if st.size[g] > 1]
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
        "trace": trace,
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


def ugaclip(
    cohort: Records,
    policy: PrivacyPolicy | Sequence[Iterable[str]],
    k: int,
    utility: UtilityPolicy,
    max_suppressed: int | None = None,
    with_visits: bool = False,
    outside: str = "group",
) -> Release:
    """UGACLIP (PNAS "Utility-guided anonymization of clinical profiles"); `outside`: see
    `anonymize_profiles`."""
    return anonymize_profiles(
        cohort,
        policy,
        k,
        utility,
        method="UGACLIP",
        max_suppressed=max_suppressed,
        with_visits=with_visits,
        outside=outside,
    )


def aclip(
    cohort: Records,
    policy: PrivacyPolicy | Sequence[Iterable[str]],
    k: int,
    max_suppressed: int | None = None,
    with_visits: bool = False,
) -> Release:
    """ACLIP, the baseline: UGACLIP's privacy policy, utility policy ignored (PNAS "Results")."""
    return anonymize_profiles(
        cohort, policy, k, None, method="ACLIP", max_suppressed=max_suppressed, with_visits=with_visits
    )


def trace_frame(release: Release, names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The method's steps in order: action, item, partner; with `names` (an OMOP CDM's concept names,
    issue 37) also each one's `engine.vocab.describe`."""
    from engine.vocab import describe

    frame = pd.DataFrame(release.params.get("trace", []), columns=["action", "item", "partner"])
    if names:
        for col in ("item", "partner"):
            frame[f"{col} description"] = [describe(v, names=names) if v else "" for v in frame[col]]
    return frame


def release_columns(release: Release) -> dict[str, np.ndarray]:
    """The release file's rows (`Release.exported_frame`: `patient_id`, `visit` only when the release
    shows its visits, `code`) as columns for `write_release_csv`."""
    frame = release.exported_frame()
    return {c: frame[c].to_numpy(dtype=object) for c in frame.columns}


def write_release_csv(columns: Mapping[str, np.ndarray] | pd.DataFrame, fh: TextIO) -> None:
    """Write long-form columns (or a frame, e.g. the code map) as CSV through the csv module."""
    names = list(columns.keys()) if isinstance(columns, Mapping) else list(columns.columns)
    arrays = [np.asarray(columns[c], dtype=object) for c in names]
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(names)
    w.writerows(zip(*arrays, strict=True))


@dataclass(frozen=True, eq=False)
class ProfilesRun:
    """One run of PPE + UGACLIP/ACLIP with its verification and measures (PNAS "Results")."""

    method: str
    k: int
    knowledge: str
    policy: PrivacyPolicy
    release: Release
    check: PolicyCheck
    satisfaction: pd.DataFrame  # utility constraints: disease, original / released records, satisfied
    relative_error: RelativeError

    @cached_property
    def verification(self) -> Verification:
        """The risk engine's verdict on `release` (cohort scope, `knowledge`), computed when first read
        unless `run_profiles` was asked to verify at once: a caller that verifies the release itself
        (`engine.study.study.make_release`) verifies it once (issue 38)."""
        from engine.adversary import Adversary
        from engine.risk import verify

        return verify(self.release, Adversary("cohort", self.knowledge), self.k)  # type: ignore[arg-type]

    @property
    def verified(self) -> bool:
        return self.check.ok and self.verification.ok

    def summary(self) -> dict:
        """One row of the Figures 3-4 sweeps."""
        from engine.utility.queries import constraints_applying

        loss = self.release.loss
        return {
            "method": self.method,
            "knowledge": self.knowledge,
            "k": self.k,
            "privacy_constraints": len(self.policy),
            "utility_satisfied": int(self.satisfaction["satisfied"].sum()),
            "utility_constraints": len(self.satisfaction),
            "utility_constraints_applying": constraints_applying(self.satisfaction),
            "suppressed_codes": loss["suppressed_codes"],
            "share_suppressed_events": loss["share_suppressed_events"],
            "generalized_items": loss["generalized_items"],
            "ncp": loss["ncp"],
            "re_mean": self.relative_error.mean,
            "re_std": self.relative_error.std,
            "verified": self.verified,
        }


def measures_table(runs: Mapping[str, ProfilesRun]) -> pd.DataFrame:
    """One row per run, the PNAS "Results" measures in words: the privacy policy's check, the risk
    engine's verdict, utility constraints satisfied (`satisfaction_words`: a policy matching no code
    of the data says so), suppression, generalized items, NCP and RE."""
    from engine.utility.queries import satisfaction_words

    rows = []
    for m, r in runs.items():
        s = r.summary()
        rows.append(
            {
                "method": m,
                "privacy policy": "satisfied" if r.check.ok else f"{r.check.n_violated} violated",
                "risk engine": "verified" if r.verification.ok else "not verified",
                "utility constraints satisfied": satisfaction_words(r.satisfaction),
                "codes suppressed": f"{s['suppressed_codes']} ({r.release.loss['share_suppressed_codes']:.2%} of codes)",
                "events suppressed": f"{s['share_suppressed_events']:.2%}",
                "generalized items": s["generalized_items"],
                "largest item (codes)": r.release.loss["largest_item"],
                "NCP": round(s["ncp"], 4),
                "RE mean": round(s["re_mean"], 3),
                "RE sd": round(s["re_std"], 3),
                "RE queries": len(r.relative_error.queries),
            }
        )
    return pd.DataFrame(rows)


def run_profiles(
    cohort: Records,
    k: int,
    knowledge: str,
    method: str,
    utility: UtilityPolicy,
    *,
    policy: PrivacyPolicy | None = None,
    max_suppressed: int | None = None,
    with_visits: bool = False,
    progress: Progress | None = None,
    verify_now: bool = True,
    workload: Workload | None = None,
) -> ProfilesRun:
    """PPE (unless `policy` is given), then UGACLIP (`method` "UGACLIP") or ACLIP, then the policy
    check, the risk engine (cohort scope, `knowledge`; `verify_now=False`: left to the first reader of
    `ProfilesRun.verification`), utility constraints and relative error (over `workload`, the cohort's
    `case_count_workload`, when the caller holds it).
    `with_visits`: the release shows its visits (single-visit knowledge only), PPE and the greedy
    count supports within visits. Raises SuppressionLimitExceeded when `max_suppressed` is exceeded.
    `progress`: see `anonymize_profiles` (it may raise to cancel)."""
    from engine.utility.queries import relative_error, utility_satisfaction

    if method not in ("UGACLIP", "ACLIP"):
        raise ValueError(f"method must be UGACLIP or ACLIP, not {method!r}")
    if with_visits and knowledge != "single_visit":
        raise ValueError(
            "a release that keeps its visits can be protected against single-visit knowledge only: an "
            "attacker who knows every visit could match them one by one; export without visits"
        )
    if policy is None:
        policy = extract_policy(cohort, k, knowledge, within_visits=with_visits)  # type: ignore[arg-type]
    elif policy.within_visits != with_visits:
        raise ValueError(
            f"the privacy policy counted supports {'within visits' if policy.within_visits else 'in whole records'}, "
            f"but the release {'keeps' if with_visits else 'drops'} its visits: extract it again"
        )
    release = anonymize_profiles(
        cohort,
        policy,
        k,
        utility if method == "UGACLIP" else None,
        method=method,
        max_suppressed=max_suppressed,
        with_visits=with_visits,
        progress=progress,
    )
    release = dataclasses.replace(release, params={**release.params, "knowledge": knowledge})
    out = ProfilesRun(
        method=method,
        k=k,
        knowledge=knowledge,
        policy=policy,
        release=release,
        check=check_policy(policy.constraints, release, k),
        satisfaction=utility_satisfaction(cohort, release, utility),
        relative_error=relative_error(cohort, release, workload=workload),
    )
    if verify_now:
        out.verification  # noqa: B018 (computed here, in the caller's process)
    return out
