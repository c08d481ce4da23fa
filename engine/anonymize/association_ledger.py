"""Heatherly 2013's Table 4 count kept live during the completion pass (issue #36): how many PheWAS
associations (uncorrected p <= alpha, as the paper) the released cohort has lost or gained against
the original, and what dropping items from one record would change in it.

The cost of the "associations" completion (`engine.anonymize.population`, `_suppress_failing`): each
failing visit drops the option (a prefix of one of its drop orders) whose exact change of this count
is lowest, given every drop chosen before it. Engine and bench/table4.py only, never a choice of the
app, the CLI or a study (docs/architecture.md, section 4): the choice reads the cohort's genotypes,
so which codes are suppressed carries the genotype-phenotype results into the release, and the
release is judged by the very tests that chose it. It is the bound of what a completion that knows
the tests can keep, against which the genotype-free "phewas" completion is measured.

Statuses are read as `engine.utility.phewas` reads a release: a record is a case of a phecode when it
holds an item every code of which counts toward it (min_code_count 1), and leaves its controls when
it holds an item some code of which lies in its exclusion range (or is a case). Counts are per SNP,
genotyped records only (`phewas_counts`); a test runs and is significant as `phewas.tested` says.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.records import Records
from engine.utility import phewas


class AssociationLedger:
    """The target records' PheWAS counts in released form, kept while items are dropped.

    `item_case` / `item_excl`: (n_codes, n_phecodes) 0/1 per representative code (the phecodes its item
    counts toward / whose controls its holders leave). `original`: the target records with their original
    codes (their tests are the reference). `within_visits`: an item is dropped from one visit, so a record
    loses it only with its last visit holding it; else from the whole record."""

    def __init__(
        self,
        original: Records,
        original_phecodes: tuple[sp.csr_matrix, sp.csr_matrix],
        genotypes: pd.DataFrame,
        *,
        within_visits: bool,
        alpha: float = 0.05,
        settings: phewas.PhewasSettings | None = None,
    ) -> None:
        settings = settings or phewas.PhewasSettings()
        if settings.min_code_count != 1:
            raise ValueError("the association ledger reads cases at min_code_count 1 (Heatherly 2013's)")
        self.settings, self.alpha, self.within_visits = settings, alpha, within_visits
        geno = genotypes.set_index(genotypes["patient_id"].astype(str))
        geno = geno.reindex(pd.Index(original.patient_ids.astype(str)))
        snps = [c for c in genotypes.columns if c != "patient_id"]
        g = np.column_stack([pd.to_numeric(geno[s], errors="coerce").to_numpy(dtype=float) for s in snps])
        self.genotype = np.where(np.isnan(g), -1, g).astype(np.int64)  # (patients, snps), -1 missing
        self.one_hot = np.stack([self.genotype == v for v in (0, 1, 2)], axis=2).astype(np.float64)
        self.genotyped = self.one_hot.sum(axis=0)  # (snps, 3)
        units = original.patient_item_sets.astype(np.int32)
        case0 = (units @ original_phecodes[0].astype(np.int32)).toarray() > 0
        excl0 = ((units @ original_phecodes[1].astype(np.int32)).toarray() > 0) | case0
        self.original_significant = self._significant(*self._counts(case0, excl0))
        self.item_case = self.item_excl = sp.csr_matrix((0, 0))
        self.h_case = self.h_excl = np.zeros((0, 0), dtype=np.int32)
        self.occurrences: list[dict[int, int]] = []

    # ------------------------------------------------------------------ counts and significance
    def _counts(self, case: np.ndarray, excl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(snps, phecodes, 3) genotype counts of the cases and of the records not controls."""
        case_g = np.einsum("rp,rsg->spg", case.astype(np.float64), self.one_hot)
        excl_g = np.einsum("rp,rsg->spg", excl.astype(np.float64), self.one_hot)
        return case_g, excl_g

    def _significant(self, case_g: np.ndarray, excl_g: np.ndarray) -> np.ndarray:
        """(snps, phecodes) or (snps, m): the tests that run and have p <= alpha."""
        ctrl_g = self.genotyped[:, None, :] - excl_g
        run, _, p = phewas.tested(case_g, ctrl_g, self.settings)
        out = np.zeros(run.shape, dtype=bool)
        out[run] = p <= self.alpha
        return out

    def sync(self, target: Records, item_case: sp.csr_matrix, item_excl: sp.csr_matrix) -> None:
        """Everything from the target records as they are now (code space: an event's item is its
        representative code; the same records, in the same order, as `original`)."""
        self.item_case, self.item_excl = item_case.tocsr(), item_excl.tocsr()
        if self.within_visits:
            owner = sp.csr_matrix(
                (np.ones(target.n_visits, np.int32), (target.visit_patient, np.arange(target.n_visits))),
                shape=(target.n_patients, target.n_visits),
            )
            occ = (owner @ target.visit_item_sets.astype(np.int32)).tocsr()
        else:
            occ = target.patient_item_sets.astype(np.int32).tocsr()
        self.occurrences = [
            dict(zip(occ.indices[a:b].tolist(), occ.data[a:b].tolist(), strict=True))
            for a, b in zip(occ.indptr[:-1], occ.indptr[1:], strict=True)
        ]
        held = (occ > 0).astype(np.int32)
        self.h_case = (held @ self.item_case.astype(np.int32)).toarray()
        self.h_excl = (held @ self.item_excl.astype(np.int32)).toarray()
        case = self.h_case > 0
        self.case_g, self.excl_g = self._counts(case, (self.h_excl > 0) | case)
        self.significant = self._significant(self.case_g, self.excl_g)

    def disagreements(self) -> int:
        """Associations lost plus false now (the Table 4 count)."""
        return int((self.significant != self.original_significant).sum())

    # ------------------------------------------------------------------------- one record's drop
    def _lost(self, record: int, items: np.ndarray) -> list[int]:
        """The items `record` no longer holds once `items` are dropped (from one of its visits when
        `within_visits`, else from the whole record)."""
        occ = self.occurrences[record]
        if self.within_visits:
            return [i for i in dict.fromkeys(items.tolist()) if occ.get(i, 0) == 1]
        return [i for i in dict.fromkeys(items.tolist()) if occ.get(i, 0) > 0]

    def _change(self, record: int, lost: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The phecodes whose case status `record` loses, those whose controls it joins, and its
        held-item counts per phecode (cases, exclusions) once `lost` is gone."""
        hc, hx = self.h_case[record], self.h_excl[record]
        hc_after, hx_after = hc.copy(), hx.copy()
        for after, matrix in ((hc_after, self.item_case), (hx_after, self.item_excl)):
            ptr, idx = matrix.indptr, matrix.indices
            for i in lost:
                np.subtract.at(after, idx[ptr[i] : ptr[i + 1]], 1)
        case_before, case_after = hc > 0, hc_after > 0
        excl_before, excl_after = (hx > 0) | case_before, (hx_after > 0) | case_after
        return (
            np.flatnonzero(case_before & ~case_after),
            np.flatnonzero(excl_before & ~excl_after),
            hc_after,
            hx_after,
        )

    def cost(self, record: int, items: np.ndarray) -> int:
        """The change of `disagreements()` if `record` dropped `items` now."""
        lost = self._lost(record, items)
        if not lost:
            return 0
        cases, controls, _, _ = self._change(record, lost)
        touched = np.union1d(cases, controls)
        if len(touched) == 0:
            return 0
        case_g, excl_g = self.case_g[:, touched].copy(), self.excl_g[:, touched].copy()
        self._shift(
            record, case_g, np.searchsorted(touched, cases), excl_g, np.searchsorted(touched, controls)
        )
        after = self._significant(case_g, excl_g)
        original = self.original_significant[:, touched]
        return int((after != original).sum() - (self.significant[:, touched] != original).sum())

    def _shift(self, record: int, case_g: np.ndarray, cases: np.ndarray, excl_g: np.ndarray, controls):
        """Take `record` out of the cases at columns `cases` and out of the non-controls at `controls`,
        SNP by SNP at its genotype (a missing genotype counts in no test of that SNP)."""
        for s, g in enumerate(self.genotype[record].tolist()):
            if g >= 0:
                case_g[s, cases, g] -= 1
                excl_g[s, controls, g] -= 1

    def apply(self, record: int, items: np.ndarray) -> None:
        """`record` drops `items` (its counts and the tests they touch change)."""
        lost = self._lost(record, items)
        occ = self.occurrences[record]
        for i in dict.fromkeys(items.tolist()):
            if i in occ:
                occ[i] = occ[i] - 1 if self.within_visits else 0
        if not lost:
            return
        cases, controls, self.h_case[record], self.h_excl[record] = self._change(record, lost)
        self._shift(record, self.case_g, cases, self.excl_g, controls)
        touched = np.union1d(cases, controls)
        if len(touched):
            self.significant[:, touched] = self._significant(self.case_g[:, touched], self.excl_g[:, touched])
