"""What an anonymization method produces: a `Release` (ARCHITECTURE section 2).

Released items are original codes or generalized items: a hierarchy node such as `401` or
`240-279`, or a set of codes written `{401.0,401.1}` (Heatherly's Figure 13, Loukides' anonymized
items). `item_codes` maps every released item that is not itself an original code to the original
codes it stands for; an item absent from the map stands for itself. The risk engine reads exactly
this mapping, so what is exported and what is verified are the same thing.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from engine.records import Records, concat_ranges

SET_LABEL_MAX_CODES = 8


def set_item_label(codes: Iterable[str]) -> str:
    """The label of a set-valued generalized item: sorted codes in braces, `{401.0,401.1}`.

    A single code is written as itself (a set of one code is no generalization). A set of more than
    `SET_LABEL_MAX_CODES` codes is written by its first three codes, the count of the others and a
    content hash, `{250.00,250.01,250.02,…+41}#1f2e3d4c`, so that a label stays short and unique; the
    release's code map (`Release.code_map`) lists every member.
    """
    cs = sorted(set(codes))
    if len(cs) == 1:
        return cs[0]
    if len(cs) <= SET_LABEL_MAX_CODES:
        return "{" + ",".join(cs) + "}"
    digest = hashlib.sha256("\x1f".join(cs).encode()).hexdigest()[:8]
    return "{" + ",".join(cs[:3]) + f",…+{len(cs) - 3}" + "}#" + digest


def codes_of(item: str, item_codes: Mapping[str, frozenset[str]] | None) -> frozenset[str]:
    """The original codes a released item stands for."""
    if item_codes is not None and item in item_codes:
        return item_codes[item]
    return frozenset((item,))


AGE_PAIR_SEP = "|"  # an LDA released item `code|age` (engine.anonymize.trajectories.pair_label)


class ReleaseInvariantError(ValueError):
    """A release that does not stand for its source cohort: a patient outside the cohort, or an item
    that stands for no code the patient had (in that visit, when visits are kept). Never exported."""


@dataclass(frozen=True, eq=False)
class Release:
    """A method's output for the cohort (and, for population-scope methods, the population).

    - `records`: the released cohort records (items may be generalized; censored or suppressed
      events are gone). They keep the targets' visits: each released visit's item set is what a
      single-visit attacker knows, whatever the export shows.
    - `item_codes`: released item -> original codes, for every item that is not an original code.
    - `suppressed`: long-form rows (`patient_id`, `code`, and `visit` when present) of the events the
      method removed (suppressed or censored), so nothing is lost silently.
    - `population`: the released candidate pool when the method anonymized a larger group and then
      extracted the cohort (Heatherly's DEMO_B / DEMO_S); None when the population is unchanged.
    - `counts_repeats`: True when repeat counts are part of what is released and of what the attacker
      knows (GCCens, or the user asked for repeats to count).
    - `shows_visits`: True when the exported file carries the visit grouping (`patient_id, visit,
      code`); then a candidate matches a single-visit known set only within one of its visits.
      False (the default) is the papers' form: one set of items per patient (Heatherly 2013 Figure
      13b, the PNAS released profiles), matched against the whole record.
    - `age_pairs`: True when items are LDA `code|age` pairs, exported as `code` and `age` columns.
    - `source`: the cohort the release was made from. When given, the construction checks that the
      release stands for it (`check_invariant`) and raises `ReleaseInvariantError` otherwise. It is no
      part of what is exported (nor of `fingerprint`).
    - `params`: the parameters the method ran with; `loss`: the method's own loss figures.
    """

    method: str
    records: Records
    item_codes: dict[str, frozenset[str]] = field(default_factory=dict)
    suppressed: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["patient_id", "code"]))
    population: Records | None = None
    counts_repeats: bool = False
    params: dict = field(default_factory=dict)
    loss: dict = field(default_factory=dict)
    shows_visits: bool = False
    age_pairs: bool = False
    source: Records | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.shows_visits and not self.records.has_visits:
            raise ValueError(f"{self.method}: the released records have no visits to show")
        if self.source is not None:
            check_invariant(self, self.source)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a worker's result): the fields, the content hashes and the content hash of the
        cohort it was checked against (`checked`), not the checked copy itself (its source is the
        caller's cohort object, which a copy cannot be)."""
        return {name: value for name, value in self.__dict__.items() if name != "_checked"}

    # ------------------------------------------------------------------ structure
    def codes_of(self, item: str) -> frozenset[str]:
        return codes_of(item, self.item_codes)

    def with_visits(self, shows: bool) -> Release:
        """The same release exported with (`shows=True`) or without the visit grouping."""
        return self if bool(shows) == self.shows_visits else replace(self, shows_visits=bool(shows))

    def checked(self, cohort: Records) -> Release:
        """This release with `source=cohort`: raises `ReleaseInvariantError` unless it stands for it.

        Checked once per release and cohort object: the release itself when `cohort` is already its
        source, and the same checked release when asked again for the same cohort (a page and the
        study both ask; records are immutable, so the answer cannot change). Once per cohort content
        across processes: a release checked in a worker against a cohort of the same fingerprint
        (`_checked_against`, pickled with it) is not checked again here; the export's `fingerprint`,
        which the source is no part of, is carried to the copy."""
        if self.source is cohort:
            return self
        done = self.__dict__.get("_checked")
        if done is not None and done.source is cohort:
            return done
        if self.__dict__.get("_checked_against") == cohort.fingerprint:
            out = copy.copy(self)  # the same content, checked against this content: no second check
            object.__setattr__(out, "source", cohort)
        else:
            out = replace(self, source=cohort)
            if "fingerprint" in self.__dict__:
                out.__dict__["fingerprint"] = self.__dict__["fingerprint"]
        out.__dict__["_checked_against"] = self.__dict__["_checked_against"] = cohort.fingerprint
        out.__dict__.pop("content_fingerprint", None)  # it covers the source
        self.__dict__["_checked"] = out  # frozen: kept beside the fields, as cached_property does
        return out

    def to_frame(self) -> pd.DataFrame:
        """Long-form released events (`patient_id`, (`visit`), `code`, (`age`)), internal structure."""
        return self.records.to_frame()

    def _exported_events(self) -> np.ndarray:
        """Indexes of the events that become rows of the release file, in record order: every event
        when repeats are released, else the first of each (patient, (visit), item)."""
        r = self.records
        if self.counts_repeats or r.n_events == 0:
            return np.arange(r.n_events)
        group = r.event_visit if self.shows_visits else r.event_patient
        key = group.astype(np.int64) * max(r.n_items, 1) + r.event_item
        _, first = np.unique(key, return_index=True)
        return np.sort(first)

    def exported_frame(self) -> pd.DataFrame:
        """Exactly the rows of the release file: `patient_id`, `visit` (when `shows_visits`), `code`
        (the released item) and `age` (when `age_pairs`). One row per (patient, (visit), item), or
        per occurrence when `counts_repeats`; in record order (patients, visits, events)."""
        r = self.records
        ev = self._exported_events()
        cols: dict[str, np.ndarray] = {"patient_id": r.patient_ids[r.event_patient[ev]].astype(str)}
        if self.shows_visits:
            cols["visit"] = r.visit_ids[r.event_visit[ev]]
        labels = r.items[r.event_item[ev]]
        if self.age_pairs:
            parts = [str(x).rpartition(AGE_PAIR_SEP) for x in r.items]
            code = np.array([p[0] for p in parts], dtype=object)
            age = np.array([p[2] for p in parts], dtype=object)
            cols["code"] = code[r.event_item[ev]]
            cols["age"] = age[r.event_item[ev]]
        else:
            cols["code"] = labels
        return pd.DataFrame(cols)

    def present_items(self) -> np.ndarray:
        """The released items that occur in the records, sorted."""
        return self.records.items[np.unique(self.records.event_item)]

    def code_map(self) -> pd.DataFrame:
        """One row per (released item, original code) for every released item, sorted."""
        rows = [(str(item), code) for item in self.records.items for code in sorted(self.codes_of(str(item)))]
        return pd.DataFrame(rows, columns=["released_item", "original_code"])

    def exported_code_map(self, spellings: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
        """The code map of the items present in the release file only.

        `spellings` (code -> the spellings it was written with in the source, `Dataset.spellings`,
        given when normalization rewrote any): a third column `source_spelling`, one row per
        (released item, original code, spelling), so the original spelling of every code is kept
        (`25000` for `250.00`). A code with no recorded spelling is its own spelling."""
        rows = [
            (str(item), code) for item in self.present_items() for code in sorted(self.codes_of(str(item)))
        ]
        if not spellings:
            return pd.DataFrame(rows, columns=["released_item", "original_code"])
        out = [
            (item, code, spelling)
            for item, code in rows
            for spelling in (sorted(spellings.get(code, ())) or [code])
        ]
        return pd.DataFrame(out, columns=["released_item", "original_code", "source_spelling"])

    @cached_property
    def fingerprint(self) -> str:
        """sha256 of what is exported: the release file's columns and values, and the code map.
        Two releases that write the same files have the same fingerprint."""
        h = hashlib.sha256()
        for name, frame in (("release", self.exported_frame()), ("code_map", self.exported_code_map())):
            h.update(f"\x1e{name}\x1d{len(frame)}\x1d".encode())
            for col in frame.columns:
                h.update(f"\x1d{col}\x1c".encode())
                h.update("\x1f".join(map(str, frame[col].tolist())).encode())
        return h.hexdigest()

    @cached_property
    def content_fingerprint(self) -> str:
        """sha256 of everything a computation on this release may read (computed once per release):
        the method, its records (with visits and ages, and patients the export shows no row of), the
        released population, the item -> codes map, the parameters, the structure (repeat counts,
        visits shown, age pairs), what it exports (`fingerprint`), the suppressed table (two cap
        settings can release the same records and suppress at different stages) and the source."""
        pop = self.population.fingerprint if self.population is not None else "-"
        source = self.source.fingerprint if self.source is not None else "-"
        codes = sorted((k, sorted(v)) for k, v in self.item_codes.items())
        params = sorted((str(k), repr(v)) for k, v in self.params.items())
        flags = (self.counts_repeats, self.shows_visits, self.age_pairs)
        h = hashlib.sha256(repr((codes, params, flags)).encode())
        h.update(f"\x1e{self.method}\x1e{self.records.fingerprint}\x1e{pop}\x1e{source}".encode())
        h.update(f"\x1e{self.fingerprint}\x1e".encode())
        sup = self.suppressed
        h.update("\x1f".join(map(str, sup.columns)).encode() + b"\x1e")
        h.update(pd.util.hash_pandas_object(sup, index=False).to_numpy().tobytes())
        return h.hexdigest()

    def __repr__(self) -> str:
        shown = ", visits shown" if self.shows_visits else ""
        return f"Release({self.method!r}, {self.records!r}, {len(self.item_codes)} generalized items{shown})"


def check_invariant(release: Release, cohort: Records) -> None:
    """Raise `ReleaseInvariantError` unless every released patient is a cohort patient and every
    released item of a patient stands for at least one code that patient had, within the same visit
    (matched by visit label) when both the release and the cohort have visits. For `age_pairs`
    releases the cohort's items must be `code|age` pairs too (the method's input).

    Patients are matched by their id's text and visits by their label's text; both are numbered once
    (integer units: a cohort patient, or a (cohort patient, visit label) pair), so no per-event text
    is built. The first failing event in record order is named (tests/reference_release.py keeps the
    text-keyed check this one equals)."""
    rec = release.records
    pids = rec.patient_ids.astype(str)
    known = pd.Index(cohort.patient_ids.astype(str))
    at = known.get_indexer(pids)  # each released patient's cohort index
    outside = pids[at < 0]
    if len(outside):
        raise ReleaseInvariantError(
            f"{release.method}: {len(outside)} released patient(s) are not in the cohort, "
            f"e.g. {', '.join(map(str, outside[:5]))}"
        )
    if rec.n_events == 0:
        return
    by_visit = rec.has_visits and cohort.has_visits
    if by_visit:
        rel_visit, src_visit = _visit_units(rec, cohort, at, known)
        rel_unit, src_unit = rel_visit[rec.event_visit], src_visit[cohort.event_visit]
    else:
        rel_unit, src_unit = at[rec.event_patient].astype(np.int64), cohort.event_patient.astype(np.int64)
    ordered = np.sort(rec.event_item)
    present_at = ordered[np.r_[True, ordered[1:] != ordered[:-1]]]  # np.unique's, by a sort
    present = rec.items[present_at]
    # each released event's position among the present items, by label (as `pd.Index(present)` reads it)
    rel_item = pd.Index(present).get_indexer(present)[np.searchsorted(present_at, rec.event_item)]
    # every released item present -> the codes it stands for, then the cohort's items -> those codes
    code_rows, item_cols = [], []
    code_index: dict[str, int] = {}
    for j, item in enumerate(present.tolist()):
        for c in release.codes_of(str(item)):
            code_rows.append(code_index.setdefault(c, len(code_index)))
            item_cols.append(j)
    ev_code = pd.Index(list(code_index)).get_indexer(cohort.items.astype(str))[cohort.event_item]
    ok = ev_code >= 0
    # the (unit, released item) pairs the cohort covers: each cohort event with a released code, once
    # per item standing for that code
    by_code = np.argsort(np.asarray(code_rows, dtype=np.int64), kind="stable")
    items_of_code = np.asarray(item_cols, dtype=np.int64)[by_code]
    starts = np.searchsorted(np.asarray(code_rows, dtype=np.int64)[by_code], np.arange(len(code_index) + 1))
    codes, units = ev_code[ok], src_unit[ok]
    counts = starts[codes + 1] - starts[codes]
    n = len(present)
    covered = np.repeat(units, counts) * n + items_of_code[concat_ranges(starts[codes], counts)]
    bad = ~_holds(np.sort(covered), rel_unit * n + rel_item)
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        where = f"visit {rec.visit_ids[rec.event_visit[e]]} of " if by_visit else ""
        raise ReleaseInvariantError(
            f"{release.method}: {int(bad.sum())} released event(s) stand for no code the patient had"
            f"{' in that visit' if by_visit else ''}, e.g. item {rec.items[rec.event_item[e]]!r} in "
            f"{where}patient {rec.patient_ids[rec.event_patient[e]]}"
        )


def _holds(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """`np.isin(keys, sorted_keys)` for a sorted array, by a binary search (numpy 2.4's `np.isin`
    hashes: slow on many distinct values)."""
    at = np.minimum(np.searchsorted(sorted_keys, keys), max(len(sorted_keys) - 1, 0))
    return sorted_keys[at] == keys if len(sorted_keys) else np.zeros(len(keys), dtype=bool)


_UNIT_SEP = "\x1f"  # the text check's separator between a patient id and a visit label


def _visit_units(
    rec: Records, cohort: Records, at: np.ndarray, known: pd.Index
) -> tuple[np.ndarray, np.ndarray]:
    """(release visits' units, cohort visits' units), numbered together: a unit is a cohort patient
    (`at`: each released patient's cohort index; `known`: the cohort's ids as text) and a visit label
    as text. The text check joined them as `id \\x1f label`; when an id or a label holds that
    separator, two different pairs can join to one text, so the units are those texts then."""
    labels = np.array([str(v) for v in rec.visit_ids] + [str(v) for v in cohort.visit_ids], dtype=object)
    label, uniq = pd.factorize(labels)
    patient = np.concatenate([at[rec.visit_patient], cohort.visit_patient]).astype(np.int64)
    names = known.astype(str).to_numpy(dtype=object)
    if any(_UNIT_SEP in s for s in uniq.tolist()) or any(_UNIT_SEP in s for s in names.tolist()):
        key = pd.factorize(
            np.array(
                [f"{names[p]}{_UNIT_SEP}{uniq[x]}" for p, x in zip(patient, label, strict=True)], dtype=object
            )
        )[0]
    else:
        key = pd.factorize(patient * max(len(uniq), 1) + label)[0]
    key = key.astype(np.int64)
    return key[: rec.n_visits], key[rec.n_visits :]


def release_from_frames(
    released: pd.DataFrame,
    code_map: pd.DataFrame | None,
    method: str = "imported",
    *,
    counts_repeats: bool | None = None,
) -> Release:
    """A Release read back from its exports: long-form released events (`patient_id`, `code` holding
    the released item, optional `visit`, `age`) and the code map (`released_item`, `original_code`).

    The structure is read from the columns: a `visit` column gives `shows_visits=True`; an `age`
    column gives `age_pairs=True` (items `code|age`, the LDA's export). `counts_repeats` defaults to
    True for age pairs and for a file with a repeated (patient, (visit), item) row, else False.
    Items absent from the map stand for themselves. Raises ValueError naming the missing column.
    """
    for col in ("patient_id", "code"):
        if col not in released.columns:
            raise ValueError(f"released events: missing column {col!r} (columns: {list(released.columns)})")
    item_codes: dict[str, frozenset[str]] = {}
    if code_map is not None:
        for col in ("released_item", "original_code"):
            if col not in code_map.columns:
                raise ValueError(f"code map: missing column {col!r} (columns: {list(code_map.columns)})")
        groups = (
            code_map[["released_item", "original_code"]].astype(str).groupby("released_item")["original_code"]
        )
        for item, codes in groups:
            cs = frozenset(codes)
            if cs != {item}:
                item_codes[str(item)] = cs
    shows_visits = "visit" in released.columns
    age_pairs = "age" in released.columns
    frame = released[[c for c in ("patient_id", "visit", "code") if c in released.columns]].copy()
    frame["patient_id"] = frame["patient_id"].astype(str)
    frame["code"] = frame["code"].astype(str)
    if age_pairs:
        frame["code"] = frame["code"] + AGE_PAIR_SEP + released["age"].astype(str)
    if counts_repeats is None:
        counts_repeats = age_pairs or bool(frame.duplicated().any())
    return Release(
        method,
        Records.from_frame(frame),
        item_codes=item_codes,
        counts_repeats=counts_repeats,
        shows_visits=shows_visits,
        age_pairs=age_pairs,
    )


def released_item_of(release: Release) -> dict[str, str]:
    """Original code -> the released item that stands for it (codes suppressed or absent: missing)."""
    out: dict[str, str] = {}
    for item in release.records.items.tolist():
        for c in release.codes_of(str(item)):
            out[c] = str(item)
    return out
