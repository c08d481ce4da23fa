"""PheWAS on original and released data, and the comparison of the two (Heatherly 2013, Table 4,
Figures 1-12; Denny et al. 2010 for the method).

Definitions (every default is stated, because the established tools disagree):
- Phenotypes are the PheWAS codes (phecodes) of the v1.2 map. An ICD-9 code counts toward its phecode
  and, when the map's Rollup column is 1, toward every ancestor phecode (`411.2` -> `411`; parents by
  truncating the decimals, kept when the map has that phecode). An ICD-10-CM code counts toward the
  phecodes the v1.2 ICD-10-CM map (beta, unrolled; `engine.vocab.phecode_map_icd10cm`) lists for it:
  its phecodes (`E11.9` -> `250.2`; a few codes have two or more) and the parents they roll up to.
  Phecodes are one set for both vocabularies (names and exclusion ranges from the ICD-9 map), so mixed
  data are one PheWAS; the two vocabularies' codes are distinct items (`engine.vocab`) that may count
  toward the same phecode.
- Case: a patient with at least `min_code_count` (default 1; R PheWAS uses 2) occurrences of codes
  counting toward the phecode, an occurrence being a visit holding such a code (an event when the data
  have no visits).
- Control: a patient with no code whose phecode lies in the phecode's exclusion range (the map's
  "Excl. Phecodes", e.g. `401-405.99`); patients with 1 <= count < min_code_count are neither.
- Codes absent from the map (unknown to ICD-9-CM, like a mistyped `401.10`, or valid but unmapped) are
  never silently cases or controls: such a code counts toward no phecode, and its patient is not a
  control of any phecode a code of the same category (`401` for `401.10`, `E11` for `E11.99`, within
  the code's vocabulary) maps to, nor of the
  phecodes whose exclusion ranges hold those. A code whose category the map does not know at all
  excludes nothing; `unmapped_codes` lists every absent code so callers report them.
- A test runs when there are at least `min_cases` cases (default 20) and at least one control.
- Test: Pearson chi-square without continuity correction on the allele-by-status 2x2 table (default,
  "allelic") or the genotype-by-status 2x3 table ("genotypic"; empty genotype columns dropped). The odds
  ratio is allelic (minor allele, cases vs controls) with a Woolf 95% interval; a 0.5 Haldane correction
  is added to every cell when one is zero. Patients with a missing genotype are left out of that SNP.
- Multiple testing: Bonferroni and Benjamini-Hochberg within each SNP's scan (one SNP = one PheWAS).
  `significance_table` defaults to Benjamini-Hochberg at q <= alpha (`DEFAULT_CORRECTION`): a PheWAS
  is a screen of hundreds of phenotypes per SNP (1,842 tests on the sample), and without correction
  about alpha of the null tests pass (some 90 chance "associations" at 0.05), so the "original
  associations" a release is judged on would include them. BH controls the share of false
  discoveries among those called, which is what a screen's list of findings needs; Bonferroni
  controls the chance of any false one and, the tests being correlated (nested phecodes), would
  drop real associations too. Heatherly 2013's Table 4 counts uncorrected p <= 0.05: the named
  option `"heatherly2013"` (`"none"` is the same).

Released data: a released item counts toward a phecode only when every code it stands for counts
toward that phecode (so generalization inside a phecode, as Heatherly constrains it, loses nothing);
suppressed codes count toward nothing. For controls the rule is conservative: a released item excludes
a patient from a phecode's controls when any code it stands for lies in the exclusion range.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import Literal

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.records import Records
from engine.release import Release, codes_of
from engine.vocab import (
    ICD10CM,
    code_of_item,
    concept_vocabulary_of_item,
    icd10cm_item,
    phecode_map,
    phecode_map_icd10cm,
    phenotype_names,
    vocabulary_of_item,
)

Test = Literal["allelic", "genotypic"]
RESULT_COLUMNS = [
    "snp",
    "phecode",
    "phenotype",
    "n_cases",
    "n_controls",
    "case_maf",
    "control_maf",
    "odds_ratio",
    "ci_low",
    "ci_high",
    "chi2",
    "p",
    "p_bonferroni",
    "p_bh",
]


@dataclass(frozen=True)
class PhewasSettings:
    """The PheWAS defaults, all stated in the page."""

    min_code_count: int = 1
    min_cases: int = 20
    test: Test = "allelic"


# ------------------------------------------------------------------------------- phecode tables
@dataclass(frozen=True, eq=False)
class PhecodeTable:
    phecodes: np.ndarray  # (n_phecodes,) str, sorted numerically
    values: np.ndarray  # (n_phecodes,) float
    code_phecodes: dict[str, frozenset[int]]  # item (ICD-9 or ICD-10-CM) -> phecodes it counts toward
    code_leaves: dict[str, frozenset[int]]  # item -> indexes of its own phecode(s)
    exclusion: sp.csr_matrix  # (n_phecodes, n_phecodes): [q, p] = 1 when phecode q is in p's range
    category_leaves: dict[str, frozenset[int]]  # category (`401`, `E11`) -> phecodes of its mapped codes

    def index(self) -> dict[str, int]:
        return {p: i for i, p in enumerate(self.phecodes)}

    def leaves_of(self, code: str) -> frozenset[int]:
        """Phecodes whose controls a patient with `code` leaves: its own phecode(s) when the map has
        the code, else the phecodes of every mapped code of its category (none when the map has none);
        every phecode for a concept of another vocabulary (`SNOMED:...` that the CDM maps to no ICD code,
        issue 37: which phenotype it is, nothing says, so its patient is never a control)."""
        own = self.code_leaves.get(code)
        if own is not None:
            return own
        if concept_vocabulary_of_item(code) is not None:
            return frozenset(range(len(self.phecodes)))
        return self.category_leaves.get(_category(code), frozenset())


def _category(code: str) -> str:
    """The category of an item: the part before the dot, in the item's vocabulary (`401.10` -> `401`,
    `V45.81` -> `V45`, `E11.99` -> `E11`, `ICD10CM:V45.5` -> `ICD10CM:V45`, `V45.5XXA` -> `ICD10CM:V45`)."""
    head = code_of_item(code).split(".", 1)[0]
    return icd10cm_item(head) if vocabulary_of_item(code) == ICD10CM else head


def _parse_ranges(text: str) -> list[tuple[float, float]]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.append((float(lo), float(hi or lo)))
    return out


def _ancestors(phecode: str, known: set[str]) -> list[str]:
    """Phecode and its ancestors by truncation of decimals (`250.11` -> `250.1` -> `250`)."""
    out = [phecode]
    p = phecode
    while "." in p:
        head, frac = p.split(".")
        p = head if len(frac) == 1 else f"{head}.{frac[:-1]}"
        if p in known:
            out.append(p)
    return out


@lru_cache(maxsize=1)
def phecode_table() -> PhecodeTable:
    """The v1.2 maps (ICD-9-CM and ICD-10-CM) as index arrays: the phecodes each item counts toward,
    its own phecodes, and the exclusion matrix (`table_of_maps`), read once per process."""
    return table_of_maps(phecode_map(), phecode_map_icd10cm())


def table_of_maps(m: pd.DataFrame, m10: pd.DataFrame) -> PhecodeTable:
    """The `PhecodeTable` of an ICD-9 map (`engine.vocab.phecode_map`'s columns) and an ICD-10-CM map
    (`engine.vocab.phecode_map_icd10cm`'s). Each distinct (phecode, rollup), (phecode, exclusion text)
    and ICD-10-CM item is read once, and a range's phecodes are found by binary search in the sorted
    phecode values (issue 36: the maps read row by row took 2.4 s of the Compare page's first opening at
    paper scale; tests/reference_phecode_table.py is that reading, the test's reference)."""
    codes = m["icd9"].to_numpy(dtype=object).tolist()
    pcs = m["phecode"].to_numpy(dtype=object).tolist()
    rollups = m["rollup"].to_numpy(dtype=bool).tolist()
    known = set(pcs)
    phecodes = np.array(sorted(known, key=float), dtype=object)
    idx = {p: i for i, p in enumerate(phecodes)}
    # what a code counts toward depends on its phecode and rollup alone; the last row of a code counts
    toward9 = {
        (pc, up): frozenset(idx[t] for t in (_ancestors(pc, known) if up else [pc]))
        for pc, up in set(zip(pcs, rollups, strict=True))
    }
    single = [frozenset((i,)) for i in range(len(phecodes))]  # shared: most items have one phecode
    leaf = {p: single[i] for p, i in idx.items()}
    code_phecodes = dict(zip(codes, [toward9[k] for k in zip(pcs, rollups, strict=True)], strict=True))
    code_leaves = dict(zip(codes, [leaf[pc] for pc in pcs], strict=True))
    ranges: dict[int, set[tuple[float, float]]] = {}
    for pc, excl in set(zip(pcs, m["exclude_range"].to_numpy(dtype=object).tolist(), strict=True)):
        ranges.setdefault(idx[pc], set()).update(_parse_ranges(excl))
    unrolled = m10["phecode_unrolled"].to_numpy(dtype=object)
    own10 = m10["phecode"].to_numpy(dtype=object)
    outside = sorted((set(unrolled.tolist()) | set(own10.tolist())) - known)
    if outside:  # the shipped maps hold none; a replaced map file must not be half understood
        raise ValueError(f"phecodes of the ICD-10-CM map absent from the ICD-9 map: {outside[:5]}")
    position = pd.Index(phecodes)
    group, items = pd.factorize(m10["item"].to_numpy(dtype=object))  # items in order of first row
    names = items.tolist()
    code_phecodes.update(zip(names, _sets_of(group, position.get_indexer(unrolled), single), strict=True))
    code_leaves.update(zip(names, _sets_of(group, position.get_indexer(own10), single), strict=True))
    values = phecodes.astype(float)
    # a phecode without its own rows (reached only by rollup) takes its descendants' ranges
    text = phecodes.astype(str)
    for i in range(len(phecodes)):
        if i not in ranges:
            below = np.flatnonzero(np.char.startswith(text, text[i] + "."))
            ranges[i] = {r for j in below.tolist() for r in ranges.get(j, ())}
    # [q, p] = 1 when q lies in one of p's ranges (the values are sorted: a range is a run of them) or q is p
    held = np.eye(len(phecodes), dtype=np.int8)
    for i, spans in ranges.items():
        for lo, hi in spans:
            held[np.searchsorted(values, lo, "left") : np.searchsorted(values, hi, "right"), i] = 1
    excl = sp.csr_matrix(held)
    by_category: dict[str, set[int]] = {}
    for code, leaves in code_leaves.items():
        by_category.setdefault(_category(code), set()).update(leaves)
    category_leaves = {c: frozenset(v) for c, v in by_category.items()}
    return PhecodeTable(phecodes, values, code_phecodes, code_leaves, excl, category_leaves)


def _sets_of(group: np.ndarray, values: np.ndarray, single: list[frozenset[int]]) -> list[frozenset[int]]:
    """Per group 0, 1, ... (`group` of each row, every group present), the set of its rows' `values`;
    `single[v]` is the set {v}, shared by the groups that hold v alone."""
    order = np.argsort(group, kind="stable")
    bounds = np.flatnonzero(np.diff(group[order], prepend=-1, append=-1)).tolist()
    vals = values[order].tolist()
    return [single[vals[a]] if b - a == 1 else frozenset(vals[a:b]) for a, b in pairwise(bounds)]


# ----------------------------------------------------------------------------- phenotype matrix
@dataclass(frozen=True, eq=False)
class PhenotypeMatrix:
    """Per patient and phecode: cases, and who is excluded from the controls."""

    patient_ids: np.ndarray
    phecodes: np.ndarray
    counts: sp.csr_matrix  # (patients, phecodes) occurrences counting toward the phecode
    excluded: sp.csr_matrix  # (patients, phecodes) 1 = not a control

    def cases(self, min_code_count: int) -> sp.csr_matrix:
        c = self.counts.copy()
        c.data = (c.data >= min_code_count).astype(np.int8)
        c.eliminate_zeros()
        return c


def _item_matrices(items: np.ndarray, item_codes: Mapping[str, frozenset[str]] | None, table: PhecodeTable):
    """(n_items, n_phecodes) 0/1 matrices: items counting toward a phecode (every code does), and
    items that exclude from controls (some code's phecode, or for a code absent from the map the
    phecodes of its category, lies in the range; `PhecodeTable.leaves_of`)."""
    n_p = len(table.phecodes)
    c_rows, c_cols, x_rows, x_cols = [], [], [], []
    for i, item in enumerate(items):
        codes = codes_of(str(item), item_codes)
        sets = [table.code_phecodes.get(c, frozenset()) for c in codes]
        for p in frozenset.intersection(*sets) if sets else ():
            c_rows.append(i)
            c_cols.append(p)
        for c in codes:
            for leaf in table.leaves_of(c):
                x_rows.append(i)
                x_cols.append(leaf)
    count_m = sp.csr_matrix((np.ones(len(c_rows), np.int32), (c_rows, c_cols)), shape=(len(items), n_p))
    leaf_m = sp.csr_matrix((np.ones(len(x_rows), np.int32), (x_rows, x_cols)), shape=(len(items), n_p))
    # an item in any phecode q excludes from the controls of every p whose range holds q
    excl_m = (leaf_m @ table.exclusion.astype(np.int32)).tocsr()
    excl_m.data[:] = 1
    return count_m, excl_m


def code_phecodes(codes: np.ndarray) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Two (len(codes), n_phecodes) 0/1 matrices of original codes: the phecodes each counts toward,
    and those whose controls a holder leaves (module docstring; the rows `phenotype_matrix` uses),
    for callers that weigh codes by the phenotypes they carry (the PheWAS-preserving completion,
    `engine.anonymize.population`)."""
    count_m, excl_m = _item_matrices(np.asarray(codes, dtype=object), None, phecode_table())
    count_m.data[:] = 1
    return count_m.tocsr(), excl_m.tocsr()


def phenotype_matrix(
    records: Records, item_codes: Mapping[str, frozenset[str]] | None = None
) -> PhenotypeMatrix:
    """Patients x phecodes for original records (`item_codes` None) or released ones."""
    table = phecode_table()
    count_m, excl_m = _item_matrices(records.items, item_codes, table)
    if records.has_visits:
        # occurrences = visits holding a code that counts toward the phecode
        per_visit = (records.visit_item_sets.astype(np.int32) @ count_m).tocsr()
        per_visit.data[:] = 1
        owner = sp.csr_matrix(
            (np.ones(records.n_visits, np.int32), (records.visit_patient, np.arange(records.n_visits))),
            shape=(records.n_patients, records.n_visits),
        )
        counts = (owner @ per_visit).tocsr()
    else:
        counts = (records.patient_item_counts.astype(np.int32) @ count_m).tocsr()
    excluded = (records.patient_item_sets.astype(np.int32) @ excl_m).tocsr()
    excluded.data[:] = 1
    excluded = excluded.maximum((counts > 0).astype(np.int32)).tocsr()
    return PhenotypeMatrix(records.patient_ids, table.phecodes, counts, excluded)


def unmapped_codes(records: Records, item_codes: Mapping[str, frozenset[str]] | None = None) -> pd.DataFrame:
    """Codes of `records` (released items expanded by `item_codes`) absent from the phecode map: one
    row per code with the number of patients holding it and `excluded_from`, the phecodes of its
    category whose controls those patients leave (with the phecodes whose exclusion ranges hold them;
    empty when the map knows nothing of the category). Sorted by code."""
    table = phecode_table()
    holders = records.patient_item_sets.tocsc()
    patients: dict[str, set[int]] = {}
    for j, item in enumerate(records.items):
        absent = [c for c in codes_of(str(item), item_codes) if c not in table.code_leaves]
        rows = holders.indices[holders.indptr[j] : holders.indptr[j + 1]].tolist() if absent else []
        for c in absent:
            patients.setdefault(c, set()).update(rows)
    out = [
        {
            "code": c,
            "patients": len(patients[c]),
            "excluded_from": " ".join(table.phecodes[sorted(table.leaves_of(c))].tolist()),
        }
        for c in sorted(patients)
    ]
    return pd.DataFrame(out, columns=["code", "patients", "excluded_from"])


# ------------------------------------------------------------------------------------- testing
def _chi2_sf(chi2: np.ndarray, dof: int | np.ndarray) -> np.ndarray:
    """Upper tail of the chi-square distribution: `scipy.special.chdtrc`, the function
    `scipy.stats.chi2.sf` calls for it (the same values, without scipy.stats' per-call argument checks,
    which the association-aware completion's thousands of small calls would pay; chi2 here is never
    negative). Imported here, when a test runs, not with the module (issue 24)."""
    from scipy import special

    return special.chdtrc(dof, chi2)


def _chi2_allelic(a, b, c, d):
    """Pearson chi-square (no continuity correction) of [[a, b], [c, d]], vectorized."""
    n = a + b + c + d
    num = n * (a * d - b * c) ** 2
    den = (a + b) * (c + d) * (a + c) * (b + d)
    with np.errstate(divide="ignore", invalid="ignore"):
        chi2 = np.where(den > 0, num / den, 0.0)
    return chi2, _chi2_sf(chi2, 1)


def _chi2_genotypic(case_g: np.ndarray, ctrl_g: np.ndarray):
    """Pearson chi-square of the 2x3 genotype table per test; empty genotype columns dropped."""
    table = np.stack([case_g, ctrl_g], axis=1).astype(float)  # (tests, 2, 3)
    col = table.sum(axis=1, keepdims=True)
    row = table.sum(axis=2, keepdims=True)
    n = table.sum(axis=(1, 2), keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = row * col / n
        contrib = np.where(expected > 0, (table - expected) ** 2 / expected, 0.0)
    chi2 = contrib.sum(axis=(1, 2))
    dof = (col[:, 0, :] > 0).sum(axis=1) - 1
    p = np.where(dof > 0, _chi2_sf(chi2, np.maximum(dof, 1)), 1.0)
    return chi2, p


def _bh(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values."""
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    ranked = p[order] * m / np.arange(1, m + 1)
    adj = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adj, 1.0)
    return out


@dataclass(frozen=True, eq=False)
class PhewasCounts:
    """Per SNP, the genotype counts a PheWAS is computed from; they add over disjoint patient sets
    (shards, `engine.scale.shards.sharded_phewas`). `cases[snp]`: (phecodes, 3) cases with genotype
    0/1/2; `excluded[snp]`: (phecodes, 3) genotyped patients not controls; `genotyped[snp]`: (3,)."""

    phecodes: np.ndarray
    snps: tuple[str, ...]
    cases: dict[str, np.ndarray]
    excluded: dict[str, np.ndarray]
    genotyped: dict[str, np.ndarray]

    def __add__(self, other: PhewasCounts) -> PhewasCounts:
        if self.snps != other.snps or not np.array_equal(self.phecodes, other.phecodes):
            raise ValueError("PheWAS counts of different SNPs or phecodes do not add")
        return PhewasCounts(
            self.phecodes,
            self.snps,
            {s: self.cases[s] + other.cases[s] for s in self.snps},
            {s: self.excluded[s] + other.excluded[s] for s in self.snps},
            {s: self.genotyped[s] + other.genotyped[s] for s in self.snps},
        )


def phewas_counts(
    phenotypes: PhenotypeMatrix, genotypes: pd.DataFrame, min_code_count: int = 1
) -> PhewasCounts:
    """Case and control genotype counts of every SNP column of `genotypes` and every phecode.
    Genotyped patients absent from the phenotype matrix are left out; patients of the matrix without
    a genotype row count as missing."""
    geno = genotypes.set_index(genotypes["patient_id"].astype(str))
    geno = geno.reindex(pd.Index(phenotypes.patient_ids.astype(str)))
    snps = tuple(c for c in genotypes.columns if c != "patient_id")
    cases = phenotypes.cases(min_code_count).astype(np.float64).T.tocsr()  # (phecodes, patients)
    excl = phenotypes.excluded.astype(np.float64).T.tocsr()
    case_g, excl_g, total = {}, {}, {}
    for snp in snps:
        g = pd.to_numeric(geno[snp], errors="coerce").to_numpy(dtype=float)
        ok = ~np.isnan(g)
        one_hot = np.stack([(g == v) & ok for v in (0, 1, 2)], axis=1).astype(float)  # (patients, 3)
        case_g[snp] = np.asarray(cases @ one_hot)  # (phecodes, 3)
        excl_g[snp] = np.asarray(excl @ one_hot)
        total[snp] = one_hot.sum(axis=0)
    return PhewasCounts(phenotypes.phecodes, snps, case_g, excl_g, total)


def run_phewas(
    phenotypes: PhenotypeMatrix, genotypes: pd.DataFrame, settings: PhewasSettings = PhewasSettings()
) -> pd.DataFrame:
    """Every SNP column of `genotypes` against every phecode with enough cases (columns
    `RESULT_COLUMNS`). Genotyped patients absent from the phenotype matrix are left out; patients of
    the matrix without a genotype row count as missing."""
    return phewas_of_counts(phewas_counts(phenotypes, genotypes, settings.min_code_count), settings)


def tested(
    case_g: np.ndarray, ctrl_g: np.ndarray, settings: PhewasSettings = PhewasSettings()
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One SNP's tests from its (..., 3) case and control genotype counts (any leading shape): whether
    each runs (at least `min_cases` cases and a control), and the chi-square and p of those that run
    (flat, in order). The one computation of `phewas_of_counts` and of the association-aware
    completion's ledger (`engine.anonymize.association_ledger`)."""
    n_case = case_g.sum(axis=-1)
    n_ctrl = ctrl_g.sum(axis=-1)
    run = (n_case >= settings.min_cases) & (n_ctrl > 0)
    cg, kg = case_g[run], ctrl_g[run]
    if settings.test == "allelic":
        a = cg[:, 1] + 2 * cg[:, 2]  # minor alleles in cases
        c = kg[:, 1] + 2 * kg[:, 2]
        chi2, p = _chi2_allelic(a, 2 * n_case[run] - a, c, 2 * n_ctrl[run] - c)
    else:
        chi2, p = _chi2_genotypic(cg, kg)
    return run, chi2, p


def phewas_of_counts(counts: PhewasCounts, settings: PhewasSettings = PhewasSettings()) -> pd.DataFrame:
    """The PheWAS table (`RESULT_COLUMNS`) from case and control genotype counts."""
    names = phenotype_names()
    frames = []
    for snp in counts.snps:
        case_g = counts.cases[snp]
        ctrl_g = counts.genotyped[snp][None, :] - counts.excluded[snp]
        run, chi2, p = tested(case_g, ctrl_g, settings)
        if not run.any():
            continue
        n_case, n_ctrl = case_g.sum(axis=1), ctrl_g.sum(axis=1)
        cg, kg = case_g[run], ctrl_g[run]
        a = cg[:, 1] + 2 * cg[:, 2]  # minor alleles in cases
        b = 2 * n_case[run] - a
        c = kg[:, 1] + 2 * kg[:, 2]
        d = 2 * n_ctrl[run] - c
        zero = (a == 0) | (b == 0) | (c == 0) | (d == 0)
        aa, bb, cc, dd = (x + 0.5 * zero for x in (a, b, c, d))
        with np.errstate(divide="ignore", invalid="ignore"):
            log_or = np.log(aa * dd / (bb * cc))
            se = np.sqrt(1 / aa + 1 / bb + 1 / cc + 1 / dd)
        pcs = counts.phecodes[run]
        frames.append(
            pd.DataFrame(
                {
                    "snp": snp,
                    "phecode": pcs,
                    "phenotype": [names.get(p_, "") for p_ in pcs],
                    "n_cases": n_case[run].astype(int),
                    "n_controls": n_ctrl[run].astype(int),
                    "case_maf": a / (2 * n_case[run]),
                    "control_maf": c / (2 * n_ctrl[run]),
                    "odds_ratio": np.exp(log_or),
                    "ci_low": np.exp(log_or - 1.959963984540054 * se),
                    "ci_high": np.exp(log_or + 1.959963984540054 * se),
                    "chi2": chi2,
                    "p": p,
                    "p_bonferroni": np.minimum(p * run.sum(), 1.0),
                    "p_bh": _bh(p),
                }
            )
        )
    if not frames:
        return pd.DataFrame(columns=RESULT_COLUMNS)
    return pd.concat(frames, ignore_index=True)[RESULT_COLUMNS]


def phewas_of_records(
    records: Records, genotypes: pd.DataFrame, settings: PhewasSettings = PhewasSettings()
) -> pd.DataFrame:
    return run_phewas(phenotype_matrix(records), genotypes, settings)


def phewas_of_release(
    release: Release, genotypes: pd.DataFrame, settings: PhewasSettings = PhewasSettings()
) -> pd.DataFrame:
    return run_phewas(phenotype_matrix(release.records, release.item_codes), genotypes, settings)


# ---------------------------------------------------------------------------------- comparison
Correction = Literal["bh", "bonferroni", "heatherly2013", "none"]
CORRECTIONS: tuple[Correction, ...] = ("bh", "bonferroni", "heatherly2013", "none")
DEFAULT_CORRECTION: Correction = "bh"  # see the module docstring, "Multiple testing"
HEATHERLY_2013: Correction = "heatherly2013"  # Table 4's setting: uncorrected p <= 0.05
_P_COLUMN = {"none": "p", "heatherly2013": "p", "bonferroni": "p_bonferroni", "bh": "p_bh"}


def paired(original: pd.DataFrame, released: pd.DataFrame) -> pd.DataFrame:
    """Original and released results side by side for every (snp, phecode) tested in either; a test
    that did not run (too few cases) has p NaN there."""
    keep = ["snp", "phecode", "phenotype", "n_cases", "odds_ratio", "p", "p_bonferroni", "p_bh"]
    o = original[keep].rename(columns={c: f"{c}_original" for c in keep[3:]})
    r = released[keep].rename(columns={c: f"{c}_released" for c in keep[3:]})
    both = o.merge(r.drop(columns="phenotype"), on=["snp", "phecode"], how="outer")
    if both["phenotype"].isna().any():
        names = phenotype_names()
        both["phenotype"] = both["phenotype"].fillna(both["phecode"].map(names))
    for col in ("p_original", "p_released"):  # an outer merge with an empty side leaves object dtype
        both[col] = pd.to_numeric(both[col], errors="coerce").astype(float)
    both["neglog10_original"] = -np.log10(both["p_original"])
    both["neglog10_released"] = -np.log10(both["p_released"])
    both["change"] = both["neglog10_released"] - both["neglog10_original"]
    return both.sort_values(["snp", "phecode"], key=_phecode_sort_key).reset_index(drop=True)


def _phecode_sort_key(col: pd.Series) -> pd.Series:
    return col.astype(float) if col.name == "phecode" else col


def significance_table(
    original: pd.DataFrame,
    released: Mapping[str, pd.DataFrame],
    alpha: float = 0.05,
    correction: Correction = DEFAULT_CORRECTION,
) -> pd.DataFrame:
    """Heatherly's Table 4 layout: per SNP, associations at (corrected) p <= alpha in the original
    data, and for each release the lost (significant before, not after) and false (not before,
    significant after) associations, with a Total row. A test that did not run counts as not
    significant. Default: Benjamini-Hochberg; `correction="heatherly2013"` is the paper's uncorrected
    p <= alpha."""
    if correction not in _P_COLUMN:
        raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}, not {correction!r}")
    col = _P_COLUMN[correction]
    snps = sorted(set(original["snp"]))
    if not snps:
        return pd.DataFrame([])
    # One outer merge per release over all SNPs and one groupby, instead of a merge per SNP (issue 13:
    # 3.9 s per PheWAS rerun on the sample). The merge key holds the SNP, so this equals the per-SNP
    # merges stacked; released SNPs absent from the original are left out, as before.
    o = original[["snp", "phecode", col]]
    columns: dict[str, pd.Series] = {
        "original": (o[col] <= alpha).groupby(o["snp"]).sum().reindex(snps, fill_value=0).astype(int)
    }
    for name, rel in released.items():
        r = rel.loc[rel["snp"].isin(snps), ["snp", "phecode", col]]
        both = o.merge(r, on=["snp", "phecode"], how="outer", suffixes=("_original", "_released"))
        sig_o = pd.to_numeric(both[f"{col}_original"], errors="coerce") <= alpha  # NaN: not significant
        sig_r = pd.to_numeric(both[f"{col}_released"], errors="coerce") <= alpha
        counts = (
            pd.DataFrame(
                {
                    f"{name}: lost": sig_o & ~sig_r,
                    f"{name}: false": ~sig_o & sig_r,
                    f"{name}: identical": sig_o & sig_r,
                }
            )
            .groupby(both["snp"])
            .sum()
        )
        for c in counts.columns:
            columns[c] = counts[c].reindex(snps, fill_value=0).astype(int)
    table = pd.DataFrame({"snp": snps, **{c: v.to_numpy() for c, v in columns.items()}})
    total = table.drop(columns="snp").sum(numeric_only=True)
    return pd.concat([table, pd.DataFrame([{"snp": "Total", **total.to_dict()}])], ignore_index=True)


def r_squared(pairs: pd.DataFrame) -> float:
    """Squared Pearson correlation of -log10 p, original vs released, over tests run in both."""
    both = pairs.dropna(subset=["neglog10_original", "neglog10_released"])
    if len(both) < 2 or both["neglog10_original"].std() == 0 or both["neglog10_released"].std() == 0:
        return float("nan")
    return float(np.corrcoef(both["neglog10_original"], both["neglog10_released"])[0, 1] ** 2)


def association_weights(original: pd.DataFrame, alpha: float = 0.05, width: float = 0.5) -> np.ndarray:
    """Per phecode of `phecode_table()`, how fragile its tests in `original` (a PheWAS table) are at
    `alpha` (uncorrected p): the sum over its SNPs of exp(-|z - z_alpha| / width), z the test's
    normal score (sqrt of the 1-dof chi-square, from p) and z_alpha the threshold's; a phecode not
    tested weighs exp(-z_alpha / width). Tests near the threshold weigh about 1, far ones about 0:
    what a change of case or control status is likely to move across it (issue #36). Engine and
    bench/table4.py only: suppressions chosen by genotype association results carry those results into
    the release (docs/architecture.md, section 4)."""
    from scipy import stats

    idx = phecode_table().index()
    z_alpha = float(stats.norm.isf(alpha / 2))
    w = np.full(len(idx), np.exp(-z_alpha / width))
    if len(original):
        z = stats.norm.isf(original["p"].to_numpy(dtype=float) / 2)
        near = np.exp(-np.abs(z - z_alpha) / width)
        rows = np.array([idx[str(p)] for p in original["phecode"]], dtype=np.int64)
        w[np.unique(rows)] = 0
        np.add.at(w, rows, near)
    return w
