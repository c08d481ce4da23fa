"""Releases that add up: the ledger of a study's releases (issue 28).

Every release goes to a recipient (`StudyRelease.recipient`, default the study's
`determination.recipient`). Two releases that share patients are verified as one, under the worst
case that one recipient holds both and links them patient by patient: the steward's crosswalk joins
the two releases' records per source patient (inside the engine a release's records carry the source
ids, which is what the crosswalk maps the release ids back to), each patient's released items are
the union of the two releases' items (labels prefixed by the release, `A:` and `B:`, so a label two
methods use differently stays two items; each stands for the codes its own code map gives, prefixed
the same way), and the combined release is verified by `engine.risk.verify` under the study's
adversary and k against the study's population. The combined file is one record per patient without
visits (a recipient cannot tell which visit of one release is which of the other; repeats count where
a release counts them), and its source is the population's records of its patients, or for an LDA
release its `code|age` cohort (`combine`). A patient's figure is the least of the combined release's
and each release's alone (`pair_distinguishability`): the pair never shows less risk than either.

This is done for every pair, whoever the recipients are (they are shown): two recipients may share
what they hold. A pair is flagged when the combined release has records below k: releases that each
meet k and together do not (`combine`'s docstring has the smallest example). Three or more releases
are linked the same way by `combine_all` / `verify_set` (prefixes `A:`, `B:`, `C:`, ...), which the
joint gate uses for the releases one recipient holds (`engine.study.joint`, issue 35).

How a pair is counted (issue 24): `combine` builds the combined release with its source, as defined
above; the ledger computes the same figures without building that source. Each release is read once
per ledger against its own side of the source (`PairCache.reading`: which of its items each original
visit of a patient supports, and whether every item it shows stands for a code its patient had), and a
pair's attacker-known visits are composed from the two readings (`_known_visits`); the linked records
are built on integer codes (`_link`). tests/reference_ledger.py keeps the pandas ledger this replaced
and tests/test_ledger_fast.py checks both agree, errors included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine import risk
from engine.adversary import Adversary
from engine.records import Records, concat_ranges
from engine.release import Release
from engine.utility.coverage import distinct


def prefixes(n: int) -> tuple[str, ...]:
    """The labels' prefixes of `n` linked files: `A:`, `B:`, ... `Z:`, then `F27:`, `F28:`, ..."""
    return tuple(chr(ord("A") + i) + ":" if i < 26 else f"F{i + 1}:" for i in range(n))


PREFIXES = prefixes(2)
LONE_VISIT = "lda"  # the one visit of a patient whose combined source has only LDA pairs


@dataclass(frozen=True)
class LedgerRelease:
    """One release on the ledger: its study, name, recipient and the release itself; `public` when
    it is held by every recipient (`engine.study.joint`)."""

    study: str
    name: str
    recipient: str
    release: Release
    public: bool = False

    @property
    def label(self) -> str:
        return f"{self.study} / {self.name}" if self.study else self.name


@dataclass(frozen=True, eq=False)
class PairResult:
    """Two releases verified as one (module docstring)."""

    a: LedgerRelease
    b: LedgerRelease
    shared: int  # patients in both
    records: int  # patients in either
    below_k: int
    unique: int
    k: int
    adversary: Adversary

    @property
    def ok(self) -> bool:
        return self.below_k == 0

    @property
    def same_recipient(self) -> bool:
        return self.a.recipient == self.b.recipient

    def message(self) -> str:
        who = (
            f"both to {self.a.recipient or 'the study recipient'}"
            if self.same_recipient
            else f"to {self.a.recipient or '(unnamed)'} and {self.b.recipient or '(unnamed)'}"
        )
        verdict = (
            f"together verified: all {self.records:,} patients have distinguishability >= {self.k}"
            if self.ok
            else f"together NOT verified: {self.below_k:,} of {self.records:,} patients below k = {self.k} "
            f"({self.unique:,} unique)"
        )
        return f"{self.a.label} + {self.b.label} ({who}; {self.shared:,} shared patients): {verdict} ({self.adversary.label})"

    def to_dict(self) -> dict[str, object]:
        return {
            "a": self.a.label,
            "b": self.b.label,
            "recipient a": self.a.recipient,
            "recipient b": self.b.recipient,
            "shared patients": self.shared,
            "records": self.records,
            "below k": self.below_k,
            "unique": self.unique,
            "verified": self.ok,
        }


def _side_codes(prefix: str, rel: Release) -> dict[str, frozenset[str]]:
    """Every item of the release, prefixed, standing for its own codes prefixed the same way: an item
    of release A is matched only by items of release A (the linked file shows which file holds what)."""
    return {
        prefix + str(item): frozenset(prefix + c for c in rel.codes_of(str(item)))
        for item in rel.records.items
    }


def _frame(r: Records, prefix: str, ids: set[str], visits: bool) -> pd.DataFrame:
    """`r`'s events of the patients `ids` (codes prefixed), with a `visit` column (str) when `visits`."""
    f = r.to_frame()
    f = f[f["patient_id"].astype(str).isin(ids)]
    out = pd.DataFrame(
        {"patient_id": f["patient_id"].astype(str).to_numpy(), "code": prefix + f["code"].astype(str)}
    )
    if visits:
        out["visit"] = f["visit"].astype(str).to_numpy() if "visit" in f.columns else "0"
    return out


def _own_codes(rel: Release) -> Records:
    """A release without a source read as its own source: each item expanded to the codes it stands for
    (nothing to check it against; the attacker's single-visit knowledge is then the whole record)."""
    r = rel.records
    rows = [
        (str(p), c)
        for p, item in zip(r.patient_ids[r.event_patient], r.items[r.event_item], strict=True)
        for c in rel.codes_of(str(item))
    ]
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "code"]))


# ------------------------------------------------------------------ linked files on integer codes
@dataclass(frozen=True, eq=False)
class _Events:
    """A file's events as the linked file lists them: per event its patient (an index into
    `patient_ids`) and its item (an index into `labels`, prefixed), in file order."""

    patient_ids: np.ndarray
    labels: np.ndarray
    patient: np.ndarray
    item: np.ndarray


def _events(r: Records, prefix: str, repeats: bool) -> _Events:
    """`r`'s events in record order, labels prefixed; unless `repeats`, the first of each (patient,
    item) only (what `drop_duplicates` keeps of the long form)."""
    ev: np.ndarray | slice = slice(None)
    if not repeats and r.n_events:
        key = r.event_patient.astype(np.int64) * max(r.n_items, 1) + r.event_item
        ev = np.sort(np.unique(key, return_index=True)[1])
    labels = np.array([prefix + str(x) for x in r.items.tolist()], dtype=object)
    return _Events(r.patient_ids, labels, r.event_patient[ev], r.event_item[ev])


@dataclass(frozen=True, eq=False)
class _Linked:
    """`_link`'s records and, per file, where its patients and items went (-1: not in the records)."""

    records: Records
    patient_map: list[np.ndarray]
    item_map: list[np.ndarray]


def _link(files: list[_Events]) -> _Linked:
    """The files' events one after the other as `Records.from_frame` reads the long form `patient_id,
    code` (no visits), built on integer codes: patients in order of first appearance, the vocabulary
    the sorted labels present, a patient's events in file order; one visit per patient."""
    ids: list[np.ndarray] = []
    orders: list[np.ndarray] = []
    for f in files:
        present, first = np.unique(f.patient, return_index=True)
        orders.append(present[np.argsort(first, kind="stable")])
        ids.append(np.asarray(f.patient_ids[orders[-1]]).astype(str))
    codes, uniques = pd.factorize(np.concatenate([np.zeros(0, dtype=str), *ids]), sort=False)
    used = [f.labels[distinct(f.item)] for f in files]
    vocab = np.array(sorted(set().union(*(u.tolist() for u in used))), dtype=object)
    at = pd.Index(vocab)
    patient_map, item_map, pats, items = [], [], [], []
    start = 0
    for f, order in zip(files, orders, strict=True):
        pm = np.full(len(f.patient_ids), -1, dtype=np.int64)
        pm[order] = codes[start : start + len(order)]
        start += len(order)
        im = at.get_indexer(f.labels).astype(np.int64)
        patient_map.append(pm)
        item_map.append(im)
        pats.append(pm[f.patient])
        items.append(im[f.item])
    p = np.concatenate([np.zeros(0, dtype=np.int64), *pats])
    order = np.argsort(p, kind="stable")
    p_sorted = p[order]
    n = len(p)
    starts = np.flatnonzero(np.r_[True, p_sorted[1:] != p_sorted[:-1]]) if n else np.zeros(0, np.int64)
    records = Records(
        patient_ids=np.asarray(uniques, dtype=object),
        items=vocab,
        visit_ptr=np.searchsorted(p_sorted[starts], np.arange(len(uniques) + 1)).astype(np.int64),
        visit_ids=np.zeros(len(starts), dtype=np.int64).astype(object),
        event_ptr=np.append(starts, n).astype(np.int64),
        event_item=np.concatenate([np.zeros(0, dtype=np.int64), *items])[order].astype(np.int32),
        has_visits=False,
    )
    return _Linked(records, patient_map, item_map)


def _sides(releases: Sequence[Release]) -> list[tuple[str, Release]]:
    return list(zip(prefixes(len(releases)), releases, strict=True))


def combine(a: Release, b: Release, population: Records | None = None) -> Release:
    """The release a recipient holding `a` and `b` has after linking them per source patient
    (`combine_all` of the two)."""
    return combine_all((a, b), population)


def combine_all(releases: Sequence[Release], population: Records | None = None) -> Release:
    """The release a recipient holding every one of `releases` has after linking them per source
    patient (issue 35: a set is judged as a whole, not only by pairs): one record per patient, the
    union of the releases' items (labels prefixed `A:`, `B:`, `C:`, ... by file). For two releases
    `a` and `b` (`combine`):

    Items and codes. Each item stands for the codes of its own code map, prefixed by its release
    (`A:401.1` stands for `A:401.1`; an LDA item `A:401|[35-36]` for the `A:code|age` pairs it covers):
    a known item of one file is matched only by items of that file, as the recipient sees which file
    shows what (unprefixed codes would let a code file B shows for a candidate stand in for one file A
    does not show for it). Repeats are kept for a release that counts them (`counts_repeats`: GCCens,
    the LDA's multiset of pairs) and the combined release counts repeats when either does; the other
    release's items count once.

    Source (what the invariant is checked against and the single-visit attacker's knowledge is read
    from, `risk.attacker_known_visits`). A release of codes: `population`'s records of its patients
    (else its own `source`), with their original visits. An LDA release (`age_pairs`): its own source,
    the cohort's `code|age` pairs (`LDASettings.run`), which carry no visits: the engine verifies an
    LDA release alone with all its pairs as one visit, so here every pair is known in each of the
    patient's original visits (a single-visit known set is that visit's codes of the other release
    plus every pair of the LDA release: never less than either release alone gives the attacker).
    Two LDA releases: one visit, every pair of both.

    Smallest example of releases that add up: P1 {a,b}, P2 {a,c}, P3 {d,b}, P4 {d,c}; release A
    keeps {a, d}, release B keeps {b, c}: each has every record shared by 2 patients (k = 2 in the
    cohort), together every record is unique."""
    sides = _sides(releases)
    records = _link([_events(rel.records, prefix, rel.counts_repeats) for prefix, rel in sides]).records
    codes: dict[str, frozenset[str]] = {}
    for prefix, rel in sides:
        codes.update(_side_codes(prefix, rel))
    ids = set(np.asarray(records.patient_ids).astype(str).tolist())
    plain: list[pd.DataFrame] = []
    pairs: list[pd.DataFrame] = []
    for prefix, rel in sides:
        src, pooled = _source_of(rel, population)
        (pairs if pooled else plain).append(_frame(src, prefix, ids, not pooled))
    base = (
        pd.concat(plain, ignore_index=True)
        if plain
        else pd.DataFrame(columns=["patient_id", "code", "visit"])
    )
    if pairs:
        known = pd.concat(pairs, ignore_index=True)
        visits = base[["patient_id", "visit"]].drop_duplicates()
        lone = sorted(set(known["patient_id"]) - set(visits["patient_id"]))
        visits = pd.concat(
            [visits, pd.DataFrame({"patient_id": lone, "visit": LONE_VISIT})], ignore_index=True
        )
        base = pd.concat([base, known.merge(visits, on="patient_id")], ignore_index=True)
    source = Records.from_frame(base.drop_duplicates()[["patient_id", "visit", "code"]])
    return Release(
        method="combined",
        records=records,
        item_codes=codes,
        counts_repeats=any(rel.counts_repeats for rel in releases),
        params={"combined": [rel.method for rel in releases]},
    ).checked(source)


def _source_of(rel: Release, population: Records | None) -> tuple[Records, bool]:
    """What `combine` reads a release's items against, and whether its codes are pooled (an LDA
    release: its `code|age` source, known in every visit) or kept by visit (the population's)."""
    if rel.age_pairs:
        return (rel.source if rel.source is not None else _own_codes(rel)), True
    src = population if population is not None else rel.source
    return (src if src is not None else _own_codes(rel)), False


def _pool_of(rel: Release, population: Records) -> Records | None:
    """The candidates one file shows (`candidate_pool`), None when it shows none."""
    pool = rel.population if rel.population is not None else (None if rel.age_pairs else population)
    return None if pool is None or pool.n_events == 0 else pool


def candidate_pool(a: Release, b: Release, population: Records, cache: PairCache | None = None) -> Records:
    """`candidate_pool_all` of the two releases."""
    return candidate_pool_all((a, b), population, cache)


def candidate_pool_all(
    releases: Sequence[Release], population: Records, cache: PairCache | None = None
) -> Records:
    """The population adversary's candidates for the combined release: every person of the pool as
    each file would show them, prefixed like `combine`'s items: for a release of codes its released
    pool (`Release.population`, Heatherly's DEMO_B / DEMO_S) or else `population`, repeats as the release
    counts them; for an LDA release nothing (the population holds no `code|age` pairs, so no candidate
    matches an LDA item: the same as the LDA release alone against the population)."""
    cache = cache if cache is not None else PairCache()
    files = []
    for prefix, rel in _sides(releases):
        pool = _pool_of(rel, population)
        if pool is not None:
            files.append(cache.events(pool, prefix, rel.counts_repeats))
    return _link(files).records


def event_patients(r: Records) -> np.ndarray:
    return r.patient_ids if r.n_events == 0 else np.unique(r.patient_ids[r.event_patient])


# ------------------------------------------------------------------ the pair, read per file
@dataclass(frozen=True, eq=False)
class _Reading:
    """What a release's items stand for in its source (`_source_of`): per entry a patient of the
    release (`patient`), a unit of the source (`visit`: its visit; -1 for pooled codes) and an item
    of the patient's standing for a code the patient had in that unit (`item`). `complete`: every
    (patient, item) the release holds has such a code (`combine`'s invariant, this file's part)."""

    src: Records
    pooled: bool
    patient: np.ndarray
    visit: np.ndarray
    item: np.ndarray
    complete: bool


def _read(rel: Release, src: Records, pooled: bool, index: pd.Index) -> _Reading:
    """`_Reading` of `rel` against `src` (`_source_of`; `index`: its patient ids as text), from
    sparse products: the source units' codes times each item's codes, kept where the patient holds
    the item."""
    r = rel.records
    held = r.patient_item_sets
    stands = [rel.codes_of(str(x)) for x in r.items.tolist()]
    col = src.item_index([c for s in stands for c in s]) if any(stands) else np.zeros(0, np.int64)
    row = np.repeat(np.arange(r.n_items), [len(s) for s in stands])
    ok = col >= 0
    item_codes = sp.csr_matrix(
        (np.ones(int(ok.sum()), dtype=np.int32), (row[ok], col[ok])), shape=(r.n_items, src.n_items)
    )
    at = index.get_indexer(r.patient_ids.astype(str))
    pats = np.flatnonzero(at >= 0)
    if pooled:
        units, owner, visit = src.patient_item_sets[at[pats]], pats, np.full(len(pats), -1, dtype=np.int64)
    else:
        first = src.visit_ptr[at[pats]]
        n_visits = src.visit_ptr[at[pats] + 1] - first
        visit = concat_ranges(first, n_visits)
        units, owner = src.visit_item_sets[visit], np.repeat(pats, n_visits)
    hits = (units.astype(np.int32) @ item_codes.T).multiply(held[owner]).tocoo()
    hits.eliminate_zeros()
    patient, item = owner[hits.row], hits.col.astype(np.int64)
    complete = len(distinct(patient * max(r.n_items, 1) + item)) == held.nnz
    return _Reading(src, pooled, patient, visit[hits.row], item, complete)


class PairCache:
    """Work the pairs of one ledger share (one population): per release its events as a linked file
    lists them, what its items stand for (`_read`) and its distinguishability alone; per source its
    patient index. Keyed by the objects themselves (records and releases compare by identity)."""

    def __init__(self) -> None:
        self._memo: dict[tuple[Any, ...], Any] = {}

    def _get(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def events(self, r: Records, prefix: str, repeats: bool) -> _Events:
        return self._get(("events", r, prefix, repeats), lambda: _events(r, prefix, repeats))

    def index(self, r: Records) -> pd.Index:
        return self._get(("index", r), lambda: pd.Index(r.patient_ids.astype(str)))

    def labels(self, r: Records) -> _VisitLabels:
        return self._get(("labels", r), lambda: _VisitLabels(r))

    def reading(self, rel: Release, population: Records | None) -> _Reading:
        def make() -> _Reading:
            src, pooled = _source_of(rel, population)
            return _read(rel, src, pooled, self.index(src))

        return self._get(("reading", rel, population), make)

    def alone(self, rel: Release, adversary: Adversary, population: Records) -> np.ndarray:
        return self._get(
            ("alone", rel, adversary, population),
            lambda: np.asarray(risk.release_distinguishability(rel, adversary, population)),
        )


def _sourced(link: _Linked, readings: list[_Reading], cache: PairCache) -> list[np.ndarray]:
    """Per file, the index in its source of each patient of the linked records (-1: none)."""
    ids = link.records.patient_ids.astype(str)
    return [cache.index(rd.src).get_indexer(ids) for rd in readings]


def _has_events(r: Records, at: np.ndarray) -> np.ndarray:
    """Whether each patient `at` (an index into `r`, -1: none) has an event in `r`."""
    ok = at >= 0
    p = np.where(ok, at, 0)
    return ok & (r.event_ptr[r.visit_ptr[p + 1]] > r.event_ptr[r.visit_ptr[p]])


class _VisitLabels:
    """The visits of a source by their label as `combine`'s source writes it (text; "0" without
    visits), each label a code; computed for the visits asked for only (`codes`)."""

    def __init__(self, src: Records) -> None:
        self.src = src
        self._code = np.full(src.n_visits, -1, dtype=np.int64)
        self._of: dict[str, int] = {}

    def codes(self, visits: np.ndarray) -> np.ndarray:
        todo = visits[self._code[visits] < 0]
        if len(todo):
            ids = self.src.visit_ids[todo].tolist() if self.src.has_visits else ["0"] * len(todo)
            of = self._of
            self._code[todo] = [of.setdefault(str(v), len(of)) for v in ids]
        return self._code[visits]

    @property
    def names(self) -> np.ndarray:
        return np.array(list(self._of), dtype=object)


def _sorteddistinct(columns: list[np.ndarray], sizes: list[int]) -> list[np.ndarray]:
    """The distinct rows of integer columns (column j in range(sizes[j])), sorted by the first column,
    then the second, ...: one int64 key when it fits, else a lexicographic sort."""
    n = len(columns[0])
    if n == 0:
        return [c.astype(np.int64) for c in columns]
    if float(np.prod([max(s, 1) for s in sizes], dtype=np.float64)) < 2.0**62:
        key = np.zeros(n, dtype=np.int64)
        for c, s in zip(columns, sizes, strict=True):
            key = key * max(s, 1) + c
        key = distinct(key)
        out = []
        for s in reversed(sizes):
            key, c = np.divmod(key, max(s, 1))
            out.append(c)
        return out[::-1]
    order = np.lexsort(columns[::-1])
    cols = [c[order] for c in columns]
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for c in cols:
        new[1:] |= c[1:] != c[:-1]
    return [c[new].astype(np.int64) for c in cols]


def _known_visits(
    link: _Linked, readings: list[_Reading], where: list[np.ndarray], cache: PairCache
) -> tuple[Records, np.ndarray]:
    """What `risk.attacker_known_visits` reads of `combine`'s release, from each file's reading:
    per original visit of a patient (by its label as text, over the sources of both files of codes),
    the items of each file of codes standing for a code of that visit, and every item an LDA file
    holds of the patient standing for one of its pairs (in each of the patient's visits; its one
    visit `LONE_VISIT` when no file of codes has one). Visits with nothing known are left out, as are
    patients with nothing known. Returns the records (over the linked vocabulary) and, per record, its
    patient in the linked records."""
    plain = [k for k, rd in enumerate(readings) if not rd.pooled]
    visits, codes, entry_codes = [], [], []
    for k in plain:  # the visits of the linked patients in each source of codes, by label
        rd, at = readings[k], where[k]
        first = rd.src.visit_ptr[at[at >= 0]]
        vis = concat_ranges(first, rd.src.visit_ptr[at[at >= 0] + 1] - first)
        visits.append(vis)
        codes.append(cache.labels(rd.src).codes(vis))
        entry_codes.append(cache.labels(rd.src).codes(rd.visit))
    names, remap = _label_union([cache.labels(readings[k].src).names for k in plain])
    lone = len(names) - 1  # LONE_VISIT, last
    visit_p, visit_l, cps, labs, items = [], [], [], [], []
    for j, k in enumerate(plain):
        rd, at, vis = readings[k], where[k], visits[j]
        pats = np.flatnonzero(at >= 0)
        n = rd.src.visit_ptr[at[pats] + 1] - rd.src.visit_ptr[at[pats]]
        with_events = rd.src.event_ptr[vis + 1] > rd.src.event_ptr[vis]
        visit_p.append(np.repeat(pats, n)[with_events])
        visit_l.append(remap[j][codes[j][with_events]])
        cps.append(link.patient_map[k][rd.patient])
        labs.append(remap[j][entry_codes[j]])
        items.append(link.item_map[k][rd.item])
    # the visits of each patient, sorted by patient: an LDA file's items are known in each
    v_pat, v_lab = _sorteddistinct([_cat(visit_p), _cat(visit_l)], [link.records.n_patients, len(names)])
    for k, rd in enumerate(readings):
        if not rd.pooled:
            continue
        q_p, q_i = link.patient_map[k][rd.patient], link.item_map[k][rd.item]
        start = np.searchsorted(v_pat, q_p, side="left")
        count = np.searchsorted(v_pat, q_p, side="right") - start
        none = count == 0
        row = np.repeat(np.arange(len(q_p)), count)
        at_visit = concat_ranges(start, count)
        cps += [q_p[row], q_p[none]]
        labs += [v_lab[at_visit], np.full(int(none.sum()), lone, dtype=np.int64)]
        items += [q_i[row], q_i[none]]
    cp, lab, item = _sorteddistinct(
        [_cat(cps), _cat(labs), _cat(items)], [link.records.n_patients, len(names), link.records.n_items]
    )
    n = len(cp)
    starts = np.flatnonzero(np.r_[True, (cp[1:] != cp[:-1]) | (lab[1:] != lab[:-1])]) if n else _cat([])
    patients, visit_patient = np.unique(cp[starts], return_inverse=True)
    known = Records(
        patient_ids=link.records.patient_ids[patients],
        items=link.records.items,
        visit_ptr=np.searchsorted(visit_patient, np.arange(len(patients) + 1)).astype(np.int64),
        visit_ids=names[lab[starts]],
        event_ptr=np.append(starts, n).astype(np.int64),
        event_item=item.astype(np.int32),
    )
    return known, patients


def _cat(xs: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.zeros(0, dtype=np.int64), *xs]).astype(np.int64)


def _label_union(names: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The distinct labels of several sources with `LONE_VISIT` last, and per source the code of each
    of its labels among them (a label of the same text is one visit, as in `combine`'s source)."""
    codes, union = pd.factorize(np.concatenate([np.zeros(0, dtype=object), *names]))
    union = np.asarray(union, dtype=object)
    union = np.append(union, LONE_VISIT)  # its own code: only a patient without another visit has it
    bounds = np.cumsum([0, *map(len, names)])
    return union, [codes[s:e].astype(np.int64) for s, e in pairwise(bounds)]


def _linked_distinguishability(
    releases: Sequence[Release], adversary: Adversary, population: Records, cache: PairCache
) -> tuple[np.ndarray, np.ndarray]:
    """The patients of `combine_all(releases, population)` and their distinguishability as
    `risk.release_distinguishability` gives it (with `candidate_pool_all` under population scope), read
    per file (`PairCache.reading`): the linked records on integer codes (`_link`), `combine`'s
    invariant from each file's reading, the attacker-known visits composed of each file's
    (`_known_visits`); the combined source is never built. When the invariant fails, `combine`
    raises its error (naming the first event that breaks it)."""
    sides = _sides(releases)
    link = _link([cache.events(rel.records, prefix, rel.counts_repeats) for prefix, rel in sides])
    readings = [cache.reading(rel, population) for _, rel in sides]
    where = _sourced(link, readings, cache)
    sourced = np.zeros(link.records.n_patients, dtype=bool)
    for rd, at in zip(readings, where, strict=True):
        sourced |= _has_events(rd.src, at)
    codes: dict[str, frozenset[str]] = {}
    for prefix, rel in sides:
        codes.update(_side_codes(prefix, rel))
    combined = Release(
        method="combined",
        records=link.records,
        item_codes=codes,
        counts_repeats=any(rel.counts_repeats for rel in releases),
        params={"combined": [rel.method for rel in releases]},
    )
    if not (sourced.all() and all(rd.complete for rd in readings)):
        combined = combine_all(releases, population)  # raises the invariant's error
    pool = candidate_pool_all(releases, population, cache) if adversary.scope == "population" else None
    if combined.source is not None:  # not reached unless the readings and `combine` disagree
        return link.records.patient_ids, risk.release_distinguishability(
            replace(combined, population=pool), adversary, population
        )
    cands = risk.candidates_for(adversary, combined.records, population, pool)
    matching = risk.Matching.of_release(combined)
    if adversary.knowledge != "single_visit":  # all visits, or the whole record (issue 39)
        return link.records.patient_ids, risk.distinguishability(
            combined.records, cands, adversary.knowledge, matching
        )
    known, at = _known_visits(link, readings, where, cache)
    out = np.full(link.records.n_patients, cands.n_patients, dtype=np.int64)
    out[at] = risk.distinguishability(known, cands, "single_visit", matching)
    return link.records.patient_ids, out


def pair_distinguishability(
    a: Release, b: Release, adversary: Adversary, population: Records, cache: PairCache | None = None
) -> dict[str, int]:
    """Per patient of either release, the fewest candidates the recipient holding both is left with
    (`set_distinguishability` of the two)."""
    return set_distinguishability((a, b), adversary, population, cache)


def set_distinguishability(
    releases: Sequence[Release], adversary: Adversary, population: Records, cache: PairCache | None = None
) -> dict[str, int]:
    """Per patient of any of `releases`, the fewest candidates the recipient holding them all is left
    with: the minimum of the linked release's distinguishability (`combine_all`, verified as
    `risk.verify` would, `_linked_distinguishability`) and each release's alone (the recipient may
    attack any file on its own: a release showing its visits, or a patient with nothing in the other
    files, can be riskier alone than linked). So the set never reports less risk than any release
    alone. `cache`: work shared with the other pairs of a ledger (`PairCache`)."""
    cache = cache if cache is not None else PairCache()
    linked = _linked_distinguishability(releases, adversary, population, cache)
    out: dict[str, int] = {}
    alone = [(rel.records.patient_ids, cache.alone(rel, adversary, population)) for rel in releases]
    for ids, v in (linked, *alone):
        for pid, d in zip(map(str, ids), np.asarray(v).tolist(), strict=True):
            out[pid] = min(out.get(pid, d), int(d))
    return out


def verify_pair(
    a: LedgerRelease,
    b: LedgerRelease,
    adversary: Adversary,
    k: int,
    population: Records,
    cache: PairCache | None = None,
) -> PairResult:
    """The pair verified as one release (module docstring, `pair_distinguishability`)."""
    ids_a = set(map(str, a.release.records.patient_ids))
    ids_b = set(map(str, b.release.records.patient_ids))
    dis = np.fromiter(
        pair_distinguishability(a.release, b.release, adversary, population, cache).values(), dtype=np.int64
    )
    return PairResult(
        a, b, len(ids_a & ids_b), len(dis), int((dis < k).sum()), int((dis <= 1).sum()), k, adversary
    )


@dataclass(frozen=True, eq=False)
class SetResult:
    """Every release of a set verified as one (`combine_all`, `set_distinguishability`)."""

    releases: tuple[LedgerRelease, ...]
    records: int  # patients in any
    below_k: int
    unique: int
    k: int
    adversary: Adversary

    @property
    def ok(self) -> bool:
        return self.below_k == 0

    @property
    def label(self) -> str:
        return " + ".join(r.label for r in self.releases)


def verify_set(
    releases: Sequence[LedgerRelease],
    adversary: Adversary,
    k: int,
    population: Records,
    cache: PairCache | None = None,
) -> SetResult:
    """The releases verified as one release, under perfect linkage of them all (`set_distinguishability`)."""
    dis = np.fromiter(
        set_distinguishability([r.release for r in releases], adversary, population, cache).values(),
        dtype=np.int64,
    )
    return SetResult(tuple(releases), len(dis), int((dis < k).sum()), int((dis <= 1).sum()), k, adversary)


def given_pair(
    given: Sequence[PairResult], a: LedgerRelease, b: LedgerRelease, adversary: Adversary, k: int
) -> PairResult | None:
    """The pair of `given` (pairs already verified) that is `a` and `b` verified as one under
    `adversary` at k: the same names, recipients and release contents; None when there is none."""
    for p in given:
        if (
            p.adversary == adversary
            and int(p.k) == int(k)
            and (p.a.name, p.a.recipient, p.a.release.fingerprint)
            == (a.name, a.recipient, a.release.fingerprint)
            and (p.b.name, p.b.recipient, p.b.release.fingerprint)
            == (b.name, b.recipient, b.release.fingerprint)
        ):
            return p
    return None


def ledger(
    releases: list[LedgerRelease], adversary: Adversary, k: int, population: Records
) -> list[PairResult]:
    """Every pair of `releases` that shares a patient, verified as one."""
    cache = PairCache()
    out = []
    for i, a in enumerate(releases):
        for b in releases[i + 1 :]:
            if set(map(str, a.release.records.patient_ids)) & set(map(str, b.release.records.patient_ids)):
                out.append(verify_pair(a, b, adversary, k, population, cache))
    return out


def check_addition(
    existing: list[LedgerRelease], new: LedgerRelease, adversary: Adversary, k: int, population: Records
) -> list[PairResult]:
    """The pairs the new release would form with those on the ledger, before it is added; the
    caller flags any that is not verified."""
    ids = set(map(str, new.release.records.patient_ids))
    cache = PairCache()
    return [
        verify_pair(e, new, adversary, k, population, cache)
        for e in existing
        if ids & set(map(str, e.release.records.patient_ids))
    ]


def study_ledger_releases(
    study, releases: Mapping[str, Release], study_name: str = ""
) -> list[LedgerRelease]:
    """A study's releases on the ledger, each with its recipient (its own, else the study's) and
    whether it is public."""
    default = study.determination.recipient
    return [
        LedgerRelease(study_name, e.name, e.recipient or default, releases[e.name], e.public)
        for e in study.current()
        if e.name in releases
    ]


def ledger_frame(pairs: list[PairResult]) -> pd.DataFrame:
    return pd.DataFrame([p.to_dict() for p in pairs])
