"""ui/gccens_charts.py's CUL histogram and faithful-vs-targeted bars as they were before issue 24 (built
with plotly.express; commit c612ecd), kept verbatim to prove the graph-object figures are the same
figures (tests/test_gccens_charts_reference.py). Not used by the app."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from ui.colours import colour_map
from ui.gccens_charts import LABELS


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


def retention_figure(compare: pd.DataFrame) -> go.Figure:
    """Share of codes retained and of records modified, faithful beside targeted: horizontal bars, the
    measures' names read level on the left (issue 26: diagonal labels squashed the bars)."""
    columns = [
        c for c in ("share_retained_vs_original", "share_codes_retained", "share_modified") if c in compare
    ]
    long = compare.melt(id_vars=["variant"], value_vars=columns, var_name="measure", value_name="share")
    long["measure"] = long["measure"].map(LABELS)
    fig = px.bar(
        long,
        y="measure",
        x="share",
        color="variant",
        barmode="group",
        orientation="h",
        color_discrete_map=colour_map(long["variant"].unique()),
        labels={"measure": "Measure", "share": "Share", "variant": "Variant"},
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
