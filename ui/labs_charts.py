"""Charts of the Lab orders page (Johnson 2018, Figures 3-6), engine-free and torch-free.

Each figure function takes the plain frames the engine returns (or the `*_frame` helpers below build,
which are also what the page offers as CSV downloads) and returns a plotly figure.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

RANDOM_COLOR, RAW_COLOR, LATENT_COLOR = "#d62728", "#1f77b4", "#2ca02c"
COLORS = {"raw": RAW_COLOR, "latent": LATENT_COLOR}


def uniqueness_figure(table: pd.DataFrame, max_days: int = 30) -> go.Figure:
    """Figure 3: share of patients with at least d lab days whose set of labs is unique."""
    t = table[table["days"] <= max_days]
    fig = go.Figure(
        go.Scatter(
            x=t["days"],
            y=100 * t["share_unique"],
            mode="lines+markers",
            line={"color": RAW_COLOR},
            customdata=np.stack([t["patients"], t["unique"]], axis=1) if len(t) else None,
            hovertemplate="at least %{x} days: %{y:.1f}% unique<br>%{customdata[1]:,} of %{customdata[0]:,} patients"
            "<extra></extra>",
            name="unique",
        )
    )
    fig.update_layout(
        xaxis_title="days with lab orders (at least)",
        yaxis_title="patients with a unique set of labs (%)",
        yaxis_range=[0, 101],
        margin={"t": 30},
        height=360,
    )
    return fig


def recall_frame(curves: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Long form of Recall@n curves: `curve`, n, recall, random, recall_low, recall_high."""
    parts = [f.assign(curve=name) for name, f in curves.items()]
    if not parts:
        return pd.DataFrame(columns=["curve", "n", "recall", "random", "recall_low", "recall_high"])
    out = pd.concat(parts, ignore_index=True)
    return out[["curve", *[c for c in out.columns if c != "curve"]]]


def recall_figure(curves: Mapping[str, pd.DataFrame], title: str = "") -> go.Figure:
    """Figure 4: Recall@n (mean over simulations, shaded 2.5-97.5 percentile band) against the random
    line n / candidates. `curves` maps a name (raw, latent) to a `Recall.to_frame()`."""
    fig = go.Figure()
    for name, f in curves.items():
        color = COLORS.get(name, RAW_COLOR)
        fig.add_trace(
            go.Scatter(
                x=np.concatenate([f["n"], f["n"][::-1]]),
                y=100 * np.concatenate([f["recall_high"], f["recall_low"][::-1]]),
                fill="toself",
                fillcolor=color,
                opacity=0.2,
                line={"width": 0},
                hoverinfo="skip",
                name=f"{name}: 95% of simulations",
            )
        )
        fig.add_trace(go.Scatter(x=f["n"], y=100 * f["recall"], name=name, line={"color": color, "width": 3}))
    if curves:
        first = next(iter(curves.values()))
        fig.add_trace(
            go.Scatter(
                x=first["n"],
                y=100 * first["random"],
                name="random",
                line={"color": RANDOM_COLOR, "dash": "dash"},
            )
        )
    fig.update_layout(
        title=title,
        xaxis_title="n (true patient among the n closest)",
        yaxis_title="Recall@n (%)",
        yaxis_range=[0, 101],
        margin={"t": 40 if title else 30},
        height=400,
    )
    return fig


def spread_frame(per_simulation: Mapping[str, np.ndarray], n: int) -> pd.DataFrame:
    """Recall@n of each simulation: `curve`, `simulation`, `recall` (Figure 4, right panel)."""
    rows = [
        pd.DataFrame({"curve": name, "simulation": np.arange(len(v)), "recall": v[:, n - 1]})
        for name, v in per_simulation.items()
    ]
    return (
        pd.concat(rows, ignore_index=True)
        if rows
        else pd.DataFrame(columns=["curve", "simulation", "recall"])
    )


def spread_figure(frame: pd.DataFrame, n: int) -> go.Figure:
    """Distribution of Recall@n over the repeated simulations (Figure 4, right panel)."""
    fig = go.Figure()
    for name, f in frame.groupby("curve", sort=False):
        fig.add_trace(
            go.Histogram(x=100 * f["recall"], name=str(name), marker_color=COLORS.get(str(name)), opacity=0.7)
        )
    fig.update_layout(
        barmode="overlay",
        xaxis_title=f"Recall@{n} of one simulation (%)",
        yaxis_title="simulations",
        margin={"t": 30},
        height=320,
    )
    return fig


def curve_frame(x: np.ndarray, y: np.ndarray, x_name: str, y_name: str) -> pd.DataFrame:
    return pd.DataFrame({x_name: np.asarray(x), y_name: np.asarray(y)})


def roc_figure(roc: pd.DataFrame, auc: float) -> go.Figure:
    """Figure 5 (left): ROC of the reconstruction of held-out patient-days."""
    fig = go.Figure(
        [
            go.Scatter(
                x=roc["false_positive_rate"], y=roc["true_positive_rate"], name=f"VAE (AUC {auc:.3f})"
            ),
            go.Scatter(x=[0, 1], y=[0, 1], name="random", line={"color": RANDOM_COLOR, "dash": "dash"}),
        ]
    )
    fig.update_layout(
        xaxis_title="false positive rate", yaxis_title="true positive rate", height=360, margin={"t": 30}
    )
    return fig


def pr_figure(pr: pd.DataFrame, auc: float, prevalence: float) -> go.Figure:
    """Figure 5 (right): precision-recall of the reconstruction; random = the share of ordered cells."""
    fig = go.Figure(
        [
            go.Scatter(x=pr["recall"], y=pr["precision"], name=f"VAE (AUC {auc:.3f})"),
            go.Scatter(
                x=[0, 1],
                y=[prevalence, prevalence],
                name="random",
                line={"color": RANDOM_COLOR, "dash": "dash"},
            ),
        ]
    )
    fig.update_layout(
        xaxis_title="recall", yaxis_title="precision", yaxis_range=[0, 1.01], height=360, margin={"t": 30}
    )
    return fig


def paired_figure(table: pd.DataFrame) -> go.Figure:
    """Figure 6: latent against raw Recall@n, one point per n with its 95% bands (the verdict's table,
    engine.labs.latent_verdict), and the line of equal recall."""
    fig = go.Figure(
        [
            go.Scatter(
                x=100 * table["recall_raw"],
                y=100 * table["recall_latent"],
                mode="markers",
                marker={"color": LATENT_COLOR},
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": 100 * (table["raw_high"] - table["recall_raw"]),
                    "arrayminus": 100 * (table["recall_raw"] - table["raw_low"]),
                },
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": 100 * (table["latent_high"] - table["recall_latent"]),
                    "arrayminus": 100 * (table["recall_latent"] - table["latent_low"]),
                },
                customdata=np.stack([table["n"], table["p_holm"]], axis=1),
                hovertemplate="n = %{customdata[0]}: raw %{x:.1f}%, latent %{y:.1f}%<br>Holm p = %{customdata[1]:.2g}"
                "<extra></extra>",
                name="Recall@n",
            ),
            go.Scatter(x=[0, 100], y=[0, 100], name="equal", line={"color": RANDOM_COLOR}),
        ]
    )
    fig.update_layout(
        xaxis_title="Recall@n, raw lab orders (%)",
        yaxis_title="Recall@n, latent vectors (%)",
        height=400,
        margin={"t": 30},
    )
    return fig
