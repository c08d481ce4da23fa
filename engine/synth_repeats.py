"""Repeated diagnosis codes for GCCens (Tamersoy et al. 2010, "Data"; thesis chapter III).

A population P of records that each hold at least one of the chosen codes, with repeat counts, and a
research sample S drawn from P of sicker patients. Tamersoy's figures for the codes 250, 272, 401,
724: mean repeats per record 2.2 / 1.3 / 2.5 / 0.9 in P (301,423 records) and 3.5 / 2.3 / 4.4 / 2.0
in S (2,676 records), about 9% of S unique against P.

Model: each record has a use of care u ~ Gamma(shape, 1/shape) (mean 1). Code j is present with
probability 1 - exp(-c_j u) and then repeated 1 + Poisson(lam_j u) times. Records without any code
are redrawn (P holds only records with at least one code). S is drawn from P without replacement
with probability ~ u ** TILT (exponential keys), which raises both presence and repeats in S.
The per-code (c_j, lam_j) for Tamersoy's four codes were fitted to the eight means (see
`engine.calibration.fit_repeat_parameters`); other codes draw (c, lam) in the same ranges.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

TAMERSOY_CODES = ("250", "272", "401", "724")
POPULATION_MEANS = (2.2, 1.3, 2.5, 0.9)
SAMPLE_MEANS = (3.5, 2.3, 4.4, 2.0)
USE_SHAPE = 1.6
TILT = 2.0
# fitted (presence rate c, repeat rate lam) per Tamersoy code, for USE_SHAPE and TILT above
FITTED: dict[str, tuple[float, float]] = {
    "250": (0.80, 2.10),
    "272": (0.60, 1.30),
    "401": (0.95, 2.10),
    "724": (0.45, 1.10),
}


def code_parameters(codes: Sequence[str], seed: int = 0) -> np.ndarray:
    """(len(codes), 2) presence and repeat rates: fitted values for Tamersoy's codes, others drawn
    log-uniformly in the fitted ranges, presence scaled down as the list grows (so a record holds a
    similar number of distinct codes whatever the list length)."""
    fitted = np.array(list(FITTED.values()))
    lo, hi = fitted.min(axis=0), fitted.max(axis=0)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 5]))
    out = np.empty((len(codes), 2))
    scale = min(1.0, 4.0 / max(len(codes), 1)) ** 0.5
    for i, code in enumerate(codes):
        if code in FITTED:
            out[i] = FITTED[code]
        else:
            out[i] = np.exp(rng.uniform(np.log(lo), np.log(hi)))
            out[i, 0] *= scale
    return out


def _draw_counts(n: int, params: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(n, n_codes) repeat counts and use of care for n records with at least one code."""
    counts_parts, use_parts, have = [], [], 0
    while have < n:
        m = int((n - have) * 1.3) + 16
        u = rng.gamma(USE_SHAPE, 1.0 / USE_SHAPE, m)
        present = rng.random((m, len(params))) < 1.0 - np.exp(-np.outer(u, params[:, 0]))
        reps = 1 + rng.poisson(np.outer(u, params[:, 1]))
        counts = np.where(present, reps, 0)
        keep = counts.any(axis=1)
        counts_parts.append(counts[keep])
        use_parts.append(u[keep])
        have += int(keep.sum())
    return np.concatenate(counts_parts)[:n], np.concatenate(use_parts)[:n]


def repeat_counts(
    n_population: int, n_sample: int, codes: Sequence[str] = TAMERSOY_CODES, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(n_population, n_codes) repeat counts of the population and the sorted row indices of the
    sample (the matrix form of `repeated_codes`)."""
    if n_sample > n_population:
        raise ValueError("the sample cannot be larger than its population")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 4]))
    params = code_parameters(list(codes), seed)
    counts, use = _draw_counts(n_population, params, rng)
    keys = rng.exponential(1.0, n_population) / use**TILT
    sample = np.sort(np.argsort(keys, kind="stable")[:n_sample])
    return counts, sample


def repeated_codes(
    n_population: int,
    n_sample: int,
    codes: Sequence[str] = TAMERSOY_CODES,
    seed: int = 0,
) -> tuple[pd.DataFrame, np.ndarray]:
    """Long-form events `patient_id, code` (one row per repeat, no visit column) of a population of
    `n_population` records, and the ids of `n_sample` of them forming the research sample.

    Defaults reproduce Tamersoy 2010's setting (GCCens benchmark: 301,423 / 2,676).
    """
    from engine.synth import patient_ids

    counts, sample = repeat_counts(n_population, n_sample, codes, seed)
    ids = patient_ids(n_population)
    rows, cols = np.nonzero(counts)
    reps = counts[rows, cols]
    code_arr = np.array(list(codes), dtype=object)
    events = pd.DataFrame(
        {
            "patient_id": pd.array(np.repeat(ids[rows], reps), dtype="str"),
            "code": pd.array(np.repeat(code_arr[cols], reps), dtype="str"),
        }
    )
    return events, ids[sample]
