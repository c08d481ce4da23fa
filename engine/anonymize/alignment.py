"""Alignment of (ICD, Age) trajectories: Baseline (Algorithm 2) and A-GS (Algorithm 3) of the
Tamersoy 2011 thesis, section IV.3.1, in exact integer arithmetic, and the look-up tables of the
compiled loops the MDAV clustering calls (`alignment_kernel`).

Costs (Definitions 4 and 6, with the worked examples' convention of `engine.hierarchy`):
- generalizing x_h with y_j costs w_ICD * LM(x.icd + y.icd -> lca) + w_Age * LM(x.age + y.age -> lca);
- suppressing a pair costs w_ICD * LM(icd -> root) + w_Age * LM(age -> root) (1 for original values).
Every cost is an integer multiple of 1 / scale, scale = W * lcm(|ICD|, |Age|) where the weights are
w_ICD = a / W, w_Age = b / W (W <= 1000), so sums and ties are exact; matrices are reported as
floats (the integer divided by scale). Ties between the three operations go to generalization
(the thesis), then to suppressing x ("up"), then to suppressing y ("left").

`align(x, y, ...)` is the public, readable A-GS / Baseline on labels (Figure 7 is its test);
`PairTables.kernel` holds the compiled loops' tables (none of them ICD nodes x ICD values: issue 36),
`ags_align` is A-GS compiled with its traceback (same integers and choices as `ags_nodes`, checked in
the tests).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from math import lcm

import numpy as np
import pandas as pd

from engine.hierarchy import Hierarchy
from engine.io.errors import UserError

DIAG, UP, LEFT = "diag", "up", "left"
METHODS = ("a-gs", "baseline")
_OPS = (DIAG, UP, LEFT)


def weight_fraction(w_icd: float, w_age: float | None = None) -> Fraction:
    """w_ICD as a fraction with denominator <= 1000; checks w_ICD, w_Age >= 0 and w_ICD + w_Age = 1."""
    if w_age is None:
        w_age = 1.0 - float(w_icd)
    if not (0 <= w_icd <= 1) or not (0 <= w_age <= 1) or abs(w_icd + w_age - 1) > 1e-9:
        raise ValueError(f"weights must be >= 0 and sum to 1 (w_icd={w_icd}, w_age={w_age})")
    return Fraction(w_icd).limit_denominator(1000)


@dataclass(frozen=True, eq=False)
class CostModel:
    """The two DGHs and the weights, as integer costs per node (see module docstring)."""

    icd: Hierarchy
    age: Hierarchy
    w_icd: Fraction

    @cached_property
    def _units(self) -> tuple[int, int, int]:
        a, w = self.w_icd.numerator, self.w_icd.denominator
        b = w - a
        L = lcm(self.icd.domain_size, self.age.domain_size)
        return a * (L // self.icd.domain_size), b * (L // self.age.domain_size), w * L

    @property
    def scale(self) -> int:
        """Integer cost units per 1.0 of loss."""
        return self._units[2]

    @cached_property
    def icd_cost(self) -> np.ndarray:
        """Per ICD node: the weighted cost of a leaf generalized to it (0 at leaves)."""
        return self._units[0] * self.icd.lost_leaves_array.astype(np.int64)

    @cached_property
    def age_cost(self) -> np.ndarray:
        return self._units[1] * self.age.lost_leaves_array.astype(np.int64)

    @cached_property
    def _lists(self) -> tuple[list[int], list[int], dict, dict]:
        return self.icd_cost.tolist(), self.age_cost.tolist(), {}, {}

    def generalize(self, xi: int, xa: int, yi: int, ya: int) -> tuple[int, int, int, int]:
        """(ICD cost, Age cost, lca ICD node, lca Age node) of generalizing x with y (Definition 6)."""
        ci, ca, memo_i, memo_a = self._lists
        gi = memo_i.get((xi, yi))
        if gi is None:
            li = self.icd._lca_index(xi, yi)
            gi = memo_i[(xi, yi)] = (2 * ci[li] - ci[xi] - ci[yi], li)
        ga = memo_a.get((xa, ya))
        if ga is None:
            la = self.age._lca_index(xa, ya)
            ga = memo_a[(xa, ya)] = (2 * ca[la] - ca[xa] - ca[ya], la)
        return gi[0], ga[0], gi[1], ga[1]

    def suppress(self, i: int, a: int) -> tuple[int, int]:
        """(ICD cost, Age cost) of suppressing a pair: its values generalized to the roots."""
        ci, ca, _, _ = self._lists
        return ci[0] - ci[i], ca[0] - ca[a]


@dataclass(frozen=True, eq=False)
class Alignment:
    """The result of aligning X (rows) with Y (columns), as Figure 7.

    `trajectory`: the anonymized (code, age) pairs as hierarchy labels; `ilm`, `alm`: i[m, n] and
    a[m, n] (weighted, including the ILM / ALM of X given as input); `i`, `a`: the (m+1) x (n+1)
    matrices; `r`: "diag" / "up" / "left" ("" at the corner); `path`: the cells of the traceback from
    (m, n) to (0, 0); `candidates`: for each cell the (ICD, Age) totals of diag / up / left
    (shape (m+1, n+1, 3, 2), NaN where an operation does not apply) for the teaching view.
    For Baseline (no dynamic programming) only the cells of its path are filled; others are NaN.
    """

    method: str
    x: list[tuple[str, str]]
    y: list[tuple[str, str]]
    trajectory: list[tuple[str, str]]
    ilm: float
    alm: float
    i: np.ndarray
    a: np.ndarray
    r: np.ndarray
    path: list[tuple[int, int]]
    candidates: np.ndarray
    ops: list[tuple[str, int, int]]  # traceback in trajectory order: (op, h, j), h/j 1-based

    @property
    def total(self) -> float:
        return self.ilm + self.alm


@dataclass(frozen=True)
class _Raw:
    """Integer result of an alignment on node indexes (the engine-internal form)."""

    pairs: list[tuple[int, int]]  # (icd node, age node) of the anonymized trajectory
    ops: list[tuple[str, int, int]]  # (op, h, j) in trajectory order, 1-based indexes
    ilm: int
    alm: int
    i: np.ndarray | None = None
    a: np.ndarray | None = None
    r: np.ndarray | None = None
    cand: np.ndarray | None = None


def ags_nodes(
    x: Sequence[tuple[int, int]],
    y: Sequence[tuple[int, int]],
    model: CostModel,
    ilm_x: int = 0,
    alm_x: int = 0,
    keep_matrices: bool = False,
) -> _Raw:
    """A-GS (Algorithm 3) on node indexes, integer costs; steps cited inline."""
    m, n = len(x), len(y)
    i = [[0] * (n + 1) for _ in range(m + 1)]
    a = [[0] * (n + 1) for _ in range(m + 1)]
    r = [[""] * (n + 1) for _ in range(m + 1)]
    # (h, j) -> the three candidate (ILM, ALM) pairs of step 22: generalize, suppress x_h, suppress y_j
    cand: dict[tuple[int, int], tuple[tuple[int, int], ...]] | None = {} if keep_matrices else None
    i[0][0], a[0][0] = ilm_x, alm_x  # step 2
    sx = [model.suppress(*p) for p in x]
    sy = [model.suppress(*p) for p in y]
    for h in range(1, m + 1):  # steps 3-7
        i[h][0], a[h][0] = i[h - 1][0] + sx[h - 1][0], a[h - 1][0] + sx[h - 1][1]
        r[h][0] = UP
    for j in range(1, n + 1):  # steps 8-12
        i[0][j], a[0][j] = i[0][j - 1] + sy[j - 1][0], a[0][j - 1] + sy[j - 1][1]
        r[0][j] = LEFT
    lcas: dict[tuple[int, int], tuple[int, int]] = {}
    for h in range(1, m + 1):  # steps 13-25
        xi, xa = x[h - 1]
        sxi, sxa = sx[h - 1]
        ih, ih1, ah, ah1, rh = i[h], i[h - 1], a[h], a[h - 1], r[h]
        for j in range(1, n + 1):
            gi, ga, li, la = model.generalize(xi, xa, *y[j - 1])
            lcas[(h, j)] = (li, la)
            d = (ih1[j - 1] + gi, ah1[j - 1] + ga)  # steps 16, 19: generalize x_h with y_j
            u = (ih1[j] + sxi, ah1[j] + sxa)  # steps 18, 21: suppress x_h
            left = (ih[j - 1] + sy[j - 1][0], ah[j - 1] + sy[j - 1][1])  # steps 17, 20: suppress y_j
            td, tu, tl = d[0] + d[1], u[0] + u[1], left[0] + left[1]
            # step 22: the minimum; ties go to generalization, then to suppressing x_h
            if td <= tu and td <= tl:
                best, op = d, DIAG
            elif tu <= tl:
                best, op = u, UP
            else:
                best, op = left, LEFT
            ih[j], ah[j] = best
            rh[j] = op
            if cand is not None:
                cand[(h, j)] = (d, u, left)
    pairs, ops = [], []
    h, j = m, n
    while h >= 1 or j >= 1:  # steps 26-36
        op = r[h][j]
        if op == DIAG:
            pairs.append(lcas[(h, j)])
            ops.append((DIAG, h, j))
            h, j = h - 1, j - 1
        elif op == LEFT:
            ops.append((LEFT, h, j))
            j -= 1
        else:
            ops.append((UP, h, j))
            h -= 1
    pairs.reverse()
    ops.reverse()
    if cand is None:  # not keep_matrices
        return _Raw(pairs, ops, i[m][n], a[m][n])
    cm = np.full((m + 1, n + 1, 3, 2), -1, dtype=np.int64)
    for (h, j), opts in cand.items():
        cm[h, j] = opts
    return _Raw(
        pairs, ops, i[m][n], a[m][n], np.array(i, np.int64), np.array(a, np.int64), np.array(r, object), cm
    )


def baseline_nodes(
    x: Sequence[tuple[int, int]],
    y: Sequence[tuple[int, int]],
    model: CostModel,
    ilm_x: int = 0,
    alm_x: int = 0,
    keep_matrices: bool = False,
) -> _Raw:
    """Baseline (Algorithm 2): match pairs on the same index, suppress the longer one's tail."""
    m, n = len(x), len(y)
    s = min(m, n)  # step 3
    ilm, alm = ilm_x, alm_x
    pairs, ops = [], []
    i = np.full((m + 1, n + 1), -1, dtype=np.int64)
    a = np.full((m + 1, n + 1), -1, dtype=np.int64)
    r = np.full((m + 1, n + 1), "", dtype=object)
    i[0, 0], a[0, 0] = ilm, alm
    for j in range(1, s + 1):  # steps 4-9
        gi, ga, li, la = model.generalize(*x[j - 1], *y[j - 1])
        pairs.append((li, la))
        ops.append((DIAG, j, j))
        ilm, alm = ilm + gi, alm + ga
        i[j, j], a[j, j], r[j, j] = ilm, alm, DIAG
    h, j = s, s
    longer, is_x = (x, True) if m > n else (y, False)
    for t in range(s + 1, len(longer) + 1):  # steps 10-14
        si, sa = model.suppress(*longer[t - 1])
        ilm, alm = ilm + si, alm + sa
        h, j = (t, j) if is_x else (h, t)
        i[h, j], a[h, j], r[h, j] = ilm, alm, UP if is_x else LEFT
        ops.append((UP if is_x else LEFT, h, j))
    return _Raw(pairs, ops, ilm, alm, i, a, r, None)


def _to_alignment(raw: _Raw, method: str, x_lab, y_lab, model: CostModel, m: int, n: int) -> Alignment:
    if raw.i is None or raw.a is None or raw.r is None:
        raise ValueError("an Alignment needs the dynamic programme's matrices (keep_matrices=True)")
    sc = float(model.scale)

    def fl(mat: np.ndarray) -> np.ndarray:
        out = mat.astype(float) / sc
        out[mat < 0] = np.nan
        return out

    cand = np.full((m + 1, n + 1, 3, 2), np.nan)
    if raw.cand is not None:
        cand = fl(raw.cand)
    path = [(0, 0)] + [(h, j) for _op, h, j in raw.ops]
    path = sorted(set(path), key=lambda c: (c[0] + c[1], c[0]), reverse=True)
    return Alignment(
        method=method,
        x=list(x_lab),
        y=list(y_lab),
        trajectory=[(model.icd.labels[i], model.age.labels[a]) for i, a in raw.pairs],
        ilm=raw.ilm / sc,
        alm=raw.alm / sc,
        i=fl(raw.i),
        a=fl(raw.a),
        r=raw.r,
        path=path,
        candidates=cand,
        ops=raw.ops,
    )


def to_nodes(pairs: Sequence[tuple[object, object]], model: CostModel) -> list[tuple[int, int]]:
    """(code, age) pairs (labels or raw ages) -> node indexes; KeyError names unknown values."""
    out = []
    for code, age in pairs:
        out.append((model.icd.index(model.icd.leaf_of(code)), model.age.index(model.age.leaf_of(age))))
    return out


def align(
    x: Sequence[tuple[object, object]],
    y: Sequence[tuple[object, object]],
    icd_hierarchy: Hierarchy,
    age_hierarchy: Hierarchy,
    w_icd: float = 0.5,
    w_age: float = 0.5,
    method: str = "a-gs",
    ilm_x: float = 0.0,
    alm_x: float = 0.0,
) -> Alignment:
    """Align trajectory x (rows) with y (columns): A-GS (Algorithm 3) or Baseline (Algorithm 2).

    x and y are sequences of (code, age) pairs ordered by age; values may be generalized nodes
    (`401`, `[35-36]`). `ilm_x`, `alm_x`: the loss X already carries (Algorithm 3, step 2).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    model = CostModel(icd_hierarchy, age_hierarchy, weight_fraction(w_icd, w_age))
    xn, yn = to_nodes(x, model), to_nodes(y, model)
    x_lab = [(model.icd.labels[i], model.age.labels[a]) for i, a in xn]
    y_lab = [(model.icd.labels[i], model.age.labels[a]) for i, a in yn]
    i0, a0 = round(ilm_x * model.scale), round(alm_x * model.scale)
    fn = ags_nodes if method == "a-gs" else baseline_nodes
    raw = fn(xn, yn, model, i0, a0, keep_matrices=True)
    return _to_alignment(raw, method, x_lab, y_lab, model, len(xn), len(yn))


# ------------------------------------------------------------------------- batched kernel
def lca_table(h: Hierarchy, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """(len(rows), len(cols)) lowest common ancestors of node indexes, vectorized over the paths."""
    depth = h.depth_array
    dmax = int(depth.max()) + 1
    anc = np.full((len(h), dmax), -1, dtype=np.int64)
    node = np.arange(len(h))
    cur = node.copy()
    for _ in range(dmax):
        ok = cur >= 0
        anc[node[ok], depth[cur[ok]]] = cur[ok]
        cur = np.where(ok, h.parent_index[np.maximum(cur, 0)], -1)
    ar, ac = anc[rows], anc[cols]
    out = np.zeros((len(rows), len(cols)), dtype=np.int64)
    for d in range(dmax):  # deepest common ancestor wins
        same = (ar[:, d][:, None] == ac[:, d][None, :]) & (ar[:, d][:, None] >= 0)
        out = np.where(same, ar[:, d][:, None], out)
    return out


@dataclass(frozen=True, eq=False)
class PairTables:
    """Look-up tables for the batched kernel over a fixed set of y values.

    y values are the distinct ICD nodes `icd_vals` and Age nodes `age_vals` present in the data; a
    y pair is encoded as `icd_pos * len(age_vals) + age_pos`. `row(xi, xa)` gives, for every y
    pair, cost(generalize x with y) - cost(suppress y), the only x-dependent term of a DP row.
    """

    model: CostModel
    icd_vals: np.ndarray
    age_vals: np.ndarray

    @property
    def n_values(self) -> int:
        """V: the number of encoded y pairs; code V itself is the padding sentinel (costs 0)."""
        return len(self.icd_vals) * len(self.age_vals)

    @cached_property
    def _lca(self) -> tuple[np.ndarray, np.ndarray]:
        """Dense (node x value) lowest common ancestors of both hierarchies: for `row` and `_parts`
        (the tests' reference kernel) only; the compiled loops use `kernel`, which holds no
        (ICD node x ICD value) table (issue 36)."""
        icd = self.model.icd
        return lca_table(icd, np.arange(len(icd)), self.icd_vals), self._lca_age

    @cached_property
    def _lca_age(self) -> np.ndarray:
        age = self.model.age
        return lca_table(age, np.arange(len(age)), self.age_vals)

    @cached_property
    def _parts(self) -> dict[str, np.ndarray]:
        """Per (x node, y value): the x share c(lca) - c(x) and the y share c(lca) - c(y) of a
        generalization, per attribute, and the y values' suppression costs."""
        ci, ca = self.model.icd_cost, self.model.age_cost
        li, la = self._lca
        return {
            "xi": ci[li] - ci[:, None],
            "yi": ci[li] - ci[self.icd_vals][None, :],
            "xa": ca[la] - ca[:, None],
            "ya": ca[la] - ca[self.age_vals][None, :],
            "sup_i": ci[0] - ci[self.icd_vals],
            "sup_a": ca[0] - ca[self.age_vals],
        }

    @cached_property
    def _g(self) -> tuple[np.ndarray, np.ndarray]:
        p = self._parts
        return p["xi"] + p["yi"] - p["sup_i"][None, :], p["xa"] + p["ya"] - p["sup_a"][None, :]

    def row(self, xi: int, xa: int, dtype=np.int64) -> np.ndarray:
        """cost(generalize x with y) - cost(suppress y) for every encoded y pair, then 0 (sentinel)."""
        gi, ga = self._g
        return np.append((gi[xi][:, None] + ga[xa][None, :]).ravel(), 0).astype(dtype)

    def y_suppress(self, pid: np.ndarray) -> np.ndarray:
        """Suppression cost of encoded y pairs (0 for the padding sentinel)."""
        ci, ca = self.model.icd_cost, self.model.age_cost
        sup_i, sup_a = ci[0] - ci[self.icd_vals], ca[0] - ca[self.age_vals]
        na = len(self.age_vals)
        ok = pid < self.n_values
        q = np.where(ok, pid, 0)
        return np.where(ok, sup_i[q // na] + sup_a[q % na], 0)

    @cached_property
    def kernel(self) -> KernelTables:
        """The tables of the compiled loops (`alignment_kernel`), contiguous int64: dense over the
        (few) age nodes and values, and for the ICD hierarchy only per node and per value (the lca
        of an x's ICD node and a value is found from the node's ancestors' DFS intervals,
        `alignment_kernel.x_ancestors`)."""
        c = np.ascontiguousarray
        model, icd = self.model, self.model.icd
        ci, ca = model.icd_cost, model.age_cost
        la = self._lca_age
        xa = ca[la] - ca[:, None]
        ya = ca[la] - ca[self.age_vals][None, :]
        sup_i, sup_a = ci[0] - ci[self.icd_vals], ca[0] - ca[self.age_vals]
        sup = sup_i[:, None] + sup_a[None, :]
        return KernelTables(
            icd_cost=c(ci),
            icd_parent=c(icd.parent_index, dtype=np.int64),
            icd_depth=c(icd.depth_array, dtype=np.int64),
            icd_tin=c(icd._tin, dtype=np.int64),
            icd_tout=c(icd._tout, dtype=np.int64),
            val_node=c(self.icd_vals, dtype=np.int64),
            val_tin=c(icd._tin[self.icd_vals], dtype=np.int64),
            val_cost=c(ci[self.icd_vals]),
            gen_a=c(xa + ya),
            yshare_a=c(ya),
            sup_i=c(sup_i),
            sup_a=c(sup_a),
            sup_min=int(sup.min(initial=0)),
            sx_i=c(ci[0] - ci),
            sx_a=c(ca[0] - ca),
            lca_a=la,
        )


@dataclass(frozen=True, eq=False)
class KernelTables:
    """`PairTables` for `alignment_kernel`. Ages (a few hundred nodes and values): per (x node, y
    value) the generalization cost (`gen_a`, x share + y share), the y share alone (`yshare_a`) and
    the lca (`lca_a`). ICD (issue 36: 13,273 nodes x 12,081 values on the paper-scale cohort, 1.28 GB
    per dense table): per node its cost (`icd_cost`), parent, depth and DFS interval (`icd_tin`,
    `icd_tout`), per value its node, DFS entry and cost (`val_node`, `val_tin`, `val_cost`): the
    lca of an x's node and a value is the deepest ancestor of the node whose DFS interval holds the
    value's entry (`alignment_kernel.x_ancestors`). Per value its suppression (`sup_*`, `sup_min`
    the cheapest pair), per node its suppression (`sx_*`)."""

    icd_cost: np.ndarray
    icd_parent: np.ndarray
    icd_depth: np.ndarray
    icd_tin: np.ndarray
    icd_tout: np.ndarray
    val_node: np.ndarray
    val_tin: np.ndarray
    val_cost: np.ndarray
    gen_a: np.ndarray
    yshare_a: np.ndarray
    sup_i: np.ndarray
    sup_a: np.ndarray
    sup_min: int
    sx_i: np.ndarray
    sx_a: np.ndarray
    lca_a: np.ndarray

    def x_arrays(self, x: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """x's ICD nodes, Age nodes and pair suppression costs."""
        xi = np.fromiter((p[0] for p in x), np.int64, len(x))
        xa = np.fromiter((p[1] for p in x), np.int64, len(x))
        return xi, xa, self.sx_i[xi] + self.sx_a[xa]

    def x_side(self, x: Sequence[tuple[int, int]]) -> XSide:
        """What the compiled loops need of one x: its pairs and its ICD nodes' ancestors
        (`alignment_kernel.x_ancestors`)."""
        from engine.anonymize import alignment_kernel

        xi, xa, sx = self.x_arrays(x)
        lo, hi, lc, du, cu = alignment_kernel.x_ancestors(
            xi, self.icd_parent, self.icd_depth, self.icd_tin, self.icd_tout, self.icd_cost
        )
        return XSide(xi, xa, sx, lo, hi, lc, du, cu)

    def y_side(self, ypi: np.ndarray, ypa: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per pair of y (value positions `ypi`, `ypa`): its ICD value's DFS entry and cost, and its
        ICD and age suppression costs."""
        return self.val_tin[ypi], self.val_cost[ypi], self.sup_i[ypi], self.sup_a[ypa]


@dataclass(frozen=True, eq=False)
class XSide:
    """One x for the compiled loops: ICD nodes `xi`, Age nodes `xa`, pair suppressions `sx`, and per
    pair h its ICD node's ancestors from the root down: DFS intervals `lo[h]`, `hi[h]`, costs
    `lc[h]`, the node's depth `du[h]` and cost `cu[h]` (`alignment_kernel.x_ancestors`)."""

    xi: np.ndarray
    xa: np.ndarray
    sx: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    lc: np.ndarray
    du: np.ndarray
    cu: np.ndarray

    @property
    def ancestors(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.lo, self.hi, self.lc, self.du, self.cu


def ags_align(
    x: Sequence[tuple[int, int]],
    ypi: np.ndarray,
    ypa: np.ndarray,
    tables: PairTables,
    ilm_x: int = 0,
    alm_x: int = 0,
    side: XSide | None = None,
) -> _Raw:
    """A-GS of x (node pairs) with y (its values' positions in `tables`' ICD and Age values), compiled
    and without the matrices (`alignment_kernel.ags_trace`): the same anonymized pairs, traceback and
    ILM / ALM as `ags_nodes` (which it is tested against). `side`: x's `KernelTables.x_side`, when
    the caller made it already."""
    from engine.anonymize import alignment_kernel

    kt = tables.kernel
    xs = side if side is not None else kt.x_side(x)
    ytin, ycost, ysup_i, ysup_a = kt.y_side(ypi, ypa)
    ops, hs, js, ilm, alm = alignment_kernel.ags_trace(
        *xs.ancestors, xs.xa, kt.sx_i[xs.xi], kt.sx_a[xs.xa], kt.gen_a, ytin, ycost, ysup_i, ysup_a, ypa
    )
    names = (DIAG, UP, LEFT)
    trace = [(names[o], h, j) for o, h, j in zip(ops.tolist(), hs.tolist(), js.tolist(), strict=True)]
    diag = ops == 0
    h0, j0 = hs[diag] - 1, js[diag] - 1
    li = alignment_kernel.lca_many(xs.xi[h0], kt.val_node[ypi[j0]], kt.icd_parent, kt.icd_depth)
    la = kt.lca_a[xs.xa[h0], ypa[j0]]
    pairs = list(zip(li.tolist(), la.tolist(), strict=True))
    return _Raw(pairs, trace, ilm_x + int(ilm), alm_x + int(alm))


class TrajectoryTextError(UserError, ValueError):
    """A typed trajectory that is not pairs `(code, age)`; the message shows the form."""


_PAIR = re.compile(r"\(\s*([^,()]+?)\s*,\s*([^()]+?)\s*\)")


def parse_trajectory(text: str) -> list[tuple[str, str]]:
    """`(401.1, 33) (401.1, 34)` -> [("401.1", "33"), ("401.1", "34")]; TrajectoryTextError naming the problem."""
    pairs = _PAIR.findall(text)
    rest = _PAIR.sub("", text).strip(" ,;\n\t")
    if rest:
        raise TrajectoryTextError(
            f"could not read {rest[:40]!r}: write pairs as (code, age), e.g. (401.1, 33) (401.1, 34)"
        )
    if not pairs:
        raise TrajectoryTextError("no (code, age) pair found: write e.g. (401.1, 33) (401.1, 34)")
    return [(c.strip(), a.strip()) for c, a in pairs]


def alignment_long(al: Alignment) -> pd.DataFrame:
    """One row per cell: h, j, the pairs, i, a, r and whether the traceback passes through it."""
    path = set(al.path)
    rows = []
    for h in range(al.i.shape[0]):
        for j in range(al.i.shape[1]):
            rows.append(
                {
                    "h": h,
                    "j": j,
                    "x": "∅" if h == 0 else f"({al.x[h - 1][0]}, {al.x[h - 1][1]})",
                    "y": "∅" if j == 0 else f"({al.y[j - 1][0]}, {al.y[j - 1][1]})",
                    "i": al.i[h, j],
                    "a": al.a[h, j],
                    "r": al.r[h, j],
                    "on_path": (h, j) in path,
                }
            )
    return pd.DataFrame(rows)
