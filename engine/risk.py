"""Distinguishability and its summaries: the one module that verifies every release.

ARCHITECTURE section 3. The distinguishability of a record is the number of candidate records
consistent with what the attacker knows (Tamersoy 2010, "Risk Measure"; Loukides 2010; Heatherly
2013). A candidate is consistent when, for every known item t, it holds items c whose codes are all
among the codes t stands for (codes(c) subset of codes(t): an original code inside a generalized item,
or the very same generalized item); with repeat counts, at least as many such occurrences.

Under `single_visit` knowledge the known set is one visit's item set, and a record's
distinguishability is the minimum over its visits; under `all_visits` it is the whole record. A
record (or visit) with nothing left to know is consistent with every candidate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.adversary import Adversary, Knowledge
from engine.records import Records
from engine.release import Release, codes_of


# ------------------------------------------------------------------------------------ kernel
def match_matrix(
    candidate_items: np.ndarray,
    target_items: np.ndarray,
    item_codes: Mapping[str, frozenset[str]] | None = None,
) -> sp.csr_matrix:
    """(n_candidate_items, n_target_items) 0/1: candidate item c matches target item t when
    codes(c) is a subset of codes(t)."""
    code_to_targets: dict[str, list[int]] = {}
    for j, t in enumerate(target_items):
        for c in codes_of(str(t), item_codes):
            code_to_targets.setdefault(c, []).append(j)
    rows, cols = [], []
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
            rows.append(i)
            cols.append(j)
    data = np.ones(len(rows), dtype=np.int32)
    return sp.csr_matrix((data, (rows, cols)), shape=(len(candidate_items), len(target_items)))


def _projected_candidates(
    targets: Records, candidates: Records, item_codes, count_repeats: bool
) -> sp.csc_matrix:
    """(n_candidates, n_target_items): per candidate, how many occurrences match each target item."""
    same_vocab = (
        candidates.items is targets.items
        or (len(candidates.items) == len(targets.items) and (candidates.items == targets.items).all())
    )
    base = candidates.patient_item_counts if count_repeats else candidates.patient_item_sets
    if same_vocab and not item_codes:
        proj = base.astype(np.int32)
    else:
        m = match_matrix(candidates.items, targets.items, item_codes)
        proj = (base.astype(np.int32) @ m).tocsr()
    if not count_repeats:
        proj.data[:] = 1
    proj = proj.tocsc()
    proj.sort_indices()
    return proj


def _known_sets(targets: Records, knowledge: Knowledge, count_repeats: bool) -> tuple[sp.csr_matrix, np.ndarray]:
    """Rows of known (item, count) sets and the target record each row belongs to."""
    if knowledge == "single_visit":
        return targets.visit_item_sets, targets.visit_patient
    m = targets.patient_item_counts if count_repeats else targets.patient_item_sets
    return m, np.arange(targets.n_patients)


def distinguishability(
    targets: Records,
    candidates: Records,
    knowledge: Knowledge,
    *,
    item_codes: Mapping[str, frozenset[str]] | None = None,
    count_repeats: bool = False,
) -> np.ndarray:
    """(n_target_records,) number of candidate records consistent with each target record.

    Known sets are deduplicated and counted once; each count starts from the known item with the
    fewest candidate postings and filters by the others.
    """
    proj = _projected_candidates(targets, candidates, item_codes, count_repeats)
    known, owner = _known_sets(targets, knowledge, count_repeats and knowledge == "all_visits")
    known = known.tocsr()
    known.sort_indices()
    n_cand = candidates.n_patients
    post_len = np.diff(proj.indptr)
    cache: dict[bytes, int] = {}
    per_row = np.empty(known.shape[0], dtype=np.int64)
    ind, dat, ptr = known.indices, known.data, known.indptr
    for r in range(known.shape[0]):
        items = ind[ptr[r] : ptr[r + 1]]
        thr = dat[ptr[r] : ptr[r + 1]]
        key = items.tobytes() + b"|" + thr.astype(np.int32).tobytes()
        hit = cache.get(key)
        if hit is None:
            hit = _count_consistent(proj, post_len, items, thr, n_cand)
            cache[key] = hit
        per_row[r] = hit
    out = np.full(targets.n_patients, n_cand, dtype=np.int64)
    np.minimum.at(out, owner, per_row)
    return out


def _count_consistent(proj: sp.csc_matrix, post_len, items, thr, n_cand: int) -> int:
    if len(items) == 0:
        return n_cand
    order = np.argsort(post_len[items], kind="stable")
    rows = None
    for j in order:
        t, need = items[j], thr[j]
        r = proj.indices[proj.indptr[t] : proj.indptr[t + 1]]
        v = proj.data[proj.indptr[t] : proj.indptr[t + 1]]
        if rows is None:
            rows = r[v >= need]
        else:
            pos = np.searchsorted(r, rows)
            pos_c = np.minimum(pos, max(len(r) - 1, 0))
            ok = (pos < len(r)) & (r[pos_c] == rows) if len(r) else np.zeros(len(rows), bool)
            ok &= v[pos_c] >= need if len(r) else ok
            rows = rows[ok]
        if len(rows) == 0:
            return 0
    return int(len(rows))


# ------------------------------------------------------------------------------ entry points
def candidates_for(
    adversary: Adversary, released_cohort: Records, population: Records | None, released_population: Records | None = None
) -> Records:
    """The candidate pool: the released cohort (scope cohort), else the released population when the
    method anonymized it, else the original population."""
    if adversary.scope == "cohort":
        return released_cohort
    if released_population is not None:
        return released_population
    if population is None:
        raise ValueError("the population adversary needs the population the cohort was drawn from")
    return population


def original_distinguishability(
    cohort: Records, adversary: Adversary, population: Records | None = None, *, count_repeats: bool = False
) -> np.ndarray:
    """Distinguishability of the original (unreleased) cohort records."""
    cands = candidates_for(adversary, cohort, population)
    return distinguishability(cohort, cands, adversary.knowledge, count_repeats=count_repeats)


def release_distinguishability(release: Release, adversary: Adversary, population: Records | None = None) -> np.ndarray:
    """Distinguishability of every released cohort record, read from the release alone."""
    cands = candidates_for(adversary, release.records, population, release.population)
    return distinguishability(
        release.records,
        cands,
        adversary.knowledge,
        item_codes=release.item_codes,
        count_repeats=release.counts_repeats,
    )


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


@dataclass(frozen=True)
class Verification:
    """The risk engine's verdict on a release: ok when every record has distinguishability >= k."""

    adversary: Adversary
    k: int
    distinguishability: np.ndarray
    patient_ids: np.ndarray

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
    return Verification(adversary, k, dis, release.records.patient_ids)
