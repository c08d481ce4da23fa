"""Diagnosis Count and Code Count (Heatherly 2013, "Computation of Diagnosis Count and Code Count",
Figure 15; the layouts of Tables 1, 2 and 3).

- Diagnosis Count (DC): the number of (record, diagnosis) pairs, a record counting a diagnosis once
  however many visits hold it (Figure 15: 053.11 in record B only gives 1). A generalized item counts
  as one diagnosis: a record holding 401.0 and 401.1, released as `{401.0,401.1}`, goes from DC 2 to 1
  (the paper's Discussion of record 49532).
- Code Count (CC): the number of ICD-9 codes with at least one positive record (Figure 15: 5). In a
  release, a code counts when some released item present in the data stands for it (the code itself,
  or a generalized set holding it). This is the reading under which Table 1's SD-Anon keeps 15,112 of
  15,115 codes while ~1,500 codes are released only inside generalized sets (Table 3 text), and under
  which an extracted cohort may cover more codes than it held (DEMO_S: 8,747 against 8,734).
  `released_items` (the number of distinct released items) is reported beside it.
- Population size: records that still hold at least one item (Table 1).
- SD %: a count as a share of the whole population's original figure; Local %: as a share of the
  same records' original figure (e.g. DEMO_B against DEMO). For Code Count, Local % counts only the
  codes the records' own original held (`Figures.codes_of_original`): the paper's count, which may
  cover codes they never held (DEMO_S 8,747 against 8,734), stays the count, and every share lies in
  0-100% (issue 35: "CC Local %" read up to 127%).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from engine.records import Records
from engine.release import codes_of


@dataclass(frozen=True)
class Figures:
    """DC, CC, released items and population size of one dataset (original or released)."""

    diagnosis_count: int
    code_count: int
    released_items: int
    population_size: int
    # of a release: the codes of its own records' original still represented (`code_count` restricted
    # to them); None for an original (its code_count). The Local % of Code Count reads this (issue 35)
    codes_of_original: int | None = None

    @property
    def own_code_count(self) -> int:
        """The codes counted against the records' own original: `codes_of_original` when known."""
        return self.code_count if self.codes_of_original is None else self.codes_of_original


def diagnosis_count(records: Records) -> int:
    """Number of distinct (record, item) pairs (Figure 15, "Diagnosis Count")."""
    return int(records.patient_item_sets.nnz)


def present_items(records: Records) -> np.ndarray:
    """The items that occur in at least one event."""
    return records.items[np.unique(records.event_item)]


def covered_codes(records: Records, item_codes: Mapping[str, frozenset[str]] | None = None) -> set[str]:
    """The original codes some present item stands for."""
    covered: set[str] = set()
    for item in present_items(records).tolist():
        covered |= codes_of(str(item), item_codes)
    return covered


def code_count(records: Records, item_codes: Mapping[str, frozenset[str]] | None = None) -> int:
    """Number of original codes some present item stands for (Figure 15, "Code Count")."""
    return len(covered_codes(records, item_codes))


def population_size(records: Records) -> int:
    """Records holding at least one item (Table 1, "Population Size")."""
    per_patient = records.event_ptr[records.visit_ptr[1:]] - records.event_ptr[records.visit_ptr[:-1]]
    return int((per_patient > 0).sum())


def figures(
    records: Records,
    item_codes: Mapping[str, frozenset[str]] | None = None,
    original: Records | None = None,
) -> Figures:
    """All of Table 1's figures for one dataset; for a release, with `original` (its records' own
    original), also the codes of that original it still represents (`Figures.codes_of_original`)."""
    covered = covered_codes(records, item_codes)
    own = None if original is None else len(covered & {str(c) for c in present_items(original).tolist()})
    return Figures(
        diagnosis_count=diagnosis_count(records),
        code_count=len(covered),
        released_items=len(present_items(records)),
        population_size=population_size(records),
        codes_of_original=own,
    )


def code_count_phrase(release: Figures, original: Figures) -> str:
    """ "CC kept of held": the original's codes a release still represents, out of the codes the original
    held, and how many further codes its generalized sets stand for. A bin built over the biobank or the
    population may hold codes only patients outside the cohort have, so `release.code_count` alone read
    "CC 12106 of 12081" at 1.37 M patients (issue #36)."""
    extra = release.code_count - release.own_code_count
    note = (
        f" (its sets also stand for {extra} code{'s' if extra != 1 else ''} the cohort never held)"
        if extra
        else ""
    )
    return f"CC {release.own_code_count} of {original.code_count}{note}"


def _share(count: int, base: int) -> float:
    return float(count) / base if base else float("nan")


@dataclass(frozen=True)
class RetentionRow:
    """One anonymized dataset of Tables 2-3: its figures with and without generalization, the figures
    of its own original records (Local) and of the whole population (SD)."""

    name: str
    with_generalization: Figures
    without_generalization: Figures
    local: Figures
    whole: Figures


def summary_table(originals: Mapping[str, Figures], rows: list[RetentionRow]) -> pd.DataFrame:
    """Table 1: original datasets, then each anonymized version with CC and DC as a share of its
    original (Local %)."""
    out = [
        {
            "dataset": name,
            "original": True,
            "Code Count": f.code_count,
            "CC %": np.nan,
            "Diagnosis Count": f.diagnosis_count,
            "DC %": np.nan,
            "Population Size": f.population_size,
            "released items": f.released_items,
        }
        for name, f in originals.items()
    ]
    for r in rows:
        f = r.with_generalization
        out.append(
            {
                "dataset": r.name,
                "original": False,
                "Code Count": f.code_count,
                "CC %": 100 * _share(f.own_code_count, r.local.code_count),
                "Diagnosis Count": f.diagnosis_count,
                "DC %": 100 * _share(f.diagnosis_count, r.local.diagnosis_count),
                "Population Size": f.population_size,
                "released items": f.released_items,
            }
        )
    return pd.DataFrame(out)


def count_table(rows: list[RetentionRow], measure: str) -> pd.DataFrame:
    """Table 2 (`measure="diagnosis_count"`) or Table 3 (`"code_count"`): count, SD % and Local %,
    without and with generalization, one row per anonymized dataset."""
    if measure not in ("diagnosis_count", "code_count"):
        raise ValueError("measure must be 'diagnosis_count' or 'code_count'")
    out = []
    for r in rows:
        row: dict[str, object] = {"dataset": r.name}
        for label, f in (
            ("without generalization", r.without_generalization),
            ("with generalization", r.with_generalization),
        ):
            c = getattr(f, measure)
            row[f"{label}: count"] = c
            row[f"{label}: SD %"] = 100 * _share(c, getattr(r.whole, measure))
            own = f.own_code_count if measure == "code_count" else c
            row[f"{label}: Local %"] = 100 * _share(own, getattr(r.local, measure))
        out.append(row)
    return pd.DataFrame(out)
