"""GCCens' compiled loops (`engine.anonymize.censor`, Tamersoy 2010 Figure 2; thesis Algorithm 1):
the cohort scope's step loop (lines 2-15 with the release as its own population) and the
population scope's exit-step search (faithful k-map).

Cohort scope (`run`): the rules are those of `engine.anonymize.censor` (module docstring): line 11
picks the code with the fewest records at its working level (ties: code order), one instance is
removed from each of them, and only the records that held the code at that level are recounted (no
other record gains or loses a dominator). A record is below k when fewer than k records hold each of
its codes at least as often (itself included): its features "at least l of code j" are intersected
as bitsets from the rarest up, stopping once fewer than k are left (`_below_bits`); when the bitsets
would not fit the caller's budget, the holders of its rarest code are checked one by one instead,
stopping at k (`below_one`). Same steps, counts and release as the loop it replaces
(tests/reference_censor.py, tests/test_censor_fast.py).

Numba compiles these loops (`cache=True`: once per installation, then loaded from the cache;
`python -m engine.anonymize.warm`). A run returns to Python every `budget` steps (progress,
cancellation) with the state left in its arrays, and resumes from it.

State: the release being censored is the tables' counts by record (`t[C_HELD_VAL]`, edited in
place; issue 36: no dense records x codes matrix, whose copy alone took 2.65 s at paper scale), `m`
the number of records, `level` (faithful:
each code's working cap; targeted: the largest count of the code among the records below k),
`sizes` (records at that level; 0: not a candidate), `below` (records below k), `hist` (targeted
only: records below k holding code j exactly l times, `hist[j, l]`), the feature bitsets (`bits`,
row off[j] + l; `size`: how many records each holds; no rows: not used), `ctrl` (`N_BELOW`,
`N_STEPS`) and the steps taken (`steps`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.anonymize.profiles_kernel import _popcount

# statuses of `run`
DONE, STUCK, BUDGET = 0, 1, 2
# `ctrl` slots: records below k now, steps taken
N_BELOW, N_STEPS = 0, 1
N_CTRL = 2

_jit = njit(cache=True, nogil=True)
_ONE = np.uint64(1)


@_jit
def _fewer_than_k(bits: np.ndarray, rows: np.ndarray, n: int, k: int, acc: np.ndarray) -> bool:
    """Whether fewer than k bits are set in the intersection of bits[rows[0]], ..., bits[rows[n -
    1]] (n >= 1; the first holds k or more), intersecting in that order into `acc` (scratch of a
    bitset's length) and stopping once fewer than k are left."""
    acc[:] = bits[rows[0]]
    for i in range(1, n):
        row = bits[rows[i]]
        count = 0
        for w in range(len(acc)):
            acc[w] &= row[w]
            count += _popcount(acc[w])
        if count < k:
            return True
    return False


# `run`'s tables, one tuple: the release's entries by record (CSR of the capped counts: `held_ptr`,
# `held_idx`, and `held_val`, their counts now, kept up to date), who held each code after capping
# (CSC: `code_ptr`, `code_idx`, and `code_pos`, each entry's place in the CSR) and where each code's
# features start in `bits` / `size` (`off`: feature "at least l of code j" is off[j] + l)
C_HELD_PTR, C_HELD_IDX, C_HELD_VAL, C_CODE_PTR, C_CODE_IDX, C_CODE_POS, C_OFF = range(7)


@_jit
def _count_of(t: tuple, c: int, j: int) -> int:
    """Record c's count of code j now (0 if it never held it): its row's indices are sorted."""
    held_ptr, held_idx = t[C_HELD_PTR], t[C_HELD_IDX]
    a, b = held_ptr[c], held_ptr[c + 1]
    while a < b:
        mid = (a + b) // 2
        if held_idx[mid] < j:
            a = mid + 1
        else:
            b = mid
    if a < held_ptr[c + 1] and held_idx[a] == j:
        return t[C_HELD_VAL][a]
    return 0


@_jit
def below_one(t: tuple, m: int, r: int, k: int, feats: np.ndarray) -> bool:
    """Whether fewer than k records of the release hold every code of record r at least as many
    times (r itself included), counted among the holders of its rarest code and stopping at k.
    `feats`: (2, r's length) scratch."""
    held_ptr, held_idx, held_val, code_ptr, code_idx = (
        t[C_HELD_PTR], t[C_HELD_IDX], t[C_HELD_VAL], t[C_CODE_PTR], t[C_CODE_IDX],
    )  # fmt: skip
    n = 0
    rare = -1
    for p in range(held_ptr[r], held_ptr[r + 1]):
        j = held_idx[p]
        if held_val[p] > 0:
            feats[0, n] = j
            feats[1, n] = held_val[p]
            if rare < 0 or code_ptr[j + 1] - code_ptr[j] < code_ptr[rare + 1] - code_ptr[rare]:
                rare = j
            n += 1
    if n == 0:  # no code: every record dominates it
        return m < k
    count = 1  # the record itself
    if count >= k:
        return False
    for p in range(code_ptr[rare], code_ptr[rare + 1]):
        c = code_idx[p]
        if c == r:
            continue
        ok = True
        for f in range(n):
            if _count_of(t, c, feats[0, f]) < feats[1, f]:
                ok = False
                break
        if ok:
            count += 1
            if count >= k:
                return False
    return True


@_jit
def cohort_bits(t: tuple, m: int) -> tuple:
    """(bits, size): row off[j] + l of `bits` is the bitset of the records holding code j at least l
    times (l >= 1), `size` its count."""
    held_ptr, held_idx, held_val, off = t[C_HELD_PTR], t[C_HELD_IDX], t[C_HELD_VAL], t[C_OFF]
    bits = np.zeros((off[-1], (m + 63) // 64), dtype=np.uint64)
    size = np.zeros(off[-1], dtype=np.int64)
    for r in range(m):
        for p in range(held_ptr[r], held_ptr[r + 1]):
            j = held_idx[p]
            for lv in range(1, held_val[p] + 1):
                bits[off[j] + lv, r >> 6] |= _ONE << np.uint64(r & 63)
                size[off[j] + lv] += 1
    return bits, size


@_jit
def _below(
    t: tuple,
    m: int,
    bits: np.ndarray,
    size: np.ndarray,
    r: int,
    k: int,
    feats: np.ndarray,
    acc: np.ndarray,
) -> bool:
    """Record r below k. With bitsets (`bits` has rows: `cohort_bits`, kept up to date by `run`), its
    features "at least y[r, j] of code j" intersected from the rarest up, stopping once fewer than k
    are left; else `below_one`. `feats`: (2, r's length) scratch; `acc`: a bitset's."""
    if not bits.shape[0]:
        return below_one(t, m, r, k, feats)
    held_ptr, held_val, off = t[C_HELD_PTR], t[C_HELD_VAL], t[C_OFF]
    rows = feats[0]
    n = 0
    for p in range(held_ptr[r], held_ptr[r + 1]):
        if held_val[p] > 0:  # insert feature off[j] + y[r, j], rarest first
            f = off[t[C_HELD_IDX][p]] + held_val[p]
            i = n
            while i > 0 and size[rows[i - 1]] > size[f]:
                rows[i] = rows[i - 1]
                i -= 1
            rows[i] = f
            n += 1
    if n == 0:  # no code: every record dominates it
        return m < k
    if size[rows[0]] < k:
        return True
    return _fewer_than_k(bits, rows, n, k, acc)


@_jit
def below_all(t: tuple, m: int, d: int, bits: np.ndarray, size: np.ndarray, k: int) -> np.ndarray:
    """`_below` of every record (m records, d codes)."""
    out = np.zeros(m, dtype=np.bool_)
    feats = np.empty((2, max(d, 1)), dtype=np.int64)
    acc = np.empty(bits.shape[1], dtype=np.uint64)
    for r in range(m):
        out[r] = _below(t, m, bits, size, r, k, feats, acc)
    return out


@_jit
def _refresh(hist: np.ndarray, level: np.ndarray, sizes: np.ndarray, j: int) -> None:
    """Targeted: code j's largest count among the records below k and how many records hold it."""
    top = 0
    for lv in range(hist.shape[1] - 1, 0, -1):
        if hist[j, lv] > 0:
            top = lv
            break
    level[j] = top
    sizes[j] = hist[j, top] if top > 0 else 0


@_jit
def _histogram_add(
    t: tuple, hist: np.ndarray, level: np.ndarray, sizes: np.ndarray, r: int, sign: int
) -> None:
    """Targeted: record r's codes enter (sign 1) or leave (-1) the histogram."""
    held_ptr, held_idx, held_val = t[C_HELD_PTR], t[C_HELD_IDX], t[C_HELD_VAL]
    for p in range(held_ptr[r], held_ptr[r + 1]):
        if held_val[p] > 0:
            j = held_idx[p]
            hist[j, held_val[p]] += sign
            _refresh(hist, level, sizes, j)


@_jit
def level_histogram(
    t: tuple, below: np.ndarray, top: int, d: int, level: np.ndarray, sizes: np.ndarray
) -> np.ndarray:
    """Targeted: hist[j, l] = records below k holding code j exactly l times (l >= 1), with `level`
    and `sizes` filled from it."""
    hist = np.zeros((d, top + 1), dtype=np.int64)
    for r in range(len(below)):
        if below[r]:
            _histogram_add(t, hist, level, sizes, r, 1)
    for j in range(d):
        _refresh(hist, level, sizes, j)
    return hist


@_jit
def run(
    t: tuple,
    m: int,
    bits: np.ndarray,
    size: np.ndarray,
    level: np.ndarray,
    sizes: np.ndarray,
    below: np.ndarray,
    hist: np.ndarray,
    targeted: bool,
    k: int,
    ctrl: np.ndarray,
    steps: np.ndarray,
    budget: int,
) -> int:
    """Algorithm 1's loop from the state given, at most `budget` steps: DONE (no record below k),
    STUCK (records below k, no code left to censor) or BUDGET (call again to go on). `steps` (4,
    room for every step: at most the instances after capping) gets each step's code, count before,
    records censored and records below k before."""
    held_val, code_ptr, code_idx, code_pos, off = (
        t[C_HELD_VAL], t[C_CODE_PTR], t[C_CODE_IDX], t[C_CODE_POS], t[C_OFF],
    )  # fmt: skip
    d = len(off) - 1
    feats = np.empty((2, max(d, 1)), dtype=np.int64)
    acc = np.empty(bits.shape[1], dtype=np.uint64)
    at = np.empty(m, dtype=np.int64)
    at_pos = np.empty(m, dtype=np.int64)
    big = np.iinfo(np.int64).max
    for _ in range(budget):
        if ctrl[N_BELOW] == 0:  # line 2
            return DONE
        o = -1  # line 11: fewest records, first in code order
        best = big
        for j in range(d):
            if 0 < sizes[j] < best:
                best = sizes[j]
                o = j
        if o < 0:
            return STUCK
        lo = level[o]
        n_at = 0
        censored = 0
        for p in range(code_ptr[o], code_ptr[o + 1]):
            h = code_idx[p]
            if held_val[code_pos[p]] == lo:
                at[n_at] = h
                at_pos[n_at] = code_pos[p]
                n_at += 1
        for i in range(n_at):  # lines 12-14
            h = at[i]
            if not targeted or below[h]:
                held_val[at_pos[i]] -= 1
                censored += 1
                if bits.shape[0]:  # h no longer holds o lo times
                    bits[off[o] + lo, h >> 6] &= ~(_ONE << np.uint64(h & 63))
                    size[off[o] + lo] -= 1
        s = ctrl[N_STEPS]
        steps[0, s] = o
        steps[1, s] = lo
        steps[2, s] = censored
        steps[3, s] = ctrl[N_BELOW]
        ctrl[N_STEPS] = s + 1
        if targeted:
            hist[o, lo] -= censored
            hist[o, lo - 1] += censored
            _refresh(hist, level, sizes, o)
        else:  # line 15, then the working cap drops to what is present
            top = 0
            for p in range(code_ptr[o], code_ptr[o + 1]):
                top = max(top, held_val[code_pos[p]])
            new = min(lo - 1, top)
            level[o] = new
            n_new = 0
            if new > 0:
                for p in range(code_ptr[o], code_ptr[o + 1]):
                    if held_val[code_pos[p]] == new:
                        n_new += 1
            sizes[o] = n_new
        for i in range(n_at):  # only these records can gain or lose dominators
            r = at[i]
            now = _below(t, m, bits, size, r, k, feats, acc)
            if now == below[r]:
                continue
            below[r] = now
            ctrl[N_BELOW] += 1 if now else -1
            if targeted:  # the record's codes enter or leave the histogram
                _histogram_add(t, hist, level, sizes, r, 1 if now else -1)
    return BUDGET


# ------------------------------------------------------------------------------ population scope
# `exit_steps`' tables, one tuple: the sample's capped counts (CSR: `held_ptr`, `held_idx`,
# `held_val`), the working caps before any step (`cap`), each code's steps in the step sequence
# (`cs_ptr`, `cs_pos`: positions, ascending), the population's holders of each feature "at least l
# of code j" (`size[off[j] + l]`), its counts by code (CSC: `pop_ptr`, `pop_idx`, `pop_val`, each
# column's larger counts first, so that the holders of a feature are a prefix) and by
# record (CSR, sorted: `row_ptr`, `row_idx`, `row_val`), and each feature's row of `bits` (`slot`,
# -1: none; the features held widely, `censor._faithful_by_exit_steps`)
(
    HELD_PTR, HELD_IDX, HELD_VAL, CAP, CS_PTR, CS_POS, OFF, SIZE,
    POP_PTR, POP_IDX, POP_VAL, ROW_PTR, ROW_IDX, ROW_VAL, SLOT,
) = range(15)  # fmt: skip


@_jit
def feature_bits(t: tuple, n_slots: int, n_pop: int) -> np.ndarray:
    """(n_slots, words) bitsets over the population of the features given a slot in `t[SLOT]`."""
    words = (n_pop + 63) // 64
    bits = np.zeros((n_slots, words), dtype=np.uint64)
    pop_ptr, pop_idx, pop_val, cap, off, slot = t[POP_PTR], t[POP_IDX], t[POP_VAL], t[CAP], t[OFF], t[SLOT]
    for j in range(len(pop_ptr) - 1):
        for p in range(pop_ptr[j], pop_ptr[j + 1]):
            c = pop_idx[p]
            for lv in range(1, min(pop_val[p], cap[j]) + 1):
                q = slot[off[j] + lv]
                if q >= 0:
                    bits[q, c >> 6] |= _ONE << np.uint64(c & 63)
    return bits


@_jit
def _steps_of(t: tuple, j: int, s: int) -> int:
    """How many of code j's steps are among the first s of the step sequence."""
    cs_ptr, cs_pos = t[CS_PTR], t[CS_POS]
    a, b = cs_ptr[j], cs_ptr[j + 1]
    while a < b:
        mid = (a + b) // 2
        if cs_pos[mid] < s:
            a = mid + 1
        else:
            b = mid
    return a - cs_ptr[j]


@_jit
def _holds(t: tuple, c: int, j: int, level: int) -> bool:
    """Whether population record c holds code j at least `level` times."""
    row_ptr, row_idx = t[ROW_PTR], t[ROW_IDX]
    a, b = row_ptr[c], row_ptr[c + 1]
    while a < b:
        mid = (a + b) // 2
        if row_idx[mid] < j:
            a = mid + 1
        else:
            b = mid
    return a < row_ptr[c + 1] and row_idx[a] == j and t[ROW_VAL][a] >= level


@_jit
def _below_after(
    t: tuple,
    bits: np.ndarray,
    r: int,
    s: int,
    k: int,
    n_pop: int,
    scratch: np.ndarray,
    acc: np.ndarray,
) -> bool:
    """Faithful k-map: whether fewer than k population records dominate sample record r after s steps
    (each code's working cap is its cap less its steps among the first s). With its rarest feature
    ("at least l of code j") without a bitset, its holders are the candidates, each other feature
    looked up in its bitset or the candidate's row, counting stopped at k; else (every feature has
    a bitset) the features' bitsets are intersected from the rarest up, stopping once
    fewer than k are left (a feature without a bitset is rarer than any with one). `scratch`: (3,
    r's length) feature, code, level (then bitset row); `acc`: a bitset."""
    held_ptr, held_idx, held_val, cap, off, size = (
        t[HELD_PTR], t[HELD_IDX], t[HELD_VAL], t[CAP], t[OFF], t[SIZE],
    )  # fmt: skip
    fid, fj, fl = scratch[0], scratch[1], scratch[2]
    n = 0
    for p in range(held_ptr[r], held_ptr[r + 1]):
        j = held_idx[p]
        lv = min(held_val[p], cap[j] - _steps_of(t, j, s))
        if lv > 0:  # insert feature off[j] + lv, rarest first
            f = off[j] + lv
            i = n
            while i > 0 and size[fid[i - 1]] > size[f]:
                fid[i], fj[i], fl[i] = fid[i - 1], fj[i - 1], fl[i - 1]
                i -= 1
            fid[i], fj[i], fl[i] = f, j, lv
            n += 1
    if n == 0:  # no code: every candidate dominates
        return n_pop < k
    if size[fid[0]] < k:
        return True
    slot = t[SLOT]
    if slot[fid[0]] < 0:  # few candidates: check them one by one
        pop_ptr, pop_idx = t[POP_PTR], t[POP_IDX]
        count = 0
        for p in range(pop_ptr[fj[0]], pop_ptr[fj[0]] + size[fid[0]]):  # larger counts first
            c = pop_idx[p]
            ok = True
            for i in range(1, n):
                q = slot[fid[i]]
                if q >= 0:
                    held_it = (bits[q, c >> 6] >> np.uint64(c & 63)) & _ONE
                    if held_it == 0:
                        ok = False
                        break
                elif not _holds(t, c, fj[i], fl[i]):
                    ok = False
                    break
            if ok:
                count += 1
                if count >= k:
                    return False
        return True
    for i in range(n):  # every feature has a bitset: none is rarer than the first
        fj[i] = slot[fid[i]]
    return _fewer_than_k(bits, fj, n, k, acc)


@_jit
def exit_steps(
    t: tuple, bits: np.ndarray, start: int, end: int, n_steps: int, k: int, n_pop: int, out: np.ndarray
) -> None:
    """Each sample record's exit step, records [start, end), into `out`: 0 if it meets k before any
    step, n_steps + 1 if it is still below k after them all, else the first s after which it meets
    k, by the binary search of `censor._faithful_by_exit_steps` (lo below k, hi meeting it, mid =
    (lo + hi) // 2 until they are adjacent)."""
    held_ptr = t[HELD_PTR]
    width = 1
    for r in range(start, end):
        width = max(width, held_ptr[r + 1] - held_ptr[r])
    scratch = np.empty((3, width), dtype=np.int64)
    acc = np.empty(bits.shape[1], dtype=np.uint64)
    for r in range(start, end):
        if not _below_after(t, bits, r, 0, k, n_pop, scratch, acc):
            out[r] = 0
        elif _below_after(t, bits, r, n_steps, k, n_pop, scratch, acc):
            out[r] = n_steps + 1
        else:
            lo, hi = 0, n_steps
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _below_after(t, bits, r, mid, k, n_pop, scratch, acc):
                    lo = mid
                else:
                    hi = mid
            out[r] = hi
