"""The Longitudinal Data Anonymizer (LDA): (ICD, Age) trajectories, A-GS / Baseline alignment and
MDAV clustering (Tamersoy 2011 thesis, chapter IV).

Trajectories (section IV.2.2): each patient's multiset of (ICD, Age) pairs ordered by age; pairs
of the same age are ordered by code (text), so the order never depends on visit labels.

Ages above 89 are one category (HIPAA safe harbor, issue 23), in one place: a `Trajectories` holds
every age above 89 as 90 however it is built (`__post_init__`, `hierarchy.top_code_ages`; the number
of events of age 90 or more is `top_coded`), before alignment and MDAV, and the LDA's age hierarchy
writes 90 as `90+` (`Hierarchy.ages(..., top_code_90=True)`: `[65-90+]`, root `[1-90+]`). An age
hierarchy with a label above 89 other than `90+` (`[65-96]`) is refused. The release records it:
`params["ages_top_coded_at"] = 90`, `loss["ages_top_coded"]` = the events top-coded.

Clustering (section IV.3.2, MDAV with the alignment cost as distance), with these stated rules:
1. among the records not yet clustered, take the most frequent trajectory (ties: the one whose
   first record comes first in cohort order);
2. find the record farthest from it (largest A-GS / Baseline cost; ties: lowest record index);
3. grow a cluster from that record: its trajectory is the cluster's anonymized trajectory; k - 1
   times, add the record whose alignment with the current anonymized trajectory costs least
   (ties: lowest record index) and replace the anonymized trajectory by that alignment's result
   (Algorithm 3 with ILM(X), ALM(X) carried over);
4. repeat while at least 2k records remain; the last k..2k-1 records form the final cluster, grown
   by the same rule (so records that would be left over, fewer than k, join the last cluster).
Every record of a cluster is released as the cluster's anonymized trajectory: k-anonymous by
construction, and verified by `engine.risk` on the `Release` (items `code|age`, repeats counted).
Patients with no pair (e.g. none of the selected codes) are released as empty records.

Steps 2 and 3 run as compiled loops (`alignment_kernel`, numba): step 3 skips the records that
exact lower bounds exclude, and the chosen record is aligned with its traceback
(`alignment.ags_align`, the same result as the readable `alignment.ags_nodes`). What does not depend
on k is prepared once per input and kept for the next runs (`_prepared`, keyed on the content of
the trajectories, hierarchies, weights and method): the cost model and tables, the pairs as
indexes, the whole cost rows of step 2 (x is then an original trajectory, met again at other k)
and the release's source pairs. `lda(..., kernel="reference")` runs the pure-Python reference.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from engine.anonymize.alignment import (
    METHODS,
    CostModel,
    PairTables,
    XSide,
    _Raw,
    ags_align,
    ags_nodes,
    baseline_nodes,
    weight_fraction,
)
from engine.hierarchy import (
    AGE_TOP_CODE,
    AGE_TOP_LABEL,
    ICD9_THESIS_LEVELS,
    Hierarchy,
    HierarchyError,
    age_labels_above_top,
    top_code_ages,
    with_codes,
)
from engine.io.progress import Progress
from engine.memo import memo
from engine.records import Records
from engine.release import Release
from engine.utility.loss import dataset_loss

PAIR_SEP = "|"
THESIS_AGE_DOMAIN = (1, 128)


def pair_label(code: str, age: str) -> str:
    """The released item of a pair: `401.1|34`, `401|[35-36]`."""
    return f"{code}{PAIR_SEP}{age}"


# ------------------------------------------------------------------------------ trajectories
@dataclass(frozen=True, eq=False)
class Trajectories:
    """Per patient, (code, age) pairs ordered by age then code, in CSR form (`ptr`).

    Ages above 89 are held as 90 (`AGE_TOP_CODE`, written `90+`) whichever way the trajectories are
    built; `top_coded` counts the pairs of age 90 or more. `from_frame` top-codes before it orders the
    pairs, so pairs of age 90+ are ordered by code like any pairs of one age; the constructor and
    `from_pairs` keep the order they are given."""

    patient_ids: np.ndarray  # (n,) object
    ptr: np.ndarray  # (n + 1,) int64
    codes: np.ndarray  # (n_pairs,) object: code labels
    ages: np.ndarray  # (n_pairs,) int64, at most AGE_TOP_CODE
    top_coded: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        ages, n_top = top_code_ages(self.ages)
        object.__setattr__(self, "ages", ages)
        object.__setattr__(self, "top_coded", n_top)

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        *,
        patient_ids: Sequence[str] | np.ndarray | None = None,
        codes: Sequence[str] | None = None,
        top_codes: int | None = None,
        distinct: bool = False,
    ) -> Trajectories:
        """From long form (`patient_id`, `code`, `age`).

        `patient_ids` fixes the patients and their order (patients without pairs get empty
        trajectories); `codes` keeps only those codes; `top_codes` keeps the N codes held by the most
        patients (ties by code text), as the thesis' D50Pop; `distinct` drops repeated identical
        pairs (the thesis keeps them: trajectories are multisets).
        """
        missing = [c for c in ("patient_id", "code", "age") if c not in df.columns]
        if missing:
            raise ValueError(f"trajectories need columns patient_id, code, age; missing {missing}")
        pid = df["patient_id"].astype(str).to_numpy(dtype=object)
        code = df["code"].astype(str).to_numpy(dtype=object)
        age_raw = pd.to_numeric(df["age"], errors="coerce")
        bad = np.flatnonzero(age_raw.isna().to_numpy() | (age_raw.to_numpy() % 1 != 0))
        if len(bad):
            r = int(bad[0])
            raise ValueError(
                f"row {r + 2}, column 'age': expected a whole number of years, found {df['age'].iloc[r]!r}"
            )
        age, _ = top_code_ages(age_raw.to_numpy().astype(np.int64))  # before ordering (class docstring)
        if patient_ids is not None:
            order_ids = np.asarray([str(p) for p in patient_ids], dtype=object)
            keep = pd.Index(order_ids).get_indexer(pid) >= 0
            pid, code, age = pid[keep], code[keep], age[keep]
        if codes is not None:
            keep = np.isin(code, np.asarray(list(codes), dtype=object))
            pid, code, age = pid[keep], code[keep], age[keep]
        if top_codes is not None:
            per = pd.DataFrame({"p": pid, "c": code}).drop_duplicates()
            cnt = per["c"].value_counts()
            ranked = sorted(cnt.items(), key=lambda kv: (-kv[1], kv[0]))[: int(top_codes)]
            keep = np.isin(code, np.asarray([c for c, _ in ranked], dtype=object))
            pid, code, age = pid[keep], code[keep], age[keep]
        frame = pd.DataFrame({"p": pid, "c": code, "a": age})
        if distinct:
            frame = frame.drop_duplicates()
        if patient_ids is None:
            order_ids = pd.unique(frame["p"].to_numpy(dtype=object))
        p_idx = pd.Index(order_ids).get_indexer(frame["p"].to_numpy(dtype=object))
        c_arr = frame["c"].to_numpy(dtype=object)
        a_arr = frame["a"].to_numpy(dtype=np.int64)
        order = np.lexsort((c_arr.astype(str), a_arr, p_idx))
        counts = np.bincount(p_idx, minlength=len(order_ids))
        return cls(
            patient_ids=np.asarray(order_ids, dtype=object),
            ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            codes=c_arr[order],
            ages=a_arr[order],
        )

    @classmethod
    def from_records(cls, records: Records, **kwargs) -> Trajectories:
        """From `Records` with ages (every patient kept, in record order)."""
        if records.event_age is None:
            raise ValueError("these events have no 'age' column: trajectories need the age of each code")
        df = records.to_frame()
        return cls.from_frame(df, patient_ids=records.patient_ids, **kwargs)

    @classmethod
    def from_pairs(
        cls, pairs: Sequence[Sequence[tuple[str, int]]], patient_ids: Sequence[str] | None = None
    ) -> Trajectories:
        """From Python lists of (code, age) pairs (kept in the given order)."""
        ids = [str(i) for i in (patient_ids or range(1, len(pairs) + 1))]
        flat = [p for t in pairs for p in t]
        return cls(
            patient_ids=np.asarray(ids, dtype=object),
            ptr=np.concatenate([[0], np.cumsum([len(t) for t in pairs])]).astype(np.int64),
            codes=np.asarray([str(c) for c, _ in flat], dtype=object),
            ages=np.asarray([int(a) for _, a in flat], dtype=np.int64),
        )

    @property
    def n(self) -> int:
        return len(self.patient_ids)

    @cached_property
    def fingerprint(self) -> str:
        """A content hash (patients, pairs): the key of the LDA's memo of prepared inputs."""
        h = hashlib.sha256()
        for arr in (self.patient_ids, self.codes):
            h.update("\x1f".join(map(str, arr.tolist())).encode())
            h.update(b"\x1e")
        for arr in (self.ptr, self.ages):
            h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
        return h.hexdigest()

    @cached_property
    def lengths(self) -> np.ndarray:
        return np.diff(self.ptr)

    def pairs(self, p: int) -> list[tuple[str, int]]:
        s, e = self.ptr[p], self.ptr[p + 1]
        return list(zip(self.codes[s:e].tolist(), self.ages[s:e].tolist(), strict=True))

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "patient_id": np.repeat(self.patient_ids, self.lengths),
                "code": self.codes,
                "age": self.ages,
            }
        )

    def summary(self) -> dict[str, float]:
        """Table 3's columns: |D|, distinct pairs, codes, ages, and per-trajectory averages."""
        f = self.to_frame()
        nz = f.groupby("patient_id", sort=False)
        n = max(int((self.lengths > 0).sum()), 1)
        return {
            "trajectories": int((self.lengths > 0).sum()),
            "distinct (ICD, Age)": len(f.drop_duplicates(["code", "age"])),
            "distinct ICD": int(f["code"].nunique()),
            "distinct Age": int(f["age"].nunique()),
            "avg (ICD, Age) per T": float(len(f) / n),
            "avg ICD per T": float(nz["code"].nunique().sum() / n),
            "avg Age per T": float(nz["age"].nunique().sum() / n),
        }


def default_age_domain(ages: np.ndarray) -> tuple[int, int]:
    """The thesis' 1-128 when every age fits; else 0-127 when every age fits; else the data range
    (ages above 89 counted as 90: the LDA's age hierarchy ends at `90+` in every case)."""
    if ages is None or len(ages) == 0:
        return THESIS_AGE_DOMAIN
    top_coded, _ = top_code_ages(ages)
    lo, hi = int(np.min(top_coded)), int(np.max(top_coded))
    if lo >= 1 and hi <= 128:
        return THESIS_AGE_DOMAIN
    if lo >= 0 and hi <= 127:
        return (0, 127)
    return (lo, hi)


def hierarchies_for(
    traj: Trajectories,
    icd: Hierarchy | None = None,
    age: Hierarchy | None = None,
    age_domain: tuple[int, int] | None = None,
) -> tuple[Hierarchy, Hierarchy]:
    """The DGHs the LDA measures loss with: the ICD hierarchy (thesis' five-level ICD-9-CM by
    default) restricted to the codes present (|ICD| = distinct codes, as the thesis' Table 3), and
    the age hierarchy over the whole configured domain (Figure 5; the thesis' 1-128), top-coded:
    ages above 89 are the one leaf `90+`, so the 1-128 domain has 90 leaves. A given age hierarchy
    with a label above 89 other than `90+` is refused (ValueError). Codes the default ICD hierarchy
    lacks get their place by their own digits (`engine.hierarchy.with_codes`); codes a given ICD
    hierarchy lacks are a `HierarchyError` naming them (a UserError: the officer's hierarchy)."""
    if icd is None:
        icd = with_codes(Hierarchy.icd9(ICD9_THESIS_LEVELS), np.unique(traj.codes.astype(str)).tolist())
    try:
        icd_r = icd.restrict(np.unique(traj.codes.astype(str)).tolist())
    except KeyError as exc:  # a user's choice of codes, not a bug: said as a UserError (HierarchyError)
        raise HierarchyError(
            f"codes not in the ICD hierarchy the LDA measures loss with ({exc.args[0]}): choose a built-in "
            "hierarchy, or the top codes or the paper's codes, or give a hierarchy that holds them"
        ) from None
    if age is None:
        lo, hi = age_domain or default_age_domain(traj.ages)
        age = Hierarchy.ages(lo, hi, top_code_90=True)
    above = age_labels_above_top(age)
    if above:
        raise ValueError(
            f"the age hierarchy {age.name} would release ages above {AGE_TOP_CODE - 1} ({above[0]}); ages of "
            f"{AGE_TOP_CODE} and over are one category, {AGE_TOP_LABEL} (HIPAA safe harbor): use a top-coded "
            f"age hierarchy (Hierarchy.ages(lo, hi, top_code_90=True))"
        )
    out = [a for a in np.unique(traj.ages).tolist() if age.leaf_of(a) not in age]
    if out:
        rows = np.flatnonzero(np.isin(traj.ages, out))[:1]
        pat = traj.patient_ids[np.searchsorted(traj.ptr, rows[0], side="right") - 1]
        shown = AGE_TOP_LABEL if out[0] == AGE_TOP_CODE else out[0]
        raise ValueError(
            f"age {shown} (patient {pat}) is outside the age hierarchy {age.root}; widen the age domain"
        )
    return icd_r, age


# ------------------------------------------------------------------------------ the pool
class _Candidates:
    """The records not yet clustered (`alive`) and MDAV's two questions about them: the record
    farthest from (step 2) and the record nearest to (step 3) a trajectory x, by alignment cost,
    the lowest record index on ties."""

    alive: np.ndarray

    def costs(self, x: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        """(records alive, their alignment cost with x), records in increasing index."""
        raise NotImplementedError

    def nearest(self, x: Sequence[tuple[int, int]]) -> int:
        recs, costs = self.costs(x)
        return int(recs[np.flatnonzero(costs == costs.min())[0]])

    def farthest(self, x: Sequence[tuple[int, int]]) -> int:
        recs, costs = self.costs(x)
        return int(recs[np.flatnonzero(costs == costs.max())[0]])

    def remove(self, recs: Sequence[int]) -> None:
        self.alive[np.asarray(recs, dtype=np.int64)] = False


_ROW_BYTES = 16 * 2**20  # per prepared input: the memo of whole cost rows (`_Prepared.row`)


def _kernel():
    """`alignment_kernel`, imported on first use (numba is loaded only when the LDA runs)."""
    from engine.anonymize import alignment_kernel

    return alignment_kernel


class _Prepared:
    """What the LDA computes of one input before clustering, none of it depending on k: the cost
    model, the pairs as node indexes and as positions among the data's values (`PairTables`),
    identical trajectories grouped, a memo of whole cost rows (x against every record with pairs,
    `row`, bounded to `_ROW_BYTES`) and of results every run shares (`shared`: `LDAResult.memo`).

    Memoized per content (`_prepared`), so a run at another k starts from here."""

    def __init__(self, traj: Trajectories, icd_h: Hierarchy, age_h: Hierarchy, w: Fraction, method: str):
        self.traj, self.method = traj, method
        self.model = model = CostModel(icd_h, age_h, w)
        nodes_i = icd_h.indexes(traj.codes.astype(str))
        nodes_a = age_h.indexes([age_h.leaf_of(a) for a in traj.ages.tolist()])
        self.lengths = lengths = traj.lengths
        self.ptr = np.ascontiguousarray(traj.ptr, dtype=np.int64)
        self.rec = np.flatnonzero(lengths > 0)
        icd_vals, pos_i = np.unique(nodes_i, return_inverse=True)
        age_vals, pos_a = np.unique(nodes_a, return_inverse=True)
        self.tables = PairTables(model, icd_vals, age_vals)
        self.pid_flat = (pos_i * len(age_vals) + pos_a).astype(np.int64)
        self.ypi, self.ypa = pos_i.astype(np.int64), pos_a.astype(np.int64)
        # node pairs per record; identical trajectories share a group id (step 1)
        self.tup = [
            tuple(zip(nodes_i[s:e].tolist(), nodes_a[s:e].tolist(), strict=True))
            for s, e in zip(traj.ptr[:-1], traj.ptr[1:], strict=True)
        ]
        self.group = pd.factorize(pd.Series([str(t) for t in self.tup], dtype=object))[0]
        self._rows: dict[tuple, np.ndarray] = {}
        self._max_rows = max(1, _ROW_BYTES // (8 * max(traj.n, 1)))
        self._lock = threading.Lock()
        self._side: tuple[tuple, XSide] | None = None
        self.shared: dict = {"nodes": (nodes_i, nodes_a)}  # `LDAResult.memo`

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (what a pool job memoized comes back pickled, issue 38 finding 4): all but the
        lock, which is this process's; `__setstate__` makes a new one."""
        return {name: value for name, value in self.__dict__.items() if name != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def x_side(self, x: Sequence[tuple[int, int]]) -> XSide:
        """x for the compiled loops (`KernelTables.x_side`: its ICD rows), the last one kept: step 3
        asks for the nearest record to x, then aligns x with it."""
        key = tuple(x)
        last = self._side
        if last is not None and last[0] == key:
            return last[1]
        side = self.tables.kernel.x_side(x)
        self._side = (key, side)
        return side

    def costs(self, x: Sequence[tuple[int, int]], recs: np.ndarray) -> np.ndarray:
        """The alignment costs of x with the records `recs` (`alignment_kernel.costs`)."""
        kt = self.tables.kernel
        xs = self.x_side(x)
        return _kernel().costs(
            0 if self.method == "a-gs" else 1,
            *xs.ancestors,
            xs.xa,
            xs.sx,
            kt.gen_a,
            *self.y_pairs,
            self.ypa,
            self.ptr,
            np.ascontiguousarray(recs, dtype=np.int64),
        )

    @cached_property
    def y_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per pair of the data: its ICD value's DFS entry and cost, and its suppression cost."""
        ytin, ycost, ysi, ysa = self.tables.kernel.y_side(self.ypi, self.ypa)
        return ytin, ycost, ysi + ysa

    def row(self, x: Sequence[tuple[int, int]]) -> np.ndarray:
        """x's cost against every record with pairs (-1 for the others), memoized."""
        key = tuple(x)
        got = self._rows.get(key)
        if got is None:
            got = np.full(self.traj.n, -1, dtype=np.int64)
            got[self.rec] = self.costs(x, self.rec)
            with self._lock:
                self._rows[key] = got
                while len(self._rows) > self._max_rows:
                    self._rows.pop(next(iter(self._rows)), None)
        return got

    def aligned(self, x: Sequence[tuple[int, int]], best: int, ilm: int, alm: int) -> _Raw:
        """x aligned with record `best` (X carrying ILM `ilm`, ALM `alm`): A-GS or Baseline."""
        if self.method == "baseline":
            return baseline_nodes(x, self.tup[best], self.model, ilm, alm)
        s, e = self.ptr[best], self.ptr[best + 1]
        return ags_align(x, self.ypi[s:e], self.ypa[s:e], self.tables, ilm, alm, side=self.x_side(x))


class _Pool(_Candidates):
    """The records not yet clustered, aligned with x by the compiled loops (`alignment_kernel`).

    Step 2 (farthest) takes x's whole cost row (`_Prepared.row`: x is an original trajectory there,
    met again at later clusters and at other k). Step 3 (nearest) skips the records that lower
    bounds exclude (`alignment_kernel.nearest`)."""

    def __init__(self, prep: _Prepared, rec: np.ndarray):
        self.prep = prep
        self.alive = np.zeros(prep.traj.n, dtype=bool)
        self.alive[rec] = True
        t = prep.tables
        self._floors = np.zeros((len(t.icd_vals), len(t.age_vals), 2), dtype=np.int64)  # nearest's scratch
        self._slot = np.full(len(prep.model.icd), -1, dtype=np.int64)  # nearest's scratch per ICD node
        self._stamp = 0

    def costs(self, x: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        recs = np.flatnonzero(self.alive)
        return recs, self.prep.costs(x, recs)

    def farthest(self, x: Sequence[tuple[int, int]]) -> int:
        recs = np.flatnonzero(self.alive)
        costs = self.prep.row(x)[recs]
        return int(recs[np.flatnonzero(costs == costs.max())[0]])

    def nearest(self, x: Sequence[tuple[int, int]]) -> int:
        prep = self.prep
        kt = prep.tables.kernel
        xs = prep.x_side(x)
        self._stamp += 1
        return int(
            _kernel().nearest(
                0 if prep.method == "a-gs" else 1,
                xs.xi,
                xs.xa,
                xs.sx,
                *xs.ancestors,
                kt.gen_a,
                kt.yshare_a,
                kt.sup_min,
                kt.icd_cost,
                kt.icd_parent,
                kt.icd_depth,
                kt.val_node,
                prep.ypi,
                prep.ypa,
                *prep.y_pairs,
                prep.ptr,
                self.alive,
                self._floors,
                self._stamp,
                self._slot,
            )
        )


class _ReferencePool(_Candidates):
    """The plain reference: one pure-Python A-GS / Baseline per remaining record (for benchmarks
    and equivalence tests; same integers, same choices as `_Pool`)."""

    def __init__(self, prep: _Prepared, rec: np.ndarray):
        self.alive = np.zeros(prep.traj.n, dtype=bool)
        self.alive[rec] = True
        self.tup, self.model, self.method = prep.tup, prep.model, prep.method

    def costs(self, x: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        fn = ags_nodes if self.method == "a-gs" else baseline_nodes
        recs = np.flatnonzero(self.alive)
        costs = []
        for r in recs:
            raw = fn(x, self.tup[r], self.model)
            costs.append(raw.ilm + raw.alm)
        return recs, np.asarray(costs, dtype=np.int64)


PoolFactory = Callable[[_Prepared, np.ndarray], _Candidates]
_KERNELS: dict[str, PoolFactory] = {"batched": _Pool, "reference": _ReferencePool}

_PREPARED_MAX = 4  # `_prepared`'s memo: the last few inputs (`engine.memo`, "trajectories prepared")
# a hierarchy's content hash per object, held weakly: it goes with the hierarchy (engine.memo.PROCESS_WIDE)
_HIERARCHY_KEYS: weakref.WeakKeyDictionary[Hierarchy, str] = weakref.WeakKeyDictionary()
_HIERARCHY_KEYS_LOCK = threading.Lock()


def _hierarchy_key(h: Hierarchy) -> str:
    """A content hash of a hierarchy (labels, parents, value map), memoized per object."""
    with _HIERARCHY_KEYS_LOCK:
        got = _HIERARCHY_KEYS.get(h)
    if got is not None:
        return got
    d = hashlib.sha256("\x1f".join(h.labels).encode())
    d.update(np.ascontiguousarray(h.parent_index).tobytes())
    d.update(repr(sorted(h.value_map.items())).encode())
    key = d.hexdigest()
    with _HIERARCHY_KEYS_LOCK:
        _HIERARCHY_KEYS[h] = key
    return key


def _prepared(
    traj: Trajectories,
    icd_hierarchy: Hierarchy | None,
    age_hierarchy: Hierarchy | None,
    age_domain: tuple[int, int] | None,
    w: Fraction,
    method: str,
) -> _Prepared:
    """The input prepared for clustering (`_Prepared`), memoized on its content where the caller's
    scope says (`engine.memo`: the app's session): the last `_PREPARED_MAX` inputs are kept."""
    key = (
        traj.fingerprint,
        None if icd_hierarchy is None else _hierarchy_key(icd_hierarchy),
        None if age_hierarchy is None else _hierarchy_key(age_hierarchy),
        age_domain,
        w,
        method,
    )

    def make() -> _Prepared:
        icd_h, age_h = hierarchies_for(traj, icd_hierarchy, age_hierarchy, age_domain)
        return _Prepared(traj, icd_h, age_h, w, method)

    return memo("trajectories prepared", key, make, size=_PREPARED_MAX)


# ------------------------------------------------------------------------------ the LDA
@dataclass(frozen=True, eq=False)
class LDAResult:
    """A k-anonymized set of trajectories and the bookkeeping behind it.

    `clusters[c]`: record indexes of cluster c in the order they joined; `cluster_pairs[c]`: its
    anonymized trajectory as (ICD node, Age node) of `model`'s hierarchies; `pair_icd`, `pair_age`:
    per original pair, the node it is released as (the root when suppressed); `pair_kept`: False
    for suppressed pairs; `memo`: what depends on the input and the model only (original nodes,
    source pairs), shared by the runs of one prepared input (`_shared`).
    """

    trajectories: Trajectories
    model: CostModel
    method: str
    k: int
    clusters: list[np.ndarray]
    cluster_pairs: list[list[tuple[int, int]]]
    pair_icd: np.ndarray
    pair_age: np.ndarray
    pair_kept: np.ndarray
    params: dict = field(default_factory=dict)
    memo: dict = field(default_factory=dict, repr=False)

    @cached_property
    def record_cluster(self) -> np.ndarray:
        """Cluster of each record (-1 for records with no pairs)."""
        out = np.full(self.trajectories.n, -1, dtype=np.int64)
        for c, members in enumerate(self.clusters):
            out[members] = c
        return out

    def cluster_labels(self, c: int) -> list[tuple[str, str]]:
        return [(self.model.icd.labels[i], self.model.age.labels[a]) for i, a in self.cluster_pairs[c]]

    def released_frame(self) -> pd.DataFrame:
        """Long form `patient_id, code, age` of the release (generalized values as labels)."""
        rows: list[tuple[object, str, str]] = []
        for p, c in enumerate(self.record_cluster):
            if c < 0:
                continue
            pid = self.trajectories.patient_ids[p]
            rows.extend((pid, code, age) for code, age in self.cluster_labels(int(c)))
        return pd.DataFrame(rows, columns=["patient_id", "code", "age"])

    def suppressed_frame(self) -> pd.DataFrame:
        t = self.trajectories
        pid = np.repeat(t.patient_ids, t.lengths)
        drop = ~self.pair_kept
        return pd.DataFrame({"patient_id": pid[drop], "code": t.codes[drop], "age": t.ages[drop]})

    def _shared(self, name: str, compute: Callable[[], object]):
        """A result that depends on the input and the model only (not on k), computed once for all
        the runs of one prepared input (`memo`)."""
        got = self.memo.get(name)
        if got is None:
            got = self.memo[name] = compute()
        return got

    def original_nodes(self) -> tuple[np.ndarray, np.ndarray]:
        """Per original pair, its ICD and Age leaf node of `model`'s hierarchies."""

        def compute() -> tuple[np.ndarray, np.ndarray]:
            t, model = self.trajectories, self.model
            icd = model.icd.indexes(t.codes.astype(str))
            return icd, model.age.indexes([model.age.leaf_of(a) for a in t.ages.tolist()])

        return self._shared("nodes", compute)

    def source_pairs(self) -> Records:
        """The LDA's input as `code|age` pair items, one record per cohort patient (those without
        pairs too): what the release's invariant is checked against (`Release.checked`)."""
        return self._shared("source_pairs", self._source_pairs)

    def _source_pairs(self) -> Records:
        t, model = self.trajectories, self.model
        icd, age = self.original_nodes()
        labels = [pair_label(model.icd.labels[i], model.age.labels[a]) for i, a in zip(icd, age, strict=True)]
        vocab = np.array(sorted(set(labels)), dtype=object)
        idx = pd.Index(vocab).get_indexer(labels).astype(np.int32) if labels else np.zeros(0, np.int32)
        return Records(
            patient_ids=np.asarray(t.patient_ids, dtype=object),
            items=vocab,
            visit_ptr=np.arange(t.n + 1, dtype=np.int64),
            visit_ids=np.zeros(t.n, dtype=object),
            event_ptr=np.asarray(t.ptr, dtype=np.int64),
            event_item=idx,
            has_visits=False,
        )

    def release(self) -> Release:
        """The `Release`: one record per patient whose items are `code|age` pairs (repeats kept).

        `item_codes` maps every generalized pair to the original pairs present in the cohort that it
        stands for (a generalized pair is consistent with any of its leaf pairs), so the risk engine
        can match released pairs against original ones; `counts_repeats` is True (all-visits
        knowledge of the multiset of pairs)."""
        t, model = self.trajectories, self.model
        labels_per_cluster = [
            [pair_label(model.icd.labels[i], model.age.labels[a]) for i, a in cp] for cp in self.cluster_pairs
        ]
        ev_labels: list[str] = []
        lengths = np.zeros(t.n, dtype=np.int64)
        for p, c in enumerate(self.record_cluster):
            if c >= 0:
                ev_labels.extend(labels_per_cluster[c])
                lengths[p] = len(labels_per_cluster[c])
        vocab = np.array(sorted(set(ev_labels)), dtype=object)
        idx = pd.Index(vocab).get_indexer(ev_labels).astype(np.int32) if ev_labels else np.zeros(0, np.int32)
        records = Records(
            patient_ids=t.patient_ids.copy(),
            items=vocab,
            visit_ptr=np.arange(t.n + 1, dtype=np.int64),
            visit_ids=np.zeros(t.n, dtype=object),
            event_ptr=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            event_item=idx,
            event_age=None,
            has_visits=False,
        )
        return Release(
            method=f"LDA ({self.method})",
            records=records,
            item_codes=self._item_codes(),
            suppressed=self.suppressed_frame(),
            counts_repeats=True,
            age_pairs=True,  # exported as `patient_id, code, age` (Release.exported_frame)
            params=dict(self.params),
            loss=self.loss_summary(),
        )

    def _present_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct original (ICD, Age) leaf pairs and their labels."""
        model = self.model
        present = (
            pd.DataFrame(dict(zip("ia", self.original_nodes(), strict=True))).drop_duplicates().to_numpy()
        )
        plab = [pair_label(model.icd.labels[i], model.age.labels[a]) for i, a in present]
        return present, np.array(plab, dtype=object)

    def _item_codes(self) -> dict[str, frozenset[str]]:
        model = self.model
        present, plab = self._shared("present", self._present_pairs)
        if len(present) == 0:
            return {}
        rel = sorted({pa for cp in self.cluster_pairs for pa in cp})
        ti, to = model.icd._tin, model.icd._tout
        ai, ao = model.age._tin, model.age._tout
        out: dict[str, frozenset[str]] = {}
        for i, a in rel:
            if model.icd.is_leaf_array[i] and model.age.is_leaf_array[a]:
                continue
            cov = (ti[i] <= ti[present[:, 0]]) & (to[present[:, 0]] <= to[i])
            cov &= (ai[a] <= ai[present[:, 1]]) & (ao[present[:, 1]] <= ao[a])
            out[pair_label(model.icd.labels[i], model.age.labels[a])] = frozenset(plab[cov].tolist())
        return out

    def loss_summary(self) -> dict[str, float]:
        """ILM, ALM, the number of clusters and of the pairs whose age was top-coded to `90+`."""
        ilm, alm = dataset_loss(self)
        return {
            "ILM": ilm,
            "ALM": alm,
            "clusters": len(self.clusters),
            "ages_top_coded": self.trajectories.top_coded,
        }


def lda(
    traj: Trajectories,
    k: int,
    *,
    w_icd: float = 0.5,
    method: str = "a-gs",
    icd_hierarchy: Hierarchy | None = None,
    age_hierarchy: Hierarchy | None = None,
    age_domain: tuple[int, int] | None = None,
    progress: Progress | None = None,
    kernel: str | PoolFactory = "batched",
) -> LDAResult:
    """k-anonymize trajectories with MDAV over A-GS (or Baseline) alignments (module docstring).

    The ICD hierarchy is restricted to the codes present; ages use the full configured domain.
    `kernel`: "batched" (numpy, one trajectory against many at once, with lower bounds) or
    "reference" (pure Python, one alignment at a time; same result, for benchmarks and tests), or a
    factory of another pool (`PoolFactory`; the tests' former kernel). `progress(fraction, message)`
    after every cluster (`engine.io.progress`).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    k = int(k)
    if k < 1:
        raise ValueError("k must be at least 1")
    w = weight_fraction(w_icd)
    factory = _KERNELS.get(kernel) if isinstance(kernel, str) else kernel
    if factory is None:
        raise ValueError(f"kernel must be 'batched' or 'reference', not {kernel!r}")
    prep = _prepared(traj, icd_hierarchy, age_hierarchy, age_domain, w, method)
    model, tup, group = prep.model, prep.tup, prep.group
    rec = prep.rec
    if 0 < len(rec) < k:
        raise ValueError(f"only {len(rec)} trajectories with pairs: at least k = {k} are needed")
    pool = factory(prep, rec)
    fast = kernel == "batched"  # the others keep the readable alignment (`ags_nodes`) too

    def align_with(cur: list[tuple[int, int]], best: int, ilm: int, alm: int):
        if fast:
            return prep.aligned(cur, best, ilm, alm)
        return (ags_nodes if method == "a-gs" else baseline_nodes)(cur, tup[best], model, ilm, alm)

    pair_icd = np.zeros(len(traj.codes), dtype=np.int64)  # root
    pair_age = np.zeros(len(traj.codes), dtype=np.int64)
    pair_kept = np.zeros(len(traj.codes), dtype=bool)
    clusters: list[np.ndarray] = []
    cluster_pairs: list[list[tuple[int, int]]] = []
    n_total = len(rec)

    def grow(seed: int, size: int) -> None:
        members = [seed]
        pool.remove([seed])
        s, e = traj.ptr[seed], traj.ptr[seed + 1]
        cur = list(tup[seed])
        prov = [[g] for g in range(s, e)]  # original pair ids behind each anonymized pair
        ilm = alm = 0
        for _ in range(size - 1):
            best = pool.nearest(cur)
            raw = align_with(cur, best, ilm, alm)
            ys = traj.ptr[best]
            new_prov = []
            for op, h, j in raw.ops:
                if op == "diag":
                    new_prov.append(prov[h - 1] + [ys + j - 1])
            cur, prov, ilm, alm = raw.pairs, new_prov, raw.ilm, raw.alm
            members.append(best)
            pool.remove([best])
        for (ci, ca), gs in zip(cur, prov, strict=True):
            pair_icd[gs], pair_age[gs], pair_kept[gs] = ci, ca, True
        clusters.append(np.asarray(members, dtype=np.int64))
        cluster_pairs.append(list(cur))
        if progress is not None:
            progress(1.0 - pool.alive.sum() / max(n_total, 1), "LDA: clustering")

    def farthest_from_most_frequent() -> int:
        alive = np.flatnonzero(pool.alive)
        cnt = np.bincount(group[alive])
        mf = int(alive[np.flatnonzero(cnt[group[alive]] == cnt.max())[0]])  # step 1, first in cohort order
        return pool.farthest(tup[mf])  # step 2, lowest index on ties

    while pool.alive.sum() >= 2 * k:  # steps 3-4
        grow(farthest_from_most_frequent(), k)
    if pool.alive.any():  # the last k..2k-1 records form the final cluster
        grow(farthest_from_most_frequent(), int(pool.alive.sum()))
    icd_h, age_h = model.icd, model.age
    params = {
        "k": k,
        "method": method,
        "w_icd": float(w),
        "w_age": float(1 - w),
        "icd_hierarchy": icd_h.name,
        "age_hierarchy": age_h.name,
        "knowledge": "all_visits (code, age) pairs with repeats",
        "ages_top_coded_at": AGE_TOP_CODE,  # ages above 89 released as one category, 90+
    }
    return LDAResult(
        traj, model, method, k, clusters, cluster_pairs, pair_icd, pair_age, pair_kept, params, prep.shared
    )
