"""Differentially private code prevalence tables through OpenDP (issue 39, third bullet).

The table: per code of a stated list of categories, the number of patients holding it. Neighbouring
data differ by one patient (add or remove). A patient adds 1 to each code they hold, so the table's
sensitivity is the number of codes per patient: each patient's codes are first truncated to at most
`max_codes` (a choice that depends on that patient alone: the codes of smallest SHA-256 of (patient id,
code), so every code is as likely to be dropped), which bounds the L1 sensitivity at `max_codes` and the
L2 sensitivity at sqrt(`max_codes`). The noise is OpenDP's, never hand-written: `make_laplace` (pure
epsilon-DP, discrete Laplace over whole counts) or, with a delta, `make_gaussian` under zero-concentrated
DP converted to (epsilon, delta) (`make_zCDP_to_approxDP`, `make_fix_delta`). The noise scale is the
smallest OpenDP's binary search finds whose privacy map at the sensitivity meets the budget, and the
map is checked again on the measurement used. Negative noisy counts read 0 (post-processing).

The categories must not come from the protected records themselves (which codes occur would leak):
`categories` is a public list, e.g. a vocabulary file or the codes of the whole population's events,
which the caller names. The noise is fresh on every call (a seeded noise would void the guarantee), so
only the privacy loss, the scale and the error's distribution are reproducible. Utility is the error
against the exact table (no truncation, no noise): for the steward, never part of what leaves.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.io.errors import UserError
from engine.records import Records

DEFAULT_MAX_CODES = (
    20  # codes per patient kept, the sensitivity (the sample's cohort: median 15, 90th pct 29)
)
MAX_EPSILON = 50.0  # beyond it a budget protects nothing (e^50), and OpenDP's Gaussian map overflows
ALPHA = 0.05  # the accuracy stated: each cell's noise is within it with probability 1 - ALPHA


def check_budget(epsilon: float, delta: float | None = None) -> tuple[float, float | None]:
    """The (epsilon, delta) when epsilon lies in (0, MAX_EPSILON] and delta (if any) in (0, 1), else a
    UserError naming them."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) or not 0 < epsilon <= MAX_EPSILON:
        raise UserError(f"epsilon must be a positive number of at most {MAX_EPSILON:g}, not {epsilon!r}")
    if delta is not None and (
        isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 < delta < 1
    ):
        raise UserError(f"delta must lie strictly between 0 and 1, not {delta!r}")
    return float(epsilon), None if delta is None else float(delta)


def _kept_order(patient_id: str, codes: Sequence[str]) -> list[int]:
    """Positions of `codes` by SHA-256 of (patient id, code): the patient's own order of keeping."""
    key = [hashlib.sha256(f"{patient_id}\x1f{c}".encode()).digest() for c in codes]
    return sorted(range(len(codes)), key=key.__getitem__)


@dataclass(frozen=True, eq=False)
class PatientSets:
    """What a table counts: `matrix` (patients x `labels`, nonzero where the patient holds the label)
    and the patients' ids (the bound's per-patient choice reads them)."""

    matrix: sp.csr_matrix
    patient_ids: np.ndarray
    labels: np.ndarray

    @classmethod
    def of_codes(cls, records: Records) -> PatientSets:
        return cls(records.patient_item_sets.tocsr(), records.patient_ids, records.items.astype(str))

    @classmethod
    def of_phecodes(cls, records: Records) -> PatientSets:
        """Patients x every phecode of the v1.2 map (`engine.utility.phewas.phenotype_matrix`): a
        patient holds a phecode when one of their codes counts toward it."""
        from engine.utility.phewas import phenotype_matrix

        m = phenotype_matrix(records)
        return cls((m.counts > 0).astype(np.int64).tocsr(), records.patient_ids, m.phecodes.astype(str))


def bounded_code_sets(sets: Records | PatientSets, max_codes: int) -> tuple[sp.csr_matrix, int]:
    """(patients x labels) 0/1 with at most `max_codes` labels per patient (`_kept_order`), and how many
    patients lost labels to the bound. `Records` count their codes (`PatientSets.of_codes`)."""
    if isinstance(max_codes, bool) or not isinstance(max_codes, int) or max_codes < 1:
        raise UserError(f"the codes kept per patient must be a whole number of at least 1, not {max_codes!r}")
    if isinstance(sets, Records):
        sets = PatientSets.of_codes(sets)
    mat = sets.matrix.copy()
    mat.sum_duplicates()
    mat.sort_indices()
    rows, cols, truncated = [], [], 0
    items = np.asarray(sets.labels).astype(str)
    for p in range(mat.shape[0]):
        held = mat.indices[mat.indptr[p] : mat.indptr[p + 1]][
            mat.data[mat.indptr[p] : mat.indptr[p + 1]] != 0
        ]
        if len(held) > max_codes:
            truncated += 1
            order = _kept_order(str(sets.patient_ids[p]), items[held].tolist())
            held = np.sort(held[order[:max_codes]])
        rows.extend([p] * len(held))
        cols.extend(held.tolist())
    data = np.ones(len(rows), dtype=np.int64)
    return sp.csr_matrix((data, (rows, cols)), shape=mat.shape), truncated


def _sets(sets: Records | PatientSets) -> PatientSets:
    return PatientSets.of_codes(sets) if isinstance(sets, Records) else sets


def _counts(matrix: sp.csr_matrix, labels: np.ndarray, categories: Sequence[str]) -> np.ndarray:
    """Patients holding each category (a category no patient's label: 0)."""
    per_item = np.asarray((matrix != 0).sum(axis=0)).ravel()
    at = pd.Index(np.asarray(labels).astype(str)).get_indexer(list(categories))
    return np.where(at >= 0, per_item[np.maximum(at, 0)], 0).astype(np.int64)


def exact_prevalence(sets: Records | PatientSets, categories: Sequence[str]) -> np.ndarray:
    """The exact table: patients holding each category, no bound, no noise."""
    s = _sets(sets)
    return _counts(s.matrix, s.labels, categories)


def bounded_prevalence(sets: Records | PatientSets, categories: Sequence[str], max_codes: int) -> np.ndarray:
    """The table the noise is added to: patients holding each category after the bound."""
    s = _sets(sets)
    return _counts(bounded_code_sets(s, max_codes)[0], s.labels, categories)


def _measurement(scale: float, delta: float | None):
    """OpenDP's Laplace on whole counts (L1), or with `delta` its Gaussian (L2) as (epsilon, delta)."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    if delta is None:
        space = dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int)
        return dp.m.make_laplace(*space, scale=scale)
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float)
    return dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(dp.m.make_gaussian(*space, scale=scale)), delta)


@dataclass(frozen=True, eq=False)
class Noise:
    """Counts with OpenDP's noise (`noisy_counts`): `released` whole and at least 0, and what it spent."""

    released: np.ndarray
    mechanism: str
    epsilon: float
    delta: float | None
    scale: float
    accuracy: float


def noisy_counts(counts: np.ndarray, l1: int, epsilon: float, delta: float | None = None) -> Noise:
    """OpenDP's noise on whole `counts` a patient changes by at most `l1` in total, by at most 1 each
    (so the L2 sensitivity is sqrt(`l1`)): the Laplace mechanism without `delta`, the Gaussian with it
    (module docstring). Negative noisy counts read 0 (post-processing)."""
    import opendp.prelude as dp

    epsilon, delta = check_budget(epsilon, delta)
    counts = np.asarray(counts, dtype=np.int64)
    d_in: float = l1 if delta is None else math.sqrt(l1)
    d_out = epsilon if delta is None else (epsilon, delta)
    scale = dp.binary_search_param(lambda s: _measurement(s, delta), d_in=d_in, d_out=d_out)
    meas = _measurement(scale, delta)
    loss = meas.map(d_in)
    spent_eps = float(loss if delta is None else loss[0])
    if spent_eps > epsilon:  # OpenDP's search promises it; checked on the measurement that runs
        raise AssertionError(f"privacy loss {spent_eps} above the budget {epsilon}")
    if len(counts):
        noisy = np.asarray(meas(counts.tolist() if delta is None else counts.astype(float).tolist()))
    else:
        noisy = np.zeros(0)
    if delta is None:
        accuracy = float(dp.laplacian_scale_to_accuracy(scale, ALPHA))
    else:
        accuracy = float(dp.gaussian_scale_to_accuracy(scale, ALPHA))
    return Noise(
        released=np.maximum(np.rint(noisy), 0).astype(np.int64),
        mechanism="laplace" if delta is None else "gaussian",
        epsilon=spent_eps,
        delta=None if delta is None else float(loss[1]),
        scale=float(scale),
        accuracy=accuracy,
    )


@dataclass(frozen=True)
class DPTable:
    """A differentially private prevalence table and what it spent.

    `table`: code, patients (noisy, whole, at least 0). `epsilon`/`delta`: the privacy loss OpenDP's map
    gives at the sensitivity (at most the budget asked). `accuracy`: each cell's noise is within it
    with probability 1 - ALPHA (OpenDP's `*_scale_to_accuracy`)."""

    table: pd.DataFrame
    mechanism: str
    epsilon: float
    delta: float | None
    scale: float
    max_codes: int
    patients: int
    truncated: int
    accuracy: float

    def error(self, exact: np.ndarray) -> dict[str, float]:
        """Mean and largest absolute error against the exact table, cell by cell, and the share of
        cells within the stated accuracy."""
        diff = np.abs(self.table["patients"].to_numpy(dtype=np.float64) - np.asarray(exact, dtype=np.float64))
        if len(diff) == 0:
            return {"mean absolute error": 0.0, "largest absolute error": 0.0, "cells within accuracy": 1.0}
        return {
            "mean absolute error": float(diff.mean()),
            "largest absolute error": float(diff.max()),
            "cells within accuracy": float(np.mean(diff <= self.accuracy)),
        }


def dp_prevalence(
    records: Records | PatientSets,
    categories: Sequence[str],
    epsilon: float,
    delta: float | None = None,
    max_codes: int = DEFAULT_MAX_CODES,
) -> DPTable:
    """The (epsilon, delta)-DP table of patients per category (module docstring): the Laplace
    mechanism without delta, the Gaussian with it. `records`: their codes, or `PatientSets` (e.g. their
    phecodes, `PatientSets.of_phecodes`, over every phecode of the map)."""
    epsilon, delta = check_budget(epsilon, delta)
    categories = [str(c) for c in categories]
    if len(set(categories)) != len(categories):
        raise UserError("the categories of a DP table must be distinct codes")
    s = _sets(records)
    sets, truncated = bounded_code_sets(s, max_codes)
    counts = _counts(sets, s.labels, categories)  # = bounded_prevalence
    noise = noisy_counts(counts, max_codes, epsilon, delta)
    return DPTable(
        table=pd.DataFrame({"code": categories, "patients": noise.released}),
        mechanism=noise.mechanism,
        epsilon=noise.epsilon,
        delta=noise.delta,
        scale=noise.scale,
        max_codes=max_codes,
        patients=int(s.matrix.shape[0]),
        truncated=truncated,
        accuracy=noise.accuracy,
    )
