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

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

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


def distinct(x: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a numeric array, as `np.unique(x)` gives them, by a sort: numpy
    2.4's `np.unique` hashes, about 80x slower on a few hundred thousand distinct values."""
    x = np.sort(np.asarray(x).ravel())
    return x[np.r_[True, x[1:] != x[:-1]]] if len(x) else x


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


# ------------------------------------------------------------ the figures of the files written (issue 23)
@dataclass(frozen=True)
class FileFigures:
    """What a release's files hold, read back from the bytes written (`file_figures`): the one
    source of every figure the report, its JSON and the Compare page show about what is kept.

    - `rows`: data rows of `release.csv`; `patients`: distinct patients in it;
    - `pairs_kept` of `pairs_of`: distinct (patient, original code) pairs of the cohort still
      represented in the file, by the code itself or by an item standing for it (the code map) that is
      specific enough to be used (`SPECIFIC_RULE`, `specific_item`: a catch-all never counts; issue 35),
      of all such pairs of the cohort (`pairs_retained`); `pairs_in_broad_items`: the pairs represented
      only by items too broad to count;
    - `codes_kept` of `codes_of`: distinct codes of the cohort that some released row stands for (as
      itself or inside a generalized item specific enough to be used, whoever's row it is);
      `codes_as_themselves`: those released as themselves (the item is the code, or for LDA a
      `code|age` pair of the code)."""

    rows: int
    patients: int
    pairs_kept: int
    pairs_of: int
    codes_kept: int
    codes_of: int
    codes_as_themselves: int
    pairs_in_broad_items: int = 0

    @property
    def pairs_share(self) -> float:
        return self.pairs_kept / self.pairs_of if self.pairs_of else 1.0

    @property
    def codes_share(self) -> float:
        return self.codes_kept / self.codes_of if self.codes_of else 1.0


SPECIFIC_RULE = (
    "a (patient, code) pair counts as retained when the released item standing for it is the code itself "
    "or stands only for codes of one phecode family (their phecodes share the integer part, as 250.1 and "
    "250.2 lie under 250: a PheWAS can still use the item at that phecode); an item spanning several "
    "families, a catch-all above all, keeps no pair"
)


def _phecode_family(code: str) -> str:
    from engine.vocab import primary_phecode_of_item

    phecode = primary_phecode_of_item(code)
    return phecode.split(".", 1)[0] if phecode else f"no phecode: {code}"


def specific_item(codes: list[str]) -> bool:
    """Whether an item standing for `codes` (the cohort's codes under it) is specific enough to count
    as keeping them (`SPECIFIC_RULE`): one code, or codes of one phecode family
    (`engine.vocab.primary_phecode_of_item`, its integer part; a code without a phecode is its own)."""
    if len(codes) <= 1:
        return True
    first = _phecode_family(codes[0])
    return all(_phecode_family(c) == first for c in codes[1:])


def codes_under(cohort_codes: list[str], originals: set[str]) -> dict[str, list[int]]:
    """Original code of a code map -> the indexes of the cohort's codes it stands for: itself when it
    is a code of the cohort, else the cohort's codes under it in the ICD hierarchy (an LDA release
    holds 3-digit categories such as `250` of the cohort's `250.01`); an unknown code, none."""
    index = {c: i for i, c in enumerate(cohort_codes)}
    out: dict[str, list[int]] = {o: [index[o]] for o in originals if o in index}
    rest = originals - set(out)
    if not rest:
        return out
    from engine.hierarchy import icd_hierarchy_for

    h = icd_hierarchy_for(cohort_codes)
    under: dict[str, list[int]] = {}
    for c, i in index.items():
        if c in h:
            for a in h.ancestors(c):
                if a in rest:
                    under.setdefault(a, []).append(i)
    for o in rest:
        out[o] = under.get(o, [])
    return out


def _pairs_represented(
    stands: list[np.ndarray], cohort_keys: np.ndarray, n_c: int, released: np.ndarray, n_j: int
) -> np.ndarray:
    """The cohort's (patient, code) keys (`patient * n_c + code`) that a released (patient, item) key
    (`patient * n_j + item`) represents, item j standing for the cohort codes `stands[j]`."""
    # (cohort code, released item standing for it), by code; then per cohort pair its candidates
    pair_c = np.concatenate(stands) if stands else np.zeros(0, np.int64)
    pair_j = np.repeat(np.arange(len(stands), dtype=np.int64), [len(x) for x in stands])
    order = np.argsort(pair_c, kind="stable")
    pair_c, pair_j = pair_c[order], pair_j[order]
    p_before, c_before = np.divmod(cohort_keys, n_c)
    start = np.searchsorted(pair_c, c_before, side="left")
    count = np.searchsorted(pair_c, c_before, side="right") - start
    row = np.repeat(np.arange(len(cohort_keys)), count)
    offs = np.arange(len(row)) - np.repeat(np.cumsum(count) - count, count)
    want = p_before[row] * n_j + pair_j[start[row] + offs]
    hit = np.isin(want, released, assume_unique=False)
    return distinct(cohort_keys[row[hit]])


def file_figures(
    cohort: Records,
    release_csv: bytes,
    code_map_csv: bytes | None,
    crosswalk: Mapping[str, str] | None,
) -> FileFigures:
    """The figures of a release's files (`FileFigures`), read back with the export gate's reader
    (`engine.io.export.read_release_bytes`). `crosswalk`: release id -> source id (the inverse of
    `engine.io.export.release_ids`); None when the file names patients by their source ids. A
    patient of the file the crosswalk does not know is an error (ValueError), never skipped."""
    from engine.io.export import read_release_bytes

    rel = read_release_bytes(release_csv, code_map_csv)
    recs = rel.records
    ids = [str(x) for x in recs.patient_ids]
    if crosswalk is not None:
        missing = [x for x in ids if x not in crosswalk]
        if missing:
            raise ValueError(f"{len(missing):,} patient(s) of the release file are not in the crosswalk")
        ids = [str(crosswalk[x]) for x in ids]
    cohort_codes = [str(c) for c in cohort.items]
    n_c = max(len(cohort_codes), 1)
    # the cohort's distinct (patient, code) pairs
    cohort_keys = distinct(cohort.event_patient.astype(np.int64) * n_c + cohort.event_item)
    held = distinct(cohort.event_item)
    # each released item -> the cohort codes it stands for; as themselves: the item is the code
    items = [str(x) for x in recs.items]
    stands_for = [rel.codes_of(item) for item in items]
    part = {o: code_part(o, rel.age_pairs) for codes in stands_for for o in codes}  # once per code
    under = codes_under(cohort_codes, set(part.values()))
    code_set = set(cohort_codes)
    stands: list[np.ndarray] = []
    themselves: set[int] = set()
    for item, originals in zip(items, stands_for, strict=True):
        own = code_part(item, rel.age_pairs)
        cs: set[int] = set()
        for o in originals:
            code = part[o]
            found = under.get(code, [])
            cs.update(found)
            if code == own and code in code_set:
                themselves.update(found)
        stands.append(np.fromiter(sorted(cs), dtype=np.int64, count=len(cs)))
    # an item spanning several phecodes keeps no pair (SPECIFIC_RULE); the broad pairs are counted apart
    plain = {c: code_part(c, rel.age_pairs) for c in cohort_codes} if rel.age_pairs else None
    usable = np.array(
        [specific_item([plain[cohort_codes[c]] if plain else cohort_codes[c] for c in x]) for x in stands],
        dtype=bool,
    )
    broad = [np.zeros(0, np.int64) if ok else x for ok, x in zip(usable, stands, strict=True)]
    stands = [x if ok else np.zeros(0, np.int64) for ok, x in zip(usable, stands, strict=True)]
    # released (patient, item) pairs, patients as the cohort's indexes (a patient outside it: -1)
    patient_index = pd.Index(cohort.patient_ids.astype(str)).get_indexer(pd.Index(ids))
    ev_p = patient_index[recs.event_patient].astype(np.int64) if recs.n_events else np.zeros(0, np.int64)
    ok = ev_p >= 0
    n_j = max(len(items), 1)
    released = distinct(ev_p[ok] * n_j + recs.event_item[ok])
    kept = _pairs_represented(stands, cohort_keys, n_c, released, n_j)
    broad_kept = _pairs_represented(broad, cohort_keys, n_c, released, n_j) if not usable.all() else kept[:0]
    present = distinct(recs.event_item)
    codes_kept = (
        np.intersect1d(distinct(np.concatenate([stands[j] for j in present])), held, assume_unique=True)
        if len(present)
        else held[:0]
    )
    return FileFigures(
        rows=int(recs.n_events),
        patients=len({ids[p] for p in distinct(recs.event_patient)}),
        pairs_kept=len(kept),
        pairs_of=len(cohort_keys),
        codes_kept=len(codes_kept),
        codes_of=len(held),
        codes_as_themselves=len(themselves & set(codes_kept.tolist())),
        pairs_in_broad_items=len(np.setdiff1d(broad_kept, kept, assume_unique=True)),
    )


def pairs_retained(
    cohort: Records,
    release_csv: bytes,
    code_map_csv: bytes | None,
    crosswalk: Mapping[str, str] | None,
) -> tuple[int, int]:
    """Pairs retained (issue 23; the glossary's `pairs_retained`): (kept, of), the distinct (patient,
    original code) pairs of the cohort still represented in the release file, by the code or by an
    item standing for it, and all such pairs of the cohort. Read from the files written
    (`file_figures`)."""
    f = file_figures(cohort, release_csv, code_map_csv, crosswalk)
    return f.pairs_kept, f.pairs_of
