"""The GCCens censoring loop as it was before the cohort scope's batched dominance counts (commit
8a2a106, `engine.anonymize.censor.censor_counts`), kept verbatim as the plain reference that
tests/test_censor_fast.py and bench/gccens.py compare the current loop against (the cohort scope
counted each record's dominators with `DominanceCounter(live=True)`, one bitset intersection per
record).

`_faithful_by_exit_steps` below is the population scope's faithful path as it was before its
compiled search (issue 24; `engine.anonymize.censor._faithful_by_exit_steps` at commit 737f6e3),
verbatim: each record's exit step by binary search in numpy batches, the dominance counts by
`DominanceCounter.below_sparse`."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from engine.anonymize.censor import (
    KERNELS,
    VARIANTS,
    CensorProblem,
    DominanceCounter,
    Kernel,
    Variant,
    _level_histogram,
    _risk_distinguishability,
)
from engine.io.progress import Progress


def reference_censor_counts(
    problem: CensorProblem,
    k: int,
    caps: np.ndarray,
    variant: Variant = "faithful",
    kernel: Kernel = "dominance",
    progress: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray, list[dict], bool]:
    """Algorithm 1 on count vectors: (capped counts, released counts, steps, k reached).

    `progress(fraction, message)` is called before every censoring step, in this thread, with the
    share of the records first below k that meet it now (the faithful k-map path, which does not
    step: once per round of its exit-step search); it may raise to cancel the run (nothing is left
    running: the loop holds no threads between steps)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, not {kernel!r}")
    if int(k) < 1:
        raise ValueError(f"k must be >= 1, not {k}")
    if progress is not None:
        progress(0.0, "capping, then counting the records below k")
    capped = np.minimum(problem.counts, caps[None, :])  # line 1: preprocess
    y = capped.copy()
    m = len(y)
    cap = np.minimum(caps, y.max(axis=0)) if m else caps.copy()  # working caps (see docstring)
    sizes = (y == cap[None, :]).sum(axis=0) * (cap > 0)
    counter = problem.counter_for(caps)
    # who holds each code (after capping; censoring only empties entries), so that the loop's column
    # and row work is proportional to the holders and the records' codes, not to the cohort or d
    held = sp.csr_matrix(capped)
    by_code = held.tocsc()
    row_lengths = np.diff(held.indptr)
    if kernel == "dominance" and variant == "faithful" and problem.scope == "population" and m:
        assert counter is not None
        y, exit_steps, reached = _faithful_by_exit_steps(problem, k, capped, cap, counter, held, progress)
        return capped, y, exit_steps, reached
    sparse_rows = (
        kernel != "risk" and problem.scope == "population" and counter is not None and not counter.dense
    )

    def still_below(rows: np.ndarray) -> np.ndarray:
        assert (
            counter is not None
        )  # every kernel but "risk" has one (population scope: shared; cohort: built below)
        if not sparse_rows:
            return counter.below(y[rows], k)
        starts, lengths = held.indptr[rows], row_lengths[rows]
        b = np.repeat(np.arange(len(rows)), lengths)
        j = held.indices[np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())]
        level = y[rows[b], j]
        nz = level > 0
        return counter.below_sparse(b[nz], j[nz], level[nz], len(rows), k)

    if kernel == "risk":
        below = _risk_distinguishability(problem, y) < k
    elif sparse_rows:
        below = still_below(np.arange(m))
    else:
        if problem.scope == "cohort":  # candidates: the release itself, edited in place below
            counter = DominanceCounter(y, y.max(axis=0) if m else cap, live=True)
        assert counter is not None
        below = counter.below(y, k)
    # targeted (fast kernels): per code, how many records below k hold it exactly l times, kept up
    # to date as records are censored or meet k, instead of rescanning y[below] on every step
    hist = _level_histogram(y, below, caps) if variant == "targeted" and kernel != "risk" else None

    steps: list[dict] = []
    labels = problem.code_labels
    n_below = int(below.sum())
    first_below = n_below
    while True:
        if kernel == "risk":
            n_below = int(below.sum())
        if progress is not None:
            met = first_below - n_below
            progress(
                met / first_below if first_below else 1.0,
                f"{met:,} of {first_below:,} records below k meet it (step {len(steps) + 1})",
            )
        if n_below == 0:  # line 2
            return capped, y, steps, True
        if variant == "faithful":
            if kernel == "risk":  # the literal scan of lines 4-10
                sizes = (y == cap[None, :]).sum(axis=0) * (cap > 0)
            level, eligible = cap, None
        else:
            if hist is None:  # the literal scan of the records below k
                yb = y[below]
                level = yb.max(axis=0)
                sizes = (yb == level[None, :]).sum(axis=0) * (level > 0)
            else:
                level, sizes = hist.level, hist.sizes
            eligible = below
        if not (sizes > 0).any():
            return capped, y, steps, False  # nothing left to censor
        o = int(np.argmin(np.where(sizes > 0, sizes, np.iinfo(np.int64).max)))  # line 11, first = code order
        holders = by_code.indices[by_code.indptr[o] : by_code.indptr[o + 1]]
        at_level = holders[y[holders, o] == level[o]]  # level[o] > 0: only holders can be at it
        rows = at_level if eligible is None else at_level[eligible[at_level]]
        lo = int(level[o])
        y[rows, o] -= 1  # lines 12-14
        steps.append({"code": labels[o], "from_count": lo, "records": len(rows), "below_k_before": n_below})
        if hist is not None:
            hist.move(o, lo, len(rows))
        if variant == "faithful":  # line 15, then the working cap drops to what is present
            left = y[holders, o]
            cap[o] = min(lo - 1, int(left.max()))
            sizes[o] = int((left == cap[o]).sum()) if cap[o] > 0 else 0
        if kernel == "risk":
            below = _risk_distinguishability(problem, y) < k
            continue
        if problem.scope == "population":  # k-map: only the censored records change, and a
            # record that met k still does (fewer codes: as many dominating candidates or more)
            rows = rows[below[rows]]
        else:  # only records that held o at the censored level can gain or lose dominators
            assert counter is not None
            counter.changed(o)
            rows = at_level
        if not len(rows):
            continue
        was = below[rows]
        below[rows] = still_below(rows)
        flipped = rows[was != below[rows]]
        n_below += int(below[flipped].sum()) - int((~below[flipped]).sum())
        if hist is not None and len(flipped):
            hist.flip(y, flipped, below[flipped])


def _faithful_by_exit_steps(
    problem: CensorProblem,
    k: int,
    capped: np.ndarray,
    cap: np.ndarray,
    counter: DominanceCounter,
    held: sp.csr_matrix,
    progress: Progress | None,
) -> tuple[np.ndarray, list[dict], bool]:
    """The faithful variant in the population scope without stepping (the default kernel).

    The faithful step sequence does not depend on k: the step at level l of code j censors every
    record holding j at least l times (all of them sit at the working cap then), so its size is
    S_j(l) = #{records with capped count >= l} and the working cap drops to l - 1. As S_j(l) grows
    while l falls, line 11's choice (fewest records, ties by code order) is the whole list of
    (S_j(l), j, -l) sorted. After s steps a record holds min(capped, working cap) of each code, its
    distinguishability can only grow with s (k-map: fewer codes, as many candidates or more), so each
    record's exit step (the first s at which it meets k) is found by binary search, all records in
    one batch per round; the loop stops at the largest exit step. Same release and steps as the
    stepwise loop (`kernel="stepwise"`), which tests check."""
    m, d = capped.shape
    # the whole step sequence: one step per (code, level), level = cap .. 1
    r, j = held.nonzero()
    c = np.minimum(capped[r, j], cap[j])
    top = int(cap.max()) if d else 0
    at = np.bincount(j * (top + 1) + c, minlength=d * (top + 1)).reshape(d, top + 1)
    at_least = np.cumsum(at[:, ::-1], axis=1)[:, ::-1]  # [j, l] = records holding j >= l times
    step_code = np.repeat(np.arange(d), cap)
    step_level = np.concatenate([np.arange(x, 0, -1) for x in cap.tolist()]) if d else np.zeros(0, np.int64)
    step_level = step_level.astype(np.int64)
    step_size = at_least[step_code, step_level]
    order = np.lexsort((-step_level, step_code, step_size))
    step_code, step_level, step_size = step_code[order], step_level[order], step_size[order]
    n_steps = len(order)
    # per code, the positions of its steps in increasing order (a global sorted key)
    key = np.sort(step_code.astype(np.int64) * (n_steps + 1) + np.arange(n_steps))
    code_start = np.searchsorted(key, np.arange(d, dtype=np.int64) * (n_steps + 1))

    def working_cap(codes: np.ndarray, s: np.ndarray) -> np.ndarray:
        """Each code's working cap after s steps (codes and s aligned)."""
        done = np.searchsorted(key, codes.astype(np.int64) * (n_steps + 1) + s) - code_start[codes]
        return cap[codes] - done

    row_ptr, code_of = held.indptr, held.indices

    def below_at(rows: np.ndarray, s: np.ndarray) -> np.ndarray:
        """Whether each record of `rows` is below k after s[i] steps."""
        lengths = row_ptr[rows + 1] - row_ptr[rows]
        idx = np.repeat(row_ptr[rows] - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
        b = np.repeat(np.arange(len(rows)), lengths)
        jj = code_of[idx]
        level = np.minimum(capped[rows[b], jj], working_cap(jj, s[b]))
        nz = level > 0
        return counter.below_sparse(b[nz], jj[nz], level[nz], len(rows), k)

    rounds = max(int(n_steps).bit_length(), 1) + 2
    if progress is not None:
        progress(0.0, f"{n_steps:,} censoring steps listed; finding each record's exit step")
    everyone = np.arange(m)
    exit_step = np.zeros(m, dtype=np.int64)
    first = below_at(everyone, np.zeros(m, dtype=np.int64))
    lo_rows = everyone[first]
    never = below_at(lo_rows, np.full(len(lo_rows), n_steps, dtype=np.int64))
    unreachable = lo_rows[never]
    rows = lo_rows[~never]
    lo = np.zeros(len(rows), dtype=np.int64)  # below k after lo steps
    hi = np.full(len(rows), n_steps, dtype=np.int64)  # meets k after hi steps
    done_rounds = 2
    while len(rows):
        if progress is not None:
            progress(min(done_rounds / rounds, 1.0), f"exit steps: round {done_rounds} of at most {rounds}")
        mid = (lo + hi) // 2
        still = below_at(rows, mid)
        lo = np.where(still, mid, lo)
        hi = np.where(still, hi, mid)
        settled = hi - lo <= 1
        exit_step[rows[settled]] = hi[settled]
        rows, lo, hi = rows[~settled], lo[~settled], hi[~settled]
        done_rounds += 1
    reached = len(unreachable) == 0
    exit_step[unreachable] = n_steps + 1
    taken = int(exit_step.max()) if reached else n_steps
    sorted_exit = np.sort(exit_step)
    below_before = m - np.searchsorted(sorted_exit, np.arange(taken), side="right")
    labels = problem.code_labels
    steps = [
        {"code": labels[o], "from_count": lv, "records": n, "below_k_before": nb}
        for o, lv, n, nb in zip(
            step_code[:taken].tolist(),
            step_level[:taken].tolist(),
            step_size[:taken].tolist(),
            below_before.tolist(),
            strict=True,
        )
    ]
    y = np.minimum(capped, working_cap(np.arange(d), np.full(d, taken, dtype=np.int64))[None, :])
    if progress is not None:
        progress(1.0, f"{m - len(unreachable):,} of {m:,} records meet k after {taken:,} steps")
    return y, steps, reached
