"""Charts of the Heatherly view (Heatherly 2013): retention and residual risk against k per release."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from ui.colours import colour_map


def tradeoff_figure(frame: pd.DataFrame) -> go.Figure:
    long = frame.melt(id_vars=["k", "release"], var_name="measure", value_name="percent")
    fig = px.line(
        long,
        x="k",
        y="percent",
        color="release",
        facet_col="measure",
        markers=True,
        color_discrete_map=colour_map(long["release"].unique()),
        labels={"percent": "Percent", "release": "Release", "measure": "Measure"},
    )
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))  # "measure=DC Local %"
    fig.update_layout(height=380, margin={"t": 40, "b": 10}, legend={"orientation": "h", "y": -0.2})
    return fig
