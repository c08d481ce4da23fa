"""Charts of the LDA view (Tamersoy 2011 thesis, Figures 9-15): the engine's DataFrames in, figures out."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from ui.colours import PALETTE, colour_map

MEASURE_TITLES = {
    "ILM": "ICD loss (ILM)",
    "ALM": "Age loss (ALM)",
    "AvgRE": "Average relative error (AvgRE)",
}


def level_shares_figure(shares: pd.DataFrame) -> go.Figure:
    """Figures 13-14: % of ICD codes and ages at each DGH level, one panel per attribute."""
    fig = px.bar(
        shares,
        x="level",
        y="share",
        facet_col="attribute",
        text=shares["share"].round(1),
        labels={"share": "% of values", "level": "DGH level"},
        color_discrete_sequence=PALETTE,
    )
    fig.update_xaxes(matches=None, showticklabels=True)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))  # "attribute=ICD"
    fig.update_layout(height=360, margin={"t": 40, "b": 10})
    return fig


def sweep_k_figure(df: pd.DataFrame, measure: str) -> go.Figure:
    """Figures 9-12: a measure against k, one line per method."""
    fig = px.line(
        df,
        x="k",
        y=measure,
        color="method",
        markers=True,
        labels={"method": "Method"},
        color_discrete_map=colour_map(df["method"].unique()),
    )
    fig.update_layout(height=320, margin={"t": 30, "b": 10}, yaxis_title=MEASURE_TITLES.get(measure, measure))
    return fig


def record_loss_figure(rl: pd.DataFrame) -> go.Figure:
    """ILM and ALM per trajectory (Definition 7, normalized by length), overlaid histograms."""
    fig = px.histogram(
        rl.melt(id_vars=["patient_id"], value_vars=["ILM", "ALM"], var_name="measure", value_name="loss"),
        x="loss",
        color="measure",
        labels={"loss": "Loss per trajectory", "measure": "Measure"},
        color_discrete_sequence=PALETTE,
    )
    fig.update_layout(height=360, barmode="overlay", margin={"t": 40, "b": 10}, yaxis_title="Trajectories")
    return fig


def weights_figure(df: pd.DataFrame) -> go.Figure:
    """Figure 15: ILM and ALM for each weight setting."""
    long = df.melt(
        id_vars=["w_icd", "w_age"], value_vars=["ILM", "ALM"], var_name="measure", value_name="loss"
    )
    long["weights"] = [f"{a:g} / {b:g}" for a, b in zip(long["w_icd"], long["w_age"], strict=True)]
    fig = px.bar(
        long,
        x="weights",
        y="loss",
        color="measure",
        barmode="group",
        labels={"loss": "Loss", "measure": "Measure"},
        color_discrete_sequence=PALETTE,
    )
    fig.update_layout(height=340, margin={"t": 30, "b": 10}, xaxis_title="Weights: ICD / Age")
    return fig
