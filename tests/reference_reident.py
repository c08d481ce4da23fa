"""engine/labs/reident.py's patient-days, lab restriction, profiles and ranking as they were before
issue 24's speed-ups (commit cf99e85), kept verbatim to prove the new code gives the same output
(tests/test_reident_reference.py). `restrict_labs` was a method of `PatientDays`; here it is a function
of the same body. Not used by the app."""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.io.progress import Progress
from engine.labs.reident import (
    DAY,
    LAB,
    LAB_COLUMNS,
    MAX_N,
    PATIENT,
    Draws,
    PatientDays,
    Profiles,
    Recall,
    recall_credit,
)


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


def restrict_labs(self, min_orders: int) -> PatientDays:
    """Keep labs ordered on at least `min_orders` patient-days (section 2.3), then drop empty days
    and patients left without days."""
    keep = np.flatnonzero(self.lab_orders() >= min_orders)
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

    `labs` is a validated frame (`engine.io.loaders.load_labs`, or `Dataset.labs`)."""
    missing = [c for c in LAB_COLUMNS if c not in labs.columns]
    if missing:
        raise ValueError(f"lab orders need columns {list(LAB_COLUMNS)}; missing {missing}")
    if len(labs) == 0:
        raise ValueError("no lab orders to analyse")
    p_code, patient_ids = _codes(labs[PATIENT], sort=False)
    day_values = labs[DAY]
    if not (pd.api.types.is_numeric_dtype(day_values) or pd.api.types.is_datetime64_any_dtype(day_values)):
        day_values = day_values.astype(str)
    d_code, day_uniques = _codes(day_values, sort=True)
    lab_values = labs[LAB]
    if not isinstance(lab_values.dtype, pd.CategoricalDtype):
        lab_values = lab_values.astype(str)
    l_code, lab_labels = _codes(lab_values, sort=True)
    n_day_values = max(len(day_uniques), 1)
    uniq_day_key, day_row = _sorted_unique(p_code * n_day_values + d_code)
    n_days = len(uniq_day_key)
    row_patient = uniq_day_key // n_day_values
    n_labs = len(lab_labels)
    cell, _ = _sorted_unique(day_row * n_labs + l_code)
    rows, cols = np.divmod(cell, n_labs)
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
        day_labels=np.asarray(day_uniques)[uniq_day_key % n_day_values],
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
    nonzero columns are gathered (a day orders a few dozen of the labs)."""
    m, n_o = cand.shape
    if sp.issparse(q) and not sp.issparse(centroid):
        q = sp.csr_matrix(q)
        lens = np.diff(q.indptr)
        trial = np.repeat(np.arange(m), lens)
        vals = centroid[cand[trial], q.indices[:, None]] * q.data[:, None]  # (nnz, n_o)
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
