"""MDAV's questions of the LDA (`engine.anonymize.trajectories`) as compiled loops: the alignment cost
of one trajectory x against many records, the nearest record, and A-GS with its traceback.

The costs are those of `engine.anonymize.alignment` (Tamersoy 2011 thesis, section IV.3.1), integers
from its tables (`PairTables`): `gen_i[x, a]` the ICD cost of generalizing ICD node x with the a-th ICD
value of the data (x share + y share), `gen_a` the same for ages; `yshare_i`, `yshare_a` the y share
alone; `sup_i[a]`, `sup_a[b]` the suppression costs of the values; `sx[h]` the suppression cost of
x's pair h. A record r's pairs are `ypi[ptr[r]:ptr[r + 1]]` (ICD value positions) and `ypa` (age
value positions). `method` 0 is A-GS (Algorithm 3), 1 is Baseline (Algorithm 2).

A-GS is the dynamic programme of `alignment.ags_nodes` on totals (ILM + ALM): step 22 chooses by
the total only, so the minimum cost, and the choices with their tie rule (generalize, then suppress
x, then suppress y), are the same. `nearest` skips records by two lower bounds, both exact:
before aligning, `floor` (every pair of y adds at least the least of suppressing it and its y share
with some pair of x; when x is longer at least its m - n cheapest suppressions, when y is longer
at least n - m suppressions of y's cheapest value); while aligning, the least total of the current
row (every cost is >= 0, so the final total is at least the total of some cell of each row). A
record is skipped only when its bound exceeds the best cost found, or equals it and the record comes
later than the best one (ties go to the lowest record index).

Numba compiles these loops (`cache=True`: once per installation, then loaded from the cache);
tests/test_trajectories.py checks them against `ags_nodes` / `baseline_nodes` and the clustering
against the pure-Python reference and the former numpy kernel (tests/reference_lda.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit

BIG = 2**62  # above every cost


@njit(cache=True)
def _ags(xi, xa, sx, gen_i, gen_a, sup_i, sup_a, ypi, ypa, s, n, row, limit, limit_later):
    """A-GS total of x against the record of pairs s..s+n (`row`: n + 1 cells of scratch). Returns
    BIG as soon as a row's least total exceeds `limit`, or reaches it when `limit_later`."""
    m = len(xi)
    row[0] = 0
    for j in range(n):  # steps 8-12: suppress y's pairs
        row[j + 1] = row[j] + sup_i[ypi[s + j]] + sup_a[ypa[s + j]]
    for h in range(m):  # steps 13-25
        gi = gen_i[xi[h]]
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
def _baseline(xi, xa, sx, gen_i, gen_a, sup_i, sup_a, ypi, ypa, s, n):
    """Baseline total of x against the record of pairs s..s+n: pairs matched on the same index,
    the longer one's tail suppressed."""
    m = len(xi)
    total = 0
    for j in range(min(m, n)):
        total += gen_i[xi[j], ypi[s + j]] + gen_a[xa[j], ypa[s + j]]
    for h in range(n, m):
        total += sx[h]
    for j in range(m, n):
        total += sup_i[ypi[s + j]] + sup_a[ypa[s + j]]
    return total


@njit(cache=True)
def costs(method, xi, xa, sx, gen_i, gen_a, sup_i, sup_a, ypi, ypa, ptr, recs):
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
            out[q] = _ags(xi, xa, sx, gen_i, gen_a, sup_i, sup_a, ypi, ypa, s, n, row, BIG, False)
        else:
            out[q] = _baseline(xi, xa, sx, gen_i, gen_a, sup_i, sup_a, ypi, ypa, s, n)
    return out


@njit(cache=True)
def nearest(
    method,
    xi,
    xa,
    sx,
    gen_i,
    gen_a,
    yshare_i,
    yshare_a,
    sup_i,
    sup_a,
    sup_min,
    ypi,
    ypa,
    ptr,
    alive,
    memo,
    stamp,
):
    """The alive record of least alignment cost with x, the lowest index on ties (module docstring:
    the bounds that skip records). `sup_min`: the cheapest suppression of a y value; `memo`: scratch
    (n_i, n_a, 2) of y floors, [a, b, 0] valid for x when [a, b, 1] == `stamp` (a new one per x)."""
    m = len(xi)
    cheapest = np.zeros(m + 1, dtype=np.int64)  # cheapest[t]: the t cheapest suppressions of x
    order = np.sort(sx)
    for t in range(m):
        cheapest[t + 1] = cheapest[t] + order[t]
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
                for h in range(m):
                    w = yshare_i[xi[h], a] + yshare_a[xa[h], b]
                    if w < v:
                        v = w
                memo[a, b, 0], memo[a, b, 1] = v, stamp
            f += memo[a, b, 0]
        if n < m:
            f += cheapest[m - n]
        elif n > m and (n - m) * sup_min > f:
            f = (n - m) * sup_min
        floor[r] = f
        if f < first_floor:
            first, first_floor = r, f
    row = np.empty(longest + 1, dtype=np.int64)
    s, n = ptr[first], ptr[first + 1] - ptr[first]  # start from the record of least bound
    if method == 0:
        best = _ags(xi, xa, sx, gen_i, gen_a, sup_i, sup_a, ypi, ypa, s, n, row, BIG, False)
    else:
        best = _baseline(xi, xa, sx, gen_i, gen_a, sup_i, sup_a, ypi, ypa, s, n)
    best_rec = first
    for r in range(n_rec):
        if not alive[r] or r == first:
            continue
        later = r > best_rec
        if floor[r] > best or (later and floor[r] == best):
            continue
        s, n = ptr[r], ptr[r + 1] - ptr[r]
        if method == 0:
            c = _ags(xi, xa, sx, gen_i, gen_a, sup_i, sup_a, ypi, ypa, s, n, row, best, later)
        else:
            c = _baseline(xi, xa, sx, gen_i, gen_a, sup_i, sup_a, ypi, ypa, s, n)
        if c < best or (c == best and not later):
            best, best_rec = c, r
    return best_rec


@njit(cache=True)
def ags_trace(xi, xa, sx_i, sx_a, gen_i, gen_a, sup_i, sup_a, ypi, ypa):
    """A-GS of x with one record y (positions `ypi`, `ypa`) with its traceback: (ops, hs, js) in
    trajectory order (0 generalize, 1 suppress x, 2 suppress y; 1-based h, j), the ICD and Age cost
    of the path. `alignment.ags_align` reads the pairs off the generalizations."""
    m, n = len(xi), len(ypi)
    r = np.empty((m + 1, n + 1), dtype=np.int8)
    prev = np.empty(n + 1, dtype=np.int64)
    cur = np.empty(n + 1, dtype=np.int64)
    prev[0] = 0
    for j in range(n):
        prev[j + 1] = prev[j] + sup_i[ypi[j]] + sup_a[ypa[j]]
        r[0, j + 1] = 2
    for h in range(m):
        gi = gen_i[xi[h]]
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
            ilm += gen_i[xi[h - 1], a]
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
