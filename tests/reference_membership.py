"""The membership attack (engine/utility/membership.py) as it was before issue 24 made it fast: a plain
copy of the module's functions, kept as the reference the fast path must match to the bit
(tests/test_membership_reference.py). Per option and table: the weights by one dense product per SNP
over the targets' case columns, and each target's statistic compared with every distinct null genotype's
in a (null genotypes x targets) matrix, chunk by chunk. Not used by the app."""

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
SHRINK = 20  # pseudo-people of the panel's overall frequency added to each case pool's reference
CHUNK = 512  # targets scored against the null genotypes at a time


@dataclass(frozen=True)
class AttackResult:
    """One attack on one released table: the detection rate (power) at the false-positive rate."""

    option: str
    rows: int  # released rows the attack used (those with a case frequency)
    members: int
    non_members: int
    fpr: float
    non_member_rate: float  # share of non-members flagged, each against the others: the level, ~ fpr
    power: float  # members' expected flagged share
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


def _half(pid: str, salt: bytes = b"") -> bool:
    return hashlib.sha256(b"cohortshield-membership\0" + salt + pid.encode()).digest()[0] % 2 == 0


def split_outside(
    population_ids: np.ndarray, cohort_ids: np.ndarray, genotyped: np.ndarray
) -> tuple[np.ndarray, np.ndarray, str]:
    """(reference panel ids, non-member target ids, words): the genotyped patients of the
    population outside the cohort, split by a fixed hash of the id; when there are none, a held-out
    half of the cohort split by a second hash (the caller then measures the members on the other half:
    the held-out patients must be neither, since the reference frequencies include the panel's own
    alleles and would depress its statistics as a null)."""
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
    held = inside[np.array([_half(p) for p in inside], dtype=bool)]
    mask = np.array([_half(p, b"held-out\0") for p in held], dtype=bool)
    return (
        held[mask],
        held[~mask],
        "no genotyped patient outside the cohort: a held-out half of the cohort, split in two by a second "
        "hash, is the reference panel and the non-member targets (the table's pools include them, so "
        "power is understated)",
    )


class _Genotypes:
    """The genotypes of `ids` (in that order), each SNP's column read once (numbers; anything else
    missing) and kept."""

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


@dataclass(frozen=True, eq=False)
class Reference:
    """The attacker's reference panel: per SNP, its minor-allele frequency (`overall`) and per phecode
    that of its cases (`case`), shrunk toward the overall one by `SHRINK` pseudo-people (the null of a
    target who is a case of p is a non-member case of p, not the population at large: otherwise being
    a case of an associated phecode would pass for membership)."""

    phecodes: dict[str, int]
    case: dict[str, np.ndarray]
    overall: dict[str, float]

    @classmethod
    def of(cls, panel: Records, genotypes: pd.DataFrame, snps: list[str]) -> Reference:
        return _Panel(panel, genotypes).reference(list(snps))


class _Panel:
    """The reference panel's phenotypes and genotypes, read once; each SNP's frequencies computed
    once, on first use. A SNP's frequencies depend on that SNP alone, so a `Reference` of any set of
    SNPs is made of them."""

    def __init__(self, panel: Records, genotypes: pd.DataFrame) -> None:
        ph = phenotype_matrix(panel)
        self.phecodes = {str(p): i for i, p in enumerate(ph.phecodes)}
        self._cases = (ph.cases(1) > 0).astype(float).T.tocsr()
        self._geno = _Genotypes(genotypes, np.asarray(panel.patient_ids).astype(str))
        self._freq: dict[str, tuple[float, np.ndarray]] = {}

    def frequencies(self, snp: str) -> tuple[float, np.ndarray]:
        """(the panel's frequency, per phecode its cases' frequency shrunk toward it)."""
        out = self._freq.get(snp)
        if out is None:
            x = self._geno.column(snp)
            ok = ~np.isnan(x)
            xs, ones = np.where(ok, x, 0.0), ok.astype(float)
            q = float(np.clip(xs.sum() / max(2 * ones.sum(), 1), CLIP, 1 - CLIP))
            a, n = self._cases @ xs, self._cases @ ones
            out = self._freq[snp] = (
                q,
                np.clip((a + 2 * SHRINK * q) / (2 * n + 2 * SHRINK), CLIP, 1 - CLIP),
            )
        return out

    def reference(self, snps: list[str]) -> Reference:
        freq = {s: self.frequencies(s) for s in snps}
        return Reference(
            dict(self.phecodes), {s: f[1] for s, f in freq.items()}, {s: f[0] for s, f in freq.items()}
        )


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p / (1 - p))


class _Targets:
    """Targets of the attack (members or non-members), read once: who is a case of each phecode
    (dense, patients x phecodes) and their genotypes."""

    def __init__(self, targets: Records, genotypes: pd.DataFrame) -> None:
        ph = phenotype_matrix(targets)
        self.n = targets.n_patients
        self.col = {str(p): i for i, p in enumerate(ph.phecodes)}
        self._case = ph.cases(1).toarray() > 0
        self._geno = _Genotypes(genotypes, np.asarray(targets.patient_ids).astype(str))

    def weights(self, table: pd.DataFrame, ref: Reference) -> tuple[np.ndarray, np.ndarray]:
        """(W, Y), targets x the SNPs of `ref`: W the sum over the target's case rows of
        logit(f) - logit(q) (zero where the target's genotype is missing), Y the genotype less twice
        the panel's frequency (zero where missing). The centred statistic is the rows of W * Y summed:
        the log-likelihood ratio x log(f/q) + (2 - x) log((1 - f)/(1 - q)) is 2 log((1 - f)/(1 - q)) +
        x (logit(f) - logit(q)). Suppressed or missing frequencies are skipped."""
        snps = list(ref.case)
        w = np.zeros((self.n, len(snps)))
        y = np.zeros((self.n, len(snps)))
        at = {s: j for j, s in enumerate(snps)}
        for j, snp in enumerate(snps):
            x = self._geno.column(snp)
            y[:, j] = np.nan_to_num(x - 2 * ref.overall[snp], nan=0.0)
        if not len(table):
            return w, y
        col = self.col
        codes = table["phecode"].astype(str).to_numpy()
        known = np.array([c in col and c in ref.phecodes for c in codes], dtype=bool)
        f = pd.to_numeric(table["case_maf"].where(table["case_maf"] != SUPPRESSED), errors="coerce")
        f = f.to_numpy(dtype=float)
        keep = known & ~np.isnan(f)
        positions = pd.Series(np.arange(len(table)), index=table.index)
        for snp, rows in positions.groupby(table["snp"].astype(str), sort=False):
            k = at.get(str(snp))
            r = rows.to_numpy(dtype=np.intp)
            r = r[keep[r]]
            if k is None or not len(r):
                continue
            q = ref.case[str(snp)][[ref.phecodes[c] for c in codes[r]]]
            cases = np.asfortranarray(self._case[:, [col[c] for c in codes[r]]], dtype=float)
            missing = np.isnan(self._geno.column(str(snp)))
            w[:, k] = np.where(missing, 0.0, cases @ (_logit(np.clip(f[r], CLIP, 1 - CLIP)) - _logit(q)))
        return w, y


def lr_statistics(
    table: pd.DataFrame, targets: Records, genotypes: pd.DataFrame, ref: Reference
) -> np.ndarray:
    """Each target's centred log-likelihood ratio over the case rows of `table` that concern them
    (module docstring), against the reference panel's frequency of the same pool (`Reference`)."""
    w, y = _Targets(targets, genotypes).weights(table, ref)
    return (w * y).sum(axis=1)


def flag_rates(w: np.ndarray, y: np.ndarray, null: np.ndarray, fpr: float, *, leave_out: bool) -> np.ndarray:
    """Per target (rows of `w`, `y`), the probability that the randomized level-`fpr` test flags it:
    its statistic (w * y summed) against those of the null genotypes (rows of `null`, centred as `y`)
    in its place. With `leave_out`, the targets are the null genotypes themselves, in order, and each
    is left out of its own null. No null genotype: nothing flagged."""
    n_null = len(null) - (1 if leave_out else 0)
    if n_null <= 0:
        return np.zeros(len(w))
    vectors, counts = np.unique(null, axis=0, return_counts=True)  # genotypes repeat: score each once
    weight = counts.astype(float)
    t = (w * y).sum(axis=1)
    out = np.empty(len(w))
    for s in range(0, len(w), CHUNK):
        tt = t[s : s + CHUNK]
        d = vectors @ w[s : s + CHUNK].T - tt  # (distinct null genotypes, targets): score less the target's
        tol = 1e-9 * (1 + np.abs(tt))
        above = weight @ (d > tol).astype(float)
        tied = weight @ (np.abs(d) <= tol).astype(float) - (1 if leave_out else 0)  # less the target itself
        p_above, p_tied = above / n_null, tied / n_null
        with np.errstate(divide="ignore", invalid="ignore"):
            split = (fpr - p_above) / p_tied
        out[s : s + CHUNK] = np.where(p_above + p_tied <= fpr, 1.0, np.where(p_above >= fpr, 0.0, split))
    return out


@dataclass(frozen=True, eq=False)
class Flags:
    """One attack's per-target results: the released rows it used and, per member and per non-member,
    the probability that the test flags them (`flag_rates`)."""

    rows: int
    members: np.ndarray
    non_members: np.ndarray


class Attacker:
    """Everything of an attack that does not depend on the released table, read once (`assess`):
    the members', non-members' and the panel's phenotypes and genotypes, and the panel's frequencies
    of each SNP."""

    def __init__(
        self, members: Records, non_members: Records, genotypes: pd.DataFrame, panel: Records
    ) -> None:
        self.members = _Targets(members, genotypes)
        self.non_members = _Targets(non_members, genotypes)
        self.panel = _Panel(panel, genotypes)

    def flags(self, table: pd.DataFrame, fpr: float = FPR) -> Flags:
        """Each member's and non-member's chance of being flagged from `table` (rows whose case
        frequency is suppressed are not used)."""
        used = table[table["case_maf"].map(lambda v: not isinstance(v, str))] if len(table) else table
        ref = self.panel.reference(sorted({str(s) for s in used["snp"]}) if len(used) else [])
        w_in, y_in = self.members.weights(used, ref)
        w_out, y_out = self.non_members.weights(used, ref)
        return Flags(
            len(used),
            flag_rates(w_in, y_in, y_out, fpr, leave_out=False),
            flag_rates(w_out, y_out, y_out, fpr, leave_out=True),
        )

    def attack(self, table: pd.DataFrame, option: str, fpr: float, reference: str) -> AttackResult:
        f = self.flags(table, fpr)
        power = float(f.members.mean()) if len(f.members) else 0.0
        level = float(f.non_members.mean()) if len(f.non_members) else 0.0
        return AttackResult(option, f.rows, len(f.members), len(f.non_members), fpr, level, power, reference)


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
    """The presence test on one released table, each target against the non-members' genotypes in
    their place (module docstring)."""
    return Attacker(members, non_members, genotypes, panel).attack(table, option, fpr, reference)


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
    held = set(map(str, non)) | set(map(str, ref))
    if held & set(map(str, cohort.patient_ids)):  # the held-out half of the cohort
        rest = np.array([p for p in map(str, cohort.patient_ids) if p in gset and p not in held])
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
    attacker = Attacker(members, non, genotypes, ref)  # read once for every table and option
    return {
        name: [attacker.attack(t, opt, fpr, words) for opt, t in release_options(table, policy).items()]
        for name, table in tables.items()
    }


def results_frame(results: Mapping[str, list[AttackResult]]) -> pd.DataFrame:
    return pd.DataFrame([{"table": name, **r.to_dict()} for name, rs in results.items() for r in rs])
