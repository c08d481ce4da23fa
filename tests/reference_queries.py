"""Utility constraint satisfaction as it was before issue 24 (engine/utility/queries.py at 41de5b2):
one pass over every item per disease, and the original cohort recounted on every call. Kept as the
plain reference the one-product count is compared with (tests/test_queries_fast.py). Not used by the
engine."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from engine.records import Records
from engine.release import Release
from engine.utility.queries import UtilityPolicy


def reference_disease_counts(
    records: Records, codes: frozenset[str], item_codes: Mapping[str, frozenset[str]] | None
) -> int:
    """Records holding an item whose codes all belong to `codes` (original data: any code of it)."""
    cols = [
        j
        for j, it in enumerate(records.items.tolist())
        if (item_codes or {}).get(str(it), frozenset((str(it),))) <= codes
    ]
    if not cols:
        return 0
    return int((records.patient_item_sets[:, cols].sum(axis=1) > 0).sum())


def reference_utility_satisfaction(
    cohort: Records, release: Release, utility: UtilityPolicy | Mapping[str, frozenset[str]]
) -> pd.DataFrame:
    """One row per disease: records with it before and after, and whether the constraint is satisfied."""
    diseases = utility.diseases if isinstance(utility, UtilityPolicy) else dict(utility)
    rows = []
    for name, codes in diseases.items():
        before = reference_disease_counts(cohort, codes, None)
        after = reference_disease_counts(release.records, codes, release.item_codes)
        rows.append((name, before, after, before == after))
    return pd.DataFrame(rows, columns=["disease", "original_records", "released_records", "satisfied"])
