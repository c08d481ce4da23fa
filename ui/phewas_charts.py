"""PheWAS figures from the engine's result frames: QQ-plots of original vs released -log10 p
(Heatherly Figures 1-6), the distribution of the change (Figures 7-12), and a Manhattan plot."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui.colours import colour_map, colour_of

_MARKED = 3  # largest changes marked per panel (a ring, named in hover and in `largest_changes`)
EMPTY = " (no associations left)"
WRAP = 3  # panels per row
PANEL_HEIGHT = 300  # pixels per row of panels
TITLE_ROOM = 90  # pixels between rows: a panel's x-axis title above, the next panel's title below


def panel_titles(pairs: dict[str, pd.DataFrame], snp: str) -> list[str]:
    """One title per release; a release on which no test ran says so (its panel is empty)."""
    out = []
    for name, df in pairs.items():
        d = df[df["snp"] == snp].dropna(subset=["neglog10_original", "neglog10_released"])
        out.append(name + (EMPTY if d.empty else ""))
    return out or ["no release"]


def _grid(titles: list[str], height: int = PANEL_HEIGHT) -> tuple[go.Figure, int]:
    """Panels that wrap at `WRAP` per row with room between rows for titles and axis titles (issue 26:
    six panels in a row overlapped their titles and axis labels). Returns (figure, columns)."""
    n = max(len(titles), 1)
    cols = min(n, WRAP)
    rows = -(-n // cols)
    plot = rows * height + (rows - 1) * TITLE_ROOM  # the panels' area, between the margins
    total = plot + 140
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[t if len(t) <= 40 else t.replace(" (", "<br>(", 1) for t in titles],
        vertical_spacing=(TITLE_ROOM / plot) if rows > 1 else 0.1,
        horizontal_spacing=0.09,
    )
    fig.update_layout(height=total, margin={"t": 90, "b": 50, "l": 60, "r": 20})
    fig.update_annotations(font_size=13)
    return fig, cols


def _place(i: int, cols: int) -> tuple[int, int]:
    return i // cols + 1, i % cols + 1


def largest_changes(pairs: dict[str, pd.DataFrame], snp: str, n: int = _MARKED) -> pd.DataFrame:
    """The `n` phenotypes whose -log10 p changed most, per release: the legend table of the QQ-plots'
    ringed points (text labels on the points overlapped, '401' over '401.1')."""
    parts = []
    for name, df in pairs.items():
        d = df[df["snp"] == snp].dropna(subset=["neglog10_original", "neglog10_released"])
        top = d.assign(_d=d["change"].abs()).nlargest(n, "_d")
        parts.append(
            pd.DataFrame(
                {
                    "release": name,
                    "phecode": top["phecode"].astype(str),
                    "phenotype": top["phenotype"].fillna("").astype(str),
                    "original -log10 p": top["neglog10_original"].round(2),
                    "released -log10 p": top["neglog10_released"].round(2),
                    "change": top["change"].round(2),
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=["release", "phecode", "phenotype", "original -log10 p",
                                     "released -log10 p", "change"])  # fmt: skip
    return pd.concat(parts, ignore_index=True)


def qq_figure(pairs: dict[str, pd.DataFrame], snp: str, alpha: float = 0.05) -> go.Figure:
    """One panel per release, `WRAP` per row: -log10 p original (x) against released (y), with y = x
    and the significance threshold; hover shows the phecode and phenotype; the largest changes are
    ringed (named in `largest_changes`, never as text on the chart)."""
    names = list(pairs)
    fig, cols = _grid(panel_titles(pairs, snp))
    thr = -np.log10(alpha)
    colours = colour_map(names)
    for i, name in enumerate(names):
        row, col = _place(i, cols)
        df = pairs[name]
        df = df[df["snp"] == snp].dropna(subset=["neglog10_original", "neglog10_released"])
        top = (
            float(max(df["neglog10_original"].max(), df["neglog10_released"].max(), thr, 1.0))
            if len(df)
            else 1
        )
        hover = "%{customdata[0]} %{customdata[1]}<br>original %{x:.2f}<br>released %{y:.2f}<extra></extra>"
        fig.add_trace(
            go.Scatter(
                x=df["neglog10_original"],
                y=df["neglog10_released"],
                mode="markers",
                marker={"size": 6, "opacity": 0.7, "color": colours[name]},
                customdata=np.stack([df["phecode"], df["phenotype"].fillna("")], axis=1) if len(df) else None,
                hovertemplate=hover,
                name=name,
                showlegend=False,
            ),
            row=row,
            col=col,
        )
        marked = df.assign(_d=df["change"].abs()).nlargest(_MARKED, "_d")
        if len(marked):
            fig.add_trace(
                go.Scatter(
                    x=marked["neglog10_original"],
                    y=marked["neglog10_released"],
                    mode="markers",
                    marker={"size": 13, "symbol": "circle-open", "line": {"width": 2}, "color": "black"},
                    customdata=np.stack([marked["phecode"], marked["phenotype"].fillna("")], axis=1),
                    hovertemplate="largest change: " + hover,
                    name=f"{name}: largest changes",
                    showlegend=False,
                ),
                row=row,
                col=col,
            )
        fig.add_trace(
            go.Scatter(
                x=[0, top], y=[0, top], mode="lines", line={"dash": "dash", "color": "grey"}, showlegend=False,
                hoverinfo="skip",
            ),
            row=row,
            col=col,
        )  # fmt: skip
        fig.add_hline(y=thr, line={"dash": "dot", "color": "red"}, row=row, col=col)
        fig.add_vline(x=thr, line={"dash": "dot", "color": "red"}, row=row, col=col)
        fig.update_xaxes(title_text="Original -log10 p", title_standoff=4, row=row, col=col)
        fig.update_yaxes(title_text="Released -log10 p", title_standoff=4, row=row, col=col)
    fig.update_layout(title=f"QQ-plots, {snp} (ringed: the largest changes, listed below)")
    return fig


def change_histogram(pairs: dict[str, pd.DataFrame], snp: str) -> go.Figure:
    """Distribution of the change in -log10 p (released minus original), one panel per release,
    `WRAP` per row."""
    names = list(pairs)
    fig, cols = _grid(panel_titles(pairs, snp), height=240)
    colours = colour_map(names)
    for i, name in enumerate(names):
        row, col = _place(i, cols)
        df = pairs[name]
        ch = df.loc[df["snp"] == snp, "change"].dropna()
        fig.add_trace(
            go.Histogram(x=ch, nbinsx=40, showlegend=False, marker={"color": colours[name]}, name=name),
            row=row,
            col=col,
        )
        fig.update_xaxes(title_text="Change in -log10 p", title_standoff=4, row=row, col=col)
        fig.update_yaxes(title_text="Phenotypes", title_standoff=4, row=row, col=col)
    fig.update_layout(title=f"Change in -log10 p, {snp}")
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
