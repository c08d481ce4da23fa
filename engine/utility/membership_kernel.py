"""The membership attack's compiled count (`engine.utility.membership._flag_rates`; issue 36): per
target, the weight of the distinct null genotypes whose score, less the target's, is at most the tie
tolerance, and the weight of those below minus it. One target at a time, its null scores in a buffer
that stays in the cache: the chunked numpy products before wrote and read a (targets x distinct null
genotypes) matrix seven times over (236,445 targets x 1,969 genotypes at paper scale: 6.2 s -> 0.47 s,
counts equal). Numba compiles it on first use and keeps the machine code beside this file
(`cache=True`), as the anonymization kernels (docs/architecture.md, section 7)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def null_counts(
    w: np.ndarray,
    t: np.ndarray,
    tol: np.ndarray,
    vectors_t: np.ndarray,
    weight: np.ndarray,
    rows: np.ndarray,
    at_most: np.ndarray,
    below: np.ndarray,
) -> None:
    """For each target `rows[r]` (a row of `w`, its statistic `t` and tolerance `tol`): `at_most[r]`
    and `below[r]`, the total `weight` (whole counts) of the null genotypes (columns of `vectors_t`,
    SNPs x genotypes) whose score (the target's weights times the genotype, summed over the SNPs in
    order) less `t` is <= `tol`, and < -`tol`."""
    n_snps, n = vectors_t.shape
    score = np.empty(n)
    for r in range(len(rows)):
        i = rows[r]
        score[:] = 0.0
        for k in range(n_snps):
            wk = w[i, k]
            for j in range(n):
                score[j] += wk * vectors_t[k, j]
        ti, hi = t[i], tol[i]
        lo = -hi
        a = 0
        b = 0
        for j in range(n):
            d = score[j] - ti
            a += weight[j] if d <= hi else 0
            b += weight[j] if d < lo else 0
        at_most[r] = a
        below[r] = b
