"""The compiled trie walk of `engine.risk` (issue 24): support of every known set, up to a cap.

The same count as `risk._SubsetCounter` (Tamersoy 2010, "Risk Measure": the candidates holding every
atom of a known set; within visits, the distinct patients with one visit holding them), as loops
numba compiles once per installation (`cache=True`; `python -m engine.anonymize.warm` compiles them):

1. `held_ranks`: per candidate, the needed atoms it holds as ranks (rarest atom first, ties by atom id),
   ascending; and per posting entry, where that candidate's later ranks start.
2. `build_trie`: the known sets (rows of atoms) as a trie of their rank sequences, inserted row by row
   through an open-addressing table keyed (parent node, rank); equal sets end at one node, so no set is
   sorted or deduplicated apart. `breadth_first` renumbers the nodes level by level, a node's children
   contiguous and by rank; `node_table` holds what a step reads of a node in one row.
3. `walk`: root child by root child (a set's rarest atom), every candidate holding that atom walks its
   subtree depth first along the prefixes of its later atoms, adding one to each set node it reaches
   (within visits, once per patient: a patient's visits are consecutive). At a node of one of the
   `_MASKED` most common ranks (`child_masks`: on engine.synth most of the work is under the hundred most
   common codes) the children it holds are an AND of two bitmasks; elsewhere a merge of two ascending
   lists, or a binary search per atom when the children are many.

With a cap, a set node is decided when its count reaches the cap: every ancestor's number of undecided
sets below it drops by one, and no walk enters a subtree with none left, at once (the vectorized walk
drops sets between rounds). The work is then about cap steps per set plus one root step per held atom,
linear in the data; full counts (no cap) take the same walk without dropping anything. Root children are
split among threads: their subtrees are disjoint, so the counts never depend on the split or the order.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

_EMPTY = np.int64(-1)
_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the key times 2^64 / golden ratio
_PARTS_PER_THREAD = 32  # parts of the roots per thread (`_parts`)
_SIZES = (1 << 16, 16, 256)  # first lengths: trie nodes, table slots (log2), walk stack; they grow as needed
_SEARCH = 8  # a node's children are searched for each remaining atom when more than this many per atom
_MASKED = 256  # nodes of the this many most common ranks meet a candidate's atoms as bitmasks (`child_masks`)
_ONE = np.uint64(1)
_M1 = np.uint64(0x5555555555555555)  # popcount (SWAR)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


@njit(cache=True, nogil=True)
def _slot(key: np.int64, shift: int) -> np.int64:
    return np.int64((np.uint64(key) * _MIX) >> np.uint64(shift))


@njit(cache=True, nogil=True)
def needed_atoms(indptr, entry_atom, rows, n_atoms):
    """Which atoms some row of `rows` holds (rows of `entry_atom` by `indptr`)."""
    out = np.zeros(n_atoms, dtype=np.bool_)
    for i in rows:
        for e in range(indptr[i], indptr[i + 1]):
            out[entry_atom[e]] = True
    return out


@njit(cache=True, nogil=True)
def held_ranks(post_ptr, post_rows, used, n_cand):
    """Per candidate, the ranks r of the atoms `used[r]` it holds, ascending (`ranks`, in candidate
    order); and per posting entry i of a used atom (`post_rows[i]` holds it), where the candidate's
    ranks after that atom's start in `ranks` and how many there are (`after`, `n_after`)."""
    ptr = np.zeros(n_cand + 1, dtype=np.int64)
    for r in range(len(used)):
        a = used[r]
        for i in range(post_ptr[a], post_ptr[a + 1]):
            ptr[post_rows[i] + 1] += 1
    for c in range(n_cand):
        ptr[c + 1] += ptr[c]
    fill = ptr[:-1].copy()
    ranks = np.empty(ptr[n_cand], dtype=np.int32)
    after = np.zeros(len(post_rows), dtype=np.int64)
    n_after = np.zeros(len(post_rows), dtype=np.int32)
    for r in range(len(used)):
        a = used[r]
        for i in range(post_ptr[a], post_ptr[a + 1]):
            c = post_rows[i]
            ranks[fill[c]] = r
            fill[c] += 1
            after[i] = fill[c]
            n_after[i] = ptr[c + 1] - fill[c]
    return ranks, after, n_after


@njit(cache=True, nogil=True)
def _grow(a, n):
    out = np.empty(max(2 * len(a), n), dtype=a.dtype)
    out[: len(a)] = a
    return out


@njit(cache=True, nogil=True)
def _rehash(keys, vals, bits):
    """The table's entries in a table of 2^bits slots."""
    new_keys = np.full(1 << bits, _EMPTY, dtype=np.int64)
    new_vals = np.empty(1 << bits, dtype=np.int32)
    shift = 64 - bits
    mask = (1 << bits) - 1
    for s in range(len(keys)):
        k = keys[s]
        if k != _EMPTY:
            h = _slot(k, shift)
            while new_keys[h] != _EMPTY:
                h = (h + 1) & mask
            new_keys[h] = k
            new_vals[h] = vals[s]
    return new_keys, new_vals


@njit(cache=True, nogil=True)
def build_trie(indptr, entry_atom, rows, rank_of, n_r, nodes0, bits):
    """The trie of the rows' rank sequences, inserted row by row: a child of the root is found by its
    rank (`root_child`), any other under the key parent * (n_r + 1) + rank in an open-addressing table
    (2^`bits` slots to start with, doubled when half full). Node 0 is the root; a node is made after
    its parent (a larger id); `nodes0`: the node arrays' first length. Returns (parent, rank, row_node,
    root_child): `row_node[x]` is the node where row `rows[x]` ends (equal sets end at one node)."""
    base = np.int64(n_r + 1)
    parent = np.empty(max(nodes0, 1), dtype=np.int32)
    rank = np.empty(max(nodes0, 1), dtype=np.int32)
    parent[0], rank[0] = -1, -1
    n_nodes = 1
    root_child = np.full(n_r, -1, dtype=np.int32)
    keys = np.full(1 << bits, _EMPTY, dtype=np.int64)
    vals = np.empty(1 << bits, dtype=np.int32)
    n_keys = 0
    row_node = np.empty(len(rows), dtype=np.int32)
    buf = np.empty(16, dtype=np.int32)
    for x in range(len(rows)):
        i = rows[x]
        s, e = indptr[i], indptr[i + 1]
        n = e - s
        if n > len(buf):
            buf = np.empty(2 * n, dtype=np.int32)
        if n > 32:  # a long row (all-visits knowledge): sorted at once
            for j in range(n):
                buf[j] = rank_of[entry_atom[s + j]]
            buf[:n] = np.sort(buf[:n])
        else:  # insertion sort: rows of one visit are short
            for j in range(n):
                v = rank_of[entry_atom[s + j]]
                q = j
                while q > 0 and buf[q - 1] > v:
                    buf[q] = buf[q - 1]
                    q -= 1
                buf[q] = v
        u = root_child[buf[0]]
        if u < 0:
            if n_nodes == len(parent):
                parent, rank = _grow(parent, n_nodes + 1), _grow(rank, n_nodes + 1)
            u = n_nodes
            parent[u], rank[u] = 0, buf[0]
            root_child[buf[0]] = u
            n_nodes += 1
        for d in range(1, n):
            key = np.int64(u) * base + buf[d]
            shift = 64 - bits
            mask = (1 << bits) - 1
            h = _slot(key, shift)
            while keys[h] != _EMPTY and keys[h] != key:
                h = (h + 1) & mask
            if keys[h] == key:
                u = vals[h]
                continue
            if n_nodes == len(parent):
                parent, rank = _grow(parent, n_nodes + 1), _grow(rank, n_nodes + 1)
            w = n_nodes
            parent[w], rank[w] = u, buf[d]
            n_nodes += 1
            keys[h], vals[h] = key, w
            n_keys += 1
            if 2 * n_keys > len(keys):  # at most half full
                bits += 1
                keys, vals = _rehash(keys, vals, bits)
            u = w
        row_node[x] = u
    return parent[:n_nodes].copy(), rank[:n_nodes].copy(), row_node, root_child


@njit(cache=True, nogil=True)
def _depths(parent):
    depth = np.zeros(len(parent), dtype=np.int32)
    for u in range(1, len(parent)):  # a node after its parent
        depth[u] = depth[parent[u]] + 1
    return depth


def breadth_first(parent: np.ndarray, rank: np.ndarray, n_r: int) -> np.ndarray:
    """New node ids: level by level, within a level by (new parent id, rank). The children of a node
    are then contiguous and by rank, and the nodes of one root child's subtree are a contiguous block
    of each level."""
    depth = _depths(parent)
    order = np.argsort(depth, kind="stable")
    starts = np.searchsorted(depth[order], np.arange(int(depth.max(initial=0)) + 2))
    new_id = np.zeros(len(parent), dtype=np.int64)
    base = np.int64(n_r + 1)
    for d in range(1, len(starts) - 1):
        nodes = order[starts[d] : starts[d + 1]]
        key = new_id[parent[nodes]] * base + rank[nodes]
        new_id[nodes[np.argsort(key, kind="stable")]] = np.arange(starts[d], starts[d + 1])
    return new_id


# the node table's columns (`node_table`): one row of int32 per node, read together at a step
BELOW, KID0, KID1, COUNT, LAST = range(5)


@njit(cache=True, nogil=True)
def node_table(parent, row_node):
    """Per node (breadth-first ids), one row: its number of undecided sets below (itself included),
    its children `KID0` .. `KID1` - 1, its count (-1: no set ends there) and the last candidate or
    patient counted there (-1: none yet). The ranks stay apart (`rank`): a node's children's ranks are
    read together, contiguous."""
    n = len(parent)
    nd = np.zeros((n, 5), dtype=np.int32)
    nd[:, COUNT] = -1
    nd[:, LAST] = -1
    for u in row_node:
        nd[u, COUNT] = 0
    nd[0, KID0] = 1
    for u in range(n - 1, 0, -1):  # children after parents: deepest first
        if nd[u, COUNT] == 0:
            nd[u, BELOW] += 1
        nd[parent[u], BELOW] += nd[u, BELOW]
    for u in range(1, n):  # a node's children are contiguous, after every earlier node's
        p = parent[u]
        if nd[p, KID1] == 0:
            nd[p, KID0] = u
        nd[p, KID1] = u + 1
    for u in range(n):
        if nd[u, KID1] == 0:
            nd[u, KID0] = 0
    return nd


@njit(cache=True, nogil=True)
def _popcount(x):
    x = x - ((x >> _ONE) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return np.int64((x * _H01) >> np.uint64(56))


@njit(cache=True, nogil=True)
def child_masks(rank, nd, base, words):
    """The children of every node of rank `base` or more, as a bitmask of `words` 64-bit words (bit
    rank - base): row `mask_row[v]` of `masks` (-1: none). Such a node's children rank above it, so
    inside the window too; a candidate's later atoms as the same mask meet them in `words` ANDs."""
    n = len(rank)
    mask_row = np.full(n, -1, dtype=np.int32)
    rows = 0
    for v in range(1, n):
        if rank[v] >= base and nd[v, KID1] > nd[v, KID0]:
            mask_row[v] = rows
            rows += 1
    masks = np.zeros((rows, max(words, 1)), dtype=np.uint64)
    for v in range(1, n):
        m = mask_row[v]
        if m >= 0:
            for q in range(nd[v, KID0], nd[v, KID1]):
                b = rank[q] - base
                masks[m, b >> 6] |= _ONE << np.uint64(b & 63)
    return mask_row, masks


@njit(cache=True, nogil=True)
def walk(
    roots, post_ptr, post_rows, used, held_rank, after, n_after, owner, has_owner, parent, rank, root_child, nd,
    mask_row, masks, base, cap, stack, search,
):  # fmt: skip
    """For each rank r of `roots`, every candidate holding atom `used[r]` (in order) walks the subtree
    of the root's child of rank r along the prefixes it holds, adding one to each set node it reaches
    (within visits, once per patient), each set up to `cap` (0: no cap). Subtrees are disjoint, so
    parts of `roots` may run at once on the shared table.

    At a node, the children the candidate holds: at a node with a mask (`child_masks`), the AND of its
    children's mask and the candidate's atoms of rank `base` or more; elsewhere its children and the
    candidate's remaining ranks (both ascending) merged, or with more than `search` children per
    remaining rank, each rank searched among the children. `stack`: the stack's first length. Returns
    the steps taken."""
    words = masks.shape[1]
    mine = np.zeros(words, dtype=np.uint64)  # the candidate's atoms of rank `base` or more
    stack_node = np.empty(max(stack, 1), dtype=np.int64)
    stack_pos = np.empty(max(stack, 1), dtype=np.int64)
    steps = 0
    for r in roots:
        u0 = root_child[r]
        if u0 < 0:
            continue
        a = used[r]
        for i in range(post_ptr[a], post_ptr[a + 1]):
            if nd[u0, BELOW] == 0:
                break  # every set below decided
            n = n_after[i]  # the candidate's ranks after r: held_rank[s:s + n]
            if n == 0 and nd[u0, COUNT] < 0:
                continue
            s = after[i]
            who = owner[post_rows[i]] if has_owner else post_rows[i]
            mine[:] = 0
            for j in range(n):
                b = held_rank[s + j] - base
                if b >= 0:
                    mine[b >> 6] |= _ONE << np.uint64(b & 63)
            stack_node[0], stack_pos[0] = u0, 0
            top = 1
            while top > 0:
                top -= 1
                v, p = stack_node[top], stack_pos[top]
                if nd[v, BELOW] == 0:
                    continue
                steps += 1
                if nd[v, COUNT] >= 0 and (cap == 0 or nd[v, COUNT] < cap) and nd[v, LAST] != who:
                    nd[v, LAST] = who
                    nd[v, COUNT] += 1
                    if cap > 0 and nd[v, COUNT] == cap:  # decided: no walk enters a subtree without sets
                        w = v
                        while True:  # up to the root's child (the root is shared by every part)
                            nd[w, BELOW] -= 1
                            if w == u0:
                                break
                            w = parent[w]
                        if nd[v, BELOW] == 0:
                            continue
                cs, ce = nd[v, KID0], nd[v, KID1]
                k = ce - cs
                if k == 0:
                    continue
                if top + k > len(stack_node):
                    stack_node = _grow(stack_node, top + k)
                    stack_pos = _grow(stack_pos, top + k)
                m_row = mask_row[v]
                if m_row >= 0:  # children and the candidate's atoms as masks
                    first = cs
                    for x in range(words):
                        kw = masks[m_row, x]
                        hit = kw & mine[x]
                        while hit:
                            low = hit & (~hit + _ONE)
                            q = first + _popcount(kw & (low - _ONE))
                            if nd[q, BELOW] > 0:
                                stack_node[top], stack_pos[top] = q, 0  # below a masked node, masks
                                top += 1
                            hit ^= low
                        first += _popcount(kw)
                    continue
                if p >= n:
                    continue
                if k > search * (n - p):  # each remaining atom searched among the children
                    lo = cs
                    for j in range(p, n):
                        x = held_rank[s + j]
                        hi = ce
                        while lo < hi:
                            mid = (lo + hi) >> 1
                            if rank[mid] < x:
                                lo = mid + 1
                            else:
                                hi = mid
                        if lo == ce:
                            break
                        if rank[lo] == x and nd[lo, BELOW] > 0:
                            stack_node[top], stack_pos[top] = lo, j + 1
                            top += 1
                else:  # children and remaining atoms merged
                    q, j = cs, p
                    while q < ce and j < n:
                        x, y = rank[q], held_rank[s + j]
                        if x < y:
                            q += 1
                        elif y < x:
                            j += 1
                        else:
                            if nd[q, BELOW] > 0:
                                stack_node[top], stack_pos[top] = q, j + 1
                                top += 1
                            q += 1
                            j += 1
    return steps


def count_rows(
    post_ptr: np.ndarray,
    post_rows: np.ndarray,
    post_length: np.ndarray,
    n_cand: int,
    indptr: np.ndarray,
    entry_atom: np.ndarray,
    rows: np.ndarray,
    owner: np.ndarray | None,
    cap: int | None,
    threads: int,
) -> tuple[np.ndarray, int]:
    """Per row of `rows` (sets of distinct atoms: `entry_atom[indptr[i]:indptr[i + 1]]`), the
    candidates (with `owner`: distinct owners of the candidate visits, nondecreasing) holding every
    atom, at most `cap`; and the walk's steps. Atoms' candidates: `post_rows[post_ptr[a]:post_ptr[a + 1]]`,
    sorted."""
    n_atoms = len(post_ptr) - 1
    if not len(rows):
        return np.zeros(0, dtype=np.int64), 0
    # one dtype per argument: the kernels are compiled (and cached) for one signature
    post_ptr, post_rows, indptr, entry_atom, rows = (
        np.asarray(a, dtype=np.int64) for a in (post_ptr, post_rows, indptr, entry_atom, rows)
    )
    used = np.flatnonzero(needed_atoms(indptr, entry_atom, rows, n_atoms))
    used = used[np.lexsort((used, post_length[used]))]  # rarest first, ties by atom id
    n_r = len(used)
    rank_of = np.full(n_atoms, -1, dtype=np.int32)
    rank_of[used] = np.arange(n_r, dtype=np.int32)
    parent0, rank0, row0, root0 = build_trie(indptr, entry_atom, rows, rank_of, n_r, _SIZES[0], _SIZES[1])
    new_id = breadth_first(parent0, rank0, n_r)
    parent = np.empty(len(parent0), dtype=np.int64)
    parent[new_id] = np.where(parent0 >= 0, new_id[np.maximum(parent0, 0)], -1)
    rank = np.empty(len(rank0), dtype=np.int32)
    rank[new_id] = rank0
    row_node = new_id[row0]
    root_child = np.where(root0 >= 0, new_id[np.maximum(root0, 0)], -1)
    del parent0, rank0, row0, root0, new_id
    nd = node_table(parent, row_node)
    base = max(n_r - _MASKED, 0)
    mask_row, masks = child_masks(rank, nd, base, (n_r - base + 63) // 64)
    held_rank, after, n_after = held_ranks(post_ptr, post_rows, used, n_cand)
    has_owner = owner is not None
    own = owner.astype(np.int32) if owner is not None else np.zeros(1, dtype=np.int32)
    limit = 0 if cap is None else int(cap)
    roots = np.flatnonzero(root_child >= 0)

    def run(part: np.ndarray) -> int:
        steps = walk(
            part, post_ptr, post_rows, used, held_rank, after, n_after, own, has_owner, parent, rank, root_child,
            nd, mask_row, masks, base, limit, _SIZES[2], _SEARCH,
        )  # fmt: skip
        return int(steps)

    parts = _parts(roots, post_length[used[roots]], threads)
    if len(parts) > 1:
        with ThreadPoolExecutor(threads) as pool:
            steps = sum(pool.map(run, parts))
    else:
        steps = sum(run(p) for p in parts)
    return nd[row_node, COUNT].astype(np.int64), steps


def _parts(roots: np.ndarray, cost: np.ndarray, threads: int) -> list[np.ndarray]:
    """`roots` in contiguous parts of about equal posting lengths, `_PARTS_PER_THREAD` per thread (a
    root's work is far from proportional to its posting length: on engine.synth most of it is under the
    hundred most common atoms, whose sets of common codes stay undecided longest), taken by the threads
    as they come free (subtrees are disjoint: the result is the same in any order)."""
    if threads <= 1 or len(roots) < 2:
        return [roots]
    n = _PARTS_PER_THREAD * threads + 1
    bounds = np.searchsorted(np.cumsum(cost), np.linspace(0, float(cost.sum()), n)[1:-1])
    return [p for p in np.split(roots, np.unique(bounds)) if len(p)]
