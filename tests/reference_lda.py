"""The LDA's batched kernel before issue 24, kept as a plain reference: trajectories bucketed by
length into padded column-major arrays, every alive record aligned with x at every step of MDAV,
and the readable `ags_nodes` for the chosen record. `lda(..., kernel=reference_bucket_pool)` runs
the clustering with it; tests/test_trajectories.py and bench/trajectories.py compare the current
kernel (flat layout, lower bounds, memoized rows) against it, release for release.

Also the compiled nearest-record search before issue 36 (`reference_sorted_nearest`, which sorted
every alive record's lower bound at every step), as `lda(..., kernel=reference_sorted_pool)`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from engine.anonymize import alignment_kernel as ak
from engine.anonymize.alignment import PairTables
from engine.anonymize.trajectories import _Candidates, _Pool, _Prepared


def reference_prepare_x(
    x: Sequence[tuple[int, int]], tables: PairTables, dtype
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per pair of x: its look-up row (`PairTables.row`) and its suppression cost (a 0-d array of
    `dtype`), computed once per batch and shared by every bucket."""
    out = []
    for xi, xa in x:
        sx = sum(tables.model.suppress(xi, xa))
        out.append((tables.row(xi, xa, dtype), np.asarray(sx).astype(dtype)))
    return out


def reference_ags_costs_batch(
    x: Sequence[tuple[int, int]] | list,
    pid: np.ndarray,
    S: np.ndarray,
    lengths: np.ndarray,
    tables: PairTables,
) -> np.ndarray:
    """A-GS total cost i[m, n] + a[m, n] (without X's own loss) of x against every column of `pid`.

    Column-major batch: `pid` (L, B) holds the encoded y pairs of B trajectories padded to L;
    `S` (L+1, B) their cumulative suppression costs (S[0] = 0); `lengths` (B,). Row by row over x,
    with T' = T - S the left-suppression recurrence T[j] = min(base[j], T[j-1] + sy[j]) becomes a
    running minimum of base - S down the columns, so each row of the dynamic programme is five
    array operations over (L, B). Same integers as `ags_nodes`. `x` may come prepared (`reference_prepare_x`).
    """
    L, B = pid.shape
    dtype = S.dtype
    prepared = x if (len(x) and isinstance(x[0][0], np.ndarray)) else reference_prepare_x(x, tables, dtype)
    T = np.zeros((L + 1, B), dtype=dtype)
    diag = np.empty((L, B), dtype=dtype)
    for lut, sx in prepared:
        np.take(lut, pid, out=diag)
        diag += T[:-1]
        T += sx  # suppress x_h: up
        np.minimum(T[1:], diag, out=T[1:])
        for j in range(1, L + 1):  # running minimum (np.minimum.accumulate is ~7x slower here)
            np.minimum(T[j], T[j - 1], out=T[j])
    cols = np.arange(B)
    return T[lengths, cols] + S[lengths, cols]


def reference_baseline_costs_batch(
    x: Sequence[tuple[int, int]], pid: np.ndarray, S: np.ndarray, lengths: np.ndarray, tables: PairTables
) -> np.ndarray:
    """Baseline total cost of x against every column (same layout as `reference_ags_costs_batch`; matches
    `baseline_nodes`)."""
    L, B = pid.shape
    m = len(x)
    cols = np.arange(B)
    s = np.minimum(lengths, m)
    total = np.zeros(B, dtype=np.int64)
    for h, (xi, xa) in enumerate(x[:L]):
        lut = tables.row(xi, xa)
        # generalization minus y-suppression; the suppression of matched y pairs is added back via S
        total += np.where(h < s, lut[pid[h]], 0)
    total += S[lengths, cols]  # S[s] restores the matched pairs, S[n] - S[s] suppresses y's tail
    sx = np.array([sum(tables.model.suppress(*p)) for p in x], dtype=np.int64)
    cum_sx = np.concatenate([[0], np.cumsum(sx)])
    total += cum_sx[m] - cum_sx[s]  # x's unmatched tail is suppressed
    return total


def reference_length_buckets(rec: np.ndarray, lengths: np.ndarray, min_rows: int = 768) -> list[np.ndarray]:
    """Records grouped by length: one group per distinct length, adjacent groups merged until each
    holds at least `min_rows` records or spans lengths within 25% (padding waste vs call overhead)."""
    Ls = lengths[rec]
    order = np.argsort(Ls, kind="stable")
    sorted_rec, sorted_L = rec[order], Ls[order]
    out: list[np.ndarray] = []
    start = 0
    n = len(sorted_rec)
    while start < n:
        end = start + 1
        while end < n and (end - start < min_rows or sorted_L[end] <= 1.25 * sorted_L[start]):
            end += 1
        # keep equal lengths together
        while end < n and sorted_L[end] == sorted_L[end - 1]:
            end += 1
        out.append(np.sort(sorted_rec[start:end]))
        start = end
    return out


class ReferenceBucketPool:
    """The records not yet clustered, grouped by length into padded arrays for the batched kernel.

    Buckets are compacted when fewer than 60% of their rows are alive, so each batch works on
    mostly-alive rows without gathering them every time.
    """

    def __init__(
        self,
        rec: np.ndarray,
        lengths: np.ndarray,
        pid_flat: np.ndarray,
        ptr: np.ndarray,
        tables: PairTables,
        dtype,
    ):
        self.tables = tables
        self.dtype = dtype
        self.alive = np.zeros(len(lengths), dtype=bool)
        self.alive[rec] = True
        self.buckets: list[dict] = []
        for sel in reference_length_buckets(rec, lengths):
            L = int(lengths[sel].max())
            pid = np.full((L, len(sel)), tables.n_values, dtype=np.int64)  # column-major, sentinel-padded
            for b, r in enumerate(sel):
                pid[: lengths[r], b] = pid_flat[ptr[r] : ptr[r + 1]]
            mask = np.arange(L)[:, None] < lengths[sel][None, :]
            sup = np.where(mask, tables.y_suppress(pid), 0)
            S = np.concatenate([np.zeros((1, len(sel)), np.int64), np.cumsum(sup, axis=0)], axis=0).astype(
                dtype
            )
            Ls = lengths[sel]
            self.buckets.append(
                {"rec": sel, "pid": pid, "S": S, "len": Ls, "Lmin": int(Ls.min()), "Lmax": int(Ls.max())}
            )

    def costs(self, x: Sequence[tuple[int, int]], method: str) -> tuple[np.ndarray, np.ndarray]:
        """(records alive, their alignment cost with x), records in increasing index.

        (Lower bounds to skip hopeless records were tried: on D50Pop-shaped data they pruned too
        little to pay for themselves, so every alive record is aligned.)
        """
        xp: Sequence[tuple[int, int]] | list[tuple[np.ndarray, np.ndarray]]
        if method == "a-gs":
            fn, xp = reference_ags_costs_batch, reference_prepare_x(x, self.tables, self.dtype)
        else:
            fn, xp = reference_baseline_costs_batch, x
        recs, costs = [], []
        for b in self.buckets:
            ok = self.alive[b["rec"]]
            if not ok.any():
                continue
            c = fn(xp, b["pid"], b["S"], b["len"], self.tables)
            recs.append(b["rec"][ok])
            costs.append(c[ok].astype(np.int64))
        if not recs:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        r, c = np.concatenate(recs), np.concatenate(costs)
        o = np.argsort(r, kind="stable")
        return r[o], c[o]

    def remove(self, recs: Sequence[int]) -> None:
        self.alive[np.asarray(recs, dtype=np.int64)] = False
        for b in self.buckets:
            ok = self.alive[b["rec"]]
            if 0 < ok.sum() < 0.6 * len(ok):
                b["rec"], b["len"] = b["rec"][ok], b["len"][ok]
                b["pid"], b["S"] = np.ascontiguousarray(b["pid"][:, ok]), np.ascontiguousarray(b["S"][:, ok])


class _Adapter(_Candidates):
    """`ReferenceBucketPool` behind the clustering's interface (nearest / farthest from costs)."""

    def __init__(self, prep: _Prepared, rec: np.ndarray):
        bound = prep.model.scale * 2 * (int(prep.lengths.max(initial=0)) + 1) * 2
        dtype = np.int32 if bound < 2**31 - 1 else np.int64
        self.pool = ReferenceBucketPool(rec, prep.lengths, prep.pid_flat, prep.ptr, prep.tables, dtype)
        self.alive = self.pool.alive
        self.method = prep.method

    def costs(self, x: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        return self.pool.costs(x, self.method)

    def remove(self, recs: Sequence[int]) -> None:
        self.pool.remove(recs)


def reference_bucket_pool(prep: _Prepared, rec: np.ndarray) -> _Candidates:
    """The former kernel as a `PoolFactory` for `lda(..., kernel=...)`."""
    return _Adapter(prep, rec)


# ------------------------------------------------------------------ the nearest search before issue 36
@njit(cache=True)
def reference_sorted_nearest(
    method,
    xi,
    xa,
    sx,
    lo,
    hi,
    lc,
    du,
    cu,
    gen_a,
    yshare_a,
    sup_min,
    icd_cost,
    parent,
    depth,
    val_node,
    ypi,
    ypa,
    ytin,
    ycost,
    ysup,
    ptr,
    alive,
    memo,
    stamp,
    slot,
):
    """`alignment_kernel.nearest` before issue 36, verbatim: every alive record's floor sorted
    (`np.argsort`), then records aligned from the least floor up. The alive record of least alignment
    cost with x, the lowest index on ties (module docstring:
    the bounds that skip records), records tried from the least bound up. `sup_min`: the cheapest
    suppression of a y value; `memo`: scratch (n_i, n_a, 2) of y floors, [a, b, 0] valid for x when
    [a, b, 1] == `stamp` (a new one per x); `slot`: scratch per ICD node, -1 on entry and on return
    (`_ancestor_best`)."""
    m = len(xi)
    cheapest = np.zeros(m + 1, dtype=np.int64)  # cheapest[t]: the t cheapest suppressions of x
    order = np.sort(sx)
    for t in range(m):
        cheapest[t + 1] = cheapest[t] + order[t]
    best_age, touched = ak._ancestor_best(xi, xa, yshare_a, parent, depth, slot)
    n_rec = len(alive)
    recs = np.flatnonzero(alive)
    floor = np.empty(len(recs), dtype=np.int64)
    yfl = np.empty(len(ypi), dtype=np.int64)  # per pair of an alive record: its least addition
    longest = 0
    for q in range(len(recs)):
        r = recs[q]
        s, n = ptr[r], ptr[r + 1] - ptr[r]
        longest = max(longest, n)
        f = 0
        for j in range(s, s + n):
            a, b = ypi[j], ypa[j]
            if memo[a, b, 1] != stamp:  # the least y value (a, b) adds to any alignment with x
                v = ysup[j]
                if m > 0:
                    node = val_node[a]
                    cy = icd_cost[node]
                    w = node
                    while w >= 0:
                        k = slot[w]
                        if k >= 0:
                            c = icd_cost[w] - cy + best_age[k, b]
                            if c < v:
                                v = c
                        w = parent[w]
                memo[a, b, 0], memo[a, b, 1] = v, stamp
            yfl[j] = memo[a, b, 0]
            f += yfl[j]
        if n < m:
            f += cheapest[m - n]
        elif n > m and (n - m) * sup_min > f:
            f = (n - m) * sup_min
        floor[q] = f
    for w in touched:
        slot[w] = -1
    row = np.empty(longest + 1, dtype=np.int64)
    rest = np.empty(longest + 1, dtype=np.int64)
    best, best_rec = ak.BIG, n_rec
    for q in np.argsort(floor, kind="mergesort"):  # least bound first, so the best cost falls early
        r = recs[q]
        if floor[q] > best:
            break  # every later bound is as high
        later = r > best_rec
        if later and floor[q] == best:
            continue
        s, n = ptr[r], ptr[r + 1] - ptr[r]
        if method == 0:
            rest[n] = 0
            for j in range(n - 1, -1, -1):
                rest[j] = rest[j + 1] + yfl[s + j]
            c = ak._ags(
                lo, hi, lc, du, cu, xa, sx, gen_a, ytin, ycost, ysup, ypa, s, n, row, rest, best, later
            )
        else:
            c = ak._baseline(lo, hi, lc, du, cu, xa, sx, gen_a, ytin, ycost, ysup, ypa, s, n)
        if c < best or (c == best and not later):
            best, best_rec = c, r
    return best_rec


class ReferenceSortedPool(_Pool):
    """`_Pool` with the nearest search before issue 36 (`reference_sorted_nearest`)."""

    def nearest(self, x: Sequence[tuple[int, int]]) -> int:
        prep = self.prep
        kt = prep.tables.kernel
        xs = prep.x_side(x)
        self._stamp += 1
        return int(
            reference_sorted_nearest(
                0 if prep.method == "a-gs" else 1,
                xs.xi,
                xs.xa,
                xs.sx,
                *xs.ancestors,
                kt.gen_a,
                kt.yshare_a,
                kt.sup_min,
                kt.icd_cost,
                kt.icd_parent,
                kt.icd_depth,
                kt.val_node,
                prep.ypi,
                prep.ypa,
                *prep.y_pairs,
                prep.ptr,
                self.alive,
                self._floors,
                self._stamp,
                self._slot,
            )
        )


def reference_sorted_pool(prep: _Prepared, rec: np.ndarray) -> _Candidates:
    """The nearest search before issue 36 as a `PoolFactory` for `lda(..., kernel=...)`."""
    return ReferenceSortedPool(prep, rec)
