"""The LDA's batched kernel before issue 24, kept as a plain reference: trajectories bucketed by
length into padded column-major arrays, every alive record aligned with x at every step of MDAV,
and the readable `ags_nodes` for the chosen record. `lda(..., kernel=reference_bucket_pool)` runs
the clustering with it; tests/test_trajectories.py and bench/trajectories.py compare the current
kernel (flat layout, lower bounds, memoized rows) against it, release for release.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.anonymize.alignment import PairTables
from engine.anonymize.trajectories import _Candidates, _Prepared


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
