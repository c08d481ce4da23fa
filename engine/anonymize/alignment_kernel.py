"""MDAV's questions of the LDA (`engine.anonymize.trajectories`) as compiled loops: the alignment cost
of one trajectory x against many records, the nearest record, and A-GS with its traceback.

The costs are those of `engine.anonymize.alignment` (Tamersoy 2011 thesis, section IV.3.1), integers
from its tables (`KernelTables`), with no table over ICD nodes x ICD values (issue 36: 13,273 x
12,081 on the paper-scale cohort, 1.28 GB each). The ICD cost of generalizing x's pair h with a y
pair is 2 c(lca) - c(x) - c(y), the lca the deepest ancestor of x's node whose DFS interval holds
y's ICD value (`x_ancestors`: per pair of x its node's ancestors, root first; at most the depth of
the hierarchy in steps, over arrays that stay in cache); `gen_a` the age cost over every age node
and value; `yshare_a` the age y share alone; per pair of the data `ytin`, `ycost` its ICD value's
DFS entry and cost and `ysup` its suppression cost; `sx[h]` the suppression cost of x's pair h. A
record r's pairs are ptr[r]:ptr[r + 1] of those arrays (`ypi`, `ypa` their ICD and age value
positions). `method` 0 is A-GS (Algorithm 3), 1 is Baseline (Algorithm 2).

A-GS is the dynamic programme of `alignment.ags_nodes` on totals (ILM + ALM): step 22 chooses by
the total only, so the minimum cost, and the choices with their tie rule (generalize, then suppress
x, then suppress y), are the same. `nearest` skips records by two lower bounds, both exact:
before aligning, `floor` (every pair of y adds at least the least of suppressing it and its y share
with some pair of x; when x is longer at least its m - n cheapest suppressions, when y is longer
at least n - m suppressions of y's cheapest value); while aligning, the least total of the current
row plus a lower bound of what y's remaining pairs add (their floors: every cost is >= 0, so the
final total is at least that of some cell of each row). Records are tried from the least floor up:
the record of least floor is aligned first, and only the records whose floor is at most its cost are
sorted (issue 36: sorting every alive record's floor was a third of the search at paper scale), and
a record's remaining floors (`rest`) are read off the per-value memo of this x rather than stored
per pair of every alive record at every step (0.6 MB written per step at paper scale). A
record is skipped only when its bound exceeds the best cost found, or equals it and the record comes
later than the best one (ties go to the lowest record index). A y value's least y share over x's
pairs is read off the ancestors of its ICD node (`_ancestor_best`): the ICD y share with x's pair h
is c(lca) - c(y), and the lca is the deepest ancestor of y above some ICD node of x, so the least
over h is the least over y's ancestors w of c(w) - c(y) plus the least age y share among x's pairs
under w: depth + 1 steps per value, not m (issue 36).

Numba compiles these loops (`cache=True`: once per installation, then loaded from the cache);
tests/test_trajectories.py checks them against `ags_nodes` / `baseline_nodes` and the clustering
against the pure-Python reference and the former numpy kernel (tests/reference_lda.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit

BIG = 2**62  # above every cost


@njit(cache=True)
def x_ancestors(xi, parent, depth, tin, tout, icd_cost):
    """Per pair h of x, the ancestors of its ICD node xi[h] from the root down (depth d at column d,
    `du[h]` its depth): their DFS intervals `lo`, `hi` and costs `lc`, and the node's cost `cu`. An
    ICD value y with DFS entry t lies under the ancestor at depth d when lo[h, d] <= t < hi[h, d];
    the deepest such is lca(xi[h], y)."""
    m = len(xi)
    most = 1
    for h in range(m):
        most = max(most, depth[xi[h]] + 1)
    lo = np.zeros((m, most), dtype=np.int64)
    hi = np.zeros((m, most), dtype=np.int64)
    lc = np.zeros((m, most), dtype=np.int64)
    du = np.empty(m, dtype=np.int64)
    cu = np.empty(m, dtype=np.int64)
    for h in range(m):
        w = xi[h]
        du[h], cu[h] = depth[w], icd_cost[w]
        for d in range(depth[w], -1, -1):
            lo[h, d], hi[h, d], lc[h, d] = tin[w], tout[w], icd_cost[w]
            w = parent[w]
    return lo, hi, lc, du, cu


@njit(cache=True)
def _gen_icd(lo, hi, lc, du, cu, h, t, cy):
    """The ICD cost of generalizing x's pair h with an ICD value of DFS entry t and cost cy:
    2 c(lca) - c(x) - c(y), the lca the deepest ancestor of x's node whose interval holds t."""
    d = 0
    dmax = du[h]
    while d < dmax and lo[h, d + 1] <= t and t < hi[h, d + 1]:
        d += 1
    return 2 * lc[h, d] - cu[h] - cy


@njit(cache=True)
def lca_many(us, vs, parent, depth):
    """The lowest common ancestor of each (us[t], vs[t]) in a hierarchy given by `parent`, `depth`."""
    out = np.empty(len(us), dtype=np.int64)
    for t in range(len(us)):
        i, j = us[t], vs[t]
        while depth[i] > depth[j]:
            i = parent[i]
        while depth[j] > depth[i]:
            j = parent[j]
        while i != j:
            i, j = parent[i], parent[j]
        out[t] = i
    return out


@njit(cache=True)
def _ancestor_best(xi, xa, yshare_a, parent, depth, slot):
    """Per ICD node w above (or at) some ICD node of x: `best[slot[w], b]` the least age y share of
    value b among x's pairs under w. `slot` (-1 for every node on entry) is filled for those nodes;
    the list of them is returned so the caller can reset it."""
    m = len(xi)
    n_age = yshare_a.shape[1]
    most = 0
    for h in range(m):
        most += depth[xi[h]] + 1
    best = np.empty((max(most, 1), n_age), dtype=np.int64)
    touched = np.empty(max(most, 1), dtype=np.int64)
    used = 0
    for h in range(m):
        ya = yshare_a[xa[h]]
        w = xi[h]
        while w >= 0:
            q = slot[w]
            if q < 0:
                q = used
                slot[w] = q
                touched[q] = w
                used += 1
                for b in range(n_age):
                    best[q, b] = ya[b]
            else:
                for b in range(n_age):
                    if ya[b] < best[q, b]:
                        best[q, b] = ya[b]
            w = parent[w]
    return best, touched[:used]


@njit(cache=True)
def _ags(lo, hi, lc, du, cu, xa, sx, gen_a, ytin, ycost, ysup, ypa, s, n, row, rest, limit, limit_later):
    """A-GS total of x against the record of pairs s..s+n (`row`: n + 1 cells of scratch). Returns
    BIG as soon as no cell of a row can end below `limit` (or at it, when `limit_later`): a cell
    (h, j) ends at least at its total plus `rest[j]`, a lower bound of what y's pairs after j add
    (zeros: the row's least total)."""
    m = len(du)
    row[0] = 0
    for j in range(n):  # steps 8-12: suppress y's pairs
        row[j + 1] = row[j] + ysup[s + j]
    for h in range(m):  # steps 13-25
        ga = gen_a[xa[h]]
        up = sx[h]
        dmax = du[h]
        cx = cu[h]
        diag = row[0]
        left = diag + up
        row[0] = left
        least = left + rest[0]
        for j in range(n):
            t = ytin[s + j]
            d = 0  # the lca's depth (`_gen_icd`, inlined)
            while d < dmax and lo[h, d + 1] <= t and t < hi[h, d + 1]:
                d += 1
            g = diag + 2 * lc[h, d] - cx - ycost[s + j] + ga[ypa[s + j]]
            diag = row[j + 1]
            u = diag + up
            lt = left + ysup[s + j]
            v = g if g <= u else u
            if lt < v:
                v = lt
            row[j + 1] = v
            left = v
            if v + rest[j + 1] < least:
                least = v + rest[j + 1]
        if least > limit or (limit_later and least == limit):
            return BIG
    return row[n]


@njit(cache=True)
def _baseline(lo, hi, lc, du, cu, xa, sx, gen_a, ytin, ycost, ysup, ypa, s, n):
    """Baseline total of x against the record of pairs s..s+n: pairs matched on the same index,
    the longer one's tail suppressed."""
    m = len(du)
    total = 0
    for j in range(min(m, n)):
        total += _gen_icd(lo, hi, lc, du, cu, j, ytin[s + j], ycost[s + j]) + gen_a[xa[j], ypa[s + j]]
    for h in range(n, m):
        total += sx[h]
    for j in range(m, n):
        total += ysup[s + j]
    return total


@njit(cache=True)
def costs(method, lo, hi, lc, du, cu, xa, sx, gen_a, ytin, ycost, ysup, ypa, ptr, recs):
    """The alignment cost of x with every record of `recs`."""
    out = np.empty(len(recs), dtype=np.int64)
    longest = 0
    for r in recs:
        longest = max(longest, ptr[r + 1] - ptr[r])
    row = np.empty(longest + 1, dtype=np.int64)
    rest = np.zeros(longest + 1, dtype=np.int64)
    for q in range(len(recs)):
        r = recs[q]
        s, n = ptr[r], ptr[r + 1] - ptr[r]
        if method == 0:
            out[q] = _ags(
                lo, hi, lc, du, cu, xa, sx, gen_a, ytin, ycost, ysup, ypa, s, n, row, rest, BIG, False
            )
        else:
            out[q] = _baseline(lo, hi, lc, du, cu, xa, sx, gen_a, ytin, ycost, ysup, ypa, s, n)
    return out


@njit(cache=True)
def nearest(
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
    """The alive record of least alignment cost with x, the lowest index on ties (module docstring:
    the bounds that skip records), records tried from the least bound up. `sup_min`: the cheapest
    suppression of a y value; `memo`: scratch (n_i, n_a, 2) of y floors, [a, b, 0] valid for x when
    [a, b, 1] == `stamp` (a new one per x); `slot`: scratch per ICD node, -1 on entry and on return
    (`_ancestor_best`)."""
    m = len(xi)
    cheapest = np.zeros(m + 1, dtype=np.int64)  # cheapest[t]: the t cheapest suppressions of x
    order = np.sort(sx)
    for t in range(m):
        cheapest[t + 1] = cheapest[t] + order[t]
    best_age, touched = _ancestor_best(xi, xa, yshare_a, parent, depth, slot)
    n_rec = len(alive)
    recs = np.flatnonzero(alive)
    floor = np.empty(len(recs), dtype=np.int64)
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
            f += memo[a, b, 0]
        if n < m:
            f += cheapest[m - n]
        elif n > m and (n - m) * sup_min > f:
            f = (n - m) * sup_min
        floor[q] = f
    for w in touched:
        slot[w] = -1
    if len(recs) == 0:
        return n_rec
    row = np.empty(longest + 1, dtype=np.int64)
    rest = np.empty(longest + 1, dtype=np.int64)
    # The record of least bound first: its cost bounds the answer, so only the records whose bound is
    # at most that cost are sorted (sorting every alive record's bound was a third of the search).
    first = np.argmin(floor)  # the lowest index among equal bounds, as the sorted order's first
    r = recs[first]
    s, n = ptr[r], ptr[r + 1] - ptr[r]
    best = _record_cost(
        method,
        lo,
        hi,
        lc,
        du,
        cu,
        xa,
        sx,
        gen_a,
        ytin,
        ycost,
        ysup,
        ypa,
        ypi,
        memo,
        s,
        n,
        row,
        rest,
        BIG,
        False,
    )
    best_rec = r
    cand = np.flatnonzero(floor <= best)
    for q in cand[np.argsort(floor[cand], kind="mergesort")]:  # least bound first: the best falls early
        if q == first:
            continue
        r = recs[q]
        if floor[q] > best:
            break  # every later bound is as high
        later = r > best_rec
        if later and floor[q] == best:
            continue
        s, n = ptr[r], ptr[r + 1] - ptr[r]
        c = _record_cost(
            method,
            lo,
            hi,
            lc,
            du,
            cu,
            xa,
            sx,
            gen_a,
            ytin,
            ycost,
            ysup,
            ypa,
            ypi,
            memo,
            s,
            n,
            row,
            rest,
            best,
            later,
        )
        if c < best or (c == best and not later):
            best, best_rec = c, r
    return best_rec


@njit(cache=True)
def _record_cost(
    method,
    lo,
    hi,
    lc,
    du,
    cu,
    xa,
    sx,
    gen_a,
    ytin,
    ycost,
    ysup,
    ypa,
    ypi,
    memo,
    s,
    n,
    row,
    rest,
    limit,
    later,
):
    """x's cost with the record of pairs s..s+n for `nearest`: A-GS given up (BIG) once it cannot end
    below `limit` (`_ags`, `rest` filled from the pairs' floors, `memo`'s for this x), or Baseline."""
    if method == 0:
        rest[n] = 0
        for j in range(n - 1, -1, -1):
            rest[j] = rest[j + 1] + memo[ypi[s + j], ypa[s + j], 0]
        return _ags(lo, hi, lc, du, cu, xa, sx, gen_a, ytin, ycost, ysup, ypa, s, n, row, rest, limit, later)
    return _baseline(lo, hi, lc, du, cu, xa, sx, gen_a, ytin, ycost, ysup, ypa, s, n)


@njit(cache=True)
def ags_trace(lo, hi, lc, du, cu, xa, sx_i, sx_a, gen_a, ytin, ycost, ysup_i, ysup_a, ypa):
    """A-GS of x with one record y (per pair: ICD DFS entry `ytin`, ICD cost `ycost`, suppression
    costs `ysup_i`, `ysup_a`, age value position `ypa`) with its traceback: (ops, hs, js) in
    trajectory order (0 generalize, 1 suppress x, 2 suppress y; 1-based h, j), the ICD and Age cost
    of the path. `alignment.ags_align` reads the pairs off the generalizations."""
    m, n = len(du), len(ytin)
    r = np.empty((m + 1, n + 1), dtype=np.int8)
    prev = np.empty(n + 1, dtype=np.int64)
    cur = np.empty(n + 1, dtype=np.int64)
    prev[0] = 0
    for j in range(n):
        prev[j + 1] = prev[j] + ysup_i[j] + ysup_a[j]
        r[0, j + 1] = 2
    for h in range(m):
        ga = gen_a[xa[h]]
        up = sx_i[h] + sx_a[h]
        cur[0] = prev[0] + up
        r[h + 1, 0] = 1
        for j in range(n):
            d = prev[j] + _gen_icd(lo, hi, lc, du, cu, h, ytin[j], ycost[j]) + ga[ypa[j]]
            u = prev[j + 1] + up
            lt = cur[j] + ysup_i[j] + ysup_a[j]
            if d <= u and d <= lt:  # step 22: ties go to generalization, then to suppressing x_h
                cur[j + 1], r[h + 1, j + 1] = d, 0
            elif u <= lt:
                cur[j + 1], r[h + 1, j + 1] = u, 1
            else:
                cur[j + 1], r[h + 1, j + 1] = lt, 2
        prev, cur = cur, prev
    ops = np.empty(m + n, dtype=np.int8)
    hs = np.empty(m + n, dtype=np.int64)
    js = np.empty(m + n, dtype=np.int64)
    ilm, alm = 0, 0
    t = 0
    h, j = m, n
    while h >= 1 or j >= 1:  # steps 26-36
        op = r[h, j]
        ops[t], hs[t], js[t] = op, h, j
        t += 1
        if op == 0:
            ilm += _gen_icd(lo, hi, lc, du, cu, h - 1, ytin[j - 1], ycost[j - 1])
            alm += gen_a[xa[h - 1], ypa[j - 1]]
            h, j = h - 1, j - 1
        elif op == 2:
            ilm += ysup_i[j - 1]
            alm += ysup_a[j - 1]
            j -= 1
        else:
            ilm += sx_i[h - 1]
            alm += sx_a[h - 1]
            h -= 1
    return ops[:t][::-1].copy(), hs[:t][::-1].copy(), js[:t][::-1].copy(), ilm, alm
