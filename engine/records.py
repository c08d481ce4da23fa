"""The data model: long-form events -> immutable, integer-coded `Records` in CSR arrays.

ARCHITECTURE section 2. A record is a patient; a patient has visits; a visit holds events, each an
item (an ICD-9-CM code, or a released item such as `401` or `{401.0,401.1}`) with an optional age.
Repeated codes are kept as repeated events: the repeat count of a code in a record is the number of
its events (Tamersoy 2010's setting). Per-visit code *sets* drop the repeats (Heatherly, Loukides).

Ordering rules (stated so that every method is deterministic):
- patients keep the order of their first appearance in the input frame;
- visits of a patient are sorted by their label (numerically when the column is numeric, else as
  text, so ISO dates sort chronologically), ties by first appearance;
- events within a visit keep input order;
- the item vocabulary is sorted as text.

Loading files and validating them is `engine.io.loaders`; this module assumes a valid frame.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

PATIENT, CODE, VISIT, AGE = "patient_id", "code", "visit", "age"


@dataclass(frozen=True, eq=False)
class Records:
    """Patients' coded events in CSR form.

    `visit_ptr[p]:visit_ptr[p+1]` are the visits of patient p; `event_ptr[v]:event_ptr[v+1]` the
    events of visit v; `event_item[e]` indexes `items`. `event_age` is None when no ages were given.
    `has_visits` is False when the input had no visit column (then each patient has one visit).
    """

    patient_ids: np.ndarray  # (n_patients,) str, unique
    items: np.ndarray  # (n_items,) str, sorted vocabulary
    visit_ptr: np.ndarray  # (n_patients + 1,) int64
    visit_ids: np.ndarray  # (n_visits,) visit labels as given (object)
    event_ptr: np.ndarray  # (n_visits + 1,) int64
    event_item: np.ndarray  # (n_events,) int32
    event_age: np.ndarray | None = None  # (n_events,) int32
    has_visits: bool = True

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a worker's or a fan-out process's result, engine/scale/pool.py): the fields and
        the content hash, not what `cached_property` derived from them (per-record item sets, event
        owners, indexes: on a released group, about as many bytes as the records), which are made
        again when first read."""
        return {name: value for name, value in self.__dict__.items() if name in _PICKLED}

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        items: Sequence[str] | np.ndarray | None = None,
        *,
        patients: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> Records:
        """Build from long form (`patient_id`, `code`, optional `visit`, optional `age`).

        `items` fixes the vocabulary (it must contain every code of `df`); by default it is the
        sorted set of codes present. `patients`: the patient column's codes and distinct ids as
        `pd.factorize(df[PATIENT].astype(str))` gives them, from a reader that factorized it already
        (`engine.io.events.Events.patients`; issue 36: 17.6 M ids not hashed twice on the first load).
        """
        if PATIENT not in df.columns or CODE not in df.columns:
            raise ValueError("Records.from_frame needs columns 'patient_id' and 'code'")
        has_visits = VISIT in df.columns
        has_age = AGE in df.columns
        # factorized as columns, never as 17.6 M Python strings (issue 36: the paper-scale load)
        if patients is None:
            p_codes, patient_ids = pd.factorize(df[PATIENT].astype(str), sort=False)
        else:
            p_codes, patient_ids = patients
            if len(p_codes) != len(df):
                raise ValueError(f"patients: {len(p_codes)} codes for {len(df)} rows")
        code_keys, present = pd.factorize(df[CODE].astype(str), sort=False)
        present = np.asarray(present, dtype=object)
        if items is None:
            vocab = np.sort(present)  # sorted as text, as sorted(set(codes))
            item_of_key = vocab.searchsorted(present)
        else:
            vocab = np.array(list(items), dtype=object)
            item_of_key = pd.Index(vocab).get_indexer(present)
            if (item_of_key < 0).any():
                missing = sorted(present[item_of_key < 0])[:5]
                raise ValueError(f"codes not in the given vocabulary: {missing}")
        ev_item = item_of_key[code_keys]
        n = len(df)
        if has_visits:
            visit_raw = df[VISIT]
            # visit order key: numeric when numeric, else the text itself
            if pd.api.types.is_numeric_dtype(visit_raw):
                vkey, visits = pd.factorize(visit_raw.to_numpy(), sort=True)
            else:
                vkey, visits = pd.factorize(visit_raw.astype(str).to_numpy(), sort=True)
            n_vkeys = len(visits)
            visit_labels = visit_raw.to_numpy()
        else:
            vkey, n_vkeys = np.zeros(n, dtype=np.int64), 1
            visit_labels = np.zeros(n, dtype=np.int64)
        order = _record_order(p_codes, len(patient_ids), vkey, n_vkeys)
        p_sorted = p_codes[order]
        v_sorted = vkey[order]
        new_visit = np.ones(n, dtype=bool)
        if n:
            new_visit[1:] = (p_sorted[1:] != p_sorted[:-1]) | (v_sorted[1:] != v_sorted[:-1])
        visit_starts = np.flatnonzero(new_visit)
        event_ptr = np.append(visit_starts, n).astype(np.int64)
        visit_patient = p_sorted[visit_starts]
        visit_ptr = np.searchsorted(visit_patient, np.arange(len(patient_ids) + 1)).astype(np.int64)
        visit_ids = np.asarray(visit_labels[order[visit_starts]], dtype=object)
        event_age = None
        if has_age:
            event_age = pd.to_numeric(df[AGE]).to_numpy()[order].astype(np.int32)
        return cls(
            patient_ids=np.asarray(patient_ids, dtype=object),
            items=vocab,
            visit_ptr=visit_ptr,
            visit_ids=visit_ids,
            event_ptr=event_ptr,
            event_item=ev_item[order].astype(np.int32),
            event_age=event_age,
            has_visits=has_visits,
        )

    def to_frame(self) -> pd.DataFrame:
        """Long form again: `patient_id`, (`visit`), `code`, (`age`), in record order."""
        cols: dict[str, np.ndarray] = {PATIENT: self.patient_ids[self.event_patient]}
        if self.has_visits:
            cols[VISIT] = self.visit_ids[self.event_visit]
        cols[CODE] = self.items[self.event_item]
        if self.event_age is not None:
            cols[AGE] = self.event_age
        return pd.DataFrame(cols)

    # ---------------------------------------------------------------- sizes and indexes
    @property
    def n_patients(self) -> int:
        return len(self.patient_ids)

    @property
    def n_visits(self) -> int:
        return len(self.event_ptr) - 1

    @property
    def n_events(self) -> int:
        return len(self.event_item)

    @property
    def n_items(self) -> int:
        return len(self.items)

    @cached_property
    def visit_patient(self) -> np.ndarray:
        """(n_visits,) patient index of each visit."""
        return np.repeat(np.arange(self.n_patients), np.diff(self.visit_ptr))

    @cached_property
    def event_visit(self) -> np.ndarray:
        """(n_events,) visit index of each event."""
        return np.repeat(np.arange(self.n_visits), np.diff(self.event_ptr))

    @cached_property
    def event_patient(self) -> np.ndarray:
        """(n_events,) patient index of each event."""
        return self.visit_patient[self.event_visit]

    @cached_property
    def _patient_index(self) -> pd.Index:
        return pd.Index(self.patient_ids)

    def index_of(self, patient_ids: Iterable[str]) -> np.ndarray:
        """Internal indexes of the given patient ids; KeyError naming the unknown ones."""
        ids = np.asarray([str(p) for p in patient_ids], dtype=object)
        idx = self._patient_index.get_indexer(ids)
        if (idx < 0).any():
            missing = ids[idx < 0]
            raise KeyError(f"{len(missing)} patient id(s) not in these records, e.g. {list(missing[:5])}")
        return idx

    @cached_property
    def _item_index(self) -> pd.Index:
        return pd.Index(self.items)

    def item_index(self, items: Iterable[str]) -> np.ndarray:
        """Vocabulary indexes of items; -1 for items not in the vocabulary."""
        return self._item_index.get_indexer(list(items))

    # ---------------------------------------------------------------- matrices
    @cached_property
    def patient_item_counts(self) -> sp.csr_matrix:
        """(n_patients, n_items) repeat counts: occurrences of each item in each record."""
        data = np.ones(self.n_events, dtype=np.int32)
        m = sp.csr_matrix(
            (data, (self.event_patient, self.event_item)), shape=(self.n_patients, self.n_items)
        )
        m.sum_duplicates()
        m.sort_indices()
        return m

    @cached_property
    def patient_item_sets(self) -> sp.csr_matrix:
        """(n_patients, n_items) 0/1: which items each record holds (repeats ignored)."""
        m = self.patient_item_counts.copy()
        m.data[:] = 1
        return m.astype(np.int8)

    @cached_property
    def visit_item_sets(self) -> sp.csr_matrix:
        """(n_visits, n_items) 0/1: the code set of each visit (row v belongs to `visit_patient[v]`)."""
        data = np.ones(self.n_events, dtype=np.int8)
        m = sp.csr_matrix((data, (self.event_visit, self.event_item)), shape=(self.n_visits, self.n_items))
        m.sum_duplicates()
        m.data[:] = 1
        m.sort_indices()
        return m

    # ---------------------------------------------------------------- per-record views
    def patient_codes(self, p: int) -> list[str]:
        """Items of record p in record order, repeats included."""
        s, e = self.event_ptr[self.visit_ptr[p]], self.event_ptr[self.visit_ptr[p + 1]]
        return [str(x) for x in self.items[self.event_item[s:e]]]

    def patient_visits(self, p: int) -> list[list[str]]:
        """Items of record p grouped by visit, repeats included."""
        out = []
        for v in range(self.visit_ptr[p], self.visit_ptr[p + 1]):
            s, e = self.event_ptr[v], self.event_ptr[v + 1]
            out.append([str(x) for x in self.items[self.event_item[s:e]]])
        return out

    # ---------------------------------------------------------------- subsets and edits
    def subset(self, patient_ids: Iterable[str]) -> Records:
        """Records of the given patients, in the given order (vocabulary kept)."""
        return self.take(self.index_of(patient_ids))

    def take(self, patients: np.ndarray) -> Records:
        """Records of the given internal patient indexes, in that order (vocabulary kept)."""
        patients = np.asarray(patients, dtype=np.int64)
        v_counts = self.visit_ptr[patients + 1] - self.visit_ptr[patients]
        visits = concat_ranges(self.visit_ptr[patients], v_counts)
        e_counts = self.event_ptr[visits + 1] - self.event_ptr[visits]
        events = concat_ranges(self.event_ptr[visits], e_counts)
        return Records(
            patient_ids=self.patient_ids[patients],
            items=self.items,
            visit_ptr=np.concatenate([[0], np.cumsum(v_counts)]).astype(np.int64),
            visit_ids=self.visit_ids[visits],
            event_ptr=np.concatenate([[0], np.cumsum(e_counts)]).astype(np.int64),
            event_item=self.event_item[events],
            event_age=None if self.event_age is None else self.event_age[events],
            has_visits=self.has_visits,
        )

    def keep_events(self, mask: np.ndarray) -> Records:
        """The same patients and visits with only the events where `mask` is True.

        Visits left empty stay (as empty visits) so that patients and visits keep their indexes.
        """
        mask = np.asarray(mask, dtype=bool)
        if len(mask) != self.n_events:
            raise ValueError(f"mask has {len(mask)} entries for {self.n_events} events")
        kept_before = np.concatenate([[0], np.cumsum(mask, dtype=np.int64)])
        kept_per_visit = kept_before[self.event_ptr[1:]] - kept_before[self.event_ptr[:-1]]
        return Records(
            patient_ids=self.patient_ids,
            items=self.items,
            visit_ptr=self.visit_ptr,
            visit_ids=self.visit_ids,
            event_ptr=np.concatenate([[0], np.cumsum(kept_per_visit)]).astype(np.int64),
            event_item=self.event_item[mask],
            event_age=None if self.event_age is None else self.event_age[mask],
            has_visits=self.has_visits,
        )

    def relabel(self, item_labels: Sequence[str] | np.ndarray) -> Records:
        """The same events with every vocabulary item renamed: item i becomes `item_labels[i]`.

        Items given the same label merge into one; the new vocabulary holds the labels of the items
        present in the events, sorted. Labels are looked up per item, never copied per event.
        """
        labels = np.asarray(item_labels, dtype=object)
        if len(labels) != self.n_items:
            raise ValueError(f"{len(labels)} labels for {self.n_items} items")
        present = np.unique(self.event_item)
        vocab = np.array(sorted(set(labels[present].tolist())), dtype=object)
        new_index = np.full(self.n_items, -1, dtype=np.int32)
        new_index[present] = pd.Index(vocab).get_indexer(labels[present])
        return replace(self, items=vocab, event_item=new_index[self.event_item])

    def recode(self, event_items: Sequence[str] | np.ndarray) -> Records:
        """The same events with new item labels (one per event); the vocabulary is rebuilt sorted."""
        labels = np.asarray(event_items, dtype=object)
        vocab = np.array(sorted(set(labels.tolist())), dtype=object)
        idx = pd.Index(vocab).get_indexer(labels).astype(np.int32)
        return Records(
            patient_ids=self.patient_ids,
            items=vocab,
            visit_ptr=self.visit_ptr,
            visit_ids=self.visit_ids,
            event_ptr=self.event_ptr,
            event_item=idx,
            event_age=self.event_age,
            has_visits=self.has_visits,
        )

    @cached_property
    def fingerprint(self) -> str:
        """A content hash (sha256 of ids, vocabulary and CSR arrays): the cache key for UI caching."""
        h = hashlib.sha256()
        for arr in (self.patient_ids, self.items, self.visit_ids):
            h.update("\x1f".join(map(str, arr.tolist())).encode())
        for arr in (self.visit_ptr, self.event_ptr, self.event_item):
            h.update(np.ascontiguousarray(arr).tobytes())
        if self.event_age is not None:
            h.update(np.ascontiguousarray(self.event_age).tobytes())
        h.update(b"v" if self.has_visits else b"-")
        return h.hexdigest()

    def __repr__(self) -> str:
        return (
            f"Records({self.n_patients} patients, {self.n_visits} visits, "
            f"{self.n_events} events, {self.n_items} items)"
        )


_PICKLED = frozenset({f.name for f in fields(Records)} | {"fingerprint"})  # `Records.__getstate__`


def _record_order(patient: np.ndarray, n_patients: int, visit: np.ndarray, n_visits: int) -> np.ndarray:
    """The events' order in `Records`: by patient, then visit key (-1, a missing visit, first), then
    input order. One stable sort of a combined key where it fits in 63 bits (a third of the time of
    `np.lexsort` with the input order as third key at 17.6 M events), else that lexsort."""
    if (n_patients + 1) * (n_visits + 1) < 2**62:
        key = patient.astype(np.int64) * (n_visits + 1) + (visit.astype(np.int64) + 1)
        return np.argsort(key, kind="stable")
    return np.lexsort((np.arange(len(patient)), visit, patient))


def concat_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, s + c) for each (s, c), vectorized."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(
        np.asarray(starts, dtype=np.int64) - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts
    )
    return offsets + np.arange(total, dtype=np.int64)


def item_bitsets(matrix: sp.spmatrix) -> np.ndarray:
    """(n_columns, n_words) uint64: the rows holding each column of a 0/1 sparse matrix, as bitsets
    (bit r of column j set when row r holds j); supports are popcounts of ANDs."""
    csc = sp.csc_matrix(matrix)
    n_words = max(1, (matrix.shape[0] + 63) // 64)
    out = np.zeros((matrix.shape[1], n_words), dtype=np.uint64)
    col = np.repeat(np.arange(matrix.shape[1]), np.diff(csc.indptr))
    rows = csc.indices.astype(np.int64)
    np.bitwise_or.at(out, (col, rows // 64), np.left_shift(np.uint64(1), (rows % 64).astype(np.uint64)))
    return out
