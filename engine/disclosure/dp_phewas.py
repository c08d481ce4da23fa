"""Differentially private PheWAS tables through OpenDP (issue 39): per SNP, phecode and genotype class
(0/1/2), the cases and the controls, the 2x3 tables `engine.utility.phewas` tests.

What is noised, per SNP: the cases per phecode and genotype, the genotyped patients excluded from a
phecode's controls without being its cases (the exclusion ranges, and codes below the case threshold),
and the genotyped patients per genotype. Controls are then the genotyped minus the excluded. A
patient's phecodes where they are not a control (`PhenotypeMatrix.excluded`, which holds the cases)
are first bounded to at most `max_phecodes` (`dp_tables.bounded_code_sets`, the patient's own choice);
a phecode dropped by the bound counts the patient as a control there. So, per SNP the patient is
genotyped for, a patient adds 1 to the genotype total and 1 to one cell of each of at most
`max_phecodes` phecodes: the L1 sensitivity is snps x (max_phecodes + 1), each cell moving by at most
1 (L2: its square root). OpenDP's noise (`dp_tables.noisy_counts`) is added to the whole vector at once.

Post-processing, stated: negative noisy counts read 0; a phecode's excluded above the genotype total
read the total (its controls 0). The associations are recomputed from the noisy tables
(`phewas_of_counts`) and compared with the exact PheWAS (no bound, no noise) at uncorrected p <= 0.05,
as Heatherly's Table 4 (`significance_table`): kept, lost and false associations, for the steward.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from engine.disclosure.dp_tables import DEFAULT_MAX_CODES, Noise, PatientSets, bounded_code_sets, noisy_counts
from engine.io.errors import UserError
from engine.records import Records
from engine.utility.phewas import (
    PhenotypeMatrix,
    PhewasCounts,
    PhewasSettings,
    phenotype_matrix,
    phewas_counts,
    phewas_of_counts,
    significance_table,
)

TABLE_COLUMNS = ["snp", "phecode", "genotype", "cases", "controls"]


def bounded_phenotypes(phen: PhenotypeMatrix, max_phecodes: int) -> tuple[PhenotypeMatrix, int]:
    """`phen` with each patient's not-control phecodes bounded to `max_phecodes` (module docstring),
    and how many patients the bound truncated."""
    sets = PatientSets(phen.excluded.tocsr(), phen.patient_ids, phen.phecodes.astype(str))
    kept, truncated = bounded_code_sets(sets, max_phecodes)
    counts = phen.counts.multiply(kept).tocsr()
    return PhenotypeMatrix(phen.patient_ids, phen.phecodes, counts, kept), truncated


def count_vector(counts: PhewasCounts) -> np.ndarray:
    """What is noised, per SNP in order: cases (phecodes x 3), excluded non-cases (phecodes x 3),
    genotyped (3), flattened."""
    parts = []
    for s in counts.snps:
        parts += [
            counts.cases[s].ravel(),
            (counts.excluded[s] - counts.cases[s]).ravel(),
            counts.genotyped[s],
        ]
    return np.rint(np.concatenate(parts) if parts else np.zeros(0)).astype(np.int64)


def counts_of_vector(template: PhewasCounts, vector: np.ndarray) -> PhewasCounts:
    """The inverse of `count_vector`, negatives read 0 and each phecode's excluded at most the
    genotype total (controls at least 0)."""
    v = np.maximum(np.asarray(vector, dtype=np.float64), 0)
    n = len(template.phecodes) * 3
    cases, excluded, genotyped, at = {}, {}, {}, 0
    for s in template.snps:
        case = v[at : at + n].reshape(-1, 3)
        other = v[at + n : at + 2 * n].reshape(-1, 3)
        total = v[at + 2 * n : at + 2 * n + 3]
        at += 2 * n + 3
        cases[s], genotyped[s] = case, total
        excluded[s] = np.minimum(case + other, total[None, :])
    return PhewasCounts(template.phecodes, template.snps, cases, excluded, genotyped)


def table_of_counts(counts: PhewasCounts) -> pd.DataFrame:
    """`TABLE_COLUMNS`: one row per SNP, phecode and genotype, whole counts."""
    frames = []
    for s in counts.snps:
        controls = counts.genotyped[s][None, :] - counts.excluded[s]
        frames.append(
            pd.DataFrame(
                {
                    "snp": s,
                    "phecode": np.repeat(counts.phecodes.astype(str), 3),
                    "genotype": np.tile([0, 1, 2], len(counts.phecodes)),
                    "cases": np.rint(counts.cases[s].ravel()).astype(np.int64),
                    "controls": np.rint(controls.ravel()).astype(np.int64),
                }
            )
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=TABLE_COLUMNS)


@dataclass(frozen=True, eq=False)
class DPPhewas:
    """A DP PheWAS release: `table` (`TABLE_COLUMNS`), the noisy `counts` it is read from, the noise
    (`noise.epsilon`/`delta`: what OpenDP's map gives at `sensitivity`), the bound and the patients
    it truncated."""

    table: pd.DataFrame
    counts: PhewasCounts
    noise: Noise
    max_phecodes: int
    sensitivity: int
    patients: int
    truncated: int


def dp_phewas(
    records: Records,
    genotypes: pd.DataFrame,
    epsilon: float,
    delta: float | None = None,
    max_phecodes: int = DEFAULT_MAX_CODES,
    min_code_count: int = 1,
) -> DPPhewas:
    """The (epsilon, delta)-DP case/control tables of every SNP column of `genotypes` against every
    phecode of the v1.2 map (a public list), module docstring."""
    phen, truncated = bounded_phenotypes(phenotype_matrix(records), max_phecodes)
    exact = phewas_counts(phen, genotypes, min_code_count)
    if not exact.snps:
        raise UserError("the genotypes name no SNP column besides patient_id")
    sensitivity = len(exact.snps) * (max_phecodes + 1)
    noise = noisy_counts(count_vector(exact), sensitivity, epsilon, delta)
    noisy = counts_of_vector(exact, noise.released)
    return DPPhewas(
        table_of_counts(noisy), noisy, noise, max_phecodes, sensitivity, records.n_patients, truncated
    )


def associations_kept(exact: pd.DataFrame, released: pd.DataFrame, alpha: float = 0.05) -> dict[str, int]:
    """Associations at uncorrected p <= alpha in the exact PheWAS (`original`) and, of the released
    one, those `kept`, `lost` and `false` (Heatherly's Table 4, `significance_table`)."""
    table = significance_table(exact, {"dp": released}, alpha, correction="heatherly2013")
    if table.empty:
        return {"original": 0, "kept": 0, "lost": 0, "false": 0}
    total = table.iloc[-1]
    return {
        "original": int(total["original"]),
        "kept": int(total["dp: identical"]),
        "lost": int(total["dp: lost"]),
        "false": int(total["dp: false"]),
    }


def phewas_of_dp(release: DPPhewas, settings: PhewasSettings | None = None) -> pd.DataFrame:
    """The PheWAS recomputed from the noisy tables (`RESULT_COLUMNS`)."""
    return phewas_of_counts(release.counts, settings or PhewasSettings())
