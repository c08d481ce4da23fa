"""Membership inference on released PheWAS statistics (issue 28): can an attacker who holds a
person's genotype and diagnoses tell from a released PheWAS table whether that person is in the
cohort? A likelihood-ratio presence test in the manner of Sankararaman et al. 2009 (Nat Genet 41:965,
"Genomic privacy and limits of individual detection in a pool") as applied to released association
statistics by Liu et al. 2018 and others.

The statistic. Each released row (SNP s, phecode p) gives the minor-allele frequency of the
phecode's cases (`case_maf`) and of its controls (`control_maf`), pools of n_cases and n_controls
people. For a target with genotype x_s (0/1/2 minor alleles) who is a case of p (by their own
diagnoses, which the attacker knows: the study's attacker knows codes), the row adds
x_s log(f/q_s) + (2 - x_s) log((1 - f)/(1 - q_s)) with f = case_maf and q_s the reference panel's
frequency among its own cases of p (`Reference`: shrunk toward the SNP's overall frequency by 20
pseudo-people); a control of p adds the same with f = control_maf against the panel's controls of p; a target neither (excluded from the controls) adds
nothing. Frequencies are clipped to [1e-4, 1 - 1e-4]. A member's own alleles pull the pools'
frequencies toward theirs, so members score higher; small pools (few cases) pull hardest.

The reference population. The sample's genotypes cover the biobank (10,500 patients), of which the
cohort (2,700) is part, so the reference is drawn from the study's population outside the cohort:
its genotyped patients are split in two by a fixed hash of the patient id (`split_outside`); one
half is the attacker's reference panel (q_s), the other the non-member targets, whose statistics set
the threshold at the stated false-positive rate (default 5%: the 95th percentile of the non-members'
statistics). When no genotyped patient lies outside the cohort, a held-out half of the cohort is the
reference (said in `AttackResult.reference`). Members are the cohort's genotyped patients.

Power is the share of members whose statistic exceeds that threshold (the detection rate at the
false-positive rate); 0.05 is what a coin that knows nothing achieves.

What the officer can do (`release_options`, each measured by `assess`): release fewer rows (only
the significant associations), coarser statistics (frequencies rounded to 2 decimals, p-values to one
significant digit), bigger cells (rows with fewer than `BIG_CELLS` cases or controls withheld), the
study's small-cell policy (`engine.disclosure.cells.suppress_phewas`), and all of them together.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from engine.disclosure.cells import SUPPRESSED, SmallCellPolicy, suppress_phewas
from engine.records import Records
from engine.utility.phewas import phenotype_matrix

FPR = 0.05
CLIP = 1e-4
BIG_CELLS = 100  # "bigger cells": a row needs this many cases and controls
ROUND_MAF = 2  # "coarser statistics": frequencies to 2 decimals
SIGNIFICANT = 0.05  # "fewer rows": Benjamini-Hochberg adjusted p <= 0.05


@dataclass(frozen=True)
class AttackResult:
    """One attack on one released table: the detection rate (power) at the false-positive rate."""

    option: str
    rows: int  # released rows the attack used
    members: int
    non_members: int
    fpr: float
    threshold: float
    power: float  # share of members above the threshold
    reference: str  # where the reference frequencies came from

    def to_dict(self) -> dict[str, object]:
        return {
            "option": self.option,
            "rows": self.rows,
            "members": self.members,
            "non members": self.non_members,
            "false positive rate": self.fpr,
            "power": round(self.power, 4),
        }


def _half(pid: str) -> bool:
    return hashlib.sha256(b"cohortshield-membership\0" + pid.encode()).digest()[0] % 2 == 0


def split_outside(
    population_ids: np.ndarray, cohort_ids: np.ndarray, genotyped: np.ndarray
) -> tuple[np.ndarray, np.ndarray, str]:
    """(reference panel ids, non-member target ids, words): the genotyped patients of the
    population outside the cohort, split by a fixed hash of the id; when there are none, a held-out
    half of the cohort is both (the caller then measures the members on the other half)."""
    geno = set(map(str, genotyped))
    cohort = set(map(str, cohort_ids))
    outside = np.array(sorted(p for p in map(str, population_ids) if p in geno and p not in cohort))
    if len(outside) >= 20:
        mask = np.array([_half(p) for p in outside], dtype=bool)
        return (
            outside[mask],
            outside[~mask],
            f"{len(outside):,} genotyped patients of the population outside the cohort, split in two halves "
            f"by a fixed hash of the id: {int(mask.sum()):,} as the reference panel, {int((~mask).sum()):,} "
            "as non-member targets",
        )
    inside = np.array(sorted(p for p in cohort if p in geno))
    mask = np.array([_half(p) for p in inside], dtype=bool)
    return (
        inside[mask],
        inside[mask],
        "no genotyped patient outside the cohort: a held-out half of the cohort is the reference and the "
        "non-member targets (its PheWAS pools include them, so power is understated)",
    )


def _genotype_matrix(genotypes: pd.DataFrame, ids: np.ndarray, snps: list[str]) -> np.ndarray:
    g = genotypes.set_index(genotypes["patient_id"].astype(str)).reindex(pd.Index(ids.astype(str)))
    return np.column_stack([pd.to_numeric(g[s], errors="coerce").to_numpy(dtype=float) for s in snps])


class _Genotypes:
    """The genotypes of `ids` (in that order), each SNP's column read once (as `_genotype_matrix`
    reads it: numbers, anything else missing) and kept."""

    def __init__(self, genotypes: pd.DataFrame, ids: np.ndarray) -> None:
        self._frame = genotypes.set_index(genotypes["patient_id"].astype(str)).reindex(
            pd.Index(np.asarray(ids).astype(str))
        )
        self._columns: dict[str, np.ndarray] = {}

    def column(self, snp: str) -> np.ndarray:
        x = self._columns.get(snp)
        if x is None:
            x = self._columns[snp] = pd.to_numeric(self._frame[snp], errors="coerce").to_numpy(dtype=float)
        return x


SHRINK = 20  # pseudo-people of the overall frequency added to each pool's reference frequency


def reference_frequencies(genotypes: pd.DataFrame, ids: np.ndarray, snps: list[str]) -> np.ndarray:
    """The reference panel's minor-allele frequency of each SNP."""
    x = _genotype_matrix(genotypes, ids, snps)
    return np.clip(np.nanmean(x, axis=0) / 2, CLIP, 1 - CLIP)


class _Panel:
    """The reference panel's phenotypes and genotypes, read once; each SNP's frequencies (`Reference`)
    computed once, on first use. A SNP's frequencies depend on that SNP alone, so a `Reference` of any
    set of SNPs is made of them."""

    def __init__(self, panel: Records, genotypes: pd.DataFrame) -> None:
        ph = phenotype_matrix(panel)
        self.phecodes = {str(p): i for i, p in enumerate(ph.phecodes)}
        self._cases = (ph.cases(1) > 0).astype(float).T.tocsr()
        self._excluded = (ph.excluded > 0).astype(float).T.tocsr()  # controls = everyone - excluded
        self._geno = _Genotypes(genotypes, np.asarray(panel.patient_ids).astype(str))
        self._freq: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def frequencies(self, snp: str) -> tuple[np.ndarray, np.ndarray]:
        """(per phecode: the panel's cases' frequency, its controls'), shrunk (`Reference`)."""
        out = self._freq.get(snp)
        if out is None:
            x = self._geno.column(snp)
            ok = ~np.isnan(x)
            xs, ones = np.where(ok, x, 0.0), ok.astype(float)
            q = np.clip(xs.sum() / max(2 * ones.sum(), 1), CLIP, 1 - CLIP)
            a, n = self._cases @ xs, self._cases @ ones
            case_f = np.clip((a + 2 * SHRINK * q) / (2 * n + 2 * SHRINK), CLIP, 1 - CLIP)
            a, n = xs.sum() - self._excluded @ xs, ones.sum() - self._excluded @ ones
            ctrl_f = np.clip((a + 2 * SHRINK * q) / (2 * n + 2 * SHRINK), CLIP, 1 - CLIP)
            out = self._freq[snp] = (case_f, ctrl_f)
        return out

    def reference(self, snps: list[str]) -> Reference:
        if not snps:
            return Reference(dict(self.phecodes), {}, {})
        freq = {s: self.frequencies(s) for s in snps}
        return Reference(
            dict(self.phecodes), {s: f[0] for s, f in freq.items()}, {s: f[1] for s, f in freq.items()}
        )


@dataclass(frozen=True, eq=False)
class Reference:
    """The attacker's reference panel: per SNP and phecode, the minor-allele frequency of the panel's
    cases and of its controls, shrunk toward the SNP's overall frequency by `SHRINK` pseudo-people
    (the null of a target who is a case of p is a non-member case of p, not the population at large:
    otherwise being a case of an associated phecode would pass for membership)."""

    phecodes: dict[str, int]
    case: dict[str, np.ndarray]
    control: dict[str, np.ndarray]

    @classmethod
    def of(cls, panel: Records, genotypes: pd.DataFrame, snps: list[str]) -> Reference:
        return _Panel(panel, genotypes).reference(list(snps))


class _Targets:
    """Targets of the attack (members or non-members), read once: who is a case of each phecode and
    who a control (dense, patients x phecodes), and their genotypes."""

    def __init__(self, targets: Records, genotypes: pd.DataFrame) -> None:
        ph = phenotype_matrix(targets)
        self.n = targets.n_patients
        self.col = {str(p): i for i, p in enumerate(ph.phecodes)}
        self._case = ph.cases(1).toarray() > 0
        self._control = ph.excluded.toarray() == 0
        self._geno = _Genotypes(genotypes, np.asarray(targets.patient_ids).astype(str))

    def statistics(self, table: pd.DataFrame, ref: Reference) -> np.ndarray:
        """`lr_statistics` of these targets."""
        out = np.zeros(self.n)
        if not len(table):
            return out
        col = self.col
        # per row, read once: the phecode's column (-1: not a column of both), each pool's frequency
        codes = table["phecode"].astype(str).to_numpy()
        known = np.array([c in col and c in ref.phecodes for c in codes], dtype=bool)
        target_col = np.array([col[c] if k else -1 for c, k in zip(codes, known, strict=True)], dtype=np.intp)
        ref_col = np.array(
            [ref.phecodes[c] if k else -1 for c, k in zip(codes, known, strict=True)], dtype=np.intp
        )
        freq = {
            c: pd.to_numeric(table[c].where(table[c] != SUPPRESSED), errors="coerce").to_numpy(dtype=float)
            for c in ("case_maf", "control_maf")
        }
        positions = pd.Series(np.arange(len(table)), index=table.index)
        for snp, at in positions.groupby(table["snp"], sort=False):  # as `table.groupby("snp")`
            if str(snp) not in ref.case:
                continue
            rows = at.to_numpy(dtype=np.intp)
            x = self._geno.column(str(snp))
            ok = ~np.isnan(x)
            xs = np.where(ok, x, 0.0)
            for kind, column in (("case", "case_maf"), ("control", "control_maf")):
                f = freq[column][rows]
                keep = ~np.isnan(f) & known[rows]
                if not keep.any():
                    continue
                fv = np.clip(f[keep], CLIP, 1 - CLIP)
                qv = (ref.case if kind == "case" else ref.control)[str(snp)][ref_col[rows[keep]]]
                member = (self._case if kind == "case" else self._control)[:, target_col[rows[keep]]]
                m = np.asfortranarray(member, dtype=float)  # column order, as a CSC matrix's toarray()
                w1 = m @ np.log(fv / qv)
                w0 = m @ np.log((1 - fv) / (1 - qv))
                out += np.where(ok, xs * w1 + (2 - xs) * w0, 0.0)
        return out


def lr_statistics(
    table: pd.DataFrame, targets: Records, genotypes: pd.DataFrame, ref: Reference
) -> np.ndarray:
    """Each target's log-likelihood ratio over the rows of `table` (module docstring), against the
    reference panel's frequency of the same pool (`Reference`); suppressed or missing frequencies are
    skipped."""
    return _Targets(targets, genotypes).statistics(table, ref)


class _Attacker:
    """Everything of an attack that does not depend on the released table, read once (`assess`):
    the members', non-members' and the panel's phenotypes and genotypes, and the panel's frequencies
    of each SNP."""

    def __init__(
        self, members: Records, non_members: Records, genotypes: pd.DataFrame, panel: Records
    ) -> None:
        self.members = _Targets(members, genotypes)
        self.non_members = _Targets(non_members, genotypes)
        self.panel = _Panel(panel, genotypes)

    def attack(self, table: pd.DataFrame, option: str, fpr: float, reference: str) -> AttackResult:
        snps = sorted({str(s) for s in table["snp"]}) if len(table) else []
        ref = self.panel.reference(snps)
        used = table
        if len(table):
            f = table["case_maf"]
            used = table[f.map(lambda v: not isinstance(v, str))]
        t_in = self.members.statistics(used, ref) if len(used) else np.zeros(self.members.n)
        t_out = self.non_members.statistics(used, ref) if len(used) else np.zeros(self.non_members.n)
        threshold = float(np.quantile(t_out, 1 - fpr)) if len(t_out) else 0.0
        power = float((t_in > threshold).mean()) if len(t_in) else 0.0
        return AttackResult(option, len(used), len(t_in), len(t_out), fpr, threshold, power, reference)


def attack(
    table: pd.DataFrame,
    members: Records,
    non_members: Records,
    genotypes: pd.DataFrame,
    panel: Records,
    *,
    option: str = "as computed",
    fpr: float = FPR,
    reference: str = "",
) -> AttackResult:
    """The presence test on one released table: threshold at the non-members' (1 - fpr) quantile."""
    return _Attacker(members, non_members, genotypes, panel).attack(table, option, fpr, reference)


def release_options(table: pd.DataFrame, policy: SmallCellPolicy | None = None) -> dict[str, pd.DataFrame]:
    """The released table under each option the officer has (module docstring), by name."""
    out: dict[str, pd.DataFrame] = {"as computed": table}
    p_col = "p_bh" if "p_bh" in table else "p"
    out["fewer rows: significant associations only"] = table[pd.to_numeric(table[p_col]) <= SIGNIFICANT]
    coarse = table.copy()
    for c in ("case_maf", "control_maf"):
        coarse[c] = pd.to_numeric(coarse[c]).round(ROUND_MAF)
    for c in ("p", "p_bonferroni", "p_bh"):
        if c in coarse:
            coarse[c] = pd.to_numeric(coarse[c]).map(lambda v: float(f"{v:.1g}"))
    out[f"coarser statistics: frequencies to {ROUND_MAF} decimals, p to 1 digit"] = coarse
    big = (table["n_cases"] >= BIG_CELLS) & (table["n_controls"] >= BIG_CELLS)
    out[f"bigger cells: rows with >= {BIG_CELLS} cases and controls"] = table[big]
    if policy is not None and policy.active:
        out[f"small-cell policy ({policy.describe()})"] = suppress_phewas(table, policy)[0]
    both = coarse[big & (pd.to_numeric(table[p_col]) <= SIGNIFICANT)]
    if policy is not None and policy.active:
        both = suppress_phewas(both, policy)[0]
    out["all options together"] = both
    return out


def targets_of(
    cohort: Records, population: Records, genotypes: pd.DataFrame
) -> tuple[Records, Records, Records, str]:
    """(members, non-member targets, reference panel, words): see `split_outside`."""
    genotyped = genotypes["patient_id"].astype(str).to_numpy()
    ref, non, words = split_outside(population.patient_ids, cohort.patient_ids, genotyped)
    gset = set(genotyped)
    if set(map(str, non)) & set(map(str, cohort.patient_ids)):  # the held-out half of the cohort
        rest = np.array([p for p in map(str, cohort.patient_ids) if p in gset and p not in set(non)])
        return cohort.subset(rest), population.subset(non), population.subset(ref), words
    members = np.array([p for p in map(str, cohort.patient_ids) if p in gset])
    return cohort.subset(members), population.subset(non), population.subset(ref), words


def assess(
    tables: Mapping[str, pd.DataFrame],
    cohort: Records,
    population: Records,
    genotypes: pd.DataFrame,
    policy: SmallCellPolicy | None = None,
    fpr: float = FPR,
) -> dict[str, list[AttackResult]]:
    """Per released PheWAS table (the original cohort's, each release's, by name): the attack's
    power as computed and under each option (`release_options`)."""
    members, non, ref, words = targets_of(cohort, population, genotypes)
    attacker = _Attacker(members, non, genotypes, ref)  # read once for every table and option
    return {
        name: [attacker.attack(t, opt, fpr, words) for opt, t in release_options(table, policy).items()]
        for name, table in tables.items()
    }


def results_frame(results: Mapping[str, list[AttackResult]]) -> pd.DataFrame:
    return pd.DataFrame([{"table": name, **r.to_dict()} for name, rs in results.items() for r in rs])
