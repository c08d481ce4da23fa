"""The former `engine.utility.loss.cluster_table` (a `.loc` lookup per cluster) and `_original_nodes`, kept verbatim to
prove the current one gives the same table (tests/test_trajectories.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.utility.loss import LDAResult, record_losses


def reference_cluster_table(res: LDAResult) -> pd.DataFrame:
    rl = record_losses(res).set_index("patient_id")
    rows = []
    for c, members in enumerate(res.clusters):
        ids = res.trajectories.patient_ids[members]
        traj = " ".join(f"({code}, {age})" for code, age in res.cluster_labels(c))
        rows.append(
            {
                "cluster": c + 1,
                "size": len(members),
                "pairs": len(res.cluster_pairs[c]),
                "anonymized trajectory": traj or "(all pairs suppressed)",
                "ILM": float(rl.loc[ids, "ILM"].mean()),
                "ALM": float(rl.loc[ids, "ALM"].mean()),
                "patients": ", ".join(map(str, ids[:10])) + (" …" if len(ids) > 10 else ""),
            }
        )
    df = pd.DataFrame(rows)
    if len(df):
        loss = df["ILM"] + df["ALM"]
        df["_mixed"] = (loss > 0) & (df["pairs"] >= 2) & (df["ILM"] < 1) & (df["ALM"] < 1)
        df["_loss"] = -loss
        df = (
            df.sort_values(["_mixed", "pairs", "_loss", "cluster"], ascending=[False, False, True, True])
            .drop(columns=["_mixed", "_loss"])
            .reset_index(drop=True)
        )
    return df


def reference_original_nodes(result: LDAResult) -> tuple[np.ndarray, np.ndarray]:
    """The former `engine.utility.loss._original_nodes`: every pair looked up again per measure."""
    model, t = result.model, result.trajectories
    oi = model.icd.indexes(t.codes.astype(str))
    oa = model.age.indexes([model.age.leaf_of(a) for a in t.ages.tolist()])
    return oi, oa
