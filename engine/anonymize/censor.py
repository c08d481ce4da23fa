"""GCCens: Greedy Code Censoring of repeated diagnosis codes under k-map.

Tamersoy et al. 2010 (AMIA), Figure 2, and Tamersoy 2011 (thesis), chapter III, Algorithm 1.

A record is a multiset of codes; the release keeps repeat counts, and the attacker knows them
(`Release.counts_repeats`). A released record's distinguishability is the number of candidate records
holding each of its codes at least as many times (the risk engine's `all_visits` knowledge with
repeats). Scope `population` is the paper's k-map (candidates: the population P); scope `cohort` runs
the same algorithm with the released sample as its own population (k-anonymity).

Algorithm 1, with the conventions this module states:

1. `preprocess`: each code is censored down to its cap (line 1). Caps are per code, or one universal
   cap; a code with no cap given keeps its sample maximum (the paper's "scan of S").
2. While some record has distinguishability < k (line 2): for each code d, r_d is the set of records
   holding d exactly c_d times (lines 3-10); codes with an empty r_d, and codes at cap 0, are not
   candidates. The code o with the fewest records in r_o is chosen (line 11), **ties broken by code
   order** (the sorted code vocabulary), one instance of o is removed from every record of r_o
   (lines 12-14) and c_o is decremented (line 15).
   Convention: the working cap of a code is lowered to the largest repeat count actually present
   whenever that is below it. The literal pseudocode would reach the same state by choosing codes
   whose r_d is empty (|r_d| = 0 is the minimum) and decrementing their caps without touching any
   record; the output is the same, and the loop cannot spin on cap-0 codes.
3. The instance removed from a record is its last occurrence of the code in record order (latest
   visit, then latest input row); preprocessing likewise keeps the first `cap` occurrences.

Variant `targeted` (beyond the paper): r_d only holds records that are still below k, at the largest
repeat count of d among them, so records that already meet k are never censored (in the population
scope a record's distinguishability depends on that record alone). Ties are broken by code order as
well. It usually retains more, but not always: the greedy choice over fewer records can pick a code
that does not help (sample {250, 272}, {250} with 272 unique in P, k = 2: targeted censors 250, then
272; faithful censors only 272, the code fewer records hold).

The loop's distinguishability is either the risk engine's (`kernel="risk"`: every record recounted
with `engine.risk.distinguishability` on every iteration, the plain reference) or an incremental
dominance count (`kernel="dominance"`, default): candidate count vectors capped at the caps (which
cannot change any count, as no target exceeds them), counted in O(1) by suffix sums over a dense
histogram when the cap grid is small (the paper's four codes), else by AND-ing per (code, level)
bitsets of candidates with per-vector memoization. The loop only asks whether a record is below k
(`DominanceCounter.below`): on the bitset path all records censored in one step are decided together
from their codes alone (not the d columns), intersecting features "at least l of code j" from the
rarest up and stopping once fewer than k candidates are left. In the population scope only the
records just censored that were still below k are recounted (a record that met k still does: fewer
codes, as many dominating candidates or more); in the cohort scope only the records that held the censored code at the
censored level (no other record gains or loses a dominating candidate). The cohort scope's loop is
compiled (`censor_kernel.run`, numba; issue 24): each record's features are intersected as bitsets
over the release kept up to date as records are censored, rarest first and stopping once fewer than
k are left (the `stepwise` kernel keeps the live bitset counter, the plain loop). Either way the
result is verified by `engine.risk.verify` (tests and callers), never by these counters.

The faithful variant in the population scope does not step at all with the default kernel: its step
sequence does not depend on k and is listed at once, and each record's exit step is binary-searched
(`_faithful_by_exit_steps`, compiled: `censor_kernel.exit_steps`); `kernel="stepwise"` runs the same
dominance counts step by step (the plain loop, kept as the tests' and the benchmark's reference).

Worked example (Figures 1-3): population Dan {250}, Bella {250,250,272}, John {250,250,272,272},
Ada {401 x4}, Tom {272,272,724}, Alan {250}, Eric {272,724}; sample Alan, Tom, Bella; k = 2, caps
250:2, 272:2, 401:0, 724:1 -> {250}, {272,724}, {250,272}, CUL 0, 1/3, 1/3. (The text's
dis(250,250,272) = 1 overlooks John, who also contains those codes; dis = 2 under the containment
definition, and Tom's record still forces the same two steps.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Literal

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine import risk
from engine.adversary import Scope
from engine.io.progress import Progress
from engine.records import PATIENT, VISIT, Records
from engine.release import Release
from engine.utility.censoring import censoring_loss, cul_statistics, release_cul
from engine.utility.coverage import instances_retained

Variant = Literal["faithful", "targeted"]
Kernel = Literal["dominance", "stepwise", "risk"]
VARIANTS: tuple[Variant, ...] = ("faithful", "targeted")
KERNELS: tuple[Kernel, ...] = ("dominance", "stepwise", "risk")
METHOD = "GCCens"
DENSE_LIMIT = 1 << 21  # largest cap grid (product of (cap + 1)) counted by a dense histogram


# ------------------------------------------------------------------------------ dominance counts
class DominanceCounter:
    """Number of candidate count vectors that dominate (>= in every code) each target vector.

    `candidates` is (n, d) sparse or dense repeat counts over the sample's codes; `top` (d,) bounds
    every target's counts (candidates are capped at it, which changes no count). With `live=True`,
    `candidates` is a dense array the caller edits in place, calling `changed(j)` after editing
    column j (the cohort scope, where the candidates are the release being censored).
    """

    def __init__(self, candidates: sp.spmatrix | np.ndarray, top: np.ndarray, *, live: bool = False) -> None:
        self.top = np.asarray(top, dtype=np.int64)
        self.n, self.d = candidates.shape
        self._bits: dict[tuple[int, int], tuple[np.ndarray, int]] = {}
        self._memo: dict[bytes, int] = {}
        self._words = (self.n + 63) // 64
        self._live = candidates if live else None
        self.dense = (not live) and float(np.log2(self.top + 1.0).sum()) <= np.log2(DENSE_LIMIT)
        # the histogram's axes: codes capped at 0 add nothing (every vector holds them >= 0 times),
        # and a grid of more than 64 axes could not be built (numpy's limit), e.g. cap 0 on 70 codes
        self._axes = np.flatnonzero(self.top > 0)
        if live:
            return
        m = sp.csc_matrix(candidates, dtype=np.int64, copy=True)
        m.data = np.minimum(m.data, np.repeat(self.top, np.diff(m.indptr)))
        m.eliminate_zeros()
        m.sort_indices()
        if self.dense:
            self._hist = _suffix_histogram(m[:, self._axes], self.top[self._axes])
        else:
            self._csc = m
            # feature (j, level) = "at least `level` of code j", numbered off[j] + level; its size
            # (how many candidates hold it) and, once asked for, its bitset in a slot of `_store`
            self._off = np.concatenate([[0], np.cumsum(self.top + 1)]).astype(np.int64)
            flat = np.repeat(self._off[:-1], np.diff(m.indptr)) + m.data
            suffix = np.cumsum(np.bincount(flat, minlength=int(self._off[-1]) + 1)[::-1])[::-1]
            self._size = suffix[:-1] - np.repeat(suffix[self._off[1:]], self.top + 1)
            self._slot = np.full(int(self._off[-1]), -1, dtype=np.int64)
            self._store = np.zeros((0, self._words), dtype=np.uint64)
            self._stored = 0

    def changed(self, j: int) -> None:
        """Forget the bitsets of column j (live mode, after the caller edited that column)."""
        for key in [key for key in self._bits if key[0] == j]:
            del self._bits[key]

    def count(self, targets: np.ndarray) -> np.ndarray:
        """(B,) dominance counts of the (B, d) target count vectors."""
        targets = np.asarray(targets, dtype=np.int64).reshape(-1, self.d)
        if len(targets) == 0:
            return np.zeros(0, dtype=np.int64)
        if self._live is None and (targets > self.top).any():
            raise ValueError("a target count exceeds the counter's cap")
        if self.dense:
            if not len(self._axes):
                return np.full(len(targets), self.n, dtype=np.int64)
            return self._hist[tuple(targets[:, self._axes].T)].astype(np.int64)
        local: dict[bytes, int] = {}  # identical targets in this call are counted once
        return np.array([self._count_one(t, local) for t in targets], dtype=np.int64)

    def below(self, targets: np.ndarray, k: int) -> np.ndarray:
        """(B,) whether each target's dominance count is below k, the only thing Algorithm 1's loop
        asks (line 2). Same answers as `count(targets) < k`; on the bitset path all targets are
        decided together, intersecting each target's features from the rarest up and stopping as
        soon as fewer than k candidates are left (or every feature is used: the exact count)."""
        targets = np.asarray(targets, dtype=np.int64).reshape(-1, self.d)
        if self.dense or self._live is not None or len(targets) == 0:
            return self.count(targets) < k
        b, j = np.nonzero(targets)
        return self.below_sparse(b, j, targets[b, j], len(targets), k)

    def below_sparse(
        self,
        b: np.ndarray,
        j: np.ndarray,
        level: np.ndarray,
        n: int,
        k: int,
    ) -> np.ndarray:
        """`below` of n targets given by their nonzero entries: target b[i] holds code j[i] level[i]
        times (levels > 0; the bitset path only, where a target's cost is its support, not d)."""
        if self.dense or self._live is not None:
            targets = np.zeros((n, self.d), dtype=np.int64)
            targets[b, j] = level
            return self.below(targets, k)
        if (level > self.top[j]).any():
            raise ValueError("a target count exceeds the counter's cap")
        fid = self._off[j] + level
        size = self._size[fid]
        order = np.lexsort((fid, size, b))  # per target, rarest feature first (ties: feature order)
        fid, size, b = fid[order], size[order], b[order]
        n_feat = np.bincount(b, minlength=n)
        start = np.concatenate([[0], np.cumsum(n_feat)[:-1]])
        out = np.full(n, self.n < k)  # no code: every candidate dominates
        if n <= SMALL_BATCH:  # a few targets: one at a time, without the batch's fixed costs
            for t in np.flatnonzero(n_feat > 0).tolist():
                s, e = int(start[t]), int(start[t] + n_feat[t])
                out[t] = self._below_one(fid[s:e], size[s:e], k)
        else:
            active = np.flatnonzero(n_feat > 0)
            rare = size[start[active]] < k  # the rarest feature alone leaves fewer than k
            out[active[rare]] = True
            active = active[~rare]
            acc = None
            r = 0
            while len(active):
                bits = self._feature_bits(fid[start[active] + r])
                acc = bits if acc is None else np.bitwise_and(acc, bits, out=acc)
                low = np.bitwise_count(acc).sum(axis=1, dtype=np.int64) < k
                done = low | (n_feat[active] <= r + 1)
                out[active[done]] = low[done]
                active, acc = active[~done], acc[~done]
                r += 1
        return out

    def _below_one(self, fid: np.ndarray, size: np.ndarray, k: int) -> bool:
        """Whether fewer than k candidates hold every feature `fid` of one target (sorted rarest
        first, sizes `size`), intersecting in that order and stopping once fewer than k are left."""
        if size[0] < k:
            return True
        acc = self._one_bits(int(fid[0])).copy()
        for f in fid[1:].tolist():
            np.bitwise_and(acc, self._one_bits(f), out=acc)
            if int(np.bitwise_count(acc).sum()) < k:
                return True
        return False

    def _one_bits(self, f: int) -> np.ndarray:
        """The bitset of feature f ("at least level of code j"), built once and kept."""
        slot = int(self._slot[f])
        if slot < 0:
            return self._feature_bits(np.array([f], dtype=np.int64))[0]
        return self._store[slot]

    def _feature_bits(self, fids: np.ndarray) -> np.ndarray:
        """(len(fids), words) bitsets of the given features, built once each and kept."""
        missing = np.unique(fids[self._slot[fids] < 0])
        if len(missing):
            need = self._stored + len(missing)
            if need > len(self._store):
                grown = np.zeros((max(need, 2 * len(self._store)), self._words), dtype=np.uint64)
                grown[: self._stored] = self._store[: self._stored]
                self._store = grown
            col = np.searchsorted(self._off, missing, side="right") - 1
            for slot, (f, j) in enumerate(zip(missing.tolist(), col.tolist(), strict=True), self._stored):
                rows = self._rows_at_least(j, f - int(self._off[j]))
                words = self._store[slot]  # zeros: a fresh slot
                np.bitwise_or.at(words, rows >> 6, np.left_shift(_ONE, (rows & 63).astype(np.uint64)))
                self._slot[f] = slot
            self._stored = need
        return self._store[self._slot[fids]]

    def _rows_at_least(self, j: int, level: int) -> np.ndarray:
        if self._live is not None:
            return np.flatnonzero(self._live[:, j] >= level)
        s, e = self._csc.indptr[j], self._csc.indptr[j + 1]
        return self._csc.indices[s:e][self._csc.data[s:e] >= level]

    def _bitset(self, j: int, level: int) -> tuple[np.ndarray, int]:
        key = (j, level)
        hit = self._bits.get(key)
        if hit is None:
            rows = self._rows_at_least(j, level)
            flags = np.zeros(self._words * 64, dtype=bool)
            flags[rows] = True
            hit = (np.packbits(flags, bitorder="little").view(np.uint64), len(rows))
            self._bits[key] = hit
        return hit

    def _count_one(self, t: np.ndarray, local: dict[bytes, int]) -> int:
        support = np.flatnonzero(t)
        if len(support) == 0:
            return self.n
        key = support.tobytes() + t[support].tobytes()
        memo = local if self._live is not None else self._memo  # fixed candidates: memoize for good
        hit = memo.get(key)
        if hit is None:
            hit = self._intersect(t, support)
            memo[key] = hit
        return hit

    def _intersect(self, t: np.ndarray, support: np.ndarray) -> int:
        sets = sorted(
            [self._bitset(j, v) for j, v in zip(support.tolist(), t[support].tolist(), strict=True)],
            key=_size,
        )
        if sets[0][1] == 0:
            return 0
        acc = sets[0][0].copy()
        for bits, _ in sets[1:]:
            np.bitwise_and(acc, bits, out=acc)
        return int(np.bitwise_count(acc).sum())


_ONE = np.uint64(1)
SMALL_BATCH = 8  # `below_sparse` decides up to this many targets one by one


def _size(bitset: tuple[np.ndarray, int]) -> int:
    return bitset[1]


def _suffix_histogram(m: sp.csc_matrix, top: np.ndarray) -> np.ndarray:
    """Histogram over the cap grid with suffix sums on every axis: hist[t] = #{rows >= t}.

    One axis per column of `m`: the caller passes only the columns whose cap `top` is above 0."""
    shape = tuple(int(x) + 1 for x in top)
    if not shape:
        return np.array(m.shape[0])
    dense = m.toarray()
    flat = np.ravel_multi_index(tuple(dense.T), shape)
    hist = np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape)
    for axis in range(len(shape)):
        hist = np.flip(np.cumsum(np.flip(hist, axis), axis=axis), axis)
    return hist


# ------------------------------------------------------------------------------ code selection
def select_codes(records: Records, codes: Iterable[str], roll_up: Mapping[str, str] | None = None) -> Records:
    """The records with only the events whose code (after `roll_up`, e.g. ICD-9 to 3-digit as in the
    paper's 250 / 272 / 401 / 724) is in `codes`, relabelled by `roll_up`. Patients keep their place,
    even with no event left. GCCens releases the chosen codes only (the paper's P and S hold four)."""
    wanted = {str(c) for c in codes}
    labels = np.asarray([str(x) for x in records.items], dtype=object)
    if roll_up:
        labels = np.asarray([roll_up.get(x, x) for x in labels], dtype=object)
    chosen = np.fromiter((x in wanted for x in labels), dtype=bool, count=len(labels))  # per item
    kept = records.keep_events(chosen[records.event_item])
    return kept.relabel(labels) if roll_up else kept


def rolled_item_codes(vocabulary: Iterable[str], roll_up: Mapping[str, str]) -> dict[str, frozenset[str]]:
    """Released item -> the original codes of `vocabulary` it stands for, for items that are not
    themselves original codes (the `Release.item_codes` the risk engine reads)."""
    groups: dict[str, set[str]] = {}
    for code in vocabulary:
        groups.setdefault(roll_up.get(str(code), str(code)), set()).add(str(code))
    return {item: frozenset(cs) for item, cs in groups.items() if cs != {item}}


# ------------------------------------------------------------------------------ problem set-up
@dataclass(frozen=True, eq=False)
class CensorProblem:
    """The sample as a (records x codes) repeat-count matrix and the fixed candidate pool.

    `codes` are the vocabulary indexes (into `cohort.items`) of the codes present in the sample, in
    code order; `counts[i, j]` is how often code `codes[j]` appears in record i.
    """

    cohort: Records
    population: Records | None
    scope: Scope
    codes: np.ndarray
    counts: np.ndarray
    counter: DominanceCounter | None  # population scope: the population, capped at sample maxima
    projected: sp.csc_matrix | None = None  # population scope: its counts of the sample's codes
    _dense: dict = field(default_factory=dict, repr=False)  # caps -> dense counter for those caps

    def counter_for(self, caps: np.ndarray) -> DominanceCounter | None:
        """The population counter for targets bounded by `caps`: a dense histogram over the capped
        grid when it is small enough (built once per caps), else the shared bitset counter."""
        if self.counter is None or self.counter.dense or self.projected is None:
            return self.counter
        top = np.minimum(self.counter.top, caps)
        if float(np.log2(top + 1.0).sum()) > np.log2(DENSE_LIMIT):
            return self.counter
        key = top.tobytes()
        if key not in self._dense:
            self._dense[key] = DominanceCounter(self.projected, top)
        return self._dense[key]

    @property
    def code_labels(self) -> list[str]:
        return list(self._labels)

    @cached_property
    def _labels(self) -> tuple[str, ...]:
        return tuple(str(c) for c in self.cohort.items[self.codes])

    @cached_property
    def _column_of(self) -> dict[str, int]:
        """Code label -> its column."""
        return {c: j for j, c in enumerate(self._labels)}

    @cached_property
    def maxima(self) -> np.ndarray:
        """(d,) each code's largest repeat count in the sample (zeros without records); read-only."""
        top = self.counts.max(axis=0) if len(self.counts) else np.zeros(len(self.codes), np.int64)
        top = top.astype(np.int64)
        top.flags.writeable = False
        return top

    @cached_property
    def projected_rows(self) -> sp.csr_matrix | None:
        """Population scope: `projected` by record (sorted indices), for the exit-step search."""
        if self.projected is None:
            return None
        m = sp.csr_matrix(self.projected, dtype=np.int64, copy=True)
        m.sum_duplicates()
        return m

    @cached_property
    def held(self) -> sp.csr_matrix:
        """`counts` as a sparse matrix (records x codes, sorted indices, no explicit zeros), read from
        the cohort's own counts rather than scanning the dense matrix."""
        m = sp.csr_matrix(self.cohort.patient_item_counts[:, self.codes], dtype=np.int64)
        m.sort_indices()
        return m

    def default_caps(self) -> dict[str, int]:
        """The paper's automatic caps: each code's maximum repeat count in the sample."""
        return dict(zip(self.code_labels, self.counts.max(axis=0).tolist(), strict=True))

    def cap_vector(self, cap: int | None = None, caps: Mapping[str, int] | None = None) -> np.ndarray:
        """(d,) caps: the universal `cap`, else per-code `caps`, else (and for codes not named) the
        sample maximum. Codes named but absent from the sample are ignored."""
        out = self.maxima.copy()
        if cap is not None:
            if int(cap) < 0:
                raise ValueError(f"the cap must be >= 0, not {cap}")
            out = np.minimum(out, int(cap))
        for code, c in (caps or {}).items():
            if int(c) < 0:
                raise ValueError(f"the cap of code {code} must be >= 0, not {c}")
            j = self._column_of.get(code, -1)
            if j >= 0:
                out[j] = min(out[j], int(c))
        return out


def dense_counts(held: sp.csr_matrix) -> np.ndarray:
    """(records x codes) column-major int64 counts of `held`'s entries, as `problem.counts`."""
    y = np.zeros(held.shape, dtype=np.int64, order="F")
    y[np.repeat(np.arange(held.shape[0]), np.diff(held.indptr)), held.indices] = held.data
    return y


def counts_at(counts: np.ndarray | sp.spmatrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """counts[rows[i], cols[i]] of a dense or sparse count matrix, as an int64 array."""
    if sp.issparse(counts):
        return np.asarray(sp.csr_matrix(counts)[rows, cols], dtype=np.int64).ravel()
    return np.asarray(counts[rows, cols], dtype=np.int64)


def sample_counts(cohort: Records) -> tuple[np.ndarray, np.ndarray]:
    """Codes present in the sample (vocabulary indexes, code order) and the dense count matrix."""
    m = cohort.patient_item_counts.tocsc()
    codes = np.flatnonzero(np.diff(m.indptr) > 0)
    return codes, np.asarray(m[:, codes].toarray(), dtype=np.int64)


def project(records: Records, labels: list[str]) -> sp.csc_matrix:
    """(n_records, len(labels)) repeat counts of the given codes (absent codes give zero columns)."""
    idx = records.item_index(labels)
    if records.n_items == 0 or len(labels) == 0:
        return sp.csc_matrix((records.n_patients, len(labels)), dtype=np.int64)
    m = sp.csc_matrix(records.patient_item_counts, dtype=np.int64)[:, np.maximum(idx, 0)]
    return sp.csc_matrix(m @ sp.diags((idx >= 0).astype(np.int64), dtype=np.int64))


def prepare(cohort: Records, population: Records | None, scope: Scope = "population") -> CensorProblem:
    """Set up GCCens for a sample and its population; reusable across k, caps and variants."""
    if scope not in ("population", "cohort"):
        raise ValueError(f"scope must be 'population' or 'cohort', not {scope!r}")
    if scope == "population" and population is None:
        raise ValueError("scope 'population' (k-map) needs the population the cohort was drawn from")
    codes, counts = sample_counts(cohort)
    counter = projected = None
    if scope == "population":
        assert population is not None
        labels = [str(c) for c in cohort.items[codes]]
        top = counts.max(axis=0) if len(counts) else np.zeros(len(codes), np.int64)
        projected = project(population, labels)
        counter = DominanceCounter(projected, top)
    return CensorProblem(
        cohort, population if scope == "population" else None, scope, codes, counts, counter, projected
    )


# ------------------------------------------------------------------------------ the algorithm
def counts_to_records(problem: CensorProblem, counts: np.ndarray) -> Records:
    """Records (one visit per patient, no visit column) holding the given repeat counts."""
    rows, cols = np.nonzero(counts)
    reps = counts[rows, cols]
    per_row = counts.sum(axis=1)
    m = len(counts)
    return Records(
        patient_ids=problem.cohort.patient_ids,
        items=problem.cohort.items,
        visit_ptr=np.arange(m + 1, dtype=np.int64),
        visit_ids=np.zeros(m, dtype=object),
        event_ptr=np.concatenate([[0], np.cumsum(per_row)]).astype(np.int64),
        event_item=np.repeat(problem.codes[cols], reps).astype(np.int32),
        has_visits=False,
    )


def _risk_distinguishability(problem: CensorProblem, y: np.ndarray) -> np.ndarray:
    """Every record recounted by the risk engine (the plain reference path)."""
    released = counts_to_records(problem, y)
    cands = released if problem.scope == "cohort" else problem.population
    if cands is None:
        raise ValueError("a population-scope problem needs its population")
    return risk.distinguishability(released, cands, "all_visits", risk.Matching(count_repeats=True))


STEP_BUDGET = 256  # cohort-scope steps between two progress calls (`_cohort_steps`)
EXIT_BUDGET = 512  # population scope: records between two progress calls (`_faithful_by_exit_steps`)
BITSET_BYTES = 1 << 26  # the compiled loops' feature bitsets (cohort: all or none), at most


def _kernel():
    """GCCens' compiled loops, imported on first use (numba loads in about half a second)."""
    from engine.anonymize import censor_kernel

    return censor_kernel


def _cohort_steps(
    problem: CensorProblem,
    k: int,
    cap: np.ndarray,
    sizes: np.ndarray,
    held: sp.csr_matrix,
    by_code: sp.csc_matrix,
    variant: Variant,
    progress: Progress | None,
) -> tuple[sp.csr_matrix, list[dict], bool]:
    """The cohort scope's loop (the candidates are the release itself, thesis Algorithm 1 line 2 as
    k-anonymity) in `censor_kernel.run`, on a copy of the capped counts `held` (sparse, by record:
    no dense records x codes matrix, issue 36): (released counts, steps, k reached).
    Each record's features "at least l of code j" are intersected as bitsets kept up to date (within
    BITSET_BYTES), else its dominators are counted among the holders of its rarest code (`by_code`:
    who held each code after capping), stopping at k either way; the same steps and counts as the
    live bitset counter the loop used before (tests/reference_censor.py). Returns to Python every
    `STEP_BUDGET` steps for `progress`."""
    ck = _kernel()
    m, d = held.shape
    off = np.concatenate([[0], np.cumsum(cap + 1)]).astype(np.int64)
    nnz = len(held.data)
    place = sp.csr_matrix((np.arange(1, nnz + 1), held.indices, held.indptr), shape=held.shape).tocsc()
    tables = tuple(
        np.array(a, dtype=np.int64)  # copies: the kernel keeps the counts (held.data's copy) up to date
        for a in (
            *(held.indptr, held.indices, held.data, by_code.indptr, by_code.indices, place.data - 1, off),
        )
    )
    if int(off[-1]) * ((m + 63) // 64) * 8 <= BITSET_BYTES:
        bits, fsize = ck.cohort_bits(tables, m)
    else:  # the holders of each record's rarest code checked one by one
        bits, fsize = np.zeros((0, 1), dtype=np.uint64), np.zeros(0, dtype=np.int64)
    below = ck.below_all(tables, m, d, bits, fsize, int(k))
    level = cap.astype(np.int64, copy=True)
    sizes = sizes.astype(np.int64, copy=True)
    targeted = variant == "targeted"
    if targeted:
        hist = ck.level_histogram(tables, below, int(cap.max()) if d else 0, d, level, sizes)
    else:
        hist = np.zeros((1, 1), dtype=np.int64)
    ctrl = np.zeros(ck.N_CTRL, dtype=np.int64)
    ctrl[ck.N_BELOW] = int(below.sum())
    first_below = int(ctrl[ck.N_BELOW])
    # every step removes at least one instance: at most as many steps as instances after capping
    room = int(held.data.sum()) + 1
    steps_out = np.zeros((4, room), dtype=np.int64)
    budget = STEP_BUDGET if progress is not None else room
    while True:
        if progress is not None:
            met = first_below - int(ctrl[ck.N_BELOW])
            progress(
                met / first_below if first_below else 1.0,
                f"{met:,} of {first_below:,} records below k meet it (step {int(ctrl[ck.N_STEPS]) + 1})",
            )
        status = ck.run(
            tables, m, bits, fsize, level, sizes, below, hist, targeted, int(k), ctrl, steps_out, budget
        )
        if status != ck.BUDGET:
            break
    n = int(ctrl[ck.N_STEPS])
    labels = problem.code_labels
    steps = [
        {"code": labels[o], "from_count": lv, "records": r, "below_k_before": nb}
        for o, lv, r, nb in zip(*(a[:n].tolist() for a in steps_out), strict=True)
    ]
    released = sp.csr_matrix(
        (tables[ck.C_HELD_VAL], tables[ck.C_HELD_IDX], tables[ck.C_HELD_PTR]), shape=held.shape
    )
    return released, steps, status == ck.DONE


def censor_counts(
    problem: CensorProblem,
    k: int,
    caps: np.ndarray,
    variant: Variant = "faithful",
    kernel: Kernel = "dominance",
    progress: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray, list[dict], bool]:
    """Algorithm 1 on count vectors: (capped counts, released counts, steps, k reached), dense
    (records x codes, column-major). The capped counts are read-only (`problem.counts` itself when no
    cap is below a sample maximum). `progress`: see `_censor`."""
    held, released, steps, reached = _censor(problem, k, caps, variant, kernel, progress)
    # line 1: preprocess (no cap below a sample maximum: nothing to cap)
    capped = problem.counts.view() if (caps >= problem.maxima).all() else dense_counts(held)
    capped.flags.writeable = False
    if sp.issparse(released):
        released = dense_counts(sp.csr_matrix(released))
    return capped, released, steps, reached


def _censor(
    problem: CensorProblem,
    k: int,
    caps: np.ndarray,
    variant: Variant,
    kernel: Kernel,
    progress: Progress | None,
) -> tuple[sp.csr_matrix, np.ndarray | sp.csr_matrix, list[dict], bool]:
    """`censor_counts` with the capped counts sparse (by record) and the released counts sparse on
    the default kernels (dense on the reference loops): no dense records x codes matrix is built or
    copied on the default paths (issue 36: the copy alone took 2.65 s of the all-codes Run at paper
    scale).

    `progress(fraction, message)` is called before every censoring step, in this thread, with the
    share of the records first below k that meet it now (the cohort scope's compiled loop: every
    `STEP_BUDGET` steps; the faithful k-map path, which does not step: every `EXIT_BUDGET` records
    of its exit-step search); it may raise to cancel the run (nothing is left running: the loop holds
    no threads between steps)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, not {kernel!r}")
    if int(k) < 1:
        raise ValueError(f"k must be >= 1, not {k}")
    if progress is not None:
        progress(0.0, "capping, then counting the records below k")
    m = len(problem.counts)
    top = problem.maxima
    # who holds each code (after capping; censoring only empties entries), so that the loop's column
    # and row work is proportional to the holders and the records' codes, not to the cohort or d
    h = problem.held
    held = sp.csr_matrix((np.minimum(h.data, caps[h.indices]), h.indices, h.indptr), shape=h.shape, copy=True)
    held.eliminate_zeros()  # in place: on copies of `problem.held`'s index arrays (line 1: the caps)
    cap = np.minimum(caps, top) if m else caps.copy()  # working caps (see docstring)
    counter = problem.counter_for(caps)
    sizes = np.bincount(held.indices[held.data == cap[held.indices]], minlength=len(cap)) * (cap > 0)
    if kernel == "dominance" and variant == "faithful" and problem.scope == "population" and m:
        assert counter is not None
        released, exit_steps, reached = _faithful_by_exit_steps(problem, k, cap, held, progress)
        return held, released, exit_steps, reached
    by_code = held.tocsc()
    row_lengths = np.diff(held.indptr)
    sparse_rows = (
        kernel != "risk" and problem.scope == "population" and counter is not None and not counter.dense
    )
    if kernel == "dominance" and problem.scope == "cohort" and m:
        released, cohort_steps, reached = _cohort_steps(
            problem, k, cap, sizes, held, by_code, variant, progress
        )
        return held, released, cohort_steps, reached
    y = dense_counts(held)  # the reference loops: the capped counts, censored in place

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
            return held, y, steps, True
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
            return held, y, steps, False  # nothing left to censor
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
            if counter is not None:
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


def _exit_step_tables(
    problem: CensorProblem, k: int, cap: np.ndarray, held: sp.csr_matrix, step_code: np.ndarray
) -> tuple[tuple[np.ndarray, ...], int]:
    """`censor_kernel.exit_steps`' tables (see there) for the step sequence's codes `step_code`, and
    how many features get a bitset: those a target may be counted by (held by k or more population
    records), the widest first within BITSET_BYTES (a size threshold: features of equal size all or
    none). A record whose rarest feature has one is counted by intersections, else by checking the
    holders of its rarest feature."""
    d = len(cap)
    pop, rows = problem.projected, problem.projected_rows
    assert pop is not None and rows is not None
    off = np.concatenate([[0], np.cumsum(cap + 1)]).astype(np.int64)
    per_code = np.diff(pop.indptr)
    flat = np.repeat(off[:-1], per_code) + np.minimum(pop.data, np.repeat(cap, per_code))
    suffix = np.cumsum(np.bincount(flat, minlength=int(off[-1]) + 1)[::-1])[::-1]
    size = suffix[:-1] - np.repeat(suffix[off[1:]], cap + 1)  # [off[j] + l]: holders of j >= l times
    by_code_steps = np.argsort(step_code, kind="stable")  # each code's step positions, ascending
    code_steps_ptr = np.concatenate([[0], np.cumsum(np.bincount(step_code, minlength=d))])
    larger_first = np.lexsort((-pop.data, np.repeat(np.arange(d), per_code)))  # holders: a prefix
    level = np.arange(len(size)) - np.repeat(off[:-1], cap + 1)
    widths = np.sort(size[(level > 0) & (size >= k)])[::-1]
    room = BITSET_BYTES // (8 * ((pop.shape[0] + 63) // 64))
    least = max(int(k), int(widths[room]) + 1 if room < len(widths) else 0)
    wide = np.flatnonzero((level > 0) & (size >= least))
    slot = np.full(len(size), -1, dtype=np.int64)
    slot[wide] = np.arange(len(wide))
    tables = tuple(
        np.ascontiguousarray(a, dtype=np.int64)
        for a in (
            *(held.indptr, held.indices, held.data, cap, code_steps_ptr, by_code_steps, off, size),
            *(pop.indptr, pop.indices[larger_first], pop.data[larger_first]),
            *(rows.indptr, rows.indices, rows.data, slot),
        )
    )
    return tables, len(wide)


def _faithful_by_exit_steps(
    problem: CensorProblem,
    k: int,
    cap: np.ndarray,
    held: sp.csr_matrix,
    progress: Progress | None,
) -> tuple[sp.csr_matrix, list[dict], bool]:
    """The faithful variant in the population scope without stepping (the default kernel).

    The faithful step sequence does not depend on k: the step at level l of code j censors every
    record holding j at least l times (all of them sit at the working cap then), so its size is
    S_j(l) = #{records with capped count >= l} and the working cap drops to l - 1. As S_j(l) grows
    while l falls, line 11's choice (fewest records, ties by code order) is the whole list of
    (S_j(l), j, -l) sorted. After s steps a record holds min(capped, working cap) of each code, its
    distinguishability can only grow with s (k-map: fewer codes, as many candidates or more), so each
    record's exit step (the first s at which it meets k) is found by binary search, record by record
    in `censor_kernel.exit_steps` (compiled; progress every `EXIT_BUDGET` records); the loop stops at
    the largest exit step. Same release and steps as the stepwise loop (`kernel="stepwise"`) and as
    the numpy batches this search replaced (tests/reference_censor.py), which tests check."""
    m, d = held.shape
    # the whole step sequence: one step per (code, level), level = cap .. 1
    j = held.indices
    c = np.minimum(held.data, cap[j])
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

    pop = problem.projected
    assert pop is not None
    tables, n_bits = _exit_step_tables(problem, k, cap, held, step_code)
    ck = _kernel()
    bits = ck.feature_bits(tables, n_bits, pop.shape[0])
    if progress is not None:
        progress(0.0, f"{n_steps:,} censoring steps listed; finding each record's exit step")
    exit_step = np.zeros(m, dtype=np.int64)
    chunk = EXIT_BUDGET if progress is not None else max(m, 1)
    for start in range(0, m, chunk):
        if progress is not None and start:
            progress(start / m, f"exit steps: {start:,} of {m:,} records")
        ck.exit_steps(tables, bits, start, min(start + chunk, m), n_steps, int(k), pop.shape[0], exit_step)
    unreachable = np.flatnonzero(exit_step > n_steps)
    reached = len(unreachable) == 0
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
    after = working_cap(np.arange(d), np.full(d, taken, dtype=np.int64))
    y = sp.csr_matrix(
        (np.minimum(held.data, after[held.indices]), held.indices, held.indptr), shape=held.shape
    )
    if progress is not None:
        progress(1.0, f"{m - len(unreachable):,} of {m:,} records meet k after {taken:,} steps")
    return y, steps, reached


@dataclass(eq=False)
class _LevelHistogram:
    """Targeted GCCens: counts[j, l] = records below k holding code j exactly l times (l >= 1), with
    each code's largest level held (`level`, 0 if none) and how many records hold it (`sizes`)."""

    counts: np.ndarray
    level: np.ndarray
    sizes: np.ndarray

    def _refresh(self, codes: np.ndarray) -> None:
        c = self.counts[codes]
        present = c > 0
        top = c.shape[1] - 1 - np.argmax(present[:, ::-1], axis=1)
        top = np.where(present.any(axis=1), top, 0)
        self.level[codes] = top
        self.sizes[codes] = np.where(top > 0, c[np.arange(len(codes)), top], 0)

    def move(self, j: int, level: int, n: int) -> None:
        """n records below k went from `level` to `level - 1` instances of code j."""
        self.counts[j, level] -= n
        self.counts[j, level - 1] += n
        self._refresh(np.array([j]))

    def flip(self, y: np.ndarray, rows: np.ndarray, now_below: np.ndarray) -> None:
        """Records that came to be below k (now_below) or met k: their codes enter or leave."""
        r, j = np.nonzero(y[rows])
        sign = np.where(now_below, 1, -1)[r]
        np.add.at(self.counts, (j, y[rows[r], j]), sign)
        self._refresh(np.unique(j))


def _level_histogram(y: np.ndarray, below: np.ndarray, caps: np.ndarray) -> _LevelHistogram:
    d = y.shape[1]
    top = int(caps.max()) if d else 0
    counts = np.zeros((d, top + 1), dtype=np.int64)
    r, j = np.nonzero(y[below])
    np.add.at(counts, (j, y[below][r, j]), 1)
    hist = _LevelHistogram(counts, np.zeros(d, dtype=np.int64), np.zeros(d, dtype=np.int64))
    if d:
        hist._refresh(np.arange(d))
    return hist


def _release_mask(
    problem: CensorProblem, keep_counts: np.ndarray | sp.csr_matrix
) -> tuple[np.ndarray, np.ndarray]:
    """Per event of the cohort: kept, and its occurrence rank within (record, code) in record order."""
    cohort = problem.cohort
    col_of_item = np.full(cohort.n_items, -1, dtype=np.int64)
    col_of_item[problem.codes] = np.arange(len(problem.codes))
    d = max(len(problem.codes), 1)
    key = cohort.event_patient.astype(np.int64) * d + col_of_item[cohort.event_item]
    order = np.argsort(key, kind="stable")
    sk = key[order]
    starts = np.flatnonzero(np.concatenate([[True], sk[1:] != sk[:-1]])) if len(sk) else np.zeros(0, np.int64)
    group_start = np.repeat(starts, np.diff(np.append(starts, len(sk))))
    rank = np.empty(len(key), dtype=np.int64)
    rank[order] = np.arange(len(sk)) - group_start
    return rank < counts_at(keep_counts, cohort.event_patient, col_of_item[cohort.event_item]), rank


def gccens_run(
    problem: CensorProblem,
    k: int,
    *,
    cap: int | None = None,
    caps: Mapping[str, int] | None = None,
    variant: Variant = "faithful",
    kernel: Kernel = "dominance",
    progress: Progress | None = None,
) -> Release:
    """GCCens on a prepared problem (Algorithm 1); see the module docstring for the conventions.
    `progress`: see `censor_counts` (it may raise to cancel)."""
    cap_vec = problem.cap_vector(cap, caps)
    capped, released, steps, reached = _censor(problem, k, cap_vec, variant, kernel, progress)
    keep, rank = _release_mask(problem, released)
    cohort = problem.cohort
    removed = ~keep
    col_of_item = np.full(cohort.n_items, -1, dtype=np.int64)
    col_of_item[problem.codes] = np.arange(len(problem.codes))
    ev_cap = counts_at(capped, cohort.event_patient, col_of_item[cohort.event_item])
    stage = np.where(rank >= ev_cap, "cap", "censor")
    sup = {PATIENT: cohort.patient_ids[cohort.event_patient[removed]]}
    if cohort.has_visits:
        sup[VISIT] = cohort.visit_ids[cohort.event_visit[removed]]
    sup["code"] = cohort.items[cohort.event_item[removed]]
    sup["stage"] = stage[removed]
    suppressed = pd.DataFrame(sup)
    params = {
        "k": int(k),
        "scope": problem.scope,
        "variant": variant,
        "cap": None if cap is None else int(cap),
        "caps": dict(zip(problem.code_labels, cap_vec.tolist(), strict=True)),
        "kernel": kernel,
    }
    release = Release(
        method=METHOD,
        records=cohort.keep_events(keep),
        suppressed=suppressed,
        counts_repeats=True,
        params=params,
    )
    cul = release_cul(release, baseline="capped")
    retained = instances_retained(release, cohort)
    loss = {
        "k_reached": reached,
        "iterations": len(steps),
        "censored_by_caps": int((stage[removed] == "cap").sum()),
        "censored_by_loop": int((stage[removed] == "censor").sum()),
        "steps": steps,
        "cul": cul_statistics(cul, release).as_dict(),
        "cul_baseline": "the capped record (Tamersoy's CUL, method-internal: caps are not counted)",
        "cul_vs_original": cul_statistics(release_cul(release, "original"), release, "original").as_dict(),
        "retained_vs_original": {
            **retained.as_dict(),
            "label": "code instances of the selected codes retained, against the original cohort (caps included)",
        },
    }
    return replace(release, loss=loss)


def gccens(
    cohort: Records,
    population: Records | None,
    k: int,
    *,
    cap: int | None = None,
    caps: Mapping[str, int] | None = None,
    scope: Scope = "population",
    variant: Variant = "faithful",
    kernel: Kernel = "dominance",
) -> Release:
    """GCCens (Tamersoy 2010 Figure 2; thesis Algorithm 1): censor repeats until every released
    record has distinguishability >= k against the population (scope `population`, k-map) or the
    release itself (scope `cohort`). `loss["k_reached"]` is False when even censoring everything
    cannot reach k (fewer than k candidates)."""
    return gccens_run(
        prepare(cohort, population, scope), k, cap=cap, caps=caps, variant=variant, kernel=kernel
    )


def report(
    release: Release,
    verification: risk.Verification,
    original_dis: np.ndarray,
    *,
    original_codes: int,
    population_size: int | None = None,
    sources: Mapping[str, str] | None = None,
) -> dict:
    """The release's report (CLI REPORT.json, the page's download): parameters, input hashes,
    per-record CUL (against the capped and the original record), CUL statistics (Tables 1-2
    layout), the censoring steps, and the risk engine's verification before and after."""
    loss = censoring_loss(release)
    loss_original = censoring_loss(release, baseline="original")
    k = verification.k
    return {
        "method": "GCCens (Tamersoy 2010; thesis chapter III, Algorithm 1)",
        "parameters": release.params,
        "inputs": dict(sources or {}),
        "records": {"population": population_size, "cohort": release.records.n_patients},
        "codes": {"original": int(original_codes), "released": int(release.records.n_events)},
        "item_codes": {item: sorted(codes) for item, codes in release.item_codes.items()},
        "censored": {
            "by_caps": release.loss["censored_by_caps"],
            "by_loop": release.loss["censored_by_loop"],
        },
        "cul_statistics": cul_statistics(loss["cul"].to_numpy(), release).as_dict(),
        "cul_statistics_vs_original": cul_statistics(
            loss_original["cul"].to_numpy(), release, baseline="original"
        ).as_dict(),
        "per_record": [
            {
                "patient_id": str(p),
                "codes_capped": int(b),
                "censored": int(c),
                "cul": float(u),
                "cul_vs_original": float(o),
            }
            for p, b, c, u, o in zip(
                loss["patient_id"],
                loss["codes_before"],
                loss["censored"],
                loss["cul"],
                loss_original["cul"],
                strict=True,
            )
        ],
        "steps": release.loss["steps"],
        "verification": {
            "ok": verification.ok,
            "adversary": verification.adversary.label,
            "k": k,
            "message": verification.message(),
            "before": risk.summarize(original_dis, k).as_dict(),
            "after": risk.summarize(verification.distinguishability, k).as_dict(),
            "failing": [
                {"patient_id": str(p), "distinguishability": int(d)}
                for p, d in zip(
                    verification.failing["patient_id"],
                    verification.failing["distinguishability"],
                    strict=True,
                )
            ],
        },
    }
