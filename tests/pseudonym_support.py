"""A fixed pseudonym key for tests, and reading a pseudonymous release file back in source ids."""

from __future__ import annotations

import io

import pandas as pd

from engine.io import export
from engine.io.pseudonyms import Pseudonyms
from engine.release import Release

KEY = "5e" * 32
PSEUDONYMS = Pseudonyms(KEY)


def source_frame(release: Release, release_csv: bytes, pseudonyms: Pseudonyms = PSEUDONYMS) -> pd.DataFrame:
    """The rows of a written release file with release ids turned back into source ids (through the
    crosswalk), in the order of `release.exported_frame()`'s patients; visits stay numbered."""
    back = export._read_text_csv(release_csv)
    to_source = {r: s for s, r in export.release_ids(release, pseudonyms).items()}
    back["patient_id"] = back["patient_id"].map(to_source)
    order = {p: i for i, p in enumerate(pd.unique(release.exported_frame()["patient_id"]))}
    back = back.iloc[back["patient_id"].map(order).argsort(kind="stable")]
    return back.reset_index(drop=True)


def in_source_ids(release: Release, release_csv: bytes, pseudonyms: Pseudonyms = PSEUDONYMS) -> str:
    """A written release file's text with its release ids replaced by the source ids (the steward's
    crosswalk), every other cell exactly as written: for checkers keyed by the source's patients."""
    rows = pd.read_csv(io.BytesIO(release_csv), dtype=str, keep_default_na=False)
    assert not set(rows["patient_id"]) & set(map(str, release.records.patient_ids)), "a source id left"
    to_source = {r: s for s, r in export.release_ids(release, pseudonyms).items()}
    rows["patient_id"] = rows["patient_id"].map(to_source)
    return rows.to_csv(index=False)
