"""GCCens' cohort-scope step loop (`engine.anonymize.censor`, Tamersoy 2010 Figure 2; thesis
Algorithm 1 lines 2-15 with the release as its own population) as one compiled loop.

The rules are those of `engine.anonymize.censor` (module docstring): line 11 picks the code with the
fewest records at its working level (ties: code order), one instance is removed from each of them,
and only the records that held the code at that level are recounted (no other record gains or loses
a dominator). A record's dominators are counted among the holders of its rarest code (`code_ptr` /
`code_idx`: who held each code after capping, a superset of who holds it now), and counting stops
at k: the loop only asks whether a record is below k. Same steps, counts and release as the numpy
loop it replaces (tests/reference_censor.py, tests/test_censor_fast.py).

Numba compiles these loops (`cache=True`: once per installation, then loaded from the cache;
`python -m engine.anonymize.warm`). A run returns to Python every `budget` steps (progress,
cancellation) with the state left in its arrays, and resumes from it.

State: `yt` (codes x records, the release being censored, edited in place: the transpose of the
caller's column-major matrix, so that a code's holders are read from one row), `level` (faithful: each
code's working cap; targeted: the largest count of the code among the records below k), `sizes`
(records at that level; 0: not a candidate), `below` (records below k), `hist` (targeted only:
records below k holding code j exactly l times, `hist[j, l]`), `ctrl` (`N_BELOW`, `N_STEPS`) and the
steps taken (`step_code`, `step_from`, `step_records`, `step_below`, one row per step).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# statuses of `run`
DONE, STUCK, BUDGET = 0, 1, 2
# `ctrl` slots: records below k now, steps taken
N_BELOW, N_STEPS = 0, 1
N_CTRL = 2

_jit = njit(cache=True, nogil=True)


@_jit
def below_one(
    yt: np.ndarray,
    r: int,
    k: int,
    held_ptr: np.ndarray,
    held_idx: np.ndarray,
    code_ptr: np.ndarray,
    code_idx: np.ndarray,
    feats: np.ndarray,
) -> bool:
    """Whether fewer than k records of the release hold every code of record r at least as many times (r
    itself included); `feats` is scratch space of at least r's length."""
    n = 0
    rare = -1
    for p in range(held_ptr[r], held_ptr[r + 1]):
        j = held_idx[p]
        if yt[j, r] > 0:
            feats[n] = j
            if rare < 0 or code_ptr[j + 1] - code_ptr[j] < code_ptr[rare + 1] - code_ptr[rare]:
                rare = j
            n += 1
    if n == 0:  # no code: every record dominates it
        return yt.shape[1] < k
    count = 1  # the record itself
    if count >= k:
        return False
    for p in range(code_ptr[rare], code_ptr[rare + 1]):
        c = code_idx[p]
        if c == r:
            continue
        ok = True
        for f in range(n):
            j = feats[f]
            if yt[j, c] < yt[j, r]:
                ok = False
                break
        if ok:
            count += 1
            if count >= k:
                return False
    return True


@_jit
def below_all(
    yt: np.ndarray,
    k: int,
    held_ptr: np.ndarray,
    held_idx: np.ndarray,
    code_ptr: np.ndarray,
    code_idx: np.ndarray,
) -> np.ndarray:
    """`below_one` of every record."""
    m = yt.shape[1]
    out = np.zeros(m, dtype=np.bool_)
    feats = np.empty(max(yt.shape[0], 1), dtype=np.int64)
    for r in range(m):
        out[r] = below_one(yt, r, k, held_ptr, held_idx, code_ptr, code_idx, feats)
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
def level_histogram(
    yt: np.ndarray,
    below: np.ndarray,
    top: int,
    held_ptr: np.ndarray,
    held_idx: np.ndarray,
    level: np.ndarray,
    sizes: np.ndarray,
) -> np.ndarray:
    """Targeted: hist[j, l] = records below k holding code j exactly l times (l >= 1), with `level`
    and `sizes` filled from it."""
    d = yt.shape[0]
    hist = np.zeros((d, top + 1), dtype=np.int64)
    for r in range(yt.shape[1]):
        if below[r]:
            for p in range(held_ptr[r], held_ptr[r + 1]):
                j = held_idx[p]
                if yt[j, r] > 0:
                    hist[j, yt[j, r]] += 1
    for j in range(d):
        _refresh(hist, level, sizes, j)
    return hist


@_jit
def run(
    yt: np.ndarray,
    level: np.ndarray,
    sizes: np.ndarray,
    below: np.ndarray,
    hist: np.ndarray,
    targeted: bool,
    k: int,
    held_ptr: np.ndarray,
    held_idx: np.ndarray,
    code_ptr: np.ndarray,
    code_idx: np.ndarray,
    ctrl: np.ndarray,
    step_code: np.ndarray,
    step_from: np.ndarray,
    step_records: np.ndarray,
    step_below: np.ndarray,
    budget: int,
) -> int:
    """Algorithm 1's loop from the state given, at most `budget` steps: DONE (no record below k),
    STUCK (records below k, no code left to censor) or BUDGET (call again to go on). The step
    arrays must have room for every step (at most the sum of the caps)."""
    d = yt.shape[0]
    feats = np.empty(max(d, 1), dtype=np.int64)
    at = np.empty(yt.shape[1], dtype=np.int64)
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
            if yt[o, h] == lo:
                at[n_at] = h
                n_at += 1
        for i in range(n_at):  # lines 12-14
            h = at[i]
            if not targeted or below[h]:
                yt[o, h] -= 1
                censored += 1
        s = ctrl[N_STEPS]
        step_code[s] = o
        step_from[s] = lo
        step_records[s] = censored
        step_below[s] = ctrl[N_BELOW]
        ctrl[N_STEPS] = s + 1
        if targeted:
            hist[o, lo] -= censored
            hist[o, lo - 1] += censored
            _refresh(hist, level, sizes, o)
        else:  # line 15, then the working cap drops to what is present
            top = 0
            for p in range(code_ptr[o], code_ptr[o + 1]):
                top = max(top, yt[o, code_idx[p]])
            new = min(lo - 1, top)
            level[o] = new
            n_new = 0
            if new > 0:
                for p in range(code_ptr[o], code_ptr[o + 1]):
                    if yt[o, code_idx[p]] == new:
                        n_new += 1
            sizes[o] = n_new
        for i in range(n_at):  # only these records can gain or lose dominators
            r = at[i]
            now = below_one(yt, r, k, held_ptr, held_idx, code_ptr, code_idx, feats)
            if now == below[r]:
                continue
            below[r] = now
            ctrl[N_BELOW] += 1 if now else -1
            if targeted:  # the record's codes enter or leave the histogram
                sign = 1 if now else -1
                for p in range(held_ptr[r], held_ptr[r + 1]):
                    j = held_idx[p]
                    if yt[j, r] > 0:
                        hist[j, yt[j, r]] += sign
                        _refresh(hist, level, sizes, j)
    return BUDGET
