"""Charts of the clinical profiles view (Loukides 2010, PNAS Figures 3-4): the sweep's rows in, figures out."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from ui.colours import colour_map

SWEEP_LABELS = {  # sweep columns in words (issue 16)
    "method": "Method",
    "knowledge": "Attacker knowledge",
    "privacy_constraints": "Privacy constraints",
    "utility_satisfied": "Utility constraints met",
    "utility_constraints": "Utility constraints",
    "utility_constraints_applying": "Utility constraints matching a code of the data",
    "suppressed_codes": "Distinct codes suppressed",
    "share_suppressed_events": "Share of code instances suppressed",
    "generalized_items": "Generalized items",
    "ncp": "NCP",
    "re_mean": "Relative error, mean",
    "re_std": "Relative error, sd",
    "verified": "Verified",
}


def worded(sweep: pd.DataFrame) -> pd.DataFrame:
    """The sweep with its knowledge values in words ("all visits", not "all_visits")."""
    return sweep.assign(knowledge=sweep["knowledge"].astype(str).str.replace("_", " "))


def satisfied_figure(sweep: pd.DataFrame) -> go.Figure:
    """Utility constraints satisfied against k (PNAS Figure 3), per method and filtering condition."""
    df = worded(sweep).assign(share=sweep["utility_satisfied"] / sweep["utility_constraints"].clip(lower=1))
    fig = px.line(
        df,
        x="k",
        y="share",
        color="method",
        line_dash="knowledge",
        markers=True,
        labels=SWEEP_LABELS,
        color_discrete_map=colour_map(df["method"].unique()),
    )
    fig.update_layout(height=360, margin={"t": 30, "b": 10}, yaxis_tickformat=".0%")
    fig.update_yaxes(title_text="Utility constraints met", range=[0, 1.05])
    return fig


def relative_error_figure(sweep: pd.DataFrame) -> go.Figure:
    """Mean relative error of case-count queries with one standard deviation against k (Figure 4)."""
    fig = px.line(
        worded(sweep),
        x="k",
        y="re_mean",
        error_y="re_std",
        color="method",
        line_dash="knowledge",
        markers=True,
        labels=SWEEP_LABELS,
        color_discrete_map=colour_map(sweep["method"].unique()),
    )
    fig.update_layout(height=360, margin={"t": 30, "b": 10}, yaxis_title="Relative error (mean ± sd)")
    return fig


def suppression_figure(sweep: pd.DataFrame) -> go.Figure:
    fig = px.line(
        worded(sweep),
        x="k",
        y="suppressed_codes",
        color="method",
        line_dash="knowledge",
        markers=True,
        labels=SWEEP_LABELS,
        color_discrete_map=colour_map(sweep["method"].unique()),
    )
    fig.update_layout(height=320, margin={"t": 30, "b": 10}, yaxis_title="Distinct codes suppressed")
    return fig
