"""Membership inference on released PheWAS statistics (issue 28): can an attacker who holds a
person's genotype and diagnoses tell from a released PheWAS table whether that person is in the
cohort? A likelihood-ratio presence test (Sankararaman et al. 2009, Nat Genet 41:965, "Genomic privacy
and limits of individual detection in a pool") on the phecodes' case pools, as presence attacks on
phenome-wide summary statistics do (Liu et al. 2018, AMIA Annu Symp Proc 2018:760, "Detecting the
presence of an individual in phenotypic summary data").

What is summed. Each released row (SNP s, phecode p) gives the minor-allele frequency f of the
phecode's n_cases cases (`case_maf`). For a target with genotype x_s (0/1/2 minor alleles) who is a
case of p by their own diagnoses (which the attacker knows), the row adds the log-likelihood ratio
x_s log(f/q) + (2 - x_s) log((1 - f)/(1 - q)), q the reference panel's frequency among its own cases
of p (`Reference`: shrunk toward the panel's frequency of s by `SHRINK` pseudo-people, so that being a
case of an associated phecode does not pass for membership); the rows of phecodes the target is not a
case of add nothing. Frequencies are clipped to [1e-4, 1 - 1e-4]. A member pulls each of their pools'
frequency toward their own alleles by (x_s/2 - f)/n_cases, so a row adds about 1/n_cases to a member's
expected statistic (Visscher & Hill 2009, PLoS Genet 5:e1000628: power grows with independent SNPs over
pool size): small pools leak most.

Why the control pools are left out. A phecode's controls are nearly the whole cohort and nearly the
same people for every phecode, so a target's ~300 control rows of one SNP all carry the cohort's one
sampling difference d from the panel (~0.01): together they add ~300 (x_s - 2q) d / (q(1 - q)), a
term with a standard deviation of 3 to 9 per SNP on the shipped sample, for members and non-members
alike, against a member's signal from those rows of ~300 / 2,700 = 0.1. Summing them drowns the case
pools' signal: on the sample the detection rate is 0.063 with them and 0.094 without (both against the
per-target null below).

Each target against their own null. Targets differ in how many rows concern them (the cohort is chosen
by phenotype: on the sample its members are cases of 25 released phecodes per SNP on average, the
non-members of 17), and the statistic's spread grows with the rows, so one threshold for all would flag
members for their diagnoses alone, which the attacker knew before any table (on the sample: 0.09 of
the members with their genotypes shuffled among them, against 0.05). So each target's statistic is
compared with the statistics the non-member targets' genotypes score in the target's place (the same
rows): the target is flagged when theirs exceeds the (1 - fpr) quantile of those, ties split so that the
level is exactly fpr (a randomized test, counted at its expected value); a target no released row
concerns is flagged with probability fpr, a coin. The statistic is centred (the log-likelihood ratio
less its expectation at the panel's frequency of each SNP), which changes no comparison and lets a
missing genotype count as that expectation (a target's own missing SNP is left out of their test).
Each non-member is tested the same way against the others: their flagged share
(`AttackResult.non_member_rate`) checks the level.

The reference population. The sample's genotypes cover the biobank (10,500 patients), of which the
cohort (2,700) is part, so the reference is drawn from the study's population outside the cohort:
its genotyped patients are split in two by a fixed hash of the patient id (`split_outside`); one
half is the attacker's reference panel (q), the other the non-member targets, whose genotypes make each
target's null. When no genotyped patient lies outside the cohort, a held-out half of the cohort, split
in two, stands for both (said in `AttackResult.reference`; those people are in the table's pools, so the
power is understated) and the members are the other half. Otherwise members are the cohort's genotyped
patients.

Power is the members' expected flagged share: the detection rate at the false-positive rate; fpr
(0.05) is what a coin that knows nothing achieves.

What the officer can do (`release_options`, each measured by `assess`): release fewer rows (only
the significant associations), coarser statistics (frequencies rounded to 2 decimals, p-values to one
significant digit), bigger cells (rows with fewer than `BIG_CELLS` cases or controls withheld), the
study's small-cell policy (`engine.disclosure.cells.suppress_phewas`), and all of them together. On
the shipped sample (tests/test_membership_sample.py) fewer rows, bigger cells, the All of Us policy and
all together lower the detection rate (0.094 -> 0.065, 0.080, 0.084, 0.058); frequencies to 2 decimals
barely do (0.093): a member moves a pool of n cases by ~1/(2n), 0.025 for the smallest pools of 20.

How it is computed (issue 24). A table's used rows become one phecodes x SNPs matrix of their terms
logit(f) - logit(q) (`_Terms`), so each target set's weights are one sparse product with its case
matrix; the non-members' centred genotypes are made distinct once per SNP set (`_Null`), and each
target's statistic is compared with every distinct null genotype's score by a compiled loop, one target
at a time (`engine.utility.membership_kernel`, issue 36); a target no used row concerns scores 0 as every
null genotype does (all tied) and is not scored.
The results are those of the attack as it was (tests/reference_membership.py, compared in
tests/test_membership_fast.py): the weights are summed in another order, so scores may differ in the
last bits, which turns no comparison unless a score difference lies within rounding of the 1e-9 tie
tolerance.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.disclosure.cells import SUPPRESSED, SmallCellPolicy, suppress_phewas
from engine.records import Records
from engine.utility.phewas import _item_matrices, phecode_table

FPR = 0.05
CLIP = 1e-4
BIG_CELLS = 100  # "bigger cells": a row needs this many cases and controls
ROUND_MAF = 2  # "coarser statistics": frequencies to 2 decimals
SIGNIFICANT = 0.05  # "fewer rows": Benjamini-Hochberg adjusted p <= 0.05
SHRINK = 20  # pseudo-people of the panel's overall frequency added to each case pool's reference


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


def _case_matrix(records: Records, maps: dict[tuple[str, ...], sp.csr_matrix]) -> sp.csr_matrix:
    """Patients x phecodes, 1.0 where the patient is a case (some code of theirs counts toward the
    phecode: `phenotype_matrix(records).cases(1) > 0`, without its controls' exclusions). The items x
    phecodes map is made once per item vocabulary and kept in `maps`: the members, non-members and panel
    are subsets of one data set's records, which share it."""
    key = tuple(map(str, records.items))
    items = maps.get(key)
    if items is None:
        items = maps[key] = _item_matrices(records.items, None, phecode_table())[0]
    return ((records.patient_item_sets.astype(np.int32) @ items) > 0).astype(float).tocsr()


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

    def __init__(
        self,
        panel: Records,
        genotypes: pd.DataFrame,
        maps: dict[tuple[str, ...], sp.csr_matrix] | None = None,
    ) -> None:
        self.phecodes = {str(p): i for i, p in enumerate(phecode_table().phecodes)}
        self._cases = _case_matrix(panel, {} if maps is None else maps).T.tocsr()
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
    (sparse, patients x phecodes) and their genotypes, each SNP's centred column kept."""

    def __init__(
        self,
        targets: Records,
        genotypes: pd.DataFrame,
        maps: dict[tuple[str, ...], sp.csr_matrix] | None = None,
    ) -> None:
        self.n = targets.n_patients
        self.col = {str(p): i for i, p in enumerate(phecode_table().phecodes)}
        self._case = _case_matrix(targets, {} if maps is None else maps)
        self._geno = _Genotypes(genotypes, np.asarray(targets.patient_ids).astype(str))
        self._centred: dict[tuple[str, float], np.ndarray] = {}

    def centred(self, snp: str, q: float) -> np.ndarray:
        """The genotype less twice the panel's frequency `q`, zero where missing."""
        y = self._centred.get((snp, q))
        if y is None:
            y = self._centred[(snp, q)] = np.nan_to_num(self._geno.column(snp) - 2 * q, nan=0.0)
        return y

    def weights(self, table: pd.DataFrame, ref: Reference) -> tuple[np.ndarray, np.ndarray]:
        """(W, Y), targets x the SNPs of `ref`: W the sum over the target's case rows of
        logit(f) - logit(q) (zero where the target's genotype is missing), Y the genotype less twice
        the panel's frequency (zero where missing). The centred statistic is the rows of W * Y summed:
        the log-likelihood ratio x log(f/q) + (2 - x) log((1 - f)/(1 - q)) is 2 log((1 - f)/(1 - q)) +
        x (logit(f) - logit(q)). Suppressed or missing frequencies are skipped."""
        return self.weights_of(_Terms.of(table, ref, self.col), ref)

    def weights_of(self, terms: _Terms, ref: Reference) -> tuple[np.ndarray, np.ndarray]:
        """`weights` of the table's `terms`: W is one sparse product, the targets' case matrix times
        the phecodes x SNPs matrix of the terms."""
        snps = list(ref.case)
        y = np.zeros((self.n, len(snps)))
        for j, snp in enumerate(snps):
            y[:, j] = self.centred(snp, ref.overall[snp])
        if not len(terms.term):
            return np.zeros((self.n, len(snps))), y
        m = sp.csr_matrix((terms.term, (terms.phecode, terms.snp)), shape=(self._case.shape[1], len(snps)))
        w = (self._case @ m).toarray()
        for j, snp in enumerate(snps):
            w[np.isnan(self._geno.column(snp)), j] = 0.0
        return w, y


@dataclass(frozen=True, eq=False)
class _Terms:
    """The rows of a released table the attack uses, each as (phecode column, SNP column of the
    `Reference`, logit(f) - logit(q)): what the row adds to the weight of a target who is a case of
    its phecode (`_Targets.weights`)."""

    phecode: np.ndarray
    snp: np.ndarray
    term: np.ndarray

    @classmethod
    def of(cls, table: pd.DataFrame, ref: Reference, col: Mapping[str, int]) -> _Terms:
        """The terms of `table`'s rows whose phecode the targets (`col`) and the panel know, whose SNP
        is the reference's and whose case frequency is a number."""
        snps = list(ref.case)
        if not len(table) or not snps:
            return cls(np.zeros(0, np.intp), np.zeros(0, np.intp), np.zeros(0))
        codes = table["phecode"].astype(str).to_numpy()
        p = pd.Index(list(col)).get_indexer(codes)
        p_ref = p if ref.phecodes == col else pd.Index(list(ref.phecodes)).get_indexer(codes)
        k = pd.Index(snps).get_indexer(table["snp"].astype(str).to_numpy())
        f = pd.to_numeric(table["case_maf"].where(table["case_maf"] != SUPPRESSED), errors="coerce")
        f = f.to_numpy(dtype=float)
        keep = (p >= 0) & (p_ref >= 0) & (k >= 0) & ~np.isnan(f)
        p, k, f = p[keep], k[keep], f[keep]
        q = np.stack([ref.case[s] for s in snps])[k, np.asarray(list(ref.phecodes.values()))[p_ref[keep]]]
        return cls(np.asarray(list(col.values()))[p], k, _logit(np.clip(f, CLIP, 1 - CLIP)) - _logit(q))


def lr_statistics(
    table: pd.DataFrame, targets: Records, genotypes: pd.DataFrame, ref: Reference
) -> np.ndarray:
    """Each target's centred log-likelihood ratio over the case rows of `table` that concern them
    (module docstring), against the reference panel's frequency of the same pool (`Reference`)."""
    w, y = _Targets(targets, genotypes).weights(table, ref)
    return (w * y).sum(axis=1)


@dataclass(frozen=True, eq=False)
class _Null:
    """Null genotypes (centred, one per row), each distinct one kept once with how often it occurs, in
    order of first appearance (`distinct_rows`: a hash, not a sort of the 236,445 non-members' rows at
    paper scale; the flag rates sum whole counts, in any order)."""

    n: int
    vectors: np.ndarray
    weight: np.ndarray

    @classmethod
    def of(cls, null: np.ndarray) -> _Null:
        first, same = distinct_rows(null)
        return cls(len(null), null[first], np.bincount(same, minlength=len(first)).astype(float))


def flag_rates(w: np.ndarray, y: np.ndarray, null: np.ndarray, fpr: float, *, leave_out: bool) -> np.ndarray:
    """Per target (rows of `w`, `y`), the probability that the randomized level-`fpr` test flags it:
    its statistic (w * y summed) against those of the null genotypes (rows of `null`, centred as `y`)
    in its place. With `leave_out`, the targets are the null genotypes themselves, in order, and each
    is left out of its own null. No null genotype: nothing flagged."""
    return _flag_rates(w, y, _Null.of(null), fpr, leave_out=leave_out)


def _flag_rates(w: np.ndarray, y: np.ndarray, null: _Null, fpr: float, *, leave_out: bool) -> np.ndarray:
    """`flag_rates` against null genotypes made distinct once (`_Null`). Per target, the null weight
    above its statistic is the total less that at or below it, and the tied weight that at or below
    less that below: two comparisons of each (distinct null genotype, target) score."""
    n_null = null.n - (1 if leave_out else 0)
    if n_null <= 0:
        return np.zeros(len(w))
    t = np.asarray((w * y).sum(axis=1), dtype=np.float64)
    total, own = null.weight.sum(), (1 if leave_out else 0)  # `own`: the target itself, tied with itself
    # a target no used row concerns (weights all zero) scores 0, as every null genotype does: all tied
    above, tied = np.zeros(len(w)), np.full(len(w), total - own)
    live = np.flatnonzero(w.any(axis=1))
    if len(live):
        # compiled (issue 36: 236,445 non-member targets x 1,969 distinct null genotypes per attack); targets
        # of the same weights and statistic are flagged alike, so each such target is scored once (a table
        # of few rows gives few weights: 3,507 distinct of 104,294 targets for GCCens' release, paper scale)
        from engine.utility.membership_kernel import null_counts

        first, same = distinct_rows(np.column_stack([w[live], t[live]]))
        at_most, below = np.zeros(len(first), np.int64), np.zeros(len(first), np.int64)
        null_counts(
            np.ascontiguousarray(w, dtype=np.float64),
            t,
            1e-9 * (1 + np.abs(t)),
            np.ascontiguousarray(null.vectors.T, dtype=np.float64),
            null.weight.astype(np.int64),
            live[first],
            at_most,
            below,
        )
        above[live] = total - at_most[same]
        tied[live] = at_most[same] - below[same] - own
    p_above, p_tied = above / n_null, tied / n_null
    with np.errstate(divide="ignore", invalid="ignore"):
        split = (fpr - p_above) / p_tied
    return np.where(p_above + p_tied <= fpr, 1.0, np.where(p_above >= fpr, 0.0, split))


_MIX = np.random.default_rng(36).integers(1, 2**63, size=64, dtype=np.uint64) | np.uint64(1)  # odd


def distinct_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the position of the first of each distinct row of `a`, in order of first appearance; for each
    row, which of them it is). Rows are the same when their bits are: told apart by a hash of the bits
    (at most 64 columns), then checked, so a collision only leaves every row its own."""
    bits = np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)
    if len(bits) == 0 or bits.shape[1] > len(_MIX):
        return np.arange(len(bits)), np.arange(len(bits))
    same, _ = pd.factorize((bits * _MIX[: bits.shape[1]]).sum(axis=1))  # wraps modulo 2**64
    first = np.zeros(int(same.max()) + 1, dtype=np.intp)
    first[same[::-1]] = np.arange(len(same) - 1, -1, -1)
    if not np.array_equal(bits, bits[first[same]]):
        return np.arange(len(bits)), np.arange(len(bits))
    return first, same


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
        maps: dict[tuple[str, ...], sp.csr_matrix] = {}  # items x phecodes, per item vocabulary
        self.members = _Targets(members, genotypes, maps)
        self.non_members = _Targets(non_members, genotypes, maps)
        self.panel = _Panel(panel, genotypes, maps)
        self._nulls: dict[tuple[str, ...], _Null] = {}

    def flags(self, table: pd.DataFrame, fpr: float = FPR) -> Flags:
        """Each member's and non-member's chance of being flagged from `table` (rows whose case
        frequency is suppressed are not used)."""
        used = table[table["case_maf"].map(lambda v: not isinstance(v, str))] if len(table) else table
        ref = self.panel.reference(sorted({str(s) for s in used["snp"]}) if len(used) else [])
        terms = _Terms.of(used, ref, self.members.col)  # the same phecode columns for both
        w_in, y_in = self.members.weights_of(terms, ref)
        w_out, y_out = self.non_members.weights_of(terms, ref)
        null = self._nulls.get(tuple(ref.case))
        if null is None:  # the centred genotypes depend on the SNPs alone: made distinct once per set
            null = self._nulls[tuple(ref.case)] = _Null.of(y_out)
        return Flags(
            len(used),
            _flag_rates(w_in, y_in, null, fpr, leave_out=False),
            _flag_rates(w_out, y_out, null, fpr, leave_out=True),
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
