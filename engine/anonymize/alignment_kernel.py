"""MDAV's questions of the LDA (`engine.anonymize.trajectories`) as compiled loops: the alignment cost
of one trajectory x against many records, the nearest record, and A-GS with its traceback.

The costs are those of `engine.anonymize.alignment` (Tamersoy 2011 thesis, section IV.3.1), integers
from its tables (`KernelTables`): `gx[xrow[h], a]` the ICD cost of generalizing x's pair h with the
a-th ICD value of the data (x share + y share; made per x by `icd_rows` from the hierarchy, never
as a table over every ICD node: issue 36), `gen_a` the same for ages over every age node; `yshare_a`
the age y share alone; `sup_i[a]`, `sup_a[b]` the suppression costs of the values; `sx[h]` the
suppression cost of x's pair h. A record r's pairs are `ypi[ptr[r]:ptr[r + 1]]` (ICD value
positions) and `ypa` (age value positions). `method` 0 is A-GS (Algorithm 3), 1 is Baseline
(Algorithm 2).

A-GS is the dynamic programme of `alignment.ags_nodes` on totals (ILM + ALM): step 22 chooses by
the total only, so the minimum cost, and the choices with their tie rule (generalize, then suppress
x, then suppress y), are the same. `nearest` skips records by two lower bounds, both exact:
before aligning, `floor` (every pair of y adds at least the least of suppressing it and its y share
with some pair of x; when x is longer at least its m - n cheapest suppressions, when y is longer
at least n - m suppressions of y's cheapest value); while aligning, the least total of the current
row (every cost is >= 0, so the final total is at least the total of some cell of each row). A
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
def icd_rows(nodes, icd_cost, parent, depth, tin, tout, val_node, val_order, val_tin):
    """Per ICD node u of `nodes`, the ICD generalization cost 2 c(lca(u, y)) - c(u) - c(y) with every
    ICD value y (`val_node`): the values in DFS order (`val_order`, their `val_tin`) under each ancestor
    w of u form one run, whose lca with u is w (the deepest such w)."""
    n_val = len(val_node)
    out = np.empty((len(nodes), n_val), dtype=np.int64)
    lca_cost = np.empty(n_val, dtype=np.int64)  # in DFS order of the values
    for q in range(len(nodes)):
        u = nodes[q]
        chain = np.empty(depth[u] + 1, dtype=np.int64)
        w = u
        for t in range(depth[u], -1, -1):
            chain[t] = w
            w = parent[w]
        for t in range(depth[u] + 1):  # the root first, each deeper ancestor over its own run
            w = chain[t]
            lo = np.searchsorted(val_tin, tin[w])
            hi = np.searchsorted(val_tin, tout[w])
            lca_cost[lo:hi] = icd_cost[w]
        cu = icd_cost[u]
        for p in range(n_val):
            a = val_order[p]
            out[q, a] = 2 * lca_cost[p] - cu - icd_cost[val_node[a]]
    return out


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
def _ags(xrow, xa, sx, gx, gen_a, sup_i, sup_a, ypi, ypa, s, n, row, limit, limit_later):
    """A-GS total of x against the record of pairs s..s+n (`row`: n + 1 cells of scratch). Returns
    BIG as soon as a row's least total exceeds `limit`, or reaches it when `limit_later`."""
    m = len(xrow)
    row[0] = 0
    for j in range(n):  # steps 8-12: suppress y's pairs
        row[j + 1] = row[j] + sup_i[ypi[s + j]] + sup_a[ypa[s + j]]
    for h in range(m):  # steps 13-25
        gi = gx[xrow[h]]
        ga = gen_a[xa[h]]
        up = sx[h]
        diag = row[0]
        left = diag + up
        row[0] = left
        least = left
        for j in range(n):
            a = ypi[s + j]
            b = ypa[s + j]
            d = diag + gi[a] + ga[b]
            diag = row[j + 1]
            u = diag + up
            lt = left + sup_i[a] + sup_a[b]
            v = d if d <= u else u
            if lt < v:
                v = lt
            row[j + 1] = v
            left = v
            if v < least:
                least = v
        if least > limit or (limit_later and least == limit):
            return BIG
    return row[n]


@njit(cache=True)
def _baseline(xrow, xa, sx, gx, gen_a, sup_i, sup_a, ypi, ypa, s, n):
    """Baseline total of x against the record of pairs s..s+n: pairs matched on the same index,
    the longer one's tail suppressed."""
    m = len(xrow)
    total = 0
    for j in range(min(m, n)):
        total += gx[xrow[j], ypi[s + j]] + gen_a[xa[j], ypa[s + j]]
    for h in range(n, m):
        total += sx[h]
    for j in range(m, n):
        total += sup_i[ypi[s + j]] + sup_a[ypa[s + j]]
    return total


@njit(cache=True)
def costs(method, xrow, xa, sx, gx, gen_a, sup_i, sup_a, ypi, ypa, ptr, recs):
    """The alignment cost of x with every record of `recs`."""
    out = np.empty(len(recs), dtype=np.int64)
    longest = 0
    for r in recs:
        longest = max(longest, ptr[r + 1] - ptr[r])
    row = np.empty(longest + 1, dtype=np.int64)
    for q in range(len(recs)):
        r = recs[q]
        s, n = ptr[r], ptr[r + 1] - ptr[r]
        if method == 0:
            out[q] = _ags(xrow, xa, sx, gx, gen_a, sup_i, sup_a, ypi, ypa, s, n, row, BIG, False)
        else:
            out[q] = _baseline(xrow, xa, sx, gx, gen_a, sup_i, sup_a, ypi, ypa, s, n)
    return out


@njit(cache=True)
def nearest(
    method,
    xi,
    xrow,
    xa,
    sx,
    gx,
    gen_a,
    yshare_a,
    sup_i,
    sup_a,
    sup_min,
    icd_cost,
    parent,
    depth,
    val_node,
    ypi,
    ypa,
    ptr,
    alive,
    memo,
    stamp,
    slot,
):
    """The alive record of least alignment cost with x, the lowest index on ties (module docstring:
    the bounds that skip records). `sup_min`: the cheapest suppression of a y value; `memo`: scratch
    (n_i, n_a, 2) of y floors, [a, b, 0] valid for x when [a, b, 1] == `stamp` (a new one per x);
    `slot`: scratch per ICD node, -1 on entry and on return (`_ancestor_best`)."""
    m = len(xi)
    cheapest = np.zeros(m + 1, dtype=np.int64)  # cheapest[t]: the t cheapest suppressions of x
    order = np.sort(sx)
    for t in range(m):
        cheapest[t + 1] = cheapest[t] + order[t]
    best_age, touched = _ancestor_best(xi, xa, yshare_a, parent, depth, slot)
    n_rec = len(alive)
    floor = np.empty(n_rec, dtype=np.int64)
    first, first_floor, longest = -1, BIG, 0
    for r in range(n_rec):
        if not alive[r]:
            continue
        s, n = ptr[r], ptr[r + 1] - ptr[r]
        longest = max(longest, n)
        f = 0
        for j in range(s, s + n):
            a, b = ypi[j], ypa[j]
            if memo[a, b, 1] != stamp:  # the least y value (a, b) adds to any alignment with x
                v = sup_i[a] + sup_a[b]
                if m > 0:
                    node = val_node[a]
                    cy = icd_cost[node]
                    w = node
                    while w >= 0:
                        q = slot[w]
                        if q >= 0:
                            c = icd_cost[w] - cy + best_age[q, b]
                            if c < v:
                                v = c
                        w = parent[w]
                memo[a, b, 0], memo[a, b, 1] = v, stamp
            f += memo[a, b, 0]
        if n < m:
            f += cheapest[m - n]
        elif n > m and (n - m) * sup_min > f:
            f = (n - m) * sup_min
        floor[r] = f
        if f < first_floor:
            first, first_floor = r, f
    for w in touched:
        slot[w] = -1
    row = np.empty(longest + 1, dtype=np.int64)
    s, n = ptr[first], ptr[first + 1] - ptr[first]  # start from the record of least bound
    if method == 0:
        best = _ags(xrow, xa, sx, gx, gen_a, sup_i, sup_a, ypi, ypa, s, n, row, BIG, False)
    else:
        best = _baseline(xrow, xa, sx, gx, gen_a, sup_i, sup_a, ypi, ypa, s, n)
    best_rec = first
    for r in range(n_rec):
        if not alive[r] or r == first:
            continue
        later = r > best_rec
        if floor[r] > best or (later and floor[r] == best):
            continue
        s, n = ptr[r], ptr[r + 1] - ptr[r]
        if method == 0:
            c = _ags(xrow, xa, sx, gx, gen_a, sup_i, sup_a, ypi, ypa, s, n, row, best, later)
        else:
            c = _baseline(xrow, xa, sx, gx, gen_a, sup_i, sup_a, ypi, ypa, s, n)
        if c < best or (c == best and not later):
            best, best_rec = c, r
    return best_rec


@njit(cache=True)
def ags_trace(xrow, xa, sx_i, sx_a, gx, gen_a, sup_i, sup_a, ypi, ypa):
    """A-GS of x with one record y (positions `ypi`, `ypa`) with its traceback: (ops, hs, js) in
    trajectory order (0 generalize, 1 suppress x, 2 suppress y; 1-based h, j), the ICD and Age cost
    of the path. `alignment.ags_align` reads the pairs off the generalizations."""
    m, n = len(xrow), len(ypi)
    r = np.empty((m + 1, n + 1), dtype=np.int8)
    prev = np.empty(n + 1, dtype=np.int64)
    cur = np.empty(n + 1, dtype=np.int64)
    prev[0] = 0
    for j in range(n):
        prev[j + 1] = prev[j] + sup_i[ypi[j]] + sup_a[ypa[j]]
        r[0, j + 1] = 2
    for h in range(m):
        gi = gx[xrow[h]]
        ga = gen_a[xa[h]]
        up = sx_i[h] + sx_a[h]
        cur[0] = prev[0] + up
        r[h + 1, 0] = 1
        for j in range(n):
            a, b = ypi[j], ypa[j]
            d = prev[j] + gi[a] + ga[b]
            u = prev[j + 1] + up
            lt = cur[j] + sup_i[a] + sup_a[b]
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
            a, b = ypi[j - 1], ypa[j - 1]
            ilm += gx[xrow[h - 1], a]
            alm += gen_a[xa[h - 1], b]
            h, j = h - 1, j - 1
        elif op == 2:
            ilm += sup_i[ypi[j - 1]]
            alm += sup_a[ypa[j - 1]]
            j -= 1
        else:
            ilm += sx_i[h - 1]
            alm += sx_a[h - 1]
            h -= 1
    return ops[:t][::-1].copy(), hs[:t][::-1].copy(), js[:t][::-1].copy(), ilm, alm
