"""The GCCens censoring loop as it was before the cohort scope's batched dominance counts (commit
8a2a106, `engine.anonymize.censor.censor_counts`), kept verbatim as the plain reference that
tests/test_censor_fast.py and bench/gccens.py compare the current loop against (the cohort scope
counted each record's dominators with `DominanceCounter(live=True)`, one bitset intersection per
record)."""

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
    _faithful_by_exit_steps,
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
