"""Repeated diagnosis codes for GCCens (Tamersoy et al. 2010, "Materials"; thesis chapter III).

A population P of records that each hold at least one of the chosen codes, with repeat counts, and a
research sample S drawn from P. Tamersoy's figures for the codes 250, 272, 401, 724: mean repeats per
record 2.2 / 1.3 / 2.5 / 0.9 in P (301,423 records) and 3.5 / 2.3 / 4.4 / 2.0 in S (2,676 records);
"more than 9%" of S unique against P (Figure 4), a record matching every population record that holds
each of its codes at least as many times (`engine.risk`, count_repeats=True).

Model: code j is present in a record with probability `presence_j`, and then billed 1 + N times,
N ~ negative binomial with mean `extra_j` and shape REPEAT_SHAPE (a gamma-Poisson mixture: a heavy
tail of repeats); codes are independent. Records without any code are redrawn (P holds only records
with at least one code). S is drawn from P in two parts: HEAVY_SHARE of it from the records with the
most repeats (sum of log(1 + count) over codes; a GWAS cohort recruits patients with long EMR
histories), the rest without replacement with probability proportional to
prod_j (1 + count_j) ** tilt_j (exponential keys), so S holds more and more-repeated codes.
For Tamersoy's codes, presence and extra were set so that P's means match, and the tilts were fitted
to S's means (`fit_tilts`); REPEAT_SHAPE sets the share of S that is unique (calibrated to about 9%).
Other codes draw their parameters in the same ranges (`code_parameters`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import optimize

from engine.synth.generator import patient_ids

TAMERSOY_CODES = ("250", "272", "401", "724")
POPULATION_MEANS = (2.2, 1.3, 2.5, 0.9)
SAMPLE_MEANS = (3.5, 2.3, 4.4, 2.0)
REPEAT_SHAPE = 0.3  # negative-binomial shape of the extra repeats (smaller: heavier tail)
HEAVY_SHARE = 0.12  # share of S drawn from P's records with the most repeats (long EMR histories)
HEAVY_TAKE = 0.9  # the heavy part takes this share of the pool it is drawn from
# (presence, mean extra repeats when present, tilt) per Tamersoy code: presences chosen, extras so that
# P's means (after the at-least-one-code condition, P(any) = 0.848) match, tilts from fit_tilts() at seed 0
TAMERSOY_PARAMETERS: dict[str, tuple[float, float, float]] = {
    "250": (0.40, 3.664, -0.247),
    "272": (0.33, 2.341, 0.017),
    "401": (0.46, 3.609, 0.008),
    "724": (0.30, 1.544, 0.366),
}


def code_parameters(codes: Sequence[str], seed: int = 0) -> np.ndarray:
    """(len(codes), 3) presence, extra repeats and tilt: Tamersoy's values for his codes, others
    drawn uniformly in the ranges those span, presence scaled by sqrt(4 / len(codes)) for longer
    lists (a record then holds a similar number of distinct codes)."""
    known = np.array(list(TAMERSOY_PARAMETERS.values()))
    lo, hi = known.min(axis=0), known.max(axis=0)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 5]))
    scale = min(1.0, (4.0 / max(len(codes), 1)) ** 0.5)
    out = np.empty((len(codes), 3))
    for i, code in enumerate(codes):
        if code in TAMERSOY_PARAMETERS:
            out[i] = TAMERSOY_PARAMETERS[code]
        else:
            out[i] = rng.uniform(lo, hi)
            out[i, 0] *= scale
    return out


def _draw_counts(n: int, params: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(n, n_codes) repeat counts of n records with at least one code."""
    parts, have = [], 0
    k = len(params)
    while have < n:
        m = int((n - have) * 1.3) + 16
        present = rng.random((m, k)) < params[:, 0]
        lam = rng.gamma(REPEAT_SHAPE, 1.0 / REPEAT_SHAPE, (m, k)) * params[:, 1]
        counts = np.where(present, 1 + rng.poisson(lam), 0)
        counts = counts[counts.any(axis=1)]
        parts.append(counts)
        have += len(counts)
    return np.concatenate(parts)[:n]


def _sample_weights(counts: np.ndarray, tilts: np.ndarray) -> np.ndarray:
    return np.exp(np.log1p(counts) @ tilts)


def _heavy_and_rest(
    counts: np.ndarray, n_sample: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The heavy part of the sample (HEAVY_SHARE of it, drawn uniformly from the
    n_heavy / HEAVY_TAKE records with the highest sum of log(1 + count); ties by a random jitter)
    and the mask of the records left for the tilted draw."""
    n_heavy = min(round(HEAVY_SHARE * n_sample), len(counts))
    pool_size = min(len(counts), int(np.ceil(n_heavy / HEAVY_TAKE)))
    score = np.log1p(counts).sum(axis=1) + 1e-6 * rng.random(len(counts))
    pool = np.argsort(-score, kind="stable")[:pool_size]
    heavy = rng.choice(pool, n_heavy, replace=False) if n_heavy else np.zeros(0, dtype=np.int64)
    rest = np.ones(len(counts), dtype=bool)
    rest[heavy] = False
    return heavy, rest


def repeat_counts(
    n_population: int, n_sample: int, codes: Sequence[str] = TAMERSOY_CODES, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(n_population, n_codes) repeat counts of the population and the sorted row indices of the
    sample (the matrix form of `repeated_codes`)."""
    if not 0 <= n_sample <= n_population:
        raise ValueError("the sample size must be between 0 and the population size")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 4]))
    params = code_parameters(list(codes), seed)
    counts = _draw_counts(n_population, params, rng)
    heavy, rest = _heavy_and_rest(counts, n_sample, rng)
    idx = np.flatnonzero(rest)
    keys = rng.exponential(1.0, len(idx)) / _sample_weights(counts[idx], params[:, 2])
    tilted = idx[np.argsort(keys, kind="stable")[: n_sample - len(heavy)]]
    return counts, np.sort(np.concatenate([heavy, tilted]))


def fit_tilts(n_population: int = 301_423, n_sample: int = 2_676, seed: int = 0) -> np.ndarray:
    """Tilts making the sample means of Tamersoy's codes equal his: the heavy part is drawn as in
    `repeat_counts`, and the tilted part's weighted means (the large-population limit of the draw
    without replacement) must make up the rest."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 4]))
    params = code_parameters(list(TAMERSOY_CODES), seed)
    counts = _draw_counts(n_population, params, rng)
    heavy, rest = _heavy_and_rest(counts, n_sample, rng)
    target = (n_sample * np.array(SAMPLE_MEANS) - counts[heavy].sum(axis=0)) / (n_sample - len(heavy))
    pool = counts[rest]

    def gap(t: np.ndarray) -> np.ndarray:
        w = _sample_weights(pool, t)
        return (w @ pool) / w.sum() - target

    return optimize.root(gap, params[:, 2], method="hybr").x


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
