"""The greedy of UGACLIP / ACLIP (`engine.anonymize.profiles`, Loukides et al. 2010) as compiled loops.

The rules are those of `engine.anonymize.profiles` (module docstring): constraints taken from a
max-heap of their current support (ties: PPE's order), refreshed lazily; while a constraint's image
has support in [1, k), its least frequent item (ties: first code) is generalized with the partner of
least COAT utility loss, log2(2^m - 1) + log2(sup) (ties: smaller support of the merged item, then
the partner's first code), or suppressed when no item of the image has an allowed partner.

Numba compiles these loops (`cache=True`: once per installation, some seconds, then loaded from the
cache in a fraction of a second). The floating-point loss is never computed here: both terms come
from tables numpy computes (`ltab`, the log2(2^m - 1) of `profiles._log2_ul`, and `log2tab`, log2 of
every possible support), so a sum here is the same IEEE addition the vectorized code did and ties
break the same way.

Partner search (`best_partner`), the cost of a step: co(i, j), the records holding both items, is
counted from the records holding i and kept up to date while i grows (`_count_co`, `_merge`), so a
run of steps on one item counts its records once. The candidates are the items of several codes
(few: `multi`), the single codes i touches, and of the single codes i does not touch only the first
of each class list (codes sorted by (support, code) once; a single code's support never changes):
their loss is log2(2^(m_i + 1) - 1) + log2(sup_i + sup_j), least at the least (sup_j, code).

State (one row per code; an item lives in the row of one of its codes, as in `profiles`): `bits`
(records holding the item, bitsets), `vbits` (visits holding it, when visits are exported), `jump`
(the first visit of the record after each visit's), `hptr`/`hidx` (each record's codes), `active`, `size`, `sup`, `group` (code ->
row, -1 suppressed), `first` (smallest code index), `container` (utility constraints holding the
whole item), `outside` (touches no utility constraint), members as linked lists (`head`, `nxt`,
`tail`), the two loss tables, the counts (`co`, `stamp`, `touched`), the class lists (`cls_ptr`,
`cls_idx`, `parent`: skips codes merged away) and the items of several codes (`multi`, `multi_pos`).
`ctrl` holds the run's counters (`HLEN` ...). A run returns to Python every `budget` heap pops
(progress, cancellation), at a constraint whose image has support 0 (Apriori, in Python:
`profiles._violation`, then `step`), when the suppression limit would be exceeded, and when the heap
is empty.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# statuses of `run`
DONE, BUDGET, ZERO, LIMIT = 0, 1, 2, 3
# trace kinds
GENERALIZE, SUPPRESS = 0, 1
# `ctrl` slots: heap length, constraint in progress (-1: none), constraints done, codes suppressed,
# trace length, codes a suppression would need (LIMIT), the item whose co-occurrences `co` holds
# (-1: none), how many items `touched` lists and the counting passes made (stamps)
HLEN, CUR, DONE_N, N_SUPPRESSED, TRACE_LEN, NEEDED, CO_ROW, N_TOUCHED, EPOCH = range(9)
N_CTRL = 9
# the state tuple's slots (`profiles._state` builds it in this order)
(
    BITS, VBITS, JUMP, HPTR, HIDX, ACTIVE, SIZE, SUP, GROUP, FIRST, CONTAINER, OUTSIDE, HEAD, NXT, TAIL,
    LTAB, LOG2TAB, CO, STAMP, TOUCHED, CLS_PTR, CLS_IDX, PARENT, MULTI, MULTI_POS,
) = range(25)  # fmt: skip

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_ONE = np.uint64(1)
# compiled once per installation and cached; the interpreter lock is released while a run goes on,
# so the server's other sessions are not held up
_jit = njit(cache=True, nogil=True)


@_jit
def _popcount(x):
    x = x - ((x >> _ONE) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return np.int64((x * _H01) >> np.uint64(56))


@_jit
def support(rows, n_rows, bits, vbits, jump, use_visits, n_records, cap):
    """Records holding every item of rows[:n_rows], counted up to `cap` (k: a constraint is protected
    once k records hold its image, and no step reads a larger support): in the whole record, or, when
    visits are exported, records owning a visit that holds them all. A record's visits are
    consecutive, so once one of its visits is found the scan jumps to the next record's first visit
    (`jump[v]`)."""
    if n_rows == 0:
        return min(n_records, cap)
    if not use_visits:
        total = 0
        for w in range(bits.shape[1]):
            acc = bits[rows[0], w]
            for t in range(1, n_rows):
                acc &= bits[rows[t], w]
            if acc != 0:
                total += _popcount(acc)
                if total >= cap:
                    return cap
        return total
    count = 0
    n_words = vbits.shape[1]
    v = 0
    while v < jump.shape[0]:
        w = v >> 6
        acc = vbits[rows[0], w]
        for t in range(1, n_rows):
            acc &= vbits[rows[t], w]
        acc &= ~((_ONE << np.uint64(v & 63)) - _ONE)  # visits v and after
        while acc == 0:
            w += 1
            if w == n_words:
                return count
            acc = vbits[rows[0], w]
            for t in range(1, n_rows):
                acc &= vbits[rows[t], w]
        count += 1
        if count == cap:
            return cap
        v = jump[w * 64 + _popcount((acc & (~acc + _ONE)) - _ONE)]
    return count


@_jit
def image(ci, cons_ptr, cons_idx, group, buf):
    """The constraint's image: the sorted distinct items of its unsuppressed codes, in buf[:m]."""
    m = 0
    for t in range(cons_ptr[ci], cons_ptr[ci + 1]):
        g = group[cons_idx[t]]
        if g < 0:
            continue
        pos = m
        while pos > 0 and buf[pos - 1] > g:
            pos -= 1
        if pos > 0 and buf[pos - 1] == g:
            continue
        for q in range(m, pos, -1):
            buf[q] = buf[q - 1]
        buf[pos] = g
        m += 1
    return m


@_jit
def _heap_less(hkey, hci, a, b):
    return hkey[a] < hkey[b] or (hkey[a] == hkey[b] and hci[a] < hci[b])


@_jit
def _heap_swap(hkey, hci, a, b):
    hkey[a], hkey[b] = hkey[b], hkey[a]
    hci[a], hci[b] = hci[b], hci[a]


@_jit
def heap_push(hkey, hci, ctrl, key, ci):
    """Push (key, ci) on the min-heap (pairs are distinct: one entry per constraint)."""
    at = ctrl[HLEN]
    hkey[at] = key
    hci[at] = ci
    ctrl[HLEN] = at + 1
    while at > 0:
        up = (at - 1) // 2
        if not _heap_less(hkey, hci, at, up):
            break
        _heap_swap(hkey, hci, at, up)
        at = up


@_jit
def heap_fill(hkey, hci, ctrl, cis, sups):
    """The heap of (-support, constraint) over the listed constraints."""
    ctrl[HLEN] = 0
    for t in range(cis.shape[0]):
        heap_push(hkey, hci, ctrl, -sups[t], cis[t])


@_jit
def _heap_pop(hkey, hci, ctrl):
    n = ctrl[HLEN] - 1
    key, ci = hkey[0], hci[0]
    hkey[0], hci[0] = hkey[n], hci[n]
    ctrl[HLEN] = n
    at = 0
    while True:
        left = 2 * at + 1
        if left >= n:
            break
        child = left
        if left + 1 < n and _heap_less(hkey, hci, left + 1, left):
            child = left + 1
        if not _heap_less(hkey, hci, child, at):
            break
        _heap_swap(hkey, hci, at, child)
        at = child
    return key, ci


@_jit
def _allowed(i, j, container, outside, use_utility, group_outside):
    """UGACLIP: the merged item lies inside one utility constraint, or (rule "group") both items
    touch none; ACLIP: any partner."""
    if not use_utility:
        return True
    for w in range(container.shape[1]):
        if container[j, w] & container[i, w] != 0:
            return True
    return group_outside and outside[j] and outside[i]


@_jit
def _before(ul, u, f, ul2, u2, f2):
    """(loss, support of the merged item, first code) ordered lexicographically."""
    return ul < ul2 or (ul == ul2 and (u < u2 or (u == u2 and f < f2)))


@_jit
def _alive_at(p, end, parent, cls_idx, active, size):
    """The first position >= p of a class list whose code is still a single-code item, or `end`.
    Positions found dead are skipped from then on (their parent points past them; path compression)."""
    root = p
    while root < end:
        if parent[root] != root:
            root = parent[root]
            continue
        j = cls_idx[root]
        if active[j] and size[j] == 1:
            break
        parent[root] = root + 1
        root += 1
    while p < root and parent[p] != p:
        nxt = parent[p]
        parent[p] = root
        p = nxt
    return root


@_jit
def _add_records(words, skip_a, skip_b, st, ctrl):
    """co[h] += 1 for every item h (other than skip_a, skip_b) held by a record of the bitset `words`
    (once per record); items reaching a count list themselves in `touched`. Stamps are record
    numbers offset by a pass number (`ctrl[EPOCH]`), so no reset is needed."""
    hptr, hidx, group = st[HPTR], st[HIDX], st[GROUP]
    co, stamp, touched = st[CO], st[STAMP], st[TOUCHED]
    ctrl[EPOCH] += 1
    base = ctrl[EPOCH] * (hptr.shape[0] + 1)
    n_touched = ctrl[N_TOUCHED]
    for w in range(words.shape[0]):
        x = words[w]
        while x != 0:
            low = x & (~x + _ONE)
            r = w * 64 + _popcount(low - _ONE)
            x ^= low
            mark = base + r
            for t in range(hptr[r], hptr[r + 1]):
                h = group[hidx[t]]
                if h < 0 or h in (skip_a, skip_b) or stamp[h] == mark:
                    continue
                stamp[h] = mark
                if co[h] == 0:
                    touched[n_touched] = h
                    n_touched += 1
                co[h] += 1
    ctrl[N_TOUCHED] = n_touched


@_jit
def _count_co(i, st, ctrl):
    """co[h] = records holding both item i and item h, for every item h != i that i touches (listed in
    `touched`), counted from the records holding i: their codes' items, once per record. `_merge`
    keeps the counts up to date, so a run of steps on one item counts its records once."""
    co, touched = st[CO], st[TOUCHED]
    for t in range(ctrl[N_TOUCHED]):
        co[touched[t]] = 0
    ctrl[N_TOUCHED] = 0
    _add_records(st[BITS][i], i, i, st, ctrl)
    ctrl[CO_ROW] = i


@_jit
def _class_open(i, c, n_cls, container, outside, use_utility, group_outside):
    """Whether item i may pair with the codes of class list c: ACLIP has one list, of every code;
    UGACLIP one per utility constraint (open when i lies inside it) and a last one of the codes
    outside every constraint (open to an item outside every one, rule "group")."""
    if not use_utility:
        return True
    if c == n_cls - 1:
        return group_outside and outside[i]
    return (container[i, c // 64] >> np.uint64(c % 64)) & _ONE != 0


@_jit
def _has_partner(i, st, n_cls, use_utility, group_outside):
    """Whether any active item other than i may pair with i: an item of several codes, or a single
    code of a class list open to i."""
    active, size, container, outside = st[ACTIVE], st[SIZE], st[CONTAINER], st[OUTSIDE]
    cls_ptr, cls_idx, parent, multi = st[CLS_PTR], st[CLS_IDX], st[PARENT], st[MULTI]
    for t in range(st[MULTI_POS][-1]):
        j = multi[t]
        if j != i and _allowed(i, j, container, outside, use_utility, group_outside):
            return True
    for c in range(n_cls):
        if _class_open(i, c, n_cls, container, outside, use_utility, group_outside):
            end = cls_ptr[c + 1]
            p = _alive_at(cls_ptr[c], end, parent, cls_idx, active, size)
            if p < end and cls_idx[p] == i:
                p = _alive_at(p + 1, end, parent, cls_idx, active, size)
            if p < end:
                return True
    return False


@_jit
def best_partner(i, st, ctrl, use_utility, group_outside):
    """The active item that generalizes with item i at the least COAT loss, or -1 (none allowed):
    the least (loss, support of the merged item, first code) over the allowed items.

    co(i, j) is counted from the records holding i (their codes' items, once per record). The loss
    of a partner j is log2(2^(m_i + m_j) - 1) + log2(sup_i + sup_j - co): exact for the items of
    several codes (`multi`, few) and the single codes i touches; a single code i does not touch costs
    log2(2^(m_i + 1) - 1) + log2(sup_i + sup_j), least at its least (sup_j, code), so only the first
    live untouched code of each class list i may pair with (codes sorted by (support, code) once:
    a single code's support never changes) is a candidate."""
    active, size, sup, first = st[ACTIVE], st[SIZE], st[SUP], st[FIRST]
    container, outside, ltab, log2tab, co, touched = (
        st[CONTAINER],
        st[OUTSIDE],
        st[LTAB],
        st[LOG2TAB],
        st[CO],
        st[TOUCHED],
    )
    cls_ptr, cls_idx, parent, multi = st[CLS_PTR], st[CLS_IDX], st[PARENT], st[MULTI]
    n_cls = cls_ptr.shape[0] - 1
    if ctrl[CO_ROW] != i:
        if not _has_partner(i, st, n_cls, use_utility, group_outside):
            return -1  # without counting (the counts of the item counted last stay)
        _count_co(i, st, ctrl)
    si, supi = size[i], sup[i]
    best = -1
    best_ul = 0.0
    best_u = 0
    best_first = 0
    # the single codes i touches: one loss term, log2(2^(m_i + 1) - 1), so the least (u, code) wins
    n_touched = ctrl[N_TOUCHED]
    for t in range(n_touched):
        j = touched[t]
        if not active[j] or size[j] != 1:
            continue
        u = sup[j] + supi - co[j]
        if best >= 0 and (u > best_u or (u == best_u and j > best)):
            continue
        if _allowed(i, j, container, outside, use_utility, group_outside):
            best, best_u = j, u
    if best >= 0:
        best_ul, best_first = ltab[1 + si] + log2tab[best_u], first[best]
    # the items of several codes
    for t in range(st[MULTI_POS][-1]):
        j = multi[t]
        if j == i or not _allowed(i, j, container, outside, use_utility, group_outside):
            continue
        u = sup[j] + supi - co[j]
        ul = ltab[size[j] + si] + log2tab[u]
        if best < 0 or _before(ul, u, first[j], best_ul, best_u, best_first):
            best, best_ul, best_u, best_first = j, ul, u, first[j]
    # the single codes i does not touch: the first of each open class list
    for c in range(n_cls):
        if not _class_open(i, c, n_cls, container, outside, use_utility, group_outside):
            continue
        end = cls_ptr[c + 1]
        p = _alive_at(cls_ptr[c], end, parent, cls_idx, active, size)
        while p < end:
            j = cls_idx[p]
            u = sup[j] + supi
            ul = ltab[1 + si] + log2tab[u]
            if best >= 0 and _before(best_ul, best_u, best_first, ul, u, j):
                break  # this code, and every later one, loses even untouched
            if j != i and co[j] == 0:
                best, best_ul, best_u, best_first = j, ul, u, j
                break
            p = _alive_at(p + 1, end, parent, cls_idx, active, size)
    return best


@_jit
def _enlist(g, multi, pos):
    """Add item g to the list of items of several codes (pos[-1]: the list's length)."""
    n = pos[-1]
    multi[n] = g
    pos[g] = n
    pos[-1] = n + 1


@_jit
def _unlist(g, multi, pos):
    at = pos[g]
    if at < 0:
        return
    n = pos[-1] - 1
    multi[at] = multi[n]
    pos[multi[at]] = at
    pos[g] = -1
    pos[-1] = n


@_jit
def _merge(i, j, st, ctrl):
    """Merge items i and j into the row of the larger one (fewer codes to relabel); the counts of
    `_count_co` follow."""
    bits, vbits, active, size, sup = st[BITS], st[VBITS], st[ACTIVE], st[SIZE], st[SUP]
    group, first, container, outside = st[GROUP], st[FIRST], st[CONTAINER], st[OUTSIDE]
    head, nxt, tail = st[HEAD], st[NXT], st[TAIL]
    if size[i] > size[j] or (size[i] == size[j] and i < j):
        keep, drop = i, j
    else:
        keep, drop = j, i
    row = ctrl[CO_ROW]
    if row in (keep, drop):  # the counted item grows: count the records it gains
        other = drop if row == keep else keep
        gained = bits[other] & ~bits[row]
        _add_records(gained, keep, drop, st, ctrl)
        st[CO][keep] = 0
        st[CO][drop] = 0
        ctrl[CO_ROW] = keep
    total = 0
    for w in range(bits.shape[1]):
        bits[keep, w] |= bits[drop, w]
        total += _popcount(bits[keep, w])
    for w in range(vbits.shape[1]):
        vbits[keep, w] |= vbits[drop, w]
    if row >= 0 and row != keep and row != drop:  # another item: its count with the merged item
        co, touched = st[CO], st[TOUCHED]
        before = co[keep]
        co[keep] = 0
        for w in range(bits.shape[1]):
            co[keep] += _popcount(bits[keep, w] & bits[row, w])
        if before == 0 and co[keep] > 0:
            touched[ctrl[N_TOUCHED]] = keep
            ctrl[N_TOUCHED] += 1
    sup[keep] = total
    size[keep] += size[drop]
    first[keep] = min(first[keep], first[drop])
    for w in range(container.shape[1]):
        container[keep, w] &= container[drop, w]
    outside[keep] = outside[keep] and outside[drop]
    active[drop] = False
    _unlist(drop, st[MULTI], st[MULTI_POS])
    if st[MULTI_POS][keep] < 0:
        _enlist(keep, st[MULTI], st[MULTI_POS])
    c = head[drop]
    while c >= 0:
        group[c] = keep
        c = nxt[c]
    nxt[tail[keep]] = head[drop]
    tail[keep] = tail[drop]
    head[drop] = -1


@_jit
def _suppress(i, st, ctrl):
    if ctrl[CO_ROW] == i:
        ctrl[CO_ROW] = -1
    active, group, head, nxt = st[ACTIVE], st[GROUP], st[HEAD], st[NXT]
    active[i] = False
    _unlist(i, st[MULTI], st[MULTI_POS])
    c = head[i]
    while c >= 0:
        group[c] = -1
        c = nxt[c]
    head[i] = -1


@_jit
def step(bad, n_bad, st, ctrl, trace, use_utility, group_outside, max_suppressed):
    """One step on a violating set of items bad[:n_bad]: generalize its least frequent item that has
    an allowed partner, else suppress its least frequent item. Returns LIMIT (nothing done, `ctrl[NEEDED]`
    set) when that suppression would exceed `max_suppressed` (-1: no limit), else DONE."""
    sup, first, size = st[SUP], st[FIRST], st[SIZE]
    order = np.empty(n_bad, dtype=np.int64)
    for t in range(n_bad):  # insertion sort by (sup, first); keys are distinct
        g = bad[t]
        pos = t
        while pos > 0 and (
            sup[order[pos - 1]] > sup[g]
            or (sup[order[pos - 1]] == sup[g] and first[order[pos - 1]] > first[g])
        ):
            order[pos] = order[pos - 1]
            pos -= 1
        order[pos] = g
    i, j = order[0], -1
    for t in range(n_bad):
        j = best_partner(order[t], st, ctrl, use_utility, group_outside)
        if j >= 0:
            i = order[t]
            break
    at = ctrl[TRACE_LEN]
    if j < 0:
        n_new = size[i]
        if max_suppressed >= 0 and ctrl[N_SUPPRESSED] + n_new > max_suppressed:
            ctrl[NEEDED] = ctrl[N_SUPPRESSED] + n_new
            return LIMIT
        trace[at, 0], trace[at, 1], trace[at, 2] = SUPPRESS, i, -1
        _suppress(i, st, ctrl)
        ctrl[N_SUPPRESSED] += n_new
    else:
        trace[at, 0], trace[at, 1], trace[at, 2] = GENERALIZE, i, j
        _merge(i, j, st, ctrl)
    ctrl[TRACE_LEN] = at + 1
    return DONE


@_jit
def constraint_supports(cis, cons_ptr, cons_idx, st, n_records, use_visits, buf, cap):
    """The current support of each listed constraint's image (the empty image: every record), counted
    up to `cap`, and the image's number of items."""
    out = np.empty(cis.shape[0], dtype=np.int64)
    sizes = np.empty(cis.shape[0], dtype=np.int64)
    for t in range(cis.shape[0]):
        sizes[t] = image(cis[t], cons_ptr, cons_idx, st[GROUP], buf)
        out[t] = support(buf, sizes[t], st[BITS], st[VBITS], st[JUMP], use_visits, n_records, cap)
    return out, sizes


@_jit
def run(
    st, ctrl, hkey, hci, cons_ptr, cons_idx, trace, buf, k, n_records, use_visits, use_utility,
    group_outside, max_suppressed, budget,
):  # fmt: skip
    """Pop constraints off the heap and protect them until the heap is empty (DONE), `budget` pops
    were made (BUDGET), the constraint in progress has an image of support 0 (ZERO: Python finds a
    violating subset and calls `step`) or a suppression would exceed the limit (LIMIT)."""
    bits, vbits, jump, group = st[BITS], st[VBITS], st[JUMP], st[GROUP]
    pops = 0
    while True:
        ci = ctrl[CUR]
        if ci < 0:
            if ctrl[HLEN] == 0:
                return DONE
            if pops == budget:
                return BUDGET
            key, ci = _heap_pop(hkey, hci, ctrl)
            pops += 1
            m = image(ci, cons_ptr, cons_idx, group, buf)
            now = support(buf, m, bits, vbits, jump, use_visits, n_records, k)
            if now != -key:
                heap_push(hkey, hci, ctrl, -now, ci)
                continue
            ctrl[CUR] = ci
        m = image(ci, cons_ptr, cons_idx, group, buf)
        s = support(buf, m, bits, vbits, jump, use_visits, n_records, k) if m > 0 else k
        if s >= k:
            ctrl[DONE_N] += 1
            ctrl[CUR] = -1
            continue
        if s == 0:
            return ZERO
        if step(buf, m, st, ctrl, trace, use_utility, group_outside, max_suppressed) == LIMIT:
            return LIMIT
