"""PheWAS figures from the engine's result frames: QQ-plots of original vs released -log10 p
(Heatherly Figures 1-6), the distribution of the change (Figures 7-12), and a Manhattan plot."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui.colours import colour_of

_LABELLED = 3  # largest changes labelled per panel
EMPTY = " (no associations left)"


def panel_titles(pairs: dict[str, pd.DataFrame], snp: str) -> list[str]:
    """One title per release; a release on which no test ran says so (its panel is empty)."""
    out = []
    for name, df in pairs.items():
        d = df[df["snp"] == snp].dropna(subset=["neglog10_original", "neglog10_released"])
        out.append(name + (EMPTY if d.empty else ""))
    return out or ["no release"]


def qq_figure(pairs: dict[str, pd.DataFrame], snp: str, alpha: float = 0.05) -> go.Figure:
    """One panel per release: -log10 p original (x) against released (y), with y = x and the
    significance threshold; hover shows the phecode and phenotype."""
    names = list(pairs)
    fig = make_subplots(rows=1, cols=max(len(names), 1), subplot_titles=panel_titles(pairs, snp))
    thr = -np.log10(alpha)
    for col, name in enumerate(names, start=1):
        df = pairs[name]
        df = df[df["snp"] == snp].dropna(subset=["neglog10_original", "neglog10_released"])
        top = (
            float(max(df["neglog10_original"].max(), df["neglog10_released"].max(), thr, 1.0))
            if len(df)
            else 1
        )
        fig.add_trace(
            go.Scatter(
                x=df["neglog10_original"],
                y=df["neglog10_released"],
                mode="markers",
                marker={"size": 6, "opacity": 0.7, "color": colour_of(name)},
                customdata=np.stack([df["phecode"], df["phenotype"].fillna("")], axis=1) if len(df) else None,
                hovertemplate="%{customdata[0]} %{customdata[1]}<br>original %{x:.2f}<br>released %{y:.2f}"
                "<extra></extra>",
                name=name,
                showlegend=False,
            ),
            row=1,
            col=col,
        )
        fig.add_trace(
            go.Scatter(
                x=[0, top], y=[0, top], mode="lines", line={"dash": "dash", "color": "grey"}, showlegend=False
            ),
            row=1,
            col=col,
        )
        for t in df.assign(d=(df["change"]).abs()).nlargest(_LABELLED, "d").itertuples():
            fig.add_annotation(
                x=t.neglog10_original,
                y=t.neglog10_released,
                text=str(t.phecode),
                row=1,
                col=col,
                showarrow=True,
            )
        fig.add_hline(y=thr, line={"dash": "dot", "color": "red"}, row=1, col=col)
        fig.add_vline(x=thr, line={"dash": "dot", "color": "red"}, row=1, col=col)
        fig.update_xaxes(title_text="Original -log10 p", row=1, col=col)
        fig.update_yaxes(title_text="Released -log10 p", row=1, col=col)
    fig.update_layout(height=380, margin={"t": 40, "b": 40}, title=f"QQ-plots, {snp}")
    return fig


def change_histogram(pairs: dict[str, pd.DataFrame], snp: str) -> go.Figure:
    """Distribution of the change in -log10 p (released minus original), one panel per release."""
    names = list(pairs)
    fig = make_subplots(rows=1, cols=max(len(names), 1), subplot_titles=panel_titles(pairs, snp))
    for col, name in enumerate(names, start=1):
        df = pairs[name]
        ch = df.loc[df["snp"] == snp, "change"].dropna()
        fig.add_trace(
            go.Histogram(x=ch, nbinsx=40, showlegend=False, marker={"color": colour_of(name)}, name=name),
            row=1,
            col=col,
        )
        fig.update_xaxes(title_text="Change in -log10 p", row=1, col=col)
        fig.update_yaxes(title_text="Phenotypes", row=1, col=col)
    fig.update_layout(height=320, margin={"t": 40, "b": 40}, title=f"Change in -log10 p, {snp}")
    return fig


def manhattan_figure(
    original: pd.DataFrame, pairs: dict[str, pd.DataFrame], snp: str, alpha: float
) -> go.Figure:
    """-log10 p of the original PheWAS by phecode, with each release's p-values overlaid."""
    o = original[original["snp"] == snp].copy()
    o["x"] = o["phecode"].astype(float)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=o["x"],
            y=-np.log10(o["p"]),
            mode="markers",
            name="original",
            marker={"color": colour_of("original")},
            customdata=np.stack([o["phecode"], o["phenotype"]], axis=1) if len(o) else None,
            hovertemplate="%{customdata[0]} %{customdata[1]}<br>-log10 p %{y:.2f}<extra>original</extra>",
        )
    )
    for name, df in pairs.items():
        r = df[(df["snp"] == snp)].dropna(subset=["neglog10_released"])
        fig.add_trace(
            go.Scatter(
                x=r["phecode"].astype(float),
                y=r["neglog10_released"],
                mode="markers",
                marker={"symbol": "x", "size": 6, "color": colour_of(name)},
                name=name if len(r) else name + EMPTY,
                showlegend=True,  # a release with no test left stays in the legend, said so
                customdata=np.stack([r["phecode"], r["phenotype"].fillna("")], axis=1) if len(r) else None,
                hovertemplate="%{customdata[0]} %{customdata[1]}<br>-log10 p %{y:.2f}<extra>"
                + name
                + "</extra>",
            )
        )
    fig.add_hline(y=-np.log10(alpha), line={"dash": "dot", "color": "red"})
    fig.update_layout(
        height=380,
        xaxis_title="Phecode",
        yaxis_title="-log10 p",
        title=f"PheWAS Manhattan plot, {snp}",
        legend_title_text="Data",
    )
    return fig
