"""Charts of the GCCens view (Tamersoy 2010, Tables 1-2 and Figure 3): the engine's plain DataFrames in,
Plotly figures out; column identifiers shown in words (`LABELS`, issue 16)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from ui.colours import PALETTE, colour_map

STAT_COLUMNS = ["mean", "std", "median", "skewness", "share_modified", "share_codes_retained"]
ORIGINAL_COLUMNS = ["mean_vs_original", "share_modified_vs_original", "share_retained_vs_original"]


# column identifiers -> the words shown (tables, axes, legends); "method-internal" marks Tamersoy's
# figures against the capped record (issue 16)
LABELS = {
    "k": "k",
    "cap": "Universal cap",
    "variant": "Variant",
    "records": "Records",
    "mean": "Mean CUL, capped record (method-internal)",
    "std": "CUL standard deviation (method-internal)",
    "median": "Median CUL (method-internal)",
    "skewness": "CUL skewness (method-internal)",
    "share_modified": "Records modified, capped record (method-internal)",
    "share_codes_retained": "Codes kept of the capped record (method-internal)",
    "mean_retention": "Mean retention, 1 - mean CUL (method-internal)",
    "mean_vs_original": "Mean CUL against the original record",
    "share_modified_vs_original": "Records modified against the original",
    "share_retained_vs_original": "Code instances kept, caps included",
    "mean_cul": "Mean CUL, capped record (method-internal)",
    "censored_by_loop": "Censored by the loop",
    "iterations": "Censoring steps",
    "k_reached": "k reached",
    "verified": "Verified by the risk engine",
}


def labelled(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with its columns named in words (`LABELS`)."""
    return frame.rename(columns=LABELS)


def _express_template():
    """The template plotly.express draws with: the default one, the "plotly" template when none is set."""
    return pio.templates[pio.templates.default or "plotly"]


def _express_layout() -> dict:
    """The layout plotly.express gives a single plot: its axes, and its template when no default is
    set (a figure takes the default one by itself; setting it costs milliseconds)."""
    layout: dict = {
        "xaxis": {"anchor": "y", "domain": [0.0, 1.0]},
        "yaxis": {"anchor": "x", "domain": [0.0, 1.0]},
    }
    if not pio.templates.default:
        layout["template"] = _express_template()
    return layout


def _first_colour() -> str:
    """The colour plotly.express gives a single series: the template's first colour, else D3's."""
    colorway = _express_template().layout.colorway
    return colorway[0] if colorway else qualitative.D3[0]


def cul_histogram(loss: pd.DataFrame) -> go.Figure:
    """Distribution of per-record CUL (Tamersoy's CUL column, Figure 3). Built as graph objects: the
    figure `plotly.express.histogram(loss, x="cul", nbins=20)` made, trace and layout alike, without its
    several tens of milliseconds per rerun (issue 24; tests/reference_gccens_charts.py)."""
    fig = go.Figure(
        go.Histogram(
            x=loss["cul"],
            nbinsx=20,
            bingroup="x",
            hovertemplate="cul=%{x}<br>count=%{y}<extra></extra>",
            legendgroup="",
            marker={"color": _first_colour(), "pattern": {"shape": ""}},
            name="",
            orientation="v",
            showlegend=False,
            xaxis="x",
            yaxis="y",
        )
    )
    fig.update_layout(_express_layout(), legend={"tracegroupgap": 0}, barmode="relative")
    fig.update_layout(
        height=340,
        margin={"t": 30, "b": 10},
        xaxis_title="CUL per record (censored / codes in the capped record)",
        yaxis_title="Records",
    )
    return fig


UNITLESS = ("skewness",)  # statistics that are no share: drawn on their own axis, below the shares


def sweep_figure(table: pd.DataFrame, x: str) -> go.Figure:
    """CUL statistics against k (Table 1) or the universal cap (Table 2), one line per statistic: the
    shares (CUL and its mean, sd and median, records modified, codes kept) on one axis in percent, the
    skewness, which has no unit, on its own panel below (issue 26: skewness 0-7 sat on the shares'
    axis)."""
    columns = [c for c in STAT_COLUMNS + ORIGINAL_COLUMNS if c in table.columns]
    shares = [c for c in columns if c not in UNITLESS]
    unitless = [c for c in columns if c in UNITLESS]
    rows = 2 if unitless else 1
    fig = make_subplots(
        rows=rows,
        cols=1,
        shared_xaxes=True,
        row_heights=[0.7, 0.3] if rows == 2 else [1.0],
        vertical_spacing=0.08,
    )
    for i, c in enumerate(shares + unitless):
        fig.add_trace(
            go.Scatter(
                x=table[x],
                y=table[c],
                mode="lines+markers",
                name=LABELS[c],
                line={
                    "color": PALETTE[i % len(PALETTE)],
                    "dash": "dash" if c in ORIGINAL_COLUMNS else "solid",
                },
                legendgroup="unitless" if c in unitless else "shares",
            ),
            row=2 if c in unitless else 1,
            col=1,
        )
    fig.update_yaxes(title_text="Share", tickformat=".0%", rangemode="tozero", row=1, col=1)
    if unitless:
        fig.update_yaxes(title_text="Skewness", rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title_text=LABELS[x], row=rows, col=1)
    fig.update_layout(
        height=680 if rows == 2 else 480,
        margin={"t": 30, "b": 10},
        legend={"orientation": "h", "yanchor": "top", "y": -0.12, "title": {"text": "Statistic"}},
    )
    return fig


def retention_figure(compare: pd.DataFrame) -> go.Figure:
    """Share of codes retained and of records modified, faithful beside targeted: horizontal bars, the
    measures' names read level on the left (issue 26: diagonal labels squashed the bars)."""
    columns = [
        c for c in ("share_retained_vs_original", "share_codes_retained", "share_modified") if c in compare
    ]
    long = compare.melt(id_vars=["variant"], value_vars=columns, var_name="measure", value_name="share")
    long["measure"] = long["measure"].map(LABELS)
    # graph objects, one bar trace per variant: what plotly.express.bar(long, y="measure", x="share",
    # color="variant", barmode="group", orientation="h") made, without its cost (issue 24)
    variants = list(long["variant"].unique())
    colours = colour_map(variants)
    fig = go.Figure()
    for v in variants:
        rows = long[long["variant"] == v]
        fig.add_trace(
            go.Bar(
                alignmentgroup="True",
                hovertemplate=f"Variant={v}<br>Share=%{{x}}<br>Measure=%{{y}}<extra></extra>",
                legendgroup=v,
                marker={"color": colours[v], "pattern": {"shape": ""}},
                name=v,
                offsetgroup=v,
                orientation="h",
                showlegend=True,
                textposition="auto",
                x=rows["share"].to_numpy(),
                xaxis="x",
                y=rows["measure"].to_numpy(),
                yaxis="y",
            )
        )
    fig.update_layout(
        _express_layout(),
        xaxis_title_text="Share",
        yaxis_title_text="Measure",
        legend={"title": {"text": "Variant"}, "tracegroupgap": 0},
        barmode="group",
    )
    n = max(len(columns), 1) * max(long["variant"].nunique(), 1)
    fig.update_layout(
        height=max(260, 120 + 34 * n),
        margin={"t": 30, "b": 10},
        xaxis_tickformat=".0%",
        xaxis_range=[0, 1.05],
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    fig.update_yaxes(title_text=None, automargin=True)
    return fig
