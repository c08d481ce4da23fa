"""Lab orders: uniqueness and one-day re-identification (Johnson et al. 2018, sections 2.2-2.6).

Input is long form `patient_id, day, lab` (ARCHITECTURE section 2). Same-day repeats of a lab count
once (section 2.3.1): a *patient-day* is a binary vector theta over the labs.

- Uniqueness (section 2.2, Figure 3): a patient's set of labs ever ordered; unique when no other
  patient of the population has the same set. The paper compared MD5 hashes of the sets; here each
  set is an exact bitset key (no collisions possible). Figure 3's curve: for each d, among patients
  with at least d days, the share unique (uniqueness is always of the whole set, over all days).
- One-day re-identification (sections 2.4-2.6, Figure 4): patient-day vectors over the labs ordered on
  at least N patient-days ("ordered at least 500 times": counted here as patient-days, after the
  same-day collapse; N = 500 x days / 6,449,310 by default), cosine distance (Eq. 1); a breached
  patient-day is drawn, the true patient is scored by the mean distance of their *other* days, each of
  99 other patients (or, beyond the paper, every other patient) by the mean distance of all their days,
  and the true patient's rank gives Recall@n against the random line n / (number of candidates).

Speed: the mean cosine similarity of a query q to a patient's days is q . c_p, where c_p is the mean of
the patient's L2-normalized day vectors (the *centroid*); the true patient's mean over their other
days is (n_p c_p . q - q . q) / (n_p - 1). So one query against the whole population is one sparse
matrix product, and 99 others are 99 row dot products. `reference_ranks` is the plain pairwise form.

Conventions (stated for determinism): ties in the distance (rounded to 1e-10) are broken uniformly at
random *in expectation*: with b candidates strictly closer and t tied with the true patient,
Recall@n credits min(1, max(0, (n - b) / (t + 1))). Patient-days left empty after dropping rare labs
are dropped, and so are patients left without days. All draws come from `numpy.random.default_rng(seed)`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.io.errors import UserError
from engine.io.progress import Progress

PATIENT, DAY, LAB = "patient_id", "day", "lab"
LAB_COLUMNS = (PATIENT, DAY, LAB)
PAPER_PATIENT_DAYS = 6_449_310  # Johnson 2018, section 3.1
PAPER_MIN_ORDERS = 500  # section 2.3
PAPER_CANDIDATES = 100  # the true patient and 99 others (section 2.5)
MAX_N = 100  # Recall@n for n = 1..100 (section 2.6)

Against = Literal["99", "population"]
Query = Literal["one_day", "all_days"]


class LabDataError(UserError, ValueError):
    """Lab orders or draw settings that cannot give a re-identification run; the message says why."""


# ------------------------------------------------------------------------------------ input
def _codes(values: pd.Series, sort: bool) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes and their labels (categorical codes used directly when available)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        cats = values.cat.remove_unused_categories()
        codes = cats.cat.codes.to_numpy().astype(np.int64)
        labels = cats.cat.categories.to_numpy()
        if sort:
            order = np.argsort(labels, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(len(order))
            return rank[codes], labels[order]
        return codes, labels
    codes, labels = pd.factorize(values, sort=sort)
    return codes.astype(np.int64), np.asarray(labels)


def _patient_codes(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """`_codes(values, sort=False)`; a text column holding each patient's rows together (a file sorted
    by patient, as the loaders' and the sample's) is coded from its runs, not by hashing every row: at
    the paper's scale 9.5 million ids, 0.2-0.6 s of the Lab orders page's first opening (issue 36)."""
    if not isinstance(values.array, pd.arrays.ArrowStringArray) or len(values) < 2 or values.hasnans:
        return _codes(values, sort=False)
    import pyarrow as pa
    import pyarrow.compute as pc

    col = pa.array(values.array)  # its Arrow data (`__arrow_array__`)
    new = np.empty(len(col), dtype=bool)
    new[0] = True
    new[1:] = pc.not_equal(col.slice(1), col.slice(0, len(col) - 1)).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(new)
    firsts = col.take(pa.array(starts))
    if pc.count_distinct(firsts).as_py() != len(starts):  # a patient's rows apart: hash them
        return _codes(values, sort=False)
    return np.cumsum(new) - 1, np.asarray(firsts.to_pylist(), dtype=object)


def among(patient_ids: np.ndarray, ids: Sequence[str]) -> np.ndarray:
    """(len(patient_ids),) bool: which of the lab orders' patients are among `ids` (a group of up to
    1.37 million ids, issue 36): the ids are looked up in a table of the few patients with lab orders,
    never put in a Python set one by one."""
    wanted = pd.Index(np.asarray(ids, dtype=object), dtype=object)
    found = wanted[wanted.isin(patient_ids)]
    return np.asarray(pd.Index(patient_ids).isin(found), dtype=bool)


# ------------------------------------------------------------------------------------ data model
@dataclass(frozen=True, eq=False)
class PatientDays:
    """Binary patient-day x lab matrix (section 2.3.1), rows grouped by patient.

    Rows `patient_ptr[p]:patient_ptr[p+1]` are the days of patient p, in day order (numeric days
    numerically, other labels as text, so ISO dates sort chronologically). Patients keep the order of
    their first appearance (category order for a categorical column); labs are sorted as text.
    """

    patient_ids: np.ndarray  # (n_patients,) str
    labs: np.ndarray  # (n_labs,) str
    patient_ptr: np.ndarray  # (n_patients + 1,) int64
    day_labels: np.ndarray  # (n_days,) the day label of each row
    matrix: sp.csr_matrix  # (n_days, n_labs) 0/1 float32, sorted indices

    @property
    def n_patients(self) -> int:
        return len(self.patient_ids)

    @property
    def n_days(self) -> int:
        return self.matrix.shape[0]

    @property
    def n_labs(self) -> int:
        return self.matrix.shape[1]

    @property
    def days_per_patient(self) -> np.ndarray:
        return np.diff(self.patient_ptr)

    @cached_property
    def day_patient(self) -> np.ndarray:
        """(n_days,) patient index of each patient-day."""
        return np.repeat(np.arange(self.n_patients), self.days_per_patient)

    @cached_property
    def fingerprint(self) -> str:
        """sha256 over ids, labs and the matrix structure (a cache key for trained models)."""
        h = hashlib.sha256()
        for part in (self.patient_ids, self.labs):
            h.update("\x1f".join(map(str, part)).encode())
        for arr in (self.patient_ptr, self.matrix.indptr, self.matrix.indices):
            h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
        return h.hexdigest()[:32]

    def lab_orders(self) -> np.ndarray:
        """(n_labs,) number of patient-days on which each lab was ordered."""
        return np.bincount(self.matrix.indices, minlength=self.n_labs)

    def _unchanged_by(self, keep: np.ndarray) -> bool:
        """Whether `restrict_labs` keeping the labs `keep` would rebuild exactly these patient-days: every
        lab kept, every day and patient non-empty, the matrix canonical (sorted, no duplicate entries),
        int64 pointers."""
        m = self.matrix
        return (
            len(keep) == self.n_labs
            and bool(np.all(np.diff(m.indptr) > 0))
            and bool(np.all(self.days_per_patient > 0))
            and m.has_canonical_format
            and self.patient_ptr.dtype == np.int64
        )

    def restrict_labs(self, min_orders: int) -> PatientDays:
        """Keep labs ordered on at least `min_orders` patient-days (section 2.3), then drop empty days
        and patients left without days. Nothing to drop (every lab kept, no day or patient left empty):
        these patient-days themselves, as the restriction would build them again."""
        keep = np.flatnonzero(self.lab_orders() >= min_orders)
        if self._unchanged_by(keep):
            return self
        m = self.matrix[:, keep].tocsr()
        m.sort_indices()
        nonempty = np.diff(m.indptr) > 0
        m = m[nonempty]
        kept_per_patient = np.bincount(self.day_patient[nonempty], minlength=self.n_patients)
        has = kept_per_patient > 0
        ptr = np.concatenate([[0], np.cumsum(kept_per_patient[has])]).astype(np.int64)
        return PatientDays(
            patient_ids=self.patient_ids[has],
            labs=self.labs[keep],
            patient_ptr=ptr,
            day_labels=self.day_labels[nonempty],
            matrix=m,
        )


def patient_days(labs: pd.DataFrame) -> PatientDays:
    """Collapse lab orders to binary patient-day vectors (section 2.3.1).

    `labs` is a validated frame (`engine.io.loaders.load_labs`, or `Dataset.labs`). Integer days are
    keyed by their offset from the first day, not ranked; a file sorted by patient, day and lab (as
    the loaders' and the sample's are) is taken as it stands, with no sort (`_sorted_unique`)."""
    missing = [c for c in LAB_COLUMNS if c not in labs.columns]
    if missing:
        raise ValueError(f"lab orders need columns {list(LAB_COLUMNS)}; missing {missing}")
    if len(labs) == 0:
        raise ValueError("no lab orders to analyse")
    p_code, patient_ids = _patient_codes(labs[PATIENT])
    lab_values = labs[LAB]
    if not isinstance(lab_values.dtype, pd.CategoricalDtype):
        lab_values = lab_values.astype(str)
    l_code, lab_labels = _codes(lab_values, sort=True)
    d_code, n_day_values, day_label = _day_codes(labs[DAY], len(patient_ids))
    uniq_day_key, day_row = _sorted_unique(p_code * n_day_values + d_code)
    n_days = len(uniq_day_key)
    row_patient = uniq_day_key // n_day_values
    n_labs = len(lab_labels)
    cell = day_row * n_labs + l_code
    if len(cell) and bool(np.all(cell[1:] > cell[:-1])):  # sorted, no same-day repeat: the rows as they are
        rows, cols = day_row, l_code
    else:
        rows, cols = np.divmod(_sorted_unique(cell)[0], n_labs)
    indptr = np.zeros(n_days + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_days), out=indptr[1:])
    matrix = sp.csr_matrix(
        (np.ones(len(cols), dtype=np.float32), cols.astype(np.int32), indptr), shape=(n_days, n_labs)
    )
    patient_ptr = np.zeros(len(patient_ids) + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_patient, minlength=len(patient_ids)), out=patient_ptr[1:])
    return PatientDays(
        patient_ids=np.asarray(patient_ids).astype(str).astype(object),
        labs=np.asarray(lab_labels).astype(str).astype(object),
        patient_ptr=patient_ptr,
        day_labels=day_label(uniq_day_key % n_day_values),
        matrix=matrix,
    )


def _day_codes(
    values: pd.Series, n_patients: int
) -> tuple[np.ndarray, int, Callable[[np.ndarray], np.ndarray]]:
    """(codes, number of code values, code -> day label) of the day column, codes in day order (numeric
    days numerically, other labels as text). Integer days: their offset from the first day when
    patients x day span fits in int64 (no ranking); otherwise each distinct day's rank."""
    if isinstance(values.dtype, np.dtype) and values.dtype.kind in "iu" and values.dtype.itemsize <= 8:
        days = values.to_numpy()
        first, last = int(days.min()), int(days.max())
        span = last - first + 1
        if span * max(n_patients, 1) < 2**62 and last < 2**63:
            codes = days.astype(np.int64) - first
            return codes, span, lambda c: (c + first).astype(values.dtype)
    if not (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_datetime64_any_dtype(values)):
        values = values.astype(str)
    codes, uniques = _codes(values, sort=True)
    labels = np.asarray(uniques)
    return codes, max(len(uniques), 1), lambda c: labels[c]


def concat_patient_days(parts: list[PatientDays]) -> PatientDays:
    """Stack patient-days of disjoint patient sets (e.g. built chunk by chunk from a large file) over
    the union of their labs (sorted as text)."""
    labs = np.array(sorted({str(x) for p in parts for x in p.labs}), dtype=object)
    index = pd.Index(labs)
    mats, ptrs, offset = [], [np.zeros(1, dtype=np.int64)], 0
    for p in parts:
        m = p.matrix.tocsr()
        cols = index.get_indexer(p.labs)[m.indices]
        mats.append(sp.csr_matrix((m.data, cols, m.indptr), shape=(m.shape[0], len(labs))))
        ptrs.append(p.patient_ptr[1:] + offset)
        offset += p.n_days
    ids = np.concatenate([p.patient_ids for p in parts])
    if len(pd.unique(ids)) != len(ids):
        raise ValueError("the parts share patients: concatenate disjoint patient sets only")
    matrix = sp.vstack(mats, format="csr")
    matrix.sort_indices()
    return PatientDays(
        patient_ids=ids,
        labs=labs,
        patient_ptr=np.concatenate(ptrs),
        day_labels=np.concatenate([p.day_labels for p in parts]),
        matrix=matrix,
    )


def _sorted_unique(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values (sorted) and the inverse index; skips the sort when `keys` is already sorted
    (as files sorted by patient, day and lab are), and never uses numpy's hash-based unique (slow here)."""
    keys = np.asarray(keys, dtype=np.int64)
    if len(keys) == 0:
        return keys, keys
    presorted = bool(np.all(keys[1:] >= keys[:-1]))
    order = None if presorted else np.argsort(keys, kind="stable")
    sk = keys if order is None else keys[order]
    first = np.empty(len(sk), dtype=bool)
    first[0] = True
    np.not_equal(sk[1:], sk[:-1], out=first[1:])
    inv_sorted = np.cumsum(first) - 1
    if order is None:
        return sk[first], inv_sorted
    inverse = np.empty_like(inv_sorted)
    inverse[order] = inv_sorted
    return sk[first], inverse


def _patient_sum(matrix: sp.csr_matrix, patient_ptr: np.ndarray) -> sp.csr_matrix:
    """(n_patients, n_cols) sum of each patient's rows."""
    n_patients = len(patient_ptr) - 1
    owner = np.repeat(np.arange(n_patients), np.diff(patient_ptr))
    agg = sp.csr_matrix(
        (np.ones(len(owner), dtype=np.float32), (owner, np.arange(len(owner)))),
        shape=(n_patients, matrix.shape[0]),
    )
    out = (agg @ matrix).tocsr()
    out.sort_indices()
    return out


def default_min_orders(n_days: int) -> int:
    """The paper's 500 orders at 6,449,310 patient-days, scaled to `n_days` (at least 1)."""
    return max(1, round(PAPER_MIN_ORDERS * n_days / PAPER_PATIENT_DAYS))


# ------------------------------------------------------------------------------------ uniqueness
def lab_set_keys(days: PatientDays, block_bytes: int = 64_000_000) -> np.ndarray:
    """(n_patients, ceil(n_labs / 64)) uint64: each patient's set of labs ever ordered as a bitset.

    Equal rows iff equal sets, so this is an exact form of the paper's MD5 of the standardized string
    (section 2.2). Built in blocks of patients (a dense boolean block of at most `block_bytes`).
    """
    n_p, n_labs = days.n_patients, days.n_labs
    words = max(1, -(-n_labs // 64))
    keys = np.zeros((n_p, words * 8), dtype=np.uint8)
    m = days.matrix
    step = max(1, block_bytes // max(n_labs, 1))
    for p0 in range(0, n_p, step):
        p1 = min(p0 + step, n_p)
        r0, r1 = days.patient_ptr[p0], days.patient_ptr[p1]
        block = np.zeros((p1 - p0, words * 64), dtype=bool)
        rows = np.repeat(np.arange(p1 - p0), np.diff(days.patient_ptr[p0 : p1 + 1]))
        nnz_per_row = np.diff(m.indptr[r0 : r1 + 1])
        block[np.repeat(rows, nnz_per_row), m.indices[m.indptr[r0] : m.indptr[r1]]] = True
        keys[p0:p1] = np.packbits(block, axis=1)
    return keys.view(np.uint64)


def lab_set_classes(days: PatientDays) -> np.ndarray:
    """(n_patients,) class id of each patient's lab set: equal ids iff equal sets (exact)."""
    return key_classes(lab_set_keys(days))


def key_classes(keys: np.ndarray) -> np.ndarray:
    """(n,) class id of each row of a bitset key matrix: equal ids iff equal rows."""
    if len(keys) == 0:
        return np.zeros(0, dtype=np.int64)
    frame = pd.DataFrame(keys)
    return frame.groupby(list(frame.columns), sort=False).ngroup().to_numpy().astype(np.int64)


@dataclass(frozen=True)
class Uniqueness:
    """Per patient: number of lab days and how many patients share their exact lab set."""

    patient_ids: np.ndarray
    days: np.ndarray
    class_size: np.ndarray  # patients sharing this patient's exact lab set (1 = unique)

    @property
    def unique(self) -> np.ndarray:
        return self.class_size == 1

    @property
    def share_unique(self) -> float:
        return float(self.unique.mean()) if len(self.unique) else 0.0

    def by_days(self, max_days: int | None = None) -> pd.DataFrame:
        """Figure 3: rows `days` d, `patients` with at least d days, `unique` of them, `share_unique`."""
        top = int(self.days.max()) if len(self.days) else 0
        top = top if max_days is None else min(top, max_days)
        total = np.bincount(self.days, minlength=top + 2)
        uniq = np.bincount(self.days[self.unique], minlength=top + 2)
        at_least = np.cumsum(total[::-1])[::-1]
        uniq_at_least = np.cumsum(uniq[::-1])[::-1]
        d = np.arange(1, top + 1)
        pts = at_least[d]
        return pd.DataFrame(
            {
                "days": d,
                "patients": pts,
                "unique": uniq_at_least[d],
                "share_unique": np.where(pts > 0, uniq_at_least[d] / np.maximum(pts, 1), np.nan),
            }
        )


def uniqueness(days: PatientDays) -> Uniqueness:
    """Section 2.2 / Figure 3: which patients' sets of labs ever ordered no other patient has."""
    return uniqueness_of_keys(days.patient_ids, days.days_per_patient, lab_set_keys(days))


def uniqueness_of_keys(patient_ids: np.ndarray, days: np.ndarray, keys: np.ndarray) -> Uniqueness:
    """`uniqueness` from each patient's lab-set bitset (`lab_set_keys`, over one vocabulary of labs
    for every patient: e.g. gathered shard by shard, `engine.scale.shards.sharded_uniqueness`)."""
    cls = key_classes(keys)
    class_size = np.bincount(cls)[cls] if len(cls) else np.zeros(0, dtype=np.int64)
    return Uniqueness(
        patient_ids=patient_ids,
        days=np.asarray(days).astype(np.int64),
        class_size=class_size.astype(np.int64),
    )


# ------------------------------------------------------------------------------------ re-identification
def normalize_rows(vectors: sp.spmatrix | np.ndarray) -> sp.csr_matrix | np.ndarray:
    """L2-normalize rows (zero rows stay zero): cosine similarity becomes a dot product (Eq. 1)."""
    if sp.issparse(vectors):
        v = sp.csr_matrix(vectors, dtype=np.float64)
        norms = np.sqrt(np.asarray(v.multiply(v).sum(axis=1)).ravel())
        inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        return sp.csr_matrix(sp.diags(inv) @ v)
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1)
    inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return v * inv[:, None]


@dataclass(frozen=True, eq=False)
class Profiles:
    """Normalized day vectors and per-patient centroids (means of normalized day vectors)."""

    unit: sp.csr_matrix | np.ndarray  # (n_days, dim)
    centroid: sp.csr_matrix | np.ndarray  # (n_patients, dim)
    days_per_patient: np.ndarray


def profiles(
    days: PatientDays, vectors: sp.spmatrix | np.ndarray | None = None, dense_limit: int = 30_000_000
) -> Profiles:
    """Centroids of `vectors` (default: the raw binary day vectors) per patient of `days`; dense when
    they have at most `dense_limit` entries, else sparse."""
    v = days.matrix if vectors is None else vectors
    if v.shape[0] != days.n_days:
        raise ValueError(f"vectors have {v.shape[0]} rows, expected one per patient-day ({days.n_days})")
    unit = normalize_rows(v)
    counts = days.days_per_patient
    if sp.issparse(unit):
        sums = _patient_sum(unit, days.patient_ptr)
        centroid = sp.csr_matrix(sp.diags(1.0 / np.maximum(counts, 1)) @ sums)
        if centroid.shape[0] * centroid.shape[1] <= dense_limit:  # dense rows gather faster
            centroid = centroid.toarray()
    else:
        sums = np.add.reduceat(unit, days.patient_ptr[:-1], axis=0) if len(unit) else unit
        centroid = sums / np.maximum(counts, 1)[:, None]
    return Profiles(unit=unit, centroid=centroid, days_per_patient=counts)


@dataclass(frozen=True, eq=False)
class Draws:
    """The seeded draws of a simulation study, shared by raw and latent runs (for pairing).

    `known` is the patient whose data the attacker holds (the breached day's owner, or the patient
    whose days are all known); `target` is the patient the ranking treats as the true one, which is
    `known` except in the null model `shuffled_identities`.
    """

    known: np.ndarray  # (simulations, trials)
    breached_day: np.ndarray  # (simulations, trials) breached row (-1 for all_days queries)
    target: np.ndarray  # (simulations, trials)
    candidates: np.ndarray | None  # (simulations, trials, n_others) other patients, or None = everyone
    query: Query
    against: Against
    n_candidates: int  # the true patient included

    def shuffled_identities(self, seed: int, n_patients: int) -> Draws:
        """Null model: the identity called "true" is drawn uniformly from the ranked patients
        (the target and its candidates), independently of the data, so Recall@n is exactly n / n_candidates
        in expectation. The breached day still leaves the released data."""
        rng = np.random.default_rng(seed)
        target = self.target.copy()
        if self.candidates is None:
            target = rng.integers(0, n_patients, size=target.shape)
            return Draws(
                self.known, self.breached_day, target, None, self.query, self.against, self.n_candidates
            )
        cand = self.candidates.copy()
        n_o = cand.shape[2]
        pick = rng.integers(0, n_o + 1, size=target.shape)
        s_idx, t_idx = np.nonzero(pick < n_o)
        slot = pick[s_idx, t_idx]
        old = target[s_idx, t_idx].copy()
        target[s_idx, t_idx] = cand[s_idx, t_idx, slot]
        cand[s_idx, t_idx, slot] = old
        return Draws(self.known, self.breached_day, target, cand, self.query, self.against, self.n_candidates)


def draw_queries(
    days: PatientDays,
    trials: int = 100,
    simulations: int = 100,
    against: Against = "99",
    query: Query = "one_day",
    seed: int = 0,
) -> Draws:
    """Draw breached records and candidate sets (section 2.5).

    `one_day`: a patient-day drawn uniformly among the days of patients with at least two days (the
    true patient must keep another day). `all_days`: a patient drawn uniformly; the attacker knows every
    day of theirs. `against="99"`: 99 other patients drawn uniformly without replacement (all others
    when fewer); `"population"`: every other patient.
    """
    if trials < 1 or simulations < 1:
        raise LabDataError("trials and simulations must be at least 1")
    if against not in ("99", "population"):
        raise LabDataError(f"against must be '99' or 'population', not {against!r}")
    if query not in ("one_day", "all_days"):
        raise LabDataError(f"query must be 'one_day' or 'all_days', not {query!r}")
    n_p = days.n_patients
    if n_p < 2:
        raise LabDataError("re-identification needs at least two patients with lab days")
    rng = np.random.default_rng(seed)
    total = simulations * trials
    if query == "one_day":
        eligible = np.flatnonzero(days.days_per_patient[days.day_patient] >= 2)
        if len(eligible) == 0:
            raise LabDataError("no patient has two or more lab days: one-day re-identification needs them")
        breached = eligible[rng.integers(0, len(eligible), size=total)]
        known = days.day_patient[breached]
    else:
        known = rng.integers(0, n_p, size=total)
        breached = np.full(total, -1, dtype=np.int64)
    candidates = None
    if against == "99":
        n_others = min(PAPER_CANDIDATES - 1, n_p - 1)
        c = _floyd_samples(rng, n_p - 1, n_others, total)
        candidates = (c + (c >= known[:, None])).reshape(simulations, trials, n_others)
        n_cand = n_others + 1
    else:
        n_cand = n_p
    known = known.reshape(simulations, trials)
    return Draws(
        known=known,
        breached_day=breached.reshape(simulations, trials),
        target=known.copy(),
        candidates=candidates,
        query=query,
        against=against,
        n_candidates=n_cand,
    )


def _floyd_samples(rng: np.random.Generator, n: int, k: int, rows: int) -> np.ndarray:
    """(rows, k) distinct integers in [0, n) per row, each row a uniform k-subset (Floyd's algorithm,
    vectorized over rows)."""
    out = np.empty((rows, k), dtype=np.int64)
    for col, j in enumerate(range(n - k, n)):
        t = rng.integers(0, j + 1, size=rows)
        seen = (out[:, :col] == t[:, None]).any(axis=1)
        out[:, col] = np.where(seen, j, t)
    return out


def _row_dots(a, rows_a: np.ndarray, b, rows_b: np.ndarray, chunk: int = 20_000) -> np.ndarray:
    """a[rows_a[i]] . b[rows_b[i]] for each i (either side sparse or dense), in chunks."""
    out = np.empty(len(rows_a), dtype=np.float64)
    for s in range(0, len(rows_a), chunk):
        ra, rb = rows_a[s : s + chunk], rows_b[s : s + chunk]
        if sp.issparse(a) and sp.issparse(b):
            out[s : s + chunk] = np.asarray(a[ra].multiply(b[rb]).sum(axis=1)).ravel()
        else:
            out[s : s + chunk] = np.einsum("ij,ij->i", _dense(a[ra]), _dense(b[rb]))
    return out


def _candidate_sims(centroid, cand: np.ndarray, q) -> np.ndarray:
    """(m, n_o) centroid[cand[i, j]] . q[i]. With dense centroids and sparse queries only the query's
    nonzero columns are gathered (a day orders a few dozen of the labs), by flat position in the
    centroids (one index array, not two broadcast ones)."""
    m, n_o = cand.shape
    if sp.issparse(q) and not sp.issparse(centroid):
        q = sp.csr_matrix(q)
        lens = np.diff(q.indptr)
        trial = np.repeat(np.arange(m), lens)
        flat = np.ascontiguousarray(centroid).ravel()
        at = cand[trial] * centroid.shape[1] + q.indices[:, None]
        vals = np.take(flat, at)  # (nnz, n_o)
        vals *= q.data[:, None]
        out = np.zeros((m, n_o))
        has = lens > 0
        if q.nnz:
            out[has] = np.add.reduceat(vals, q.indptr[:-1][has], axis=0)
        return out
    rows = _dense(centroid[cand.ravel()]).reshape(m, n_o, -1)
    return np.einsum("ijk,ik->ij", rows, _dense(q))


def _dense(m) -> np.ndarray:
    return m.toarray() if sp.issparse(m) else np.asarray(m)


def _round(d: np.ndarray) -> np.ndarray:
    return np.round(d, 10)


def true_patient_ranks(
    prof: Profiles, draws: Draws, progress: Progress | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(b, t) per draw, shape (simulations, trials): candidates strictly closer to the query than the
    true patient, and candidates tied with it (cosine distances rounded to 1e-10).

    A patient's score is the mean cosine distance of their days to the query; the breached day is not
    in the released data, so its owner is scored on their other days (section 2.5). Under `all_days`
    the query is all the known patient's days and the score is the mean over all (query day, day) pairs.
    """
    shape = draws.target.shape
    known = draws.known.ravel()
    target = draws.target.ravel()
    breached = draws.breached_day.ravel()
    n = len(target)
    one_day = draws.query == "one_day"
    if one_day:
        q_src, q_rows = prof.unit, breached
        self_dot = _row_dots(prof.unit, breached, prof.unit, breached)
    else:
        q_src, q_rows = prof.centroid, known
        self_dot = np.zeros(n)
    counts = prof.days_per_patient.astype(np.float64)

    def owner_fix(sim: np.ndarray, patients: np.ndarray, who: np.ndarray, sd: np.ndarray) -> np.ndarray:
        """Mean over the owner's other days: (n_p * sim - q.q) / (n_p - 1)."""
        if not one_day:
            return sim
        own = patients == who
        n_p = counts[patients[own]]
        sim = sim.copy()
        sim[own] = (n_p * sim[own] - sd[own]) / np.maximum(n_p - 1, 1)
        return sim

    true_sim = owner_fix(_row_dots(prof.centroid, target, q_src, q_rows), target, known, self_dot)
    true_d = _round(1.0 - true_sim)
    better = np.empty(n, dtype=np.int64)
    ties = np.empty(n, dtype=np.int64)
    if draws.candidates is not None:
        cand = draws.candidates.reshape(n, -1)
        n_o = cand.shape[1]
        dim = prof.centroid.shape[1]
        chunk = max(1, 8_000_000 // max(n_o * min(dim, 64), 1))
        for s in range(0, n, chunk):
            sl = slice(s, min(s + chunk, n))
            c = cand[sl]
            sims = _candidate_sims(prof.centroid, c, q_src[q_rows[sl]])
            sims = owner_fix(sims.ravel(), c.ravel(), np.repeat(known[sl], n_o), np.repeat(self_dot[sl], n_o))
            d = _round(1.0 - sims.reshape(c.shape))
            better[sl] = (d < true_d[sl, None]).sum(axis=1)
            ties[sl] = (d == true_d[sl, None]).sum(axis=1)
            if progress:
                progress(sl.stop / n, f"ranked {sl.stop} of {n} queries against {n_o} others each")
        return better.reshape(shape), ties.reshape(shape)
    # whole population: one sparse product per chunk of queries
    n_pat = prof.centroid.shape[0]
    chunk = max(1, 4_000_000 // max(n_pat, 1))
    for s in range(0, n, chunk):
        sl = slice(s, min(s + chunk, n))
        cols = np.arange(sl.stop - sl.start)
        q = _dense(q_src[q_rows[sl]]).T  # (dim, c)
        sim = np.asarray(prof.centroid @ q, dtype=np.float64)  # (n_pat, c)
        if one_day:
            k = known[sl]
            sim[k, cols] = (counts[k] * sim[k, cols] - self_dot[sl]) / np.maximum(counts[k] - 1, 1)
        d = _round(1.0 - sim)
        d[target[sl], cols] = np.inf  # the true patient is not its own candidate
        td = true_d[sl]
        better[sl] = (d < td[None, :]).sum(axis=0)
        ties[sl] = (d == td[None, :]).sum(axis=0)
        if progress:
            progress(sl.stop / n, f"ranked {sl.stop} of {n} queries against the whole population")
    return better.reshape(shape), ties.reshape(shape)


def recall_credit(better: np.ndarray, ties: np.ndarray, ns: np.ndarray) -> np.ndarray:
    """Expected hit at each n under uniform tie-breaking: clip((n - b) / (t + 1), 0, 1); shape (..., len(ns))."""
    b = better[..., None].astype(np.float64)
    t = ties[..., None].astype(np.float64)
    return np.clip((ns - b) / (t + 1.0), 0.0, 1.0)


@dataclass(frozen=True, eq=False)
class Recall:
    """Recall@n per simulation (section 2.6, Figure 4)."""

    n: np.ndarray  # (len,) 1..100
    per_simulation: np.ndarray  # (simulations, len(n))
    n_candidates: int
    trials: int
    against: str
    query: str

    @property
    def random(self) -> np.ndarray:
        """The random line: n / number of candidates (true patient included)."""
        return np.minimum(self.n / self.n_candidates, 1.0)

    @property
    def mean(self) -> np.ndarray:
        return self.per_simulation.mean(axis=0)

    def spread(self, low: float = 2.5, high: float = 97.5) -> tuple[np.ndarray, np.ndarray]:
        """Percentiles of Recall@n over the simulations (Figure 4, right panel)."""
        return (
            np.percentile(self.per_simulation, low, axis=0),
            np.percentile(self.per_simulation, high, axis=0),
        )

    def at(self, n: int) -> float:
        return float(self.mean[int(n) - 1])

    def to_frame(self) -> pd.DataFrame:
        """Rows n, recall (mean over simulations), random, recall_low / recall_high (2.5 / 97.5 %)."""
        lo, hi = self.spread()
        return pd.DataFrame(
            {"n": self.n, "recall": self.mean, "random": self.random, "recall_low": lo, "recall_high": hi}
        )


def recall_at_n(
    days: PatientDays,
    draws: Draws,
    vectors: sp.spmatrix | np.ndarray | None = None,
    progress: Progress | None = None,
    prof: Profiles | None = None,
) -> Recall:
    """Recall@n, n = 1..100, of the true patient for each simulation (sections 2.5-2.6).

    `vectors` replaces the raw day vectors (e.g. the VAE's latent vectors, section 3.3.2); pass the
    same `draws` to compare raw and latent on the same breached records and candidates.
    """
    prof = prof if prof is not None else profiles(days, vectors)
    better, ties = true_patient_ranks(prof, draws, progress)
    ns = np.arange(1, MAX_N + 1, dtype=np.float64)
    per = recall_credit(better, ties, ns).mean(axis=1)
    return Recall(
        n=np.arange(1, MAX_N + 1),
        per_simulation=per,
        n_candidates=draws.n_candidates,
        trials=draws.target.shape[1],
        against=draws.against,
        query=draws.query,
    )


def paired_test(raw: Recall, latent: Recall) -> pd.DataFrame:
    """Figure 6: per n, mean raw and latent Recall@n and the matched-pairs t-test over simulations
    (scipy.stats.ttest_rel; NaN p where the two never differ)."""
    from scipy.stats import ttest_rel

    with np.errstate(invalid="ignore", divide="ignore"):
        res = ttest_rel(raw.per_simulation, latent.per_simulation, axis=0)
    return pd.DataFrame(
        {
            "n": raw.n,
            "recall_raw": raw.mean,
            "recall_latent": latent.mean,
            "t": np.asarray(res.statistic, dtype=float),
            "p": np.asarray(res.pvalue, dtype=float),
        }
    )


# ------------------------------------------------------------------------------------ reference
def reference_ranks(
    days: PatientDays, draws: Draws, vectors: np.ndarray | sp.spmatrix | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Plain implementation of section 2.5 (one cosine distance per pair of day vectors, means per
    patient, no centroid algebra): for tests and the benchmark's speed-up."""
    v = _dense(days.matrix if vectors is None else vectors).astype(np.float64)
    ptr = days.patient_ptr
    shape = draws.target.shape
    better = np.zeros(shape, dtype=np.int64)
    ties = np.zeros(shape, dtype=np.int64)

    def cos_dist(a: np.ndarray, b: np.ndarray) -> float:
        na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
        return 1.0 - (float(a @ b) / (na * nb) if na > 0 and nb > 0 else 0.0)

    for s in range(shape[0]):
        for i in range(shape[1]):
            k, t, r = int(draws.known[s, i]), int(draws.target[s, i]), int(draws.breached_day[s, i])
            known = [v[r]] if draws.query == "one_day" else [v[j] for j in range(ptr[k], ptr[k + 1])]

            def score(p: int, known=known, r=r) -> float:
                rows = [v[j] for j in range(ptr[p], ptr[p + 1]) if j != r]  # the breached day is not released
                return round(float(np.mean([cos_dist(q, x) for q in known for x in rows])), 10)

            true_d = score(t)
            others = (
                draws.candidates[s, i]
                if draws.candidates is not None
                else [p for p in range(days.n_patients) if p != t]
            )
            for p in others:
                d = score(int(p))
                better[s, i] += d < true_d
                ties[s, i] += d == true_d
    return better, ties
