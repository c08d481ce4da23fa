"""Loss and utility measures of anonymized trajectories (Tamersoy 2011 thesis, section IV.2.6, IV.4).

- `record_losses` / `dataset_loss`: ILM and ALM per trajectory and per dataset (Definitions 7-8),
  unweighted (the weights steer the alignment; the measures report plain LM so that runs with
  different weights compare, as Figure 15). Each original pair costs LM(value -> released node),
  a suppressed pair costs LM(value -> root) = 1; a trajectory's sum is divided by its original
  length |T| (Definition 8's |T~| read as the number of pairs anonymized), so ILM, ALM lie in [0, 1].
- `level_shares`: share of ICD codes and ages at each DGH level (Figures 13-14; suppressed values
  count at the root level, as the thesis' Baseline "in the Any and 128-year levels").
- `avg_re`: AvgRE over the workload of (ICD, Age) pair combinations present in at least 1% of the
  original trajectories (section IV.4.1): here combinations of one or two pairs (`max_size`); the
  estimate counts each generalized pair as each of its leaf pairs with equal probability, a
  trajectory holds a query pair with probability 1 - prod(1 - p) over its released pairs, and the
  pairs of a combination are taken as independent.

The sweeps over k and weights (Figures 9-12, 15) run the method: `engine.study.experiments.lda_sweep_k`,
`lda_sweep_weights`. This module imports no method, not even for the checker: what it reads of the
method's result (`engine.anonymize.trajectories.LDAResult`) is named here structurally (`LDAResult`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd
import scipy.sparse as sp


class LDAResult(Protocol):
    """What these measures read of an LDA result (`engine.anonymize.trajectories.LDAResult`): its
    trajectories and cost model (hierarchies of ICD codes and ages), clusters, released pairs and the
    node each original pair is released as."""

    @property
    def trajectories(self) -> Any: ...

    @property
    def model(self) -> Any: ...

    @property
    def clusters(self) -> list[np.ndarray]: ...

    @property
    def cluster_pairs(self) -> list[list[tuple[int, int]]]: ...

    @property
    def pair_icd(self) -> np.ndarray: ...

    @property
    def pair_age(self) -> np.ndarray: ...

    @property
    def pair_kept(self) -> np.ndarray: ...

    def cluster_labels(self, c: int) -> list[tuple[str, str]]: ...

    def original_nodes(self) -> tuple[np.ndarray, np.ndarray]: ...


def _original_nodes(result: LDAResult) -> tuple[np.ndarray, np.ndarray]:
    """Per original pair, its ICD and Age leaf node: the result's own (computed once per prepared
    input, before clustering), not looked up again for every measure."""
    return result.original_nodes()


def record_losses(result: LDAResult) -> pd.DataFrame:
    """Per trajectory with pairs: `patient_id`, `pairs`, `suppressed`, `ILM`, `ALM` (Definition 7 / |T|)."""
    model, t = result.model, result.trajectories
    oi, oa = _original_nodes(result)
    li, la = model.icd.lost_leaves_array, model.age.lost_leaves_array
    pi = (li[result.pair_icd] - li[oi]) / model.icd.domain_size
    pa = (la[result.pair_age] - la[oa]) / model.age.domain_size
    owner = np.repeat(np.arange(t.n), t.lengths)
    n = np.maximum(t.lengths, 1)
    ilm = np.bincount(owner, weights=pi, minlength=t.n) / n
    alm = np.bincount(owner, weights=pa, minlength=t.n) / n
    sup = np.bincount(owner, weights=(~result.pair_kept).astype(float), minlength=t.n)
    keep = t.lengths > 0
    return pd.DataFrame(
        {
            "patient_id": t.patient_ids[keep],
            "pairs": t.lengths[keep],
            "suppressed": sup[keep].astype(np.int64),
            "ILM": ilm[keep],
            "ALM": alm[keep],
        }
    )


def dataset_loss(result: LDAResult) -> tuple[float, float]:
    """(ILM(D~), ALM(D~)), Definition 8: the mean over trajectories of their normalized LM."""
    r = record_losses(result)
    if len(r) == 0:
        return 0.0, 0.0
    return float(r["ILM"].mean()), float(r["ALM"].mean())


def level_shares(result: LDAResult) -> pd.DataFrame:
    """`attribute` (ICD / Age), `level`, `count`, `share` (%) of released values per DGH level."""
    rows = []
    for attr, h, nodes in (
        ("ICD", result.model.icd, result.pair_icd),
        ("Age", result.model.age, result.pair_age),
    ):
        levels = pd.Series(np.asarray(h.level_names, dtype=object)[nodes])
        counts = levels.value_counts()
        total = max(len(nodes), 1)
        for lv in [*h.level_order, *sorted(set(counts.index) - set(h.level_order))]:
            c = int(counts.get(lv, 0))
            rows.append((attr, lv, c, 100.0 * c / total))
    return pd.DataFrame(rows, columns=["attribute", "level", "count", "share"])


@dataclass(frozen=True)
class AvgRE:
    """AvgRE and its workload: one row per query (`query`, `size`, `actual`, `estimate`, `RE`)."""

    value: float
    workload: pd.DataFrame


def avg_re(result: LDAResult, min_support: float = 0.01, max_size: int = 2) -> AvgRE:
    """Average Relative Error of COUNT queries for (ICD, Age) pair combinations (section IV.4.1)."""
    if max_size not in (1, 2):
        raise ValueError("max_size must be 1 or 2")
    model, t = result.model, result.trajectories
    oi, oa = _original_nodes(result)
    owner = np.repeat(np.arange(t.n), t.lengths)
    n_traj = int((t.lengths > 0).sum())
    if n_traj == 0:
        return AvgRE(float("nan"), pd.DataFrame(columns=["query", "size", "actual", "estimate", "RE"]))
    na = len(model.age)
    pair_id, uniq_code = pd.factorize(oi * na + oa)
    uniq = [(int(u) // na, int(u) % na) for u in uniq_code]
    X = sp.csr_matrix((np.ones(len(owner)), (owner, pair_id)), shape=(t.n, len(uniq)))
    X.data[:] = 1
    X.sum_duplicates()
    X.data[:] = 1
    support = np.asarray(X.sum(axis=0)).ravel()
    need = min_support * n_traj
    freq = np.flatnonzero(support >= need)
    fi = np.array([uniq[f][0] for f in freq], dtype=np.int64)
    fa = np.array([uniq[f][1] for f in freq], dtype=np.int64)
    # released pairs per cluster and the probability that each covers each frequent pair
    ci = np.array([p[0] for cp in result.cluster_pairs for p in cp], dtype=np.int64)
    ca = np.array([p[1] for cp in result.cluster_pairs for p in cp], dtype=np.int64)
    cl = np.repeat(np.arange(len(result.cluster_pairs)), [len(cp) for cp in result.cluster_pairs])
    sizes = np.array([len(m) for m in result.clusters], dtype=float)
    hi, ha = model.icd, model.age
    if len(ci) and len(freq):
        cov = (hi._tin[ci][:, None] <= hi._tin[fi][None, :]) & (
            hi._tout[fi][None, :] <= hi._tout[ci][:, None]
        )
        cov &= (ha._tin[ca][:, None] <= ha._tin[fa][None, :]) & (
            ha._tout[fa][None, :] <= ha._tout[ca][:, None]
        )
        p = cov / (hi.n_leaves_array[ci] * ha.n_leaves_array[ca]).astype(float)[:, None]
        logq = np.log(np.maximum(1.0 - p, 1e-300))
        M = sp.csr_matrix((np.ones(len(cl)), (cl, np.arange(len(cl)))), shape=(len(sizes), len(cl)))
        P = 1.0 - np.exp(M @ logq)  # (clusters, frequent pairs)
    else:
        P = np.zeros((len(sizes), len(freq)))
    labels = [f"({hi.labels[i]}, {ha.labels[a]})" for i, a in zip(fi, fa, strict=True)]
    rows = []
    e1 = sizes @ P
    for q in range(len(freq)):
        a1 = support[freq[q]]
        rows.append((labels[q], 1, float(a1), float(e1[q])))
    if max_size == 2 and len(freq) > 1:
        Xf = X[:, freq]
        co = (Xf.T @ Xf).toarray()
        e2 = (P * sizes[:, None]).T @ P
        qa, qb = np.nonzero(np.triu(co >= need, k=1))
        for u, v in zip(qa.tolist(), qb.tolist(), strict=True):
            rows.append((f"{labels[u]} {labels[v]}", 2, float(co[u, v]), float(e2[u, v])))
    wl = pd.DataFrame(rows, columns=["query", "size", "actual", "estimate"])
    wl["RE"] = (wl["actual"] - wl["estimate"]).abs() / wl["actual"]
    return AvgRE(float(wl["RE"].mean()) if len(wl) else float("nan"), wl)


def cluster_table(res: LDAResult) -> pd.DataFrame:
    """One row per MDAV cluster (thesis Table 4): size, pairs kept, the anonymized trajectory, mean
    ILM / ALM of its members and up to ten of its patients. Order: clusters that keep at least two
    pairs yet hold generalized values first (most pairs, then most loss), then the rest; ties by
    cluster number."""
    rl = record_losses(res)
    # each trajectory's row in `rl`, looked up once (a member without pairs has none: KeyError, as
    # `.loc` raised); the means are numpy's, which is what pandas' `Series.mean` computes
    row_of = pd.Index(rl["patient_id"]).get_indexer(res.trajectories.patient_ids)
    ilm, alm = rl["ILM"].to_numpy(), rl["ALM"].to_numpy()
    rows = []
    for c, members in enumerate(res.clusters):
        ids = res.trajectories.patient_ids[members]
        at = row_of[members]
        if (at < 0).any():
            raise KeyError(f"trajectories without pairs in cluster {c + 1}: {list(ids[at < 0])}")
        traj = " ".join(f"({code}, {age})" for code, age in res.cluster_labels(c))
        rows.append(
            {
                "cluster": c + 1,
                "size": len(members),
                "pairs": len(res.cluster_pairs[c]),
                "anonymized trajectory": traj or "(all pairs suppressed)",
                "ILM": float(ilm[at].mean()),
                "ALM": float(alm[at].mean()),
                "patients": ", ".join(map(str, ids[:10])) + (" …" if len(ids) > 10 else ""),
            }
        )
    df = pd.DataFrame(rows)
    if len(df):
        # as Table 4: first the clusters that keep several pairs yet hold generalized values
        # (most pairs first, then most loss); wholly generalized or untouched clusters come last
        loss = df["ILM"] + df["ALM"]
        df["_mixed"] = (loss > 0) & (df["pairs"] >= 2) & (df["ILM"] < 1) & (df["ALM"] < 1)
        df["_loss"] = -loss
        df = (
            df.sort_values(["_mixed", "pairs", "_loss", "cluster"], ascending=[False, False, True, True])
            .drop(columns=["_mixed", "_loss"])
            .reset_index(drop=True)
        )
    return df
