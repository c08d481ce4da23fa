"""ui/lda_charts.py's DGH-level bars and loss-per-trajectory histogram as they were before issue 24 (built
with plotly.express; commit 534072f), kept verbatim to prove the graph-object figures are the same figures
(tests/test_lda_charts_fast.py). Not used by the app."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from ui.colours import PALETTE


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
