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

The costs of step 2 and 3 for all remaining records are computed at once by
`alignment.ags_costs_batch` (records grouped into length buckets); only the chosen record is then
aligned with the readable `alignment.ags_nodes` to obtain the anonymized trajectory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from engine.anonymize.alignment import (
    METHODS,
    CostModel,
    PairTables,
    ags_costs_batch,
    ags_nodes,
    baseline_costs_batch,
    baseline_nodes,
    prepare_x,
    weight_fraction,
)
from engine.hierarchy import (
    AGE_TOP_CODE,
    AGE_TOP_LABEL,
    ICD9_THESIS_LEVELS,
    Hierarchy,
    age_labels_above_top,
    top_code_ages,
)
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
    with a label above 89 other than `90+` is refused (ValueError)."""
    icd = icd or Hierarchy.icd9(ICD9_THESIS_LEVELS)
    try:
        icd_r = icd.restrict(np.unique(traj.codes.astype(str)).tolist())
    except KeyError as exc:
        raise ValueError(f"codes not in the ICD hierarchy ({exc.args[0]})") from None
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
def _length_buckets(rec: np.ndarray, lengths: np.ndarray, min_rows: int = 768) -> list[np.ndarray]:
    """Records grouped by length: one group per distinct length, adjacent groups merged until each
    holds at least `min_rows` records or spans lengths within 25% (padding waste vs call overhead)."""
    Ls = lengths[rec]
    order = np.argsort(Ls, kind="stable")
    sorted_rec, sorted_L = rec[order], Ls[order]
    out: list[np.ndarray] = []
    start = 0
    n = len(sorted_rec)
    while start < n:
        end = start + 1
        while end < n and (end - start < min_rows or sorted_L[end] <= 1.25 * sorted_L[start]):
            end += 1
        # keep equal lengths together
        while end < n and sorted_L[end] == sorted_L[end - 1]:
            end += 1
        out.append(np.sort(sorted_rec[start:end]))
        start = end
    return out


class _Pool:
    """The records not yet clustered, grouped by length into padded arrays for the batched kernel.

    Buckets are compacted when fewer than 60% of their rows are alive, so each batch works on
    mostly-alive rows without gathering them every time.
    """

    def __init__(
        self,
        rec: np.ndarray,
        lengths: np.ndarray,
        pid_flat: np.ndarray,
        ptr: np.ndarray,
        tables: PairTables,
        dtype,
    ):
        self.tables = tables
        self.dtype = dtype
        self.alive = np.zeros(len(lengths), dtype=bool)
        self.alive[rec] = True
        self.buckets: list[dict] = []
        for sel in _length_buckets(rec, lengths):
            L = int(lengths[sel].max())
            pid = np.full((L, len(sel)), tables.n_values, dtype=np.int64)  # column-major, sentinel-padded
            for b, r in enumerate(sel):
                pid[: lengths[r], b] = pid_flat[ptr[r] : ptr[r + 1]]
            mask = np.arange(L)[:, None] < lengths[sel][None, :]
            sup = np.where(mask, tables.y_suppress(pid), 0)
            S = np.concatenate([np.zeros((1, len(sel)), np.int64), np.cumsum(sup, axis=0)], axis=0).astype(
                dtype
            )
            Ls = lengths[sel]
            self.buckets.append(
                {"rec": sel, "pid": pid, "S": S, "len": Ls, "Lmin": int(Ls.min()), "Lmax": int(Ls.max())}
            )

    def costs(self, x: Sequence[tuple[int, int]], method: str) -> tuple[np.ndarray, np.ndarray]:
        """(records alive, their alignment cost with x), records in increasing index.

        (Lower bounds to skip hopeless records were tried: on D50Pop-shaped data they pruned too
        little to pay for themselves, so every alive record is aligned.)
        """
        xp: Sequence[tuple[int, int]] | list[tuple[np.ndarray, np.ndarray]]
        if method == "a-gs":
            fn, xp = ags_costs_batch, prepare_x(x, self.tables, self.dtype)
        else:
            fn, xp = baseline_costs_batch, x
        recs, costs = [], []
        for b in self.buckets:
            ok = self.alive[b["rec"]]
            if not ok.any():
                continue
            c = fn(xp, b["pid"], b["S"], b["len"], self.tables)
            recs.append(b["rec"][ok])
            costs.append(c[ok].astype(np.int64))
        if not recs:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        r, c = np.concatenate(recs), np.concatenate(costs)
        o = np.argsort(r, kind="stable")
        return r[o], c[o]

    def remove(self, recs: Sequence[int]) -> None:
        self.alive[np.asarray(recs, dtype=np.int64)] = False
        for b in self.buckets:
            ok = self.alive[b["rec"]]
            if 0 < ok.sum() < 0.6 * len(ok):
                b["rec"], b["len"] = b["rec"][ok], b["len"][ok]
                b["pid"], b["S"] = np.ascontiguousarray(b["pid"][:, ok]), np.ascontiguousarray(b["S"][:, ok])


class _ReferencePool:
    """The plain reference: one pure-Python A-GS / Baseline per remaining record (for benchmarks
    and equivalence tests; same integers, same choices as `_Pool`)."""

    def __init__(self, rec: np.ndarray, n: int, tup: list, model: CostModel):
        self.alive = np.zeros(n, dtype=bool)
        self.alive[rec] = True
        self.tup, self.model = tup, model

    def costs(self, x: Sequence[tuple[int, int]], method: str) -> tuple[np.ndarray, np.ndarray]:
        fn = ags_nodes if method == "a-gs" else baseline_nodes
        recs = np.flatnonzero(self.alive)
        costs = []
        for r in recs:
            raw = fn(x, self.tup[r], self.model)
            costs.append(raw.ilm + raw.alm)
        return recs, np.asarray(costs, dtype=np.int64)

    def remove(self, recs: Sequence[int]) -> None:
        self.alive[np.asarray(recs, dtype=np.int64)] = False


# ------------------------------------------------------------------------------ the LDA
@dataclass(frozen=True, eq=False)
class LDAResult:
    """A k-anonymized set of trajectories and the bookkeeping behind it.

    `clusters[c]`: record indexes of cluster c in the order they joined; `cluster_pairs[c]`: its
    anonymized trajectory as (ICD node, Age node) of `model`'s hierarchies; `pair_icd`, `pair_age`:
    per original pair, the node it is released as (the root when suppressed); `pair_kept`: False
    for suppressed pairs.
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

    def source_pairs(self) -> Records:
        """The LDA's input as `code|age` pair items, one record per cohort patient (those without
        pairs too): what the release's invariant is checked against (`Release.checked`)."""
        t, model = self.trajectories, self.model
        icd = model.icd.indexes(t.codes.astype(str))
        age = model.age.indexes([model.age.leaf_of(a) for a in t.ages.tolist()])
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

    def _item_codes(self) -> dict[str, frozenset[str]]:
        model, t = self.model, self.trajectories
        oi = model.icd.indexes(t.codes.astype(str))
        oa = model.age.indexes([model.age.leaf_of(a) for a in t.ages.tolist()])
        present = pd.DataFrame({"i": oi, "a": oa}).drop_duplicates().to_numpy()
        if len(present) == 0:
            return {}
        plab = np.array(
            [pair_label(model.icd.labels[i], model.age.labels[a]) for i, a in present], dtype=object
        )
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
    progress: Callable[[float], None] | None = None,
    kernel: str = "batched",
) -> LDAResult:
    """k-anonymize trajectories with MDAV over A-GS (or Baseline) alignments (module docstring).

    The ICD hierarchy is restricted to the codes present; ages use the full configured domain.
    `kernel`: "batched" (numpy, one trajectory against all remaining at once) or "reference"
    (pure Python, one alignment at a time; same result, for benchmarks and tests).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    k = int(k)
    if k < 1:
        raise ValueError("k must be at least 1")
    w = weight_fraction(w_icd)
    icd_h, age_h = hierarchies_for(traj, icd_hierarchy, age_hierarchy, age_domain)
    model = CostModel(icd_h, age_h, w)
    nodes_i = icd_h.indexes(traj.codes.astype(str))
    nodes_a = age_h.indexes([age_h.leaf_of(a) for a in traj.ages.tolist()])
    lengths = traj.lengths
    rec = np.flatnonzero(lengths > 0)
    if 0 < len(rec) < k:
        raise ValueError(f"only {len(rec)} trajectories with pairs: at least k = {k} are needed")
    icd_vals, pos_i = np.unique(nodes_i, return_inverse=True)
    age_vals, pos_a = np.unique(nodes_a, return_inverse=True)
    tables = PairTables(model, icd_vals, age_vals)
    pid_flat = pos_i * len(age_vals) + pos_a
    bound = model.scale * 2 * (int(lengths.max(initial=0)) + 1) * 2
    dtype = np.int32 if bound < 2**31 - 1 else np.int64
    # identical trajectories share a group id (step 1: the most frequent trajectory)
    tup = [
        tuple(zip(nodes_i[s:e].tolist(), nodes_a[s:e].tolist(), strict=True))
        for s, e in zip(traj.ptr[:-1], traj.ptr[1:], strict=True)
    ]
    group = pd.factorize(pd.Series([str(t) for t in tup], dtype=object))[0]
    pool: _Pool | _ReferencePool
    if kernel == "batched":
        pool = _Pool(rec, lengths, pid_flat, traj.ptr, tables, dtype)
    elif kernel == "reference":
        pool = _ReferencePool(rec, traj.n, tup, model)
    else:
        raise ValueError(f"kernel must be 'batched' or 'reference', not {kernel!r}")
    align_fn = ags_nodes if method == "a-gs" else baseline_nodes
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
            recs, costs = pool.costs(cur, method)
            best = int(recs[np.flatnonzero(costs == costs.min())[0]])
            raw = align_fn(cur, tup[best], model, ilm, alm)
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
            progress(1.0 - pool.alive.sum() / max(n_total, 1))

    def farthest_from_most_frequent() -> int:
        alive = np.flatnonzero(pool.alive)
        cnt = np.bincount(group[alive])
        mf = int(alive[np.flatnonzero(cnt[group[alive]] == cnt.max())[0]])  # step 1, first in cohort order
        recs, costs = pool.costs(tup[mf], method)
        return int(recs[np.flatnonzero(costs == costs.max())[0]])  # step 2, lowest index on ties

    while pool.alive.sum() >= 2 * k:  # steps 3-4
        grow(farthest_from_most_frequent(), k)
    if pool.alive.any():  # the last k..2k-1 records form the final cluster
        grow(farthest_from_most_frequent(), int(pool.alive.sum()))
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
    return LDAResult(traj, model, method, k, clusters, cluster_pairs, pair_icd, pair_age, pair_kept, params)
