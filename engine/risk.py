"""Distinguishability and its summaries: the one module that verifies every release.

ARCHITECTURE section 3. The distinguishability of a record is the number of candidate records
consistent with what the attacker knows (Tamersoy 2010, "Risk Measure"; Loukides 2010; Heatherly
2013). A candidate is consistent when, for every known item t, it holds items c whose codes are all
among the codes t stands for (codes(c) subset of codes(t): an original code inside a generalized item,
or the very same generalized item); with repeat counts, at least as many such occurrences.

Under `single_visit` knowledge the known set is one visit's item set, and a record's
distinguishability is the minimum over its visits; under `all_visits` it is the whole record. A
record (or visit) with nothing left to know is consistent with every candidate.

Where the known set is matched: by default against the candidate's whole record (the papers'
released form, one item set per patient). When the release shows the visit grouping
(`Release.shows_visits`, `Matching(within_visits=True)`) and the knowledge is one visit, a candidate is
consistent only when ONE of its visits holds every known item, and the count is of distinct
candidate patients (Heatherly 2013: "the same set of diagnosis codes from some visit"). Under
`all_visits` knowledge the match stays whole-record.

Under `whole_record` knowledge (issue 39; the flat-table model of ARX, sdcMicro and pycanon) the
attacker also knows which codes the record does not hold: a candidate is consistent only when the set
of items it shows equals the target's item set, so a record's distinguishability is the size of its
class of identical item sets (`_whole_record_counts`). Repeat counts and visits are not part of it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from threading import Lock

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.adversary import ALL_ADVERSARIES, Adversary, Knowledge
from engine.io.errors import UserError
from engine.memo import memo
from engine.records import Records, concat_ranges
from engine.release import Release, codes_of


class MissingPopulationError(UserError, ValueError):
    """A population-scope adversary asked for while no population is loaded."""


# ------------------------------------------------------------------------------------ kernel
# Work plan of `known_set_distinguishability` (ARCHITECTURE section 7):
# 1. project the candidates onto the targets' items (a candidate item c counts for target item t when
#    codes(c) is a subset of codes(t)): one sparse product, giving per target item the sorted
#    candidate ids holding it (the inverted index) with their occurrence counts;
# 2. turn every (item, required count) of the known sets into an "atom" with its own posting list
#    (candidates holding the item at least that often), so that repeats become plain set containment;
# 3. group known sets by size and count identical sets once (exact dedup, np.unique);
# 4. answer sets of one atom from posting lengths, and the others (`_Intersector`) either by AND-ing
#    the bitmaps of common atoms and counting bits, or by expanding (set, candidate) pairs from the
#    set's rarest atom and filtering them by membership of the further atoms (bit lookups, or binary
#    search of sorted (atom, candidate) keys for rare atoms), whichever is cheaper for the set;
# 5. or, from the candidates' side (`_SubsetCounter`), walk every candidate through a trie of the distinct
#    sets and add one to each set it reaches: work = pairs (candidate, prefix of a known set it holds),
#    independent of (distinct sets) x (population), which the index pays. `_kernel` chooses per call
#    (the walk always for within-visit counting). Issue 15 / ARCHITECTURE section 7.
# Ties and order never change a count, so results are deterministic.
#
# Why full counts cannot be near-linear here, and capped counts are (issue 15). Whole population
# against itself, single visit: let f_S be the share of records containing a distinct known set S.
# A method that enumerates (set, supporter) pairs pays sum_S n f_S; as n grows, more distinct sets
# are seen (n^0.81 on engine.synth) and those of common codes keep a support proportional to n, so
# the sum grows as n^1.36 (measured). Bitmaps pay n/64 words per distinct set: n^1.81 / 64. Every
# verdict, though, needs only min(support, k) (unique, below k, failing records; the CDF below k):
# with `cap` the walk takes candidates in rounds of doubling size and, between rounds, drops the
# trie nodes with no set still under the cap. Its steps are then (a) one root step per (candidate,
# needed atom): the data, linear; (b) per set, at most about 2 cap + f_S C0 steps to its last node
# (C0: the first round's candidates; a set is dropped after the round in which it reaches the cap,
# and rounds double), summing to 2 cap n^0.81 + C0 n^0.36; (c) steps through the inner nodes of
# sets still live. Each step is a binary search (log n). Projection, atoms, deduplication and the
# trie are sorts (n log n). Measured (bench/scale.py, cap5): CPU exponent 1.04 over 0.2-0.8 M patients.
# Capped counts are counted by the compiled walk (`engine.scale.trie`, issue 24): the same walk, root child
# by root child, each set dropped the moment it reaches the cap, without the deduplication above, the
# children of nodes of common codes met as bitmasks. 1.37 M patients against themselves (bench/scale.py,
# cap5 against walkcap5, one run): CPU 5.2 s against 23.4 s, peak memory 2.8 GB against 5.4 GB.

THREADS_ENV = "COHORTSHIELD_THREADS"  # environment variable: default thread count of the kernel
_PAIR_CHUNK = 1 << 21  # (set, candidate) pairs expanded at once
_PAIR_WEIGHT = 40  # cost of one expanded pair, in bitmap words AND-ed
_AND_CHUNK_WORDS = 1 << 18  # bitmap words AND-ed at once (2 MB per operand: stays in cache)
_AND_FULL_COLUMNS = 16  # whole-bitmap ANDs per set before continuing on non-zero words only
_BITMAP_MIN_POSTING = 256  # atoms held by at least this many candidates get a bitmap ...
_BITMAP_MAX_BYTES = 1 << 30  # ... within this much memory (most frequent first)
_BITMAP_ALL_BYTES = 1 << 26  # every atom gets a bitmap when all of them fit in this much
_KERNEL = "auto"  # "walk" (_SubsetCounter), "index" (_Intersector), "trie" (`engine.scale.trie`, compiled)
# or "auto": capped counts by the compiled walk, full counts as `_kernel` chooses
_WALK_CHUNK = 1 << 17  # candidates' held atoms walked at once (about 0.2 GB of walk state)
_WALK_WEIGHT = 600.0  # cost of a pair of held atoms in the walk, in bitmap words AND-ed (measured, `_kernel`)
_COMMON_SHARE = 0.01  # atoms held by this share of the candidates are "common" (`_walk_counts`)  # candidates' held atoms walked through the trie at once
_HOLDING_CHUNK = 1 << 12  # a capped `Postings.holding` takes the rarest postings this many at a time
_HOLDING_FEW = 32  # ... and checks this many candidates left against every further atom at once
_HOLDERS_MAX_SETS = 256  # more known sets: `distinguishability_among_holders` counts every candidate
_HOLDERS_MIN_POOL = 1 << 17  # ... or fewer candidates than this
_HOLDERS_SHARE = 256  # ... else the sets held by fewer than 1/256 of the candidates: on their holders only


_RAN = threading.local()  # `record_kernels`: the log of this thread, if one is open


@contextlib.contextmanager
def record_kernels() -> Iterator[list[str]]:
    """Collect, in call order, which kernel each `count_known_sets` call of this thread ran ("walk",
    "index", "posting lengths" when every set has one item; ", counts capped at K" with `cap`), for the
    CLI, the Risk page and bench/scale.py to say what ran. Calls on other threads or Dask workers are
    not seen."""
    prev = getattr(_RAN, "log", None)
    log: list[str] = []
    _RAN.log = log
    try:
        yield log
    finally:
        _RAN.log = prev


def thread_count(threads: int | None = None) -> int:
    """Threads the kernel counts chunks with: `threads` when given, else the environment variable
    COHORTSHIELD_THREADS, else every core of the machine. Results never depend on it."""
    if threads is None:
        env = os.environ.get(THREADS_ENV, "").strip()
        if env:
            try:
                threads = int(env)
            except ValueError:
                raise ValueError(f"{THREADS_ENV} must be a positive whole number, not {env!r}") from None
        else:
            threads = os.cpu_count() or 1
    if threads < 1:
        raise ValueError(f"the thread count must be a positive whole number, not {threads}")
    return int(threads)


@dataclass(frozen=True)
class Matching:
    """How target records are matched against candidates and counted: one object for every kernel
    entry point (in process, sharded, Dask).

    item_codes: the codes a released (generalized) item stands for (`Release.item_codes`); a
      candidate item matches a target item when its codes are a subset of the target item's.
    count_repeats: a known item must occur at least as often in the candidate (all-visits knowledge).
    within_visits: single-visit knowledge matched within one candidate visit (`Release.shows_visits`).
    threads: see `thread_count` (results never depend on it).
    cap: count each known set only up to `cap` (`count_known_sets`), or None for full counts."""

    item_codes: Mapping[str, frozenset[str]] | None = None
    count_repeats: bool = False
    within_visits: bool = False
    threads: int | None = None
    cap: int | None = None

    def __post_init__(self) -> None:
        cap = self.cap
        if cap is not None and (isinstance(cap, bool) or int(cap) != cap or cap < 1):
            raise ValueError(f"the count cap must be a positive whole number, not {cap!r}")

    @classmethod
    def of_release(cls, release: Release, *, threads: int | None = None, cap: int | None = None) -> Matching:
        """The matching a release calls for: its items' codes, repeat counts, visits shown."""
        return cls(release.item_codes, release.counts_repeats, release.shows_visits, threads, cap)


DEFAULT_MATCHING = Matching()


def match_matrix(
    candidate_items: np.ndarray,
    target_items: np.ndarray,
    item_codes: Mapping[str, frozenset[str]] | None = None,
) -> sp.csr_matrix:
    """(n_candidate_items, n_target_items) 0/1: candidate item c matches target item t when
    codes(c) is a subset of codes(t)."""
    if not item_codes or not (
        any(str(c) in item_codes for c in candidate_items) or any(str(t) in item_codes for t in target_items)
    ):
        # every item stands for itself: match by name
        cols = pd.Index(np.asarray(target_items, dtype=object).astype(str)).get_indexer(
            np.asarray(candidate_items, dtype=object).astype(str)
        )
        rows = np.flatnonzero(cols >= 0)
        data = np.ones(len(rows), dtype=np.int32)
        return sp.csr_matrix((data, (rows, cols[rows])), shape=(len(candidate_items), len(target_items)))
    code_to_targets: dict[str, list[int]] = {}
    for j, t in enumerate(target_items):
        for c in codes_of(str(t), item_codes):
            code_to_targets.setdefault(c, []).append(j)
    pairs_i: list[int] = []
    pairs_j: list[int] = []
    for i, c in enumerate(candidate_items):
        cs = codes_of(str(c), item_codes)
        hit: set[int] | None = None
        for code in cs:
            ts = code_to_targets.get(code)
            if ts is None:
                hit = set()
                break
            hit = set(ts) if hit is None else hit.intersection(ts)
            if not hit:
                break
        for j in hit or ():
            pairs_i.append(i)
            pairs_j.append(j)
    data = np.ones(len(pairs_i), dtype=np.int32)
    return sp.csr_matrix((data, (pairs_i, pairs_j)), shape=(len(candidate_items), len(target_items)))


def _projected_candidates(
    target_items: np.ndarray, candidates: Records, item_codes, count_repeats: bool, by_visit: bool = False
) -> sp.csc_matrix:
    """(n_candidates, n_target_items) CSC: per candidate, how many occurrences match each target
    item (1 for any number when repeats are not counted); row indices sorted within columns.
    With `by_visit` the rows are the candidates' visits (`candidates.visit_patient` owns them)."""
    same_vocab = candidates.items is target_items or (
        len(candidates.items) == len(target_items) and (candidates.items == target_items).all()
    )
    if by_visit:
        base, count_repeats = candidates.visit_item_sets, False
    else:
        base = candidates.patient_item_counts if count_repeats else candidates.patient_item_sets
    if same_vocab and not item_codes:
        proj = base.astype(np.int32)
    else:
        m = match_matrix(candidates.items, target_items, item_codes)
        proj = (base.astype(np.int32) @ m).tocsr()
    if not count_repeats:
        proj.data[:] = 1
    proj = proj.tocsc()
    proj.sort_indices()
    return proj


def _known_sets(
    targets: Records, knowledge: Knowledge, count_repeats: bool
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Rows of known (item, count) sets and the target record each row belongs to.

    Single visit: one row per visit, its item set (repeats within a visit are not counted).
    All visits: one row per record, with repeat counts when `count_repeats`."""
    if knowledge == "single_visit":
        m, owner = targets.visit_item_sets, targets.visit_patient
    else:
        m = targets.patient_item_counts if count_repeats else targets.patient_item_sets
        owner = np.arange(targets.n_patients)
    m = m.tocsr()
    m.sort_indices()
    return m, owner


@dataclass(frozen=True, eq=False)
class _Postings:
    """Inverted index over atoms: `rows[ptr[a]:ptr[a+1]]` are the sorted candidates holding atom a."""

    ptr: np.ndarray  # (n_atoms + 1,) int64
    rows: np.ndarray  # candidate ids: int64 (int32 in `item_postings`, half the memory)
    n_cand: int
    # `item_postings`: the same pairs by candidate, `held_atoms[held_ptr[q]:held_ptr[q + 1]]` the sorted
    # atoms candidate q holds (`holding` checks a few candidates against many atoms at once with it)
    held_ptr: np.ndarray | None = None
    held_atoms: np.ndarray | None = None

    @property
    def n_atoms(self) -> int:
        return len(self.ptr) - 1

    @property
    def length(self) -> np.ndarray:
        return np.diff(self.ptr)

    def owner_length(self, owner: np.ndarray) -> np.ndarray:
        """Per atom, the number of distinct owners of its candidates (`owner` nondecreasing in the
        candidate id, as `Records.visit_patient`: a patient's visits are contiguous)."""
        o = owner[self.rows]
        new = np.ones(len(o), dtype=bool)
        new[1:] = o[1:] != o[:-1]
        new[self.ptr[:-1][self.length > 0]] = True
        cs = np.concatenate([[0], np.cumsum(new, dtype=np.int64)])
        return cs[self.ptr[1:]] - cs[self.ptr[:-1]]

    def posting(self, atom: int) -> np.ndarray:
        """The sorted candidates holding `atom`."""
        return self.rows[self.ptr[atom] : self.ptr[atom + 1]]

    def holding(
        self, groups: list[np.ndarray], cap: int | None = None, masks: dict[int, np.ndarray] | None = None
    ) -> np.ndarray:
        """The sorted candidates holding, for every group, one atom of it (a group: the atoms that
        match one known item). From the rarest group (fewest postings in all), its candidates are
        kept while they hold one atom of each further group (binary search of the postings; with
        `masks`, a cache the caller keeps, a lookup in a boolean mask over the candidates for atoms of
        `_BITMAP_MIN_POSTING` or more: one array operation where a record meets many common codes).

        `cap`: the rarest group's candidates are taken in chunks and the search stops after the chunk
        that brings the holders found to `cap`: min(len(result), cap) is min(holders, cap), and the
        result is every holder when there are fewer than `cap` (a verdict "below k or not"). The
        chunks double in size, so a scarce intersection costs a few chunks more than one pass."""
        if not groups:
            return np.arange(self.n_cand, dtype=np.int64)
        width = [len(g) for g in groups]
        if min(width) == 0:  # an item no candidate item matches: nobody holds the set
            return np.zeros(0, dtype=np.int64)
        flat = np.concatenate(groups) if len(groups) > 1 else groups[0]
        lens = self.ptr[flat + 1] - self.ptr[flat]
        size = np.add.reduceat(lens, np.cumsum([0, *width[:-1]]))
        order = np.argsort(size, kind="stable")  # rarest first, ties in the order given
        first, rest = groups[order[0]], [groups[i] for i in order[1:].tolist()]
        if len(first) == 1:
            start = self.posting(int(first[0]))
        else:
            start = np.unique(np.concatenate([self.posting(int(a)) for a in first]))
        step = len(start) if cap is None else max(_HOLDING_CHUNK, cap)
        found, n_found, s = [], 0, 0
        while s < len(start):
            cur = start[s : s + step]
            s, step = s + step, 2 * step  # chunks double: few of them where holders are scarce
            for i, group in enumerate(rest):
                if len(cur) <= _HOLDING_FEW and self.held_ptr is not None and len(rest) - i > 2:
                    cur = cur[self._holds_all(cur, rest[i:])]  # a few candidates, many atoms: at once
                    break
                if len(group) == 1:
                    hit = self._has(int(group[0]), cur, masks)
                else:
                    hit = np.zeros(len(cur), dtype=bool)
                    for a in group.tolist():
                        hit |= self._has(a, cur, masks)
                cur = cur[hit]
                if not len(cur):
                    break
            found.append(cur)
            n_found += len(cur)
            if cap is not None and n_found >= cap:
                break
        return np.concatenate([np.zeros(0, dtype=np.int64), *found])

    def _holds_all(self, cand: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
        """Does each candidate of `cand` hold one atom of every group? One binary search of every
        (candidate, atom) pair among the sorted (candidate, atom held) keys of `cand`."""
        assert self.held_ptr is not None and self.held_atoms is not None
        lens = self.held_ptr[cand + 1] - self.held_ptr[cand]
        keys = np.repeat(np.arange(len(cand), dtype=np.int64), lens) * (self.n_atoms + 1)
        keys += self.held_atoms[concat_ranges(self.held_ptr[cand], lens)]  # ascending: atoms sorted
        width = [len(g) for g in groups]
        atoms = np.concatenate(groups).astype(np.int64)
        query = np.arange(len(cand), dtype=np.int64)[:, None] * (self.n_atoms + 1) + atoms[None, :]
        at = np.minimum(np.searchsorted(keys, query), max(len(keys) - 1, 0))
        found = keys[at] == query if len(keys) else np.zeros(query.shape, dtype=bool)
        hit = np.logical_or.reduceat(found, np.cumsum([0, *width[:-1]]), axis=1)
        return np.asarray(hit.all(axis=1), dtype=bool)

    def _has(self, atom: int, cand: np.ndarray, masks: dict[int, np.ndarray] | None) -> np.ndarray:
        """Does each candidate of `cand` hold `atom`?"""
        seg = self.posting(atom)
        if not len(seg):
            return np.zeros(len(cand), dtype=bool)
        if masks is None or len(seg) < _BITMAP_MIN_POSTING:
            return seg[np.minimum(np.searchsorted(seg, cand), len(seg) - 1)] == cand
        mask = masks.get(atom)
        if mask is None:
            mask = masks[atom] = np.zeros(self.n_cand, dtype=bool)
            mask[seg] = True
        return mask[cand]


Postings = _Postings  # the inverted index, public: `item_postings`, `engine.estimate.explain`


def _atoms(proj: sp.csc_matrix, known: sp.csr_matrix) -> tuple[_Postings, np.ndarray]:
    """Postings per atom and the atom id of every entry of `known`.

    Atom t (t < n_items) is "holds item t at least once"; atoms n_items + j stand for the j-th distinct
    (item, count >= 2) requirement, with the candidates holding the item at least that often."""
    n_items = proj.shape[1]
    thr = known.data.astype(np.int64)
    entry_atom = known.indices.astype(np.int64)
    ptr = proj.indptr.astype(np.int64)
    rows = proj.indices.astype(np.int64)
    many = thr > 1
    if many.any():
        req = np.unique(entry_atom[many] * (int(thr.max()) + 1) + thr[many])
        req_item, req_thr = np.divmod(req, int(thr.max()) + 1)
        extra_rows, extra_len = [], np.zeros(len(req), dtype=np.int64)
        for j, (t, need) in enumerate(zip(req_item.tolist(), req_thr.tolist(), strict=True)):
            s, e = proj.indptr[t], proj.indptr[t + 1]
            r = proj.indices[s:e][proj.data[s:e] >= need]
            extra_rows.append(r.astype(np.int64))
            extra_len[j] = len(r)
        rows = np.concatenate([rows, *extra_rows])
        ptr = np.concatenate([ptr, ptr[-1] + np.cumsum(extra_len)])
        key = entry_atom[many] * (int(thr.max()) + 1) + thr[many]
        entry_atom = entry_atom.copy()
        entry_atom[many] = n_items + np.searchsorted(req, key)
    return _Postings(ptr, rows, proj.shape[0]), entry_atom


class _Intersector:
    """Counts, for sets of atoms, the candidates holding every atom of the set.

    Atoms held by many candidates get a bitmap over the candidates (64 per word). A set is counted
    either by AND-ing the bitmaps of all its atoms and counting bits (when every atom has one and its
    rarest atom is common), or by expanding (set, candidate) pairs from its rarest atom's posting and
    keeping the pairs whose candidate holds each further atom (a bit lookup, or a binary search of the
    sorted (atom, candidate) keys for atoms without a bitmap). The choice per set compares the pairs
    to expand (`_PAIR_WEIGHT` each) with the bitmap words to AND.

    With `owner` (candidates are visits, `owner[v]` their patient), every set is counted by the
    pairs path and the surviving pairs are reduced to distinct owners: the count is of patients
    with at least one visit holding every atom.
    """

    def __init__(
        self, post: _Postings, needed: np.ndarray, owner: np.ndarray | None = None, threads: int = 1
    ):
        self.post = post
        self.threads = threads
        self.owner = owner
        self.n_owners = 0 if owner is None else int(owner.max(initial=-1)) + 1
        n = post.n_cand
        self.sentinel = post.n_atoms  # padding: an atom every candidate holds
        self.plen = np.append(post.length, n)
        self.n_words = (n + 63) // 64
        used = np.flatnonzero(needed)
        if len(used) * self.n_words * 8 <= _BITMAP_ALL_BYTES:  # small pools: a bitmap for every atom
            common = used[self.plen[used] >= 1]
        else:
            common = used[self.plen[used] >= max(_BITMAP_MIN_POSTING, 1)]
        common = common[np.lexsort((common, -self.plen[common]))]
        common = common[: _BITMAP_MAX_BYTES // max(8 * self.n_words, 1)]
        self.bitmap_of = np.full(post.n_atoms + 1, -1, dtype=np.int64)
        self.bitmap_of[common] = np.arange(len(common))
        self.bitmap_of[self.sentinel] = len(common)
        self.bits = np.zeros((len(common) + 1, self.n_words), dtype=np.uint64)
        full = np.zeros(self.n_words * 64, dtype=bool)
        full[:n] = True
        self.bits[-1] = np.packbits(full, bitorder="little").view(np.uint64)
        lens = self.plen[common]
        cand = post.rows[concat_ranges(post.ptr[common], lens)]
        word = np.repeat(np.arange(len(common), dtype=np.int64), lens) * self.n_words + (cand >> 6)
        if len(word):  # word indexes ascend (atoms in order, candidates sorted): OR = sum per word
            starts = np.flatnonzero(np.concatenate([[True], word[1:] != word[:-1]]))
            bit = np.left_shift(np.uint64(1), (cand & 63).astype(np.uint64))
            self.bits.reshape(-1)[word[starts]] = np.add.reduceat(bit, starts)
        self.bits_flat = self.bits.reshape(-1)
        rare = used[self.bitmap_of[used] < 0]
        self.keys = np.sort(
            np.repeat(rare * n, self.plen[rare]) + post.rows[concat_ranges(post.ptr[rare], self.plen[rare])]
        )

    def _member(self, atom: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """Does candidate cand[i] hold atom[i]?"""
        out = np.empty(len(atom), dtype=bool)
        bm = self.bitmap_of[atom]
        has = bm >= 0
        if has.any():
            c = cand[has]
            word = self.bits_flat[bm[has] * self.n_words + (c >> 6)]
            out[has] = ((word >> (c & 63).astype(np.uint64)) & np.uint64(1)).astype(bool)
        rest = ~has & (atom != self.sentinel)
        out[atom == self.sentinel] = True
        if rest.any():
            q = atom[rest] * self.post.n_cand + cand[rest]
            if len(self.keys):
                pos = np.minimum(np.searchsorted(self.keys, q), len(self.keys) - 1)
                out[rest] = self.keys[pos] == q
            else:
                out[rest] = False
        return out

    def count(self, sets: np.ndarray) -> np.ndarray:
        """(m, L) distinct atom sets, L >= 2 -> candidates holding every atom of each set."""
        m = len(sets)
        order = np.argsort(self.plen[sets] * (self.post.n_atoms + 1) + sets, axis=1, kind="stable")
        srt = np.take_along_axis(sets, order, axis=1)
        flen = self.plen[srt[:, 0]]
        out = np.zeros(m, dtype=np.int64)
        n_real = (srt != self.sentinel).sum(axis=1)
        and_cost = np.minimum(n_real - 1, _AND_FULL_COLUMNS) * self.n_words
        by_and = (self.bitmap_of[srt] >= 0).all(axis=1) & (flen * _PAIR_WEIGHT > and_cost)
        if self.owner is not None:  # bitmaps count visits, not patients
            by_and[:] = False
        jobs = []  # (selected sets, how to count them); chunks write disjoint parts of `out`
        idx = np.flatnonzero(by_and)
        step = max(_AND_CHUNK_WORDS // max(self.n_words, 1), 1)
        jobs += [(idx[s : s + step], self._count_and) for s in range(0, len(idx), step)]
        idx = np.flatnonzero(~by_and & (flen > 0))  # a set with an atom nobody holds: 0
        csum = np.cumsum(flen[idx])
        start = 0
        while start < len(idx):
            base = csum[start - 1] if start else 0
            stop = max(int(np.searchsorted(csum, base + _PAIR_CHUNK, side="right")), start + 1)
            jobs.append((idx[start:stop], self._count_pairs))
            start = stop

        def run(job) -> None:
            sel, how = job
            out[sel] = how(srt[sel], n_real[sel])

        if self.threads > 1 and len(jobs) > 1:  # numpy releases the GIL inside these array operations
            with ThreadPoolExecutor(self.threads) as pool:
                list(pool.map(run, jobs))
        else:
            for job in jobs:
                run(job)
        return out

    def _count_and(self, srt: np.ndarray, n_real: np.ndarray) -> np.ndarray:
        """AND the whole bitmaps of each set's rarest atoms (up to `_AND_FULL_COLUMNS` + 1), then only
        the words still non-zero with the bitmaps of its further atoms, and count the bits."""
        width = int(n_real.max())
        full = min(width, _AND_FULL_COLUMNS + 1)
        acc = self.bits[self.bitmap_of[srt[:, 0]]]
        for j in range(1, full):
            np.bitwise_and(acc, self.bits[self.bitmap_of[srt[:, j]]], out=acc)
        if width <= full:
            return np.bitwise_count(acc).sum(axis=1, dtype=np.int64)
        row, word = np.nonzero(acc)
        vals = acc[row, word]
        del acc
        for j in range(full, width):
            if len(vals) == 0:
                break
            vals &= self.bits_flat[self.bitmap_of[srt[row, j]] * self.n_words + word]
            nz = vals != 0
            row, word, vals = row[nz], word[nz], vals[nz]
        return np.bincount(row, weights=np.bitwise_count(vals), minlength=len(srt)).astype(np.int64)

    def _count_pairs(self, srt: np.ndarray, n_real: np.ndarray | None = None) -> np.ndarray:
        """Expand (set, candidate) pairs from each set's rarest atom, keep those whose candidate holds
        the second atom, then check all further atoms of the survivors at once (in chunks)."""
        p = self.post
        first = srt[:, 0]
        lens = self.plen[first]
        pair_set = np.repeat(np.arange(len(srt)), lens)
        pair_c = p.rows[concat_ranges(p.ptr[first], lens)]
        ok = self._member(srt[pair_set, 1], pair_c)
        pair_set, pair_c = pair_set[ok], pair_c[ok]
        more = srt.shape[1] - 2
        if more > 0 and len(pair_set):
            keep = np.empty(len(pair_set), dtype=bool)
            step = max(_PAIR_CHUNK // more, 1)
            for s in range(0, len(pair_set), step):
                ps, pc = pair_set[s : s + step], pair_c[s : s + step]
                hit = self._member(srt[ps, 2:].reshape(-1), np.repeat(pc, more))
                keep[s : s + step] = hit.reshape(-1, more).all(axis=1)
            pair_set, pair_c = pair_set[keep], pair_c[keep]
        if self.owner is not None:  # distinct owning patients per set
            key = np.unique(pair_set.astype(np.int64) * self.n_owners + self.owner[pair_c])
            pair_set = key // self.n_owners
        return np.bincount(pair_set, minlength=len(srt))


class _SubsetCounter:
    """Counts, for distinct atom sets, the candidates holding every atom, from the candidates' side:
    each candidate enumerates the known sets it contains by walking a trie of the sets.

    Atoms are ranked rarest first (posting length, then id); sets are sorted by rank and stored as a
    trie whose nodes are their distinct prefixes. A candidate's needed atoms (sorted by rank) start a
    walk at the root's children; a walk at node u with the candidate's atoms from position j on goes
    to every child of u the candidate holds: found by looking up each remaining atom of the candidate
    among u's children, or each child's atom among the candidate's atoms, whichever list is shorter.
    A walk reaching a set's last node adds one to that set. The work is the number of (candidate,
    prefix of a known set it contains) pairs times a short lookup: it grows with the data and with the
    number of known sets each record contains, not with (distinct sets) x (population) as an index
    over the candidates does (issue 15). Candidates are counted in chunks (threads); counts add.

    With `owner` (candidates are visits, `owner[v]` their patient, nondecreasing), chunks hold whole
    patients and every set counts the distinct owners of the visits that reach it.
    """

    def __init__(
        self,
        post: _Postings,
        set_ptr: np.ndarray,
        set_atoms: np.ndarray,
        owner: np.ndarray | None = None,
        threads: int = 1,
        merge: bool = False,
        cap: int | None = None,
    ):
        """Sets as ragged rows: set i is `set_atoms[set_ptr[i]:set_ptr[i + 1]]` (distinct sets, each
        of distinct atoms). `merge` (not with `owner`): candidates holding the same needed atoms walk
        once, with their number as weight (few distinct rows when the sets use few common atoms).
        `cap`: count each set only up to `cap` (see `count`)."""
        self.owner = owner
        self.cap = cap
        self.threads = threads
        self.n_sets = len(set_ptr) - 1
        n_atoms = post.n_atoms
        used = np.unique(set_atoms)
        # rank: rarest atom first (ties by atom id), over the atoms some set needs
        used = used[np.lexsort((used, post.length[used]))]
        self.n_ranks = n_r = len(used)
        rank_of = np.full(n_atoms + 1, n_r, dtype=np.int64)
        rank_of[used] = np.arange(n_r)
        lens = np.diff(set_ptr)
        owner_set = np.repeat(np.arange(self.n_sets, dtype=np.int64), lens)
        ranked = rank_of[set_atoms]
        ranked = ranked[np.lexsort((ranked, owner_set))]  # each set's atoms by rank
        # candidates x ranks, indices sorted by rank (a CSC over ranks turned into CSR)
        lens_u = post.length[used]
        rows = post.rows[concat_ranges(post.ptr[used], lens_u)]
        col_ptr = np.concatenate([[0], np.cumsum(lens_u)])
        held = sp.csc_matrix(
            (np.ones(len(rows), dtype=np.int8), rows, col_ptr), shape=(post.n_cand, max(n_r, 1))
        ).tocsr()
        held.sort_indices()
        self.held_ptr = held.indptr.astype(np.int64)
        self.held_rank = held.indices.astype(np.int64)
        self.weight = None
        if merge and owner is None:
            self.held_ptr, self.held_rank, self.weight = _merge_rows(self.held_ptr, self.held_rank, n_r)
        # the trie: node 0 is the root; nodes of depth d+1 numbered after those of depth d, in
        # (parent, rank) order, so (parent, rank) keys ascend with the node id
        base = n_r + 1
        at = np.zeros(self.n_sets, dtype=np.int64)
        keys = []
        n_nodes = 1
        self.depth_start = [1]  # node ids of depth d + 1 are depth_start[d] .. depth_start[d + 1] - 1
        for d in range(int(lens.max(initial=0))):
            act = np.flatnonzero(lens > d)
            key = at[act] * base + ranked[set_ptr[act] + d]
            uniq, inv = np.unique(key, return_inverse=True)
            at[act] = n_nodes + inv.reshape(-1)
            keys.append(uniq)
            n_nodes += len(uniq)
            self.depth_start.append(n_nodes)
        self.set_node = at
        self.child_key = np.concatenate([np.zeros(0, dtype=np.int64), *keys])  # of nodes 1..n_nodes-1
        parent, self.child_rank = np.divmod(self.child_key, base)
        self.parent = np.concatenate([[0], parent])  # of every node (the root its own)
        self.live = np.ones(n_nodes, dtype=bool)  # nodes with a set still counted below them (`cap`)
        self.child_start = np.searchsorted(parent, np.arange(n_nodes)) + 1  # node id of first child
        self.child_count = np.bincount(parent, minlength=n_nodes).astype(np.int64)
        self.node_set = np.full(n_nodes, -1, dtype=np.int64)
        self.node_set[at] = np.arange(self.n_sets)
        self.root_child = np.full(n_r + 1, -1, dtype=np.int64)
        root_kids = self.child_key < base
        self.root_child[self.child_rank[root_kids]] = np.flatnonzero(root_kids) + 1
        self.base = base
        self.work = (0, 0)

    def count(self) -> np.ndarray:
        """Candidates (distinct owners with `owner`) holding every atom of each set.

        With `cap`: min(that number, cap), exactly. Chunks are then counted in rounds of doubling size
        (the first of one chunk per thread); after each round the sets that reached `cap` are dropped
        from the trie (a node stays while a set below it is still counted), so a candidate walks only
        towards sets not yet decided. A set's walk steps are then bounded by about 2 cap plus its
        share of the first round, not by its support (the support of a set of common atoms grows with
        the population; issue 15)."""
        n_cand = len(self.held_ptr) - 1
        bounds = (
            np.searchsorted(self.held_ptr, np.arange(0, int(self.held_ptr[-1]), _WALK_CHUNK), side="right")
            - 1
        )
        bounds = np.unique(np.concatenate([bounds, [n_cand]]))
        if self.owner is not None and len(self.owner):  # a patient's visits stay in one chunk
            bounds = np.unique(np.searchsorted(self.owner, self.owner[np.minimum(bounds, n_cand - 1)]))
            bounds = np.unique(np.concatenate([bounds, [0, n_cand]]))
        out = np.zeros(self.n_sets, dtype=np.int64)
        lock = Lock()

        def run(span) -> None:
            got = self._walk(*span)
            with lock:  # integer sums: the same whatever the order
                out[:] += got

        spans = list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))
        rounds = [spans]
        if self.cap is not None:
            rounds, start, size = [], 0, self.threads
            while start < len(spans):
                rounds.append(spans[start : start + size])
                start, size = start + size, size * 2
        for r, spans_r in enumerate(rounds):
            if r:
                self._prune(out)
                if not self.live[0]:
                    break
            if self.threads > 1 and len(spans_r) > 1:
                with ThreadPoolExecutor(self.threads) as pool:
                    list(pool.map(run, spans_r))
            else:
                for span in spans_r:
                    run(span)
        if self.cap is not None:
            np.minimum(out, self.cap, out=out)
        return out

    def _prune(self, counts: np.ndarray) -> None:
        """Keep (`live`) the nodes with a set below them whose count is still under `cap`."""
        live = np.zeros(len(self.live), dtype=bool)
        live[self.set_node[counts < self.cap]] = True
        for d in range(len(self.depth_start) - 2, 0, -1):  # deepest first: a node keeps its parent
            lo, hi = self.depth_start[d], self.depth_start[d + 1]
            live[self.parent[lo:hi][live[lo:hi]]] = True
        live[0] = live[1 : self.depth_start[1]].any() if len(self.depth_start) > 1 else False
        self.live = live

    def _walk(self, c0: int, c1: int) -> np.ndarray:
        """Counts over the candidates c0 .. c1 - 1."""
        ptr = self.held_ptr[c0 : c1 + 1] - self.held_ptr[c0]
        ranks = self.held_rank[self.held_ptr[c0] : self.held_ptr[c1]]
        n_r = max(self.n_ranks, 1)
        row = np.repeat(np.arange(c1 - c0, dtype=np.int64), np.diff(ptr))
        held_key = row * n_r + ranks  # ascending: rows in order, ranks sorted within rows
        live = self.live
        node = self.root_child[ranks]
        hit = np.flatnonzero(node >= 0)
        hit = hit[live[node[hit]]]
        cand, node, pos = row[hit], node[hit], hit + 1
        reached, reached_cand = [], []
        visits = lookups = 0
        while len(cand):
            visits += len(cand)
            s = self.node_set[node]
            done = s >= 0
            if self.owner is not None:
                reached.append(s[done] * (int(self.owner[-1]) + 1) + self.owner[c0 + cand[done]])
            else:
                reached.append(s[done])
                reached_cand.append(cand[done])
            kids = self.child_count[node]
            rest = ptr[cand + 1] - pos
            go = (kids > 0) & (rest > 0)
            cand, node, pos, kids, rest = cand[go], node[go], pos[go], kids[go], rest[go]
            by_atom = rest <= kids  # look the candidate's remaining atoms up among the children
            a = np.flatnonzero(by_atom)
            j = concat_ranges(pos[a], rest[a])
            a_cand = np.repeat(cand[a], rest[a])
            look = np.repeat(node[a], rest[a]) * self.base + ranks[j]
            k = np.minimum(np.searchsorted(self.child_key, look), max(len(self.child_key) - 1, 0))
            ok = self.child_key[k] == look if len(self.child_key) else np.zeros(len(look), dtype=bool)
            ok &= live[k + 1] if len(self.child_key) else ok
            new_cand, new_node, new_pos = [a_cand[ok]], [k[ok] + 1], [j[ok] + 1]
            b = np.flatnonzero(~by_atom)  # look each child's atom up among the candidate's atoms
            k = concat_ranges(self.child_start[node[b]], kids[b])
            b_cand = np.repeat(cand[b], kids[b])
            look = b_cand * n_r + self.child_rank[k - 1]
            p = np.minimum(np.searchsorted(held_key, look), max(len(held_key) - 1, 0))
            ok = held_key[p] == look if len(held_key) else np.zeros(len(look), dtype=bool)
            ok &= live[k]
            new_cand.append(b_cand[ok])
            new_node.append(k[ok])
            new_pos.append(p[ok] + 1)
            lookups += len(look) + len(j)
            cand, node, pos = np.concatenate(new_cand), np.concatenate(new_node), np.concatenate(new_pos)
        self.work = (self.work[0] + visits, self.work[1] + lookups)  # (walk steps, lookups): bench/scale.py
        got = np.concatenate([np.zeros(0, dtype=np.int64), *reached])
        if self.owner is not None:
            got = np.unique(got) // (int(self.owner[-1]) + 1)
        if self.weight is None:
            return np.bincount(got, minlength=self.n_sets)
        w = self.weight[c0 + np.concatenate([np.zeros(0, dtype=np.int64), *reached_cand])]
        return np.bincount(got, weights=w, minlength=self.n_sets).round().astype(np.int64)


def _walk_counts(
    post: _Postings,
    set_ptr: np.ndarray,
    set_atoms: np.ndarray,
    owner: np.ndarray | None,
    threads: int,
    cap: int | None = None,
) -> np.ndarray:
    """Support of every set (ragged rows of atoms) by `_SubsetCounter`. Without `owner`, the sets of
    common atoms only (each held by at least `_COMMON_SHARE` of the candidates) are counted apart,
    over the distinct combinations of common atoms the candidates hold (merged rows): their supports
    are large and would otherwise be enumerated candidate by candidate. With `cap`, every set goes
    to one walk that stops counting a set once it reaches `cap` (`_SubsetCounter.count`)."""
    lens = np.diff(set_ptr)
    out = np.zeros(len(lens), dtype=np.int64)
    if cap is not None:
        return _SubsetCounter(post, set_ptr, set_atoms, owner, threads, cap=cap).count()
    if owner is None:
        common = post.length[set_atoms] >= max(_COMMON_SHARE * post.n_cand, 1)
        all_common = (
            np.bincount(np.repeat(np.arange(len(lens)), lens), weights=~common, minlength=len(lens)) == 0
        )
        parts = [(np.flatnonzero(all_common), True), (np.flatnonzero(~all_common), False)]
    else:
        parts = [(np.arange(len(lens)), False)]
    for idx, merge in parts:
        if len(idx):
            ptr = np.concatenate([[0], np.cumsum(lens[idx])])
            atoms = set_atoms[concat_ranges(set_ptr[idx], lens[idx])]
            out[idx] = _SubsetCounter(post, ptr, atoms, owner, threads, merge=merge).count()
    return out


def _merge_rows(ptr: np.ndarray, cols: np.ndarray, n_cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct non-empty rows of a CSR pattern (indices sorted within rows), in order of first
    appearance, and the number of rows equal to each."""
    lens = np.diff(ptr)
    bucket = np.where(lens > 0, 1 << np.ceil(np.log2(np.maximum(lens, 1))).astype(np.int64), 0)
    keep_rows, weights = [], []
    for width in np.unique(bucket[lens > 0]).tolist():
        rows = np.flatnonzero(bucket == width)
        r_lens = lens[rows]
        mat = np.full((len(rows), width), n_cols, dtype=np.int64)
        mat[
            np.repeat(np.arange(len(rows)), r_lens),
            concat_ranges(np.zeros(len(rows), dtype=np.int64), r_lens),
        ] = cols[concat_ranges(ptr[rows], r_lens)]
        _, inv = _dedup_rows(mat, n_cols + 1)
        first = np.full(inv.max(initial=-1) + 1, len(rows), dtype=np.int64)
        np.minimum.at(first, inv, np.arange(len(rows)))
        keep_rows.append(rows[first])
        weights.append(np.bincount(inv, minlength=len(first)))
    keep = np.concatenate([np.zeros(0, dtype=np.int64), *keep_rows])
    weight = np.concatenate([np.zeros(0, dtype=np.int64), *weights])
    order = np.argsort(keep, kind="stable")
    keep, weight = keep[order], weight[order]
    new_ptr = np.concatenate([[0], np.cumsum(lens[keep])])
    return new_ptr, cols[concat_ranges(ptr[keep], lens[keep])], weight.astype(np.float64)


def _kernel(
    post: _Postings, needed: np.ndarray, groups: list, owner: np.ndarray | None, cap: int | None = None
) -> str:
    """Which counter serves a call: `_KERNEL` when set; else the walk (`_SubsetCounter`) when counting
    distinct owners (within visits: the index pays a pair per visit there) or when its estimated
    work, `_WALK_WEIGHT` per pair of needed atoms a candidate holds, is below the index's estimate
    (per set the cheaper of its pairs and its bitmap words, as `_Intersector.count` chooses). Capped
    counts (`cap`) go to the walk too: its work per set is then bounded by the cap."""
    if _KERNEL != "auto":
        return _KERNEL
    if owner is not None or cap is not None:
        return "walk"
    n_words = (post.n_cand + 63) // 64
    plen = np.append(post.length, post.n_cand)  # the padding atom: every candidate
    index_cost = 0.0
    for _, uniq, _ in groups:
        n_real = (uniq < post.n_atoms).sum(axis=1)
        flen = plen[uniq].min(axis=1)
        index_cost += float(
            np.minimum(flen * _PAIR_WEIGHT, np.minimum(n_real - 1, _AND_FULL_COLUMNS) * n_words).sum()
        )
    atoms = np.flatnonzero(needed)
    held = np.bincount(post.rows[concat_ranges(post.ptr[atoms], post.length[atoms])], minlength=post.n_cand)
    walk_cost = _WALK_WEIGHT * float((held * (held + 1) // 2).sum())
    return "walk" if walk_cost < index_cost else "index"


def _dedup_rows(mat: np.ndarray, n_atoms: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of an (n, L) int matrix (each row sorted) and the inverse map."""
    width = mat.shape[1]
    bits = max(int(n_atoms - 1).bit_length(), 1)
    if bits * width <= 62:
        key = np.zeros(len(mat), dtype=np.int64)
        for j in range(width):
            key = (key << bits) | mat[:, j]
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        return mat[first], inv.reshape(-1)
    uniq, inv = np.unique(mat, axis=0, return_inverse=True)
    return uniq, inv.reshape(-1)


@dataclass(frozen=True, eq=False)
class KnownSets:
    """The known sets of the target records and the distinguishability of each.

    `matrix` rows are known sets over the targets' items (data: required occurrences), `owner[r]` the
    target record of row r, `values[r]` its number of consistent candidates (at most `cap` when the
    counts were capped, `count_known_sets`)."""

    matrix: sp.csr_matrix
    owner: np.ndarray
    values: np.ndarray
    n_targets: int
    n_candidates: int
    cap: int | None = None

    def per_record(self) -> np.ndarray:
        """Minimum over each record's known sets (a record with none: every candidate; at most
        `cap`)."""
        full = self.n_candidates if self.cap is None else min(self.n_candidates, self.cap)
        out = np.full(self.n_targets, full, dtype=np.int64)
        np.minimum.at(out, self.owner, self.values)
        return out

    def riskiest_row(self) -> np.ndarray:
        """Per target record, the row of its known set with the fewest candidates (ties: first row);
        -1 for a record with no known set."""
        out = np.full(self.n_targets, -1, dtype=np.int64)
        order = np.lexsort((np.arange(len(self.owner)), self.values, self.owner))
        owners = self.owner[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = owners[1:] != owners[:-1]
        out[owners[first]] = order[first]
        return out


def known_set_distinguishability(
    targets: Records, candidates: Records, knowledge: Knowledge, matching: Matching = DEFAULT_MATCHING
) -> KnownSets:
    """Distinguishability of every known set of the target records (one per visit under single-visit
    knowledge, one per record under all-visits), counted as described at the top of this section.

    `matching.within_visits` (single-visit knowledge only): the candidates' visits are the rows of the
    index, sets are counted by the pairs path and reduced to distinct patients. `matching.threads`:
    see `thread_count` (results are the same for every count). `matching.cap`: see `count_known_sets`."""
    known, owner = known_sets(targets, knowledge, matching.count_repeats)
    values = count_known_sets(targets.items, known, candidates, knowledge, matching)
    return KnownSets(known, owner, values, targets.n_patients, candidates.n_patients, matching.cap)


def known_sets(
    targets: Records, knowledge: Knowledge, count_repeats: bool = False
) -> tuple[sp.csr_matrix, np.ndarray]:
    """The known sets of the target records (rows over `targets.items`, data: required occurrences;
    repeats count under all-visits knowledge only) and the target record of each row."""
    return _known_sets(targets, knowledge, count_repeats and knowledge == "all_visits")


def count_known_sets(
    target_items: np.ndarray,
    known: sp.csr_matrix,
    candidates: Records,
    knowledge: Knowledge,
    matching: Matching = DEFAULT_MATCHING,
) -> np.ndarray:
    """Per row of `known` (sets over `target_items`, from `known_sets`), the number of `candidates`
    consistent with it: the support of the set among the candidates (distinct patients with one visit
    holding it, under `within_visits` and single-visit knowledge). Supports over disjoint groups of
    patients add up, which is what sharded runs (engine/scale/shards.py) rely on.

    `matching.cap` (a positive whole number, or None for full counts): every value is min(support, cap),
    exactly; enough for every verdict at k <= cap (below k, unique, failing records), and capped sums
    still add (min(a + b, cap) = min(min(a, cap) + min(b, cap), cap)). Capped counts go to the compiled
    walk (`engine.scale.trie`, issue 24), which stops counting a set once it has `cap` supporters, so
    its work no longer grows with the supports of common sets (issue 15); a CDF or median above `cap`
    needs full counts. Every verdict (below k, unique, the records failing k) needs only min(support,
    k), so at population scale the capped count is the kernel for verdicts: its work per set is bounded
    by the cap (CPU growth exponent about 1.04 in bench/scale.py), where full counts grow with the
    supports of common sets (exponent 1.5-1.7)."""
    return KnownSetCounter(target_items, candidates, knowledge, matching).count(known)


class KnownSetCounter:
    """`count_known_sets` with its candidate index built once: the projection of `candidates` onto
    `target_items` and its postings (`_projected_candidates`), then `count` for any number of known
    sets over `target_items`. A caller whose candidates do not change between counts keeps one (the
    completion pass's others, rebuilt after merge rounds only: issue 36, "the index rebuilt at every
    call"); the counts are `count_known_sets`' exactly."""

    def __init__(
        self,
        target_items: np.ndarray,
        candidates: Records,
        knowledge: Knowledge,
        matching: Matching = DEFAULT_MATCHING,
    ):
        self.target_items, self.candidates = target_items, candidates
        self.knowledge, self.matching = knowledge, matching
        self.by_visit = matching.within_visits and knowledge == "single_visit"
        self._proj: sp.csc_matrix | None = None
        self._post: _Postings | None = None  # the atoms "holds item t" alone
        self._owner_length: np.ndarray | None = None
        if knowledge != "whole_record":
            self._proj = _projected_candidates(
                target_items, candidates, matching.item_codes, matching.count_repeats, by_visit=self.by_visit
            )
            self._post = _Postings(
                self._proj.indptr.astype(np.int64), self._proj.indices.astype(np.int64), self._proj.shape[0]
            )

    def _atoms(self, known: sp.csr_matrix) -> tuple[_Postings, np.ndarray]:
        """The prepared postings and the atom of every entry of `known`; a known set that needs an
        item more than once (repeat counts) gets its atoms added for this count (`_atoms`)."""
        assert self._proj is not None and self._post is not None
        if (known.data > 1).any():
            return _atoms(self._proj, known)
        return self._post, known.indices.astype(np.int64)

    def _atom_count(self, post: _Postings) -> np.ndarray:
        """Per atom, its holders: candidates, or their distinct patients when they are visits."""
        if not self.by_visit:
            return post.length
        if post is not self._post:
            return post.owner_length(self.candidates.visit_patient)
        if self._owner_length is None:
            self._owner_length = post.owner_length(self.candidates.visit_patient)
        return self._owner_length

    def count(self, known: sp.csr_matrix) -> np.ndarray:
        """Per row of `known` (sets over `target_items`, from `known_sets`), the number of candidates
        consistent with it (`count_known_sets`)."""
        candidates, matching = self.candidates, self.matching
        if self.knowledge == "whole_record":
            return _whole_record_counts(self.target_items, known, candidates, matching)
        cap, threads, by_visit = matching.cap, matching.threads, self.by_visit
        post, entry_atom = self._atoms(known)
        n_cand = candidates.n_patients
        cand_owner = candidates.visit_patient if by_visit else None
        lens = np.diff(known.indptr)
        values = np.empty(known.shape[0], dtype=np.int64)
        values[lens == 0] = n_cand
        single = np.flatnonzero(lens == 1)
        values[single] = self._atom_count(post)[entry_atom[known.indptr[single]]]
        multi = lens >= 2
        ran = "posting lengths"
        if multi.any() and (_KERNEL == "trie" or (_KERNEL == "auto" and cap is not None)):
            from engine.scale import trie  # numba is loaded only when a compiled walk counts

            rows = np.flatnonzero(multi)
            values[rows] = trie.count_rows(
                post.ptr, post.rows, post.length, post.n_cand, known.indptr, entry_atom, rows, cand_owner, cap,
                thread_count(threads),
            )[0]  # fmt: skip
            ran = "compiled walk"
        elif multi.any():
            needed = np.zeros(post.n_atoms, dtype=bool)
            needed[entry_atom[np.repeat(multi, lens)]] = True
            sentinel = post.n_atoms  # padding: an atom every candidate holds
            # sets of 2, 3-4, 5-8, ... items padded with the sentinel, identical sets counted once
            bucket = np.where(multi, 1 << np.ceil(np.log2(np.maximum(lens, 2))).astype(np.int64), 0)
            groups = []
            for width in np.unique(bucket[multi]).tolist():
                rows = np.flatnonzero(bucket == width)
                r_lens = lens[rows]
                mat = np.full((len(rows), width), sentinel, dtype=np.int64)
                at_row = np.repeat(np.arange(len(rows)), r_lens)
                mat[at_row, concat_ranges(np.zeros(len(rows), dtype=np.int64), r_lens)] = entry_atom[
                    concat_ranges(known.indptr[rows], r_lens)
                ]
                mat.sort(axis=1)
                uniq, inv = _dedup_rows(mat, post.n_atoms + 1)
                groups.append((rows, uniq, inv))
            ran = _kernel(post, needed, groups, cand_owner, cap)
            if ran == "walk":
                set_lens = np.concatenate([(u != sentinel).sum(axis=1) for _, u, _ in groups])
                set_atoms = np.concatenate([u[u != sentinel] for _, u, _ in groups])  # row-major: set by set
                set_ptr = np.concatenate([[0], np.cumsum(set_lens)])
                counts = _walk_counts(post, set_ptr, set_atoms, cand_owner, thread_count(threads), cap)
                first = 0
                for rows, uniq, inv in groups:
                    values[rows] = counts[first : first + len(uniq)][inv]
                    first += len(uniq)
            else:
                counter = _Intersector(post, needed, cand_owner, thread_count(threads))
                for rows, uniq, inv in groups:
                    values[rows] = counter.count(uniq)[inv]
        if cap is not None:
            np.minimum(values, cap, out=values)
        _record_kernel(ran, cap)
        return values


def _record_kernel(ran: str, cap: int | None) -> None:
    log = getattr(_RAN, "log", None)
    if log is not None:
        log.append(ran + ("" if cap is None else f", counts capped at {cap}"))


def shown_items(target_items: np.ndarray, candidates: Records, item_codes) -> sp.csr_matrix:
    """(n_candidates, n_target_items) 0/1, indices sorted: the target items each candidate shows. A
    candidate item that is itself a target item (by name) stands for itself; another item for every
    target item whose codes include its codes (`match_matrix`); an item no target item stands for is
    not shown: the release dropped it (tests/reference_risk.py `shown_items`)."""
    m = match_matrix(candidates.items, target_items, item_codes).tocsr()
    at = pd.Index(np.asarray(target_items, dtype=object).astype(str)).get_indexer(
        np.asarray(candidates.items, dtype=object).astype(str)
    )
    same = np.flatnonzero(at >= 0)
    m = sp.diags((at < 0).astype(np.int32), dtype=np.int32) @ m + sp.csr_matrix(
        (np.ones(len(same), dtype=np.int32), (same, at[same])), shape=m.shape
    )
    shown = (candidates.patient_item_sets.astype(np.int32) @ m).tocsr()
    shown.sum_duplicates()
    shown.eliminate_zeros()
    shown.sort_indices()
    return shown


def _row_keys(m: sp.csr_matrix) -> list[bytes]:
    """Each row's sorted column indices as bytes: equal keys, equal item sets."""
    m = m.tocsr()
    if not m.has_canonical_format:  # never sorted in place: the caller's matrix may be read-only
        m = m.copy()
        m.sum_duplicates()
        m.sort_indices()
    cols = m.indices.astype(np.int64)
    return [cols[m.indptr[i] : m.indptr[i + 1]].tobytes() for i in range(m.shape[0])]


def _whole_record_counts(
    target_items: np.ndarray, known: sp.csr_matrix, candidates: Records, matching: Matching
) -> np.ndarray:
    """Per known set, the candidates whose shown item set (`shown_items` over the items some known set
    holds: the flat table's columns, onto which ARX projects a population for k-map) equals it exactly:
    the whole-record attacker's class size (issue 39), at most `matching.cap`. Counts over disjoint groups
    of candidates add up, as `count_known_sets` promises."""
    held = np.unique(known.indices)  # the flat table's columns: the items some target record holds
    shown = shown_items(np.asarray(target_items)[held], candidates, matching.item_codes)
    have = pd.Series(_row_keys(shown)).value_counts()
    values = (
        pd.Series(_row_keys(known.tocsc()[:, held].tocsr()))
        .map(have)
        .fillna(0)
        .to_numpy(dtype=np.int64, copy=True)
    )
    _record_kernel("identical item sets", matching.cap)
    return values if matching.cap is None else np.minimum(values, matching.cap)


def distinguishability(
    targets: Records, candidates: Records, knowledge: Knowledge, matching: Matching = DEFAULT_MATCHING
) -> np.ndarray:
    """(n_target_records,) number of candidate records consistent with each target record.

    Known sets are deduplicated and counted once; each count starts from the known item with the
    fewest candidate postings and filters by the others (see `known_set_distinguishability`).
    `matching.within_visits` with single-visit knowledge: a candidate is consistent when one of its
    visits holds every known item (a release that shows its visits); the count is of distinct
    patients. `matching.cap`: values min(distinguishability, cap), exactly, counted faster
    (`count_known_sets`).
    """
    return known_set_distinguishability(targets, candidates, knowledge, matching).per_record()


def item_postings(candidates: Records, groups: Mapping[str, list[str]] | None = None) -> Postings:
    """The candidates' inverted index: atom j < `candidates.n_items` is item j (the candidates
    holding it, sorted); then, in the order of `groups`, one atom per group of items (name -> item
    names), held by the candidates holding any of them (a category's codes: `engine.estimate.explain`).
    Depends on neither k nor the adversary: its callers build it once per candidate pool."""
    held = candidates.patient_item_sets
    m = held.tocsc()
    m.sort_indices()
    ids = np.int32 if candidates.n_patients < 2**31 else np.int64
    ptr, rows = m.indptr.astype(np.int64), m.indices.astype(ids)
    if groups:
        at = candidates.item_index([c for items in groups.values() for c in items])
        col = np.repeat(np.arange(len(groups)), [len(items) for items in groups.values()])
        ok = at >= 0
        member = sp.csr_matrix(
            (np.ones(int(ok.sum()), dtype=np.int32), (at[ok], col[ok])),
            shape=(candidates.n_items, len(groups)),
        )
        g = (held.astype(np.int32) @ member).tocsc()
        g.sort_indices()
        ptr = np.concatenate([ptr, ptr[-1] + g.indptr[1:].astype(np.int64)])
        rows = np.concatenate([rows, g.indices.astype(ids)])
    by_atom = sp.csc_matrix(
        (np.ones(len(rows), dtype=np.int8), rows, ptr), shape=(candidates.n_patients, len(ptr) - 1)
    )
    by_cand = by_atom.tocsr()
    by_cand.sort_indices()
    return Postings(
        ptr, rows, candidates.n_patients, by_cand.indptr.astype(np.int64), by_cand.indices.astype(ids)
    )


def distinguishability_among_holders(
    targets: Records,
    candidates: Records,
    knowledge: Knowledge,
    matching: Matching = DEFAULT_MATCHING,
    postings: Postings | None = None,
) -> np.ndarray:
    """`distinguishability(targets, candidates, knowledge, matching)`, exactly, with the kernel run on
    few candidates (issue 36: the recount of one fixed record against 1.37 M candidates).

    A candidate consistent with a known set holds, for each of its items t, an item matching t
    (`match_matrix`; within one visit, or as often, asks more): it is among `Postings.holding` of the
    set's items. Of each set, every holder when they are fewer than 1/`_HOLDERS_SHARE` of the
    candidates (the set is "few"), else as many of them as its record's fewest few set has, are put
    together, and the kernel counts them: each few set gets its exact count, every other set a count
    no larger than its own (and, under the default matching, its holders being consistent, at least
    its record's few sets' minimum). A record's distinguishability, the minimum over its sets, is
    then its few sets' minimum when that is at most every other set's count there. The records where
    it is not, and every record under whole-record knowledge, with more than `_HOLDERS_MAX_SETS` known
    sets or fewer than `_HOLDERS_MIN_POOL` candidates (the whole pool costs less there: the shipped
    sample), are counted against every candidate. A set with nothing known is consistent with every
    candidate. `postings`: `item_postings(candidates)` (groups may follow the items) when built."""
    known, owner = known_sets(targets, knowledge, matching.count_repeats)
    n_cand = candidates.n_patients
    if knowledge == "whole_record" or known.shape[0] > _HOLDERS_MAX_SETS or n_cand < _HOLDERS_MIN_POOL:
        return distinguishability(targets, candidates, knowledge, matching)
    post = item_postings(candidates) if postings is None else postings
    used = np.unique(known.indices)
    match = match_matrix(candidates.items, targets.items[used], matching.item_codes).tocsc()
    match.sort_indices()
    group = [match.indices[match.indptr[j] : match.indptr[j + 1]].astype(np.int64) for j in range(len(used))]
    at = np.searchsorted(used, known.indices)
    bound = max(n_cand // _HOLDERS_SHARE, _HOLDING_CHUNK)
    lens = np.diff(known.indptr)
    found = {
        r: post.holding([group[j] for j in at[known.indptr[r] : known.indptr[r + 1]].tolist()], bound)
        for r in np.flatnonzero(lens).tolist()
    }
    few = np.zeros(len(lens), dtype=bool)
    few[list(found)] = [len(h) < bound for h in found.values()]  # `holding` did not stop early: all
    # of another set, as many holders as its record's fewest few set has: enough for the proof below
    enough = np.zeros(targets.n_patients, dtype=np.int64)
    np.maximum.at(enough, owner[few], bound)
    np.minimum.at(enough, owner[few], [len(found[r]) for r in np.flatnonzero(few).tolist()])
    held = [h if few[r] else h[: enough[owner[r]]] for r, h in found.items()]
    among = np.unique(np.concatenate([np.zeros(0, dtype=np.int64), *held]))
    values = np.zeros(len(lens), dtype=np.int64)
    if len(among):
        values = count_known_sets(targets.items, known, candidates.take(among), knowledge, matching)
    exact = few | (lens == 0)
    values[lens == 0] = n_cand
    if matching.cap is not None:
        np.minimum(values, matching.cap, out=values)
    top = n_cand if matching.cap is None else min(n_cand, matching.cap)
    best = np.full(targets.n_patients, top, dtype=np.int64)  # per record: its exact sets' minimum
    np.minimum.at(best, owner[exact], values[exact])
    bound_of_rest = np.full(targets.n_patients, top, dtype=np.int64)  # the others' lower bounds
    np.minimum.at(bound_of_rest, owner[~exact], values[~exact])
    has_rest = np.bincount(owner[~exact], minlength=targets.n_patients) > 0
    has_exact = np.bincount(owner[exact], minlength=targets.n_patients) > 0
    unproven = np.flatnonzero(has_rest & ~(has_exact & (best <= bound_of_rest)))
    if len(unproven):
        best[unproven] = distinguishability(targets.take(unproven), candidates, knowledge, matching)
    return best


# ------------------------------------------------------------------------------ entry points
def candidates_for(
    adversary: Adversary,
    released_cohort: Records,
    population: Records | None,
    released_population: Records | None = None,
) -> Records:
    """The candidate pool: the released cohort (scope cohort), else the released population when the
    method anonymized it, else the original population."""
    if adversary.scope == "cohort":
        return released_cohort
    if released_population is not None:
        return released_population
    if population is None:
        raise MissingPopulationError(
            "the population adversary needs the population the cohort was drawn from"
        )
    return population


def original_distinguishability(
    cohort: Records,
    adversary: Adversary,
    population: Records | None = None,
    matching: Matching = DEFAULT_MATCHING,
) -> np.ndarray:
    """Distinguishability of the original (unreleased) cohort records (`matching`: see `Matching`)."""
    cands = candidates_for(adversary, cohort, population)
    return distinguishability(cohort, cands, adversary.knowledge, matching)


_KNOWN_VISITS_KEPT = 16  # releases whose attacker-known visits are memoized (least recently used dropped)


def attacker_known_visits(release: Release) -> Records | None:
    """`_attacker_known_visits`, memoized per release content (`Release.content_fingerprint`, which
    covers the records, the item -> codes map and the source it reads) where the caller's scope says
    (`engine.memo`: the app's session): it depends on neither k nor the adversary's scope, so a change
    of either re-thresholds without recomputing it."""
    if release.source is None or release.shows_visits:
        return None
    return memo(
        "risk known visits",
        release.content_fingerprint,
        lambda: _attacker_known_visits(release),
        size=_KNOWN_VISITS_KEPT,
    )


def _attacker_known_visits(release: Release) -> Records | None:
    """What a single-visit attacker can use of each ORIGINAL visit of a target when the release does
    not show visits: every released item of the target's whole record that stands for a code of that
    visit. A code suppressed in one visit but kept in another of the same patient stays visible in a
    file of one set per patient, so the released visit alone would understate the attacker. Needs the
    release's `source` (the original cohort); None without it, or when the release shows visits
    (then each released visit is matched on its own and the released visits' sets dominate).
    One visit per original visit, items in the release's vocabulary; a patient with nothing left to
    know is absent (consistent with every candidate).

    Integer-coded (tests/reference_known_visits.py keeps the text-keyed merge this equals): patients
    matched by their id's text once, each source code -> the released items standing for it, the
    patient's released items tested on sorted (patient, item) keys."""
    src = release.source
    if src is None or release.shows_visits:
        return None
    rec = release.records
    n_items = rec.n_items
    to_rel = pd.Index(rec.patient_ids.astype(str)).get_indexer(src.patient_ids.astype(str))
    items_of_code, starts = _released_items_of_codes(release, src)
    ev_code, ev_patient = src.event_item, src.event_patient
    counts = np.diff(starts)[ev_code]
    events = np.flatnonzero((to_rel[ev_patient] >= 0) & (counts > 0))
    counts = counts[events]
    # one row per (source event, released item standing for its code): event order, items ascending,
    # the order of the reference's inner merges (which keep the left rows' order)
    row_event = np.repeat(events, counts)
    row_item = items_of_code[concat_ranges(starts[ev_code[events]], counts)]
    held = rec.patient_item_sets
    held_key = np.repeat(np.arange(rec.n_patients, dtype=np.int64), np.diff(held.indptr)) * n_items
    held_key += held.indices
    if len(held_key) > 1 and (held_key[1:] <= held_key[:-1]).any():
        held_key = np.unique(held_key)
    key = to_rel[ev_patient[row_event]].astype(np.int64) * n_items + row_item
    at = np.minimum(np.searchsorted(held_key, key), max(len(held_key) - 1, 0))
    shown = (held_key[at] == key) if len(held_key) else np.zeros(len(key), dtype=bool)
    row_event, row_item = row_event[shown], row_item[shown]
    # each (visit, item) once, at its first row
    row_visit = src.event_visit[row_event].astype(np.int64)
    _, first = np.unique(row_visit * n_items + row_item, return_index=True)
    first.sort()
    row_visit, row_item, row_patient = row_visit[first], row_item[first], ev_patient[row_event[first]]
    # The rows are in source event order, so sorted by (patient, visit) already: `Records.from_frame`
    # of them (patients by first appearance, visits by index, events in row order) keeps this order.
    n = len(row_visit)
    visit_starts = (
        np.flatnonzero(np.r_[True, row_visit[1:] != row_visit[:-1]]) if n else np.zeros(0, np.int64)
    )
    visit_patient = row_patient[visit_starts]
    patient_starts = (
        np.flatnonzero(np.r_[True, visit_patient[1:] != visit_patient[:-1]])
        if len(visit_patient)
        else np.zeros(0, np.int64)
    )
    return Records(
        patient_ids=np.asarray(src.patient_ids[visit_patient[patient_starts]].astype(str), dtype=object),
        items=np.array(list(rec.items), dtype=object),
        visit_ptr=np.append(patient_starts, len(visit_starts)).astype(np.int64),
        visit_ids=np.asarray(row_visit[visit_starts], dtype=object),
        event_ptr=np.append(visit_starts, n).astype(np.int64),
        event_item=row_item.astype(np.int32),
        event_age=None,
        has_visits=True,
    )


def _released_items_of_codes(release: Release, src: Records) -> tuple[np.ndarray, np.ndarray]:
    """CSR over the source's items: `items_of[starts[s]:starts[s + 1]]` are the released items
    (ascending) that stand for source item s's code."""
    item_list: list[int] = []
    code_list: list[str] = []
    for j, item in enumerate(release.records.items.tolist()):
        codes = release.codes_of(str(item))
        item_list.extend([j] * len(codes))
        code_list.extend(codes)
    code = pd.Index(src.items.astype(str)).get_indexer(code_list) if code_list else np.zeros(0, np.intp)
    ok = code >= 0
    code, item = code[ok], np.asarray(item_list, dtype=np.int64)[ok]
    order = np.argsort(code, kind="stable")  # items stay ascending within a code
    starts = np.searchsorted(code[order], np.arange(src.n_items + 1)).astype(np.int64)
    return item[order], starts


def release_distinguishability(
    release: Release, adversary: Adversary, population: Records | None = None
) -> np.ndarray:
    """Distinguishability of every released cohort record; matched within the candidates' visits when
    the release shows them (`Release.shows_visits`). Under single-visit knowledge against a release
    without visits, the known sets are `attacker_known_visits` when the release carries its source."""
    cands = candidates_for(adversary, release.records, population, release.population)
    known = attacker_known_visits(release) if adversary.knowledge == "single_visit" else None
    dis = distinguishability(
        release.records if known is None else known, cands, adversary.knowledge, Matching.of_release(release)
    )
    if known is None:
        return dis
    at = pd.Index(known.patient_ids.astype(str)).get_indexer(release.records.patient_ids.astype(str))
    return np.where(at >= 0, dis[np.maximum(at, 0)] if len(dis) else 0, cands.n_patients).astype(np.int64)


# --------------------------------------------------------------------------------- summaries
@dataclass(frozen=True)
class RiskSummary:
    """Headline figures of a distinguishability vector for a given k."""

    n_records: int
    k: int
    share_unique: float
    share_below_k: float
    median: float

    def as_dict(self) -> dict[str, float]:
        return {
            "records": self.n_records,
            "k": self.k,
            "share unique": self.share_unique,
            "share below k": self.share_below_k,
            "median distinguishability": self.median,
        }


def summarize(dis: np.ndarray, k: int) -> RiskSummary:
    dis = np.asarray(dis)
    n = len(dis)
    if n == 0:
        return RiskSummary(0, k, 0.0, 0.0, float("nan"))
    return RiskSummary(
        n_records=n,
        k=k,
        share_unique=float(np.mean(dis <= 1)),
        share_below_k=float(np.mean(dis < k)),
        median=float(np.median(dis)),
    )


def cdf(dis: np.ndarray) -> pd.DataFrame:
    """Share of records at or below each distinguishability value (Tamersoy Figure 4, PNAS Figure 2)."""
    dis = np.asarray(dis)
    if len(dis) == 0:
        return pd.DataFrame({"distinguishability": [], "share": []})
    values, counts = np.unique(dis, return_counts=True)
    return pd.DataFrame({"distinguishability": values, "share": np.cumsum(counts) / len(dis)})


# ------------------------------------------------------------- risk as an expert determination states it
def threshold_of_k(k: int) -> float:
    """The risk threshold that k stands for: 1/k. A record is at risk under it exactly when its
    distinguishability is below k (`risk_measures` compares the float 1/d with the float 1/k; distinct
    whole numbers d < k give 1/d > 1/k in floating point too)."""
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive whole number, not {k!r}")
    return 1.0 / int(k)


@dataclass(frozen=True)
class RiskThresholdPrecedent:
    """A published risk threshold (El Emam's precedents for the maximum risk of a release) and the k it
    corresponds to: `threshold` is exactly `threshold_of_k(k)`, `stated` the rounded figure as cited."""

    name: str
    stated: float
    k: int

    @property
    def threshold(self) -> float:
        return threshold_of_k(self.k)


RISK_THRESHOLD_PRECEDENTS: tuple[RiskThresholdPrecedent, ...] = (
    # K. El Emam, "Guide to the De-Identification of Personal Health Information" (2013), and El Emam et
    # al., "A systematic review of re-identification attacks on health data" (PLoS One 2011); the
    # thresholds of precedent for the maximum (prosecutor) risk, by how the data are released.
    RiskThresholdPrecedent("public release (most stringent)", 0.05, 20),
    RiskThresholdPrecedent("public release", 0.09, 11),
    RiskThresholdPrecedent("controlled access under a data use agreement", 0.2, 5),
    RiskThresholdPrecedent("internal use, trusted recipients", 0.33, 3),
)
"""El Emam's precedents as (name, the threshold as cited, k): 0.05 ~ k = 20, 0.09 ~ k = 11, 0.2 ~ k = 5,
0.33 ~ k = 3. Compare with `threshold` (1/k), never with `stated`: 1/11 = 0.0909 exceeds 0.09."""


@dataclass(frozen=True)
class RiskMeasures:
    """Maximum and average re-identification risk of a distinguishability vector, and the records at risk.

    records: number of records measured.
    threshold: the risk threshold the records at risk exceed (e.g. `threshold_of_k(k)`).
    prosecutor_max: 1 / the smallest distinguishability: the highest probability that an attacker who
      targets one record re-identifies it (ARX's prosecutor risk, highest; with population-scope
      distinguishability, where the candidates are the population, ARX's journalist risk, highest).
    average: mean of 1/distinguishability: the expected share of records re-identified by an attacker
      who matches every record and picks one consistent candidate at random (ARX's marketer risk;
      with cohort-scope distinguishability the candidates are the released records, with
      population-scope distinguishability the population).
    records_at_risk: records whose risk 1/d exceeds `threshold` (with threshold 1/k: d < k).
    share_at_risk: records_at_risk / records (0 without records).
    unmatched: records with distinguishability below 1, counted at risk 1 (see `risk_measures`)."""

    records: int
    threshold: float
    prosecutor_max: float
    average: float
    records_at_risk: int
    share_at_risk: float
    unmatched: int = 0

    def as_dict(self) -> dict[str, float]:
        return {
            "records": self.records,
            "risk threshold": self.threshold,
            "maximum risk": self.prosecutor_max,
            "average risk": self.average,
            "records at risk": self.records_at_risk,
            "share at risk": self.share_at_risk,
            "records no candidate matches": self.unmatched,
        }


def risk_measures(distinguishability: np.ndarray, threshold: float) -> RiskMeasures:
    """Maximum (1 / min d) and average (mean of 1/d) risk of the records, and those whose risk 1/d
    exceeds `threshold` (a probability in (0, 1]; `threshold_of_k(k)` for "distinguishability below k").

    Every released record is its own candidate when the candidates hold what the release shows, so
    its distinguishability is at least 1. A value of 0 arises when they do not (e.g. LDA's `code|age`
    items against a population of plain codes, or a cohort counted against a population it is not
    part of): the measure cannot vouch for such a record, so it is counted at the highest risk, 1
    (conservative, never an infinite or missing figure), and their number is `unmatched`. A negative
    or missing value is a bug: ValueError naming how many. Without records every figure is 0."""
    dis = np.asarray(distinguishability)
    if dis.ndim != 1:
        raise ValueError(f"distinguishability must be one value per record, not shape {dis.shape}")
    threshold = float(threshold)
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"the risk threshold must be a probability in (0, 1], not {threshold!r}")
    n = len(dis)
    if n == 0:
        return RiskMeasures(0, threshold, 0.0, 0.0, 0, 0.0)
    bad = int(np.count_nonzero(~(dis >= 0)))
    if bad:
        raise ValueError(f"{bad} of {n} records have a negative or missing distinguishability")
    unmatched = int(np.count_nonzero(dis < 1))
    risk = 1.0 / np.maximum(dis.astype(np.float64), 1.0)
    at_risk = int(np.count_nonzero((risk > threshold) | (dis < 1)))
    return RiskMeasures(
        records=n,
        threshold=threshold,
        prosecutor_max=float(risk.max()),
        average=float(risk.mean()),
        records_at_risk=at_risk,
        share_at_risk=at_risk / n,
        unmatched=unmatched,
    )


@dataclass(frozen=True)
class Verification:
    """The risk engine's verdict on a release: ok when every record has distinguishability >= k.

    `release_fingerprint` is the `Release.fingerprint` of the release verified (set by `verify`), so
    an export gate can check that a verification belongs to exactly the files being written."""

    adversary: Adversary
    k: int
    distinguishability: np.ndarray
    patient_ids: np.ndarray
    release_fingerprint: str = ""

    @property
    def ok(self) -> bool:
        return bool((self.distinguishability >= self.k).all())

    @property
    def failing(self) -> pd.DataFrame:
        bad = self.distinguishability < self.k
        return pd.DataFrame(
            {"patient_id": self.patient_ids[bad], "distinguishability": self.distinguishability[bad]}
        )

    def message(self) -> str:
        n = int((self.distinguishability < self.k).sum())
        if n == 0:
            return f"Verified: every one of {len(self.patient_ids)} records has distinguishability >= {self.k} ({self.adversary.label})."
        return f"Not verified: {n} of {len(self.patient_ids)} records have distinguishability < {self.k} ({self.adversary.label})."


def verify(release: Release, adversary: Adversary, k: int, population: Records | None = None) -> Verification:
    """Check a release against an adversary and k, independently of the method's bookkeeping."""
    dis = release_distinguishability(release, adversary, population)
    return Verification(adversary, k, dis, release.records.patient_ids, release.fingerprint)


# ------------------------------------------------------------------------- all four adversaries
def all_adversaries(
    cohort: Records,
    population: Records | None = None,
    matching: Matching = DEFAULT_MATCHING,
    *,
    adversaries: tuple[Adversary, ...] = ALL_ADVERSARIES,
) -> dict[Adversary, np.ndarray]:
    """Distinguishability of the original cohort records under each adversary (ARCHITECTURE
    section 3); population scope is skipped when no population is given."""
    return {
        adv: original_distinguishability(cohort, adv, population, matching)
        for adv in adversaries
        if adv.scope == "cohort" or population is not None
    }


def release_all_adversaries(
    release: Release,
    population: Records | None = None,
    adversaries: tuple[Adversary, ...] = ALL_ADVERSARIES,
) -> dict[Adversary, np.ndarray]:
    """Distinguishability of a release's cohort records under each adversary (population scope
    skipped when neither the release nor the caller provides a population)."""
    have_pop = population is not None or release.population is not None
    return {
        adv: release_distinguishability(release, adv, population)
        for adv in adversaries
        if adv.scope == "cohort" or have_pop
    }


# ----------------------------------------------------------------------- riskiest code patterns
def _item_text(item: str, need: int) -> str:
    return item if need <= 1 else f"{item} ×{need}"


def _item_description(
    item: str, item_codes: Mapping[str, frozenset[str]] | None, names: Mapping[str, str] | None
) -> str:
    """`engine.vocab.describe`: ICD-9-CM and ICD-10-CM alike, a CDM's concepts by their concept_name
    (`names`, issue 37), a dash and the reason when unknown."""
    from engine.vocab import describe

    return describe(item, item_codes, names=names)


def riskiest_patterns(
    targets: Records,
    candidates: Records,
    knowledge: Knowledge,
    matching: Matching = DEFAULT_MATCHING,
    *,
    n: int = 20,
    names: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """The code patterns that single out the records at highest risk: for every target record, the
    known set with the fewest consistent candidates (its single-visit set, or its whole record),
    grouped by pattern. Never patient identifiers.

    Columns: `distinguishability`, `records` (target records whose riskiest known set this is),
    `items` (size of the pattern), `codes` ("; "-joined items, `×n` for required repeats), and
    `descriptions` (`engine.vocab.describe`; an OMOP CDM's concepts by their concept names `names`,
    `ConceptParents.names`; a generalized item lists its codes). Sorted by distinguishability,
    then by records (most first), then by codes; the first `n` rows.
    """
    ks = known_set_distinguishability(targets, candidates, knowledge, matching)
    best = ks.riskiest_row()
    best = best[best >= 0]
    cols = ["distinguishability", "records", "items", "codes", "descriptions"]
    if len(best) == 0:
        return pd.DataFrame({c: [] for c in cols})
    m = ks.matrix
    patterns = []
    for r in best.tolist():
        s, e = m.indptr[r], m.indptr[r + 1]
        items = targets.items[m.indices[s:e]].astype(str)
        needs = m.data[s:e].astype(int)
        patterns.append((int(ks.values[r]), tuple(sorted(zip(items.tolist(), needs.tolist(), strict=True)))))
    frame = pd.DataFrame(patterns, columns=["distinguishability", "pattern"])
    grouped = frame.groupby(["distinguishability", "pattern"], sort=False).size().reset_index(name="records")
    grouped["codes"] = ["; ".join(_item_text(i, need) for i, need in pat) for pat in grouped["pattern"]]
    grouped = grouped.sort_values(
        ["distinguishability", "records", "codes"], ascending=[True, False, True], kind="stable"
    ).head(n)
    grouped["items"] = [len(p) for p in grouped["pattern"]]
    grouped["descriptions"] = [
        "; ".join(_item_description(i, matching.item_codes, names) for i, _ in pat)
        for pat in grouped["pattern"]
    ]
    return grouped[cols].reset_index(drop=True)
