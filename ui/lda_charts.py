"""Charts of the LDA view (Tamersoy 2011 thesis, Figures 9-15): the engine's DataFrames in, figures out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import plotly.io as pio

from ui.colours import PALETTE, colour_map

MEASURE_TITLES = {
    "ILM": "ICD loss (ILM)",
    "ALM": "Age loss (ALM)",
    "AvgRE": "Average relative error (AvgRE)",
}


def _express_layout() -> dict:
    """What plotly.express puts in every figure's layout besides the axes: its legend spacing, and the
    template it draws with when no default is set (a figure takes the default one by itself)."""
    layout: dict = {"legend": {"tracegroupgap": 0}}
    if not pio.templates.default:
        layout["template"] = pio.templates["plotly"]
    return layout


def level_shares_figure(shares: pd.DataFrame) -> go.Figure:
    """Figures 13-14: % of ICD codes and ages at each DGH level, one panel per attribute. Built as graph
    objects: the figure `plotly.express.bar(shares, x="level", y="share", facet_col="attribute", ...)`
    made (tests/reference_lda_charts.py), without its tens of milliseconds per rerun (issue 24)."""
    attributes = list(pd.unique(shares["attribute"]))  # express's facets: in order of appearance
    n = max(len(attributes), 1)
    spacing = 0.02  # express's facet_col_spacing; the domains as plotly.subplots computes them
    widths = [(1.0 - spacing * (n - 1)) * (1.0 / float(n))] * n  # column_widths [1] * n, as express
    text = shares["share"].round(1)
    # express reads a text equal to the shares (all of them at one decimal already) as that column
    hover = (
        "% of values=%{text}"
        if (text.to_numpy() == shares["share"].to_numpy()).all()
        else ("% of values=%{y}<br>text=%{text}")
    )
    layout = _express_layout()
    traces = []
    for i, attribute in enumerate(attributes):
        rows = (shares["attribute"] == attribute).to_numpy()
        x0 = sum(widths[:i]) + i * spacing
        suffix = str(i + 1) if i else ""
        layout[f"xaxis{suffix}"] = {
            "anchor": f"y{suffix}",
            "domain": [x0, x0 + widths[i]],
            "title": {"text": "DGH level"},
            "showticklabels": True,
        }
        layout[f"yaxis{suffix}"] = {"anchor": f"x{suffix}", "domain": [0.0, 1.0]} | (
            {"matches": "y", "showticklabels": False} if i else {"title": {"text": "% of values"}}
        )
        layout.setdefault("annotations", []).append(
            {
                "font": {"size": 16},  # make_subplots' size, then unset by express (below)
                "showarrow": False,
                "text": str(attribute),
                "x": (x0 + x0 + widths[i]) / 2.0,
                "xanchor": "center",
                "xref": "paper",
                "y": 1.0,
                "yanchor": "bottom",
                "yref": "paper",
            }
        )
        traces.append(
            go.Bar(
                hovertemplate=f"attribute={attribute}<br>DGH level=%{{x}}<br>{hover}<extra></extra>",
                legendgroup="",
                marker={"color": PALETTE[0], "pattern": {"shape": ""}},
                name="",
                orientation="v",
                showlegend=False,
                text=text[rows],
                textposition="auto",
                x=shares["level"][rows],
                xaxis=f"x{suffix}",
                y=shares["share"][rows],
                yaxis=f"y{suffix}",
            )
        )
    fig = go.Figure(traces, layout | {"barmode": "relative"})
    for annotation in fig.layout.annotations:  # express leaves the title's font to the template: {}
        annotation.update(font=None)
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
    """ILM and ALM per trajectory (Definition 7, normalized by length), overlaid histograms. Built as
    graph objects: the figure `plotly.express.histogram` made of the two columns melted into one
    (tests/reference_lda_charts.py), without its tens of milliseconds per rerun (issue 24)."""
    measures = ("ILM", "ALM") if len(rl) else ()  # an empty frame melts to no series
    dtype = np.result_type(rl["ILM"].dtype, rl["ALM"].dtype)  # the melted column's, as express read it
    traces = [
        go.Histogram(
            bingroup="x",
            hovertemplate=f"Measure={m}<br>Loss per trajectory=%{{x}}<br>count=%{{y}}<extra></extra>",
            legendgroup=m,
            marker={"color": PALETTE[i % len(PALETTE)], "pattern": {"shape": ""}},
            name=m,
            orientation="v",
            showlegend=True,
            x=rl[m].to_numpy(dtype=dtype),
            xaxis="x",
            yaxis="y",
        )
        for i, m in enumerate(measures)
    ]
    layout = _express_layout()
    layout["legend"]["title"] = {"text": "Measure"}
    layout |= {
        "xaxis": {"anchor": "y", "domain": [0.0, 1.0], "title": {"text": "Loss per trajectory"}},
        "yaxis": {"anchor": "x", "domain": [0.0, 1.0], "title": {"text": "count"}},
        "barmode": "relative",
    }
    fig = go.Figure(traces, layout)
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
