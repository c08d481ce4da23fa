"""What a release keeps of the cohort, measured against the ORIGINAL cohort (issue 16).

Method-internal figures can read as loss-free when they are not: Tamersoy's CUL is measured against
the capped record, so a universal cap removes instances no CUL sees; a generalization method can meet
its constraints by folding most codes into one item. These measures read any `Release`:

- `instances_retained`: share of the original cohort's code instances still released (caps included).
- `catch_all`: the generalized item holding the most released rows, its share of them and how many
  codes it stands for; flagged when it holds over half of the released rows (`CATCH_ALL_SHARE`).
- `code_coverage`: of the cohort's distinct codes, the share released as themselves, only inside
  generalized items, or not at all. An LDA release (`Release.age_pairs`) is read on the code part of
  its `code|age` pairs (`code_part`): a code is kept as itself when a released pair carries it, at
  any age.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from engine.records import Records
from engine.release import AGE_PAIR_SEP, Release

CATCH_ALL_SHARE = 0.5  # a generalized item holding more than this share of the released rows


@dataclass(frozen=True)
class Retained:
    """Code instances (events) of the original cohort and of the release."""

    original: int
    released: int

    @property
    def share(self) -> float:
        return self.released / self.original if self.original else 1.0

    def as_dict(self) -> dict[str, float]:
        return {"original": self.original, "released": self.released, "share": self.share}


def instances_retained(release: Release, original: Records) -> Retained:
    """Released code instances over the original cohort's code instances (every removal counts:
    caps, censoring, suppression, and codes a method does not release at all)."""
    return Retained(original=int(original.n_events), released=int(release.records.n_events))


@dataclass(frozen=True)
class CatchAll:
    """The generalized item holding the most released rows (None when no generalized item is used)."""

    item: str | None
    rows: int
    released_rows: int
    codes: int

    @property
    def share(self) -> float:
        return self.rows / self.released_rows if self.released_rows else 0.0

    @property
    def flagged(self) -> bool:
        return self.share > CATCH_ALL_SHARE

    def as_dict(self) -> dict:
        return {**asdict(self), "share": self.share, "flagged": self.flagged}


def catch_all(release: Release) -> CatchAll:
    """The largest generalized item by released rows (ties: the item's text order), its share of the
    released rows, the number of original codes it stands for, and whether it holds over half."""
    recs = release.records
    rows = np.bincount(recs.event_item, minlength=recs.n_items)
    best: tuple[int, str] | None = None
    for i, item in enumerate(str(x) for x in recs.items):
        if item in release.item_codes and rows[i] > 0 and (best is None or (-rows[i], item) < best):
            best = (-int(rows[i]), item)
    if best is None:
        return CatchAll(None, 0, int(recs.n_events), 0)
    return CatchAll(best[1], -best[0], int(recs.n_events), len(release.item_codes[best[1]]))


@dataclass(frozen=True)
class Coverage:
    """The cohort's distinct codes: released as themselves, only inside generalized items, removed."""

    codes: int
    as_themselves: int
    generalized: int
    removed: int

    def shares(self) -> dict[str, float]:
        n = self.codes or 1
        return {
            "as_themselves": self.as_themselves / n,
            "generalized": self.generalized / n,
            "removed": self.removed / n,
        }

    def as_dict(self) -> dict:
        return {**asdict(self), "shares": self.shares()}


def code_part(item: str, age_pairs: bool) -> str:
    """The code of an item: the part before the last `|` of an LDA `code|age` pair, else the item."""
    code, sep, _ = str(item).rpartition(AGE_PAIR_SEP)
    return code if age_pairs and sep else str(item)


def code_coverage(release: Release, cohort: Records) -> Coverage:
    """Each distinct code of the cohort counted once: released as itself (a released row carries the
    code), else inside a generalized item that has released rows, else removed. For an LDA release
    the codes are the code parts of its pairs, on both sides when the cohort given is its pairs."""
    held = np.bincount(cohort.event_item, minlength=cohort.n_items) > 0
    cohort_pairs = release.age_pairs and all(AGE_PAIR_SEP in str(c) for c in cohort.items[held])
    codes = {code_part(c, cohort_pairs) for c in cohort.items[held]}
    recs = release.records
    present = {str(x) for x in recs.items[np.bincount(recs.event_item, minlength=recs.n_items) > 0]}
    themselves: set[str] = set()
    inside: set[str] = set()
    for item in present:
        own = code_part(item, release.age_pairs)
        stands = release.item_codes.get(item)
        if stands is None:
            themselves.add(own)
            continue
        for original in stands:
            code = code_part(original, release.age_pairs)
            (themselves if release.age_pairs and code == own else inside).add(code)
    themselves &= codes
    generalized = (inside & codes) - themselves
    return Coverage(
        codes=len(codes),
        as_themselves=len(themselves),
        generalized=len(generalized),
        removed=len(codes) - len(themselves) - len(generalized),
    )
