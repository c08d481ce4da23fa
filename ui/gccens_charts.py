"""Charts of the GCCens view (Tamersoy 2010, Tables 1-2 and Figure 3): the engine's plain DataFrames in,
Plotly figures out; column identifiers shown in words (`LABELS`, issue 16)."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from ui.colours import colour_map

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


def cul_histogram(loss: pd.DataFrame) -> go.Figure:
    """Distribution of per-record CUL (Tamersoy's CUL column, Figure 3)."""
    fig = px.histogram(loss, x="cul", nbins=20)
    fig.update_layout(
        height=340,
        margin={"t": 30, "b": 10},
        xaxis_title="CUL per record (censored / codes in the capped record)",
        yaxis_title="Records",
    )
    return fig


def sweep_figure(table: pd.DataFrame, x: str) -> go.Figure:
    """CUL statistics against k (Table 1) or the universal cap (Table 2), one line per statistic."""
    columns = [c for c in STAT_COLUMNS + ORIGINAL_COLUMNS if c in table.columns]
    long = table.melt(id_vars=[x], value_vars=columns, var_name="statistic", value_name="value")
    long["statistic"] = long["statistic"].map(LABELS)
    fig = px.line(
        long,
        x=x,
        y="value",
        color="statistic",
        markers=True,
        labels={x: LABELS[x], "value": "Value of the statistic", "statistic": "Statistic"},
    )
    fig.update_layout(height=420, margin={"t": 30, "b": 10}, legend={"orientation": "h", "y": -0.3})
    return fig


def retention_figure(compare: pd.DataFrame) -> go.Figure:
    """Share of codes retained and of records modified, faithful beside targeted."""
    columns = [
        c for c in ("share_retained_vs_original", "share_codes_retained", "share_modified") if c in compare
    ]
    long = compare.melt(id_vars=["variant"], value_vars=columns, var_name="measure", value_name="share")
    long["measure"] = long["measure"].map(LABELS)
    fig = px.bar(
        long,
        x="measure",
        y="share",
        color="variant",
        barmode="group",
        color_discrete_map=colour_map(long["variant"].unique()),
        labels={"measure": "Measure", "share": "Share", "variant": "Variant"},
    )
    fig.update_layout(height=360, margin={"t": 30, "b": 10}, yaxis_tickformat=".0%")
    return fig
