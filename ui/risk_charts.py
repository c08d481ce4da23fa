"""Charts of re-identification risk: distinguishability CDFs (Tamersoy 2010 Figure 4, PNAS Figure 2).

Engine-free helpers that take plain distinguishability vectors (one value per record, as returned by
`engine.risk`) and return plotly figures or the DataFrame behind them, for the CSV download.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from engine.risk import cdf
from engine.vocab import describe
from ui.colours import adversary_style, colour_map


def cdf_frame(curves: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """Long-form CDF data: one row per (curve, distinguishability value) with the share of records at
    or below that value. Columns: `curve`, `distinguishability`, `share`, `records`."""
    parts = []
    for name, dis in curves.items():
        dis = np.asarray(dis)
        f = cdf(dis)
        f.insert(0, "curve", name)
        f["records"] = len(dis)
        parts.append(f)
    if not parts:
        return pd.DataFrame(
            {"curve": pd.Series([], dtype=object), "distinguishability": [], "share": [], "records": []}
        )
    return pd.concat(parts, ignore_index=True)


def distinguishability_cdf_figure(
    curves: Mapping[str, np.ndarray],
    k: int,
    title: str = "",
    *,
    highlight: str | None = None,
    dashed: Sequence[str] = (),
    legend: Mapping[str, str] | None = None,
) -> go.Figure:
    """Share of records at or below each distinguishability (x on a log axis), one step line per curve,
    with k marked as a vertical line.

    `highlight` draws that curve thicker (e.g. the sidebar's adversary); curves named in `dashed` are
    dashed (e.g. "released" next to "original"); an adversary's curve (named by its label) has the
    adversary's colour and line style (`engine.report.palette.ADVERSARY_STYLE`). `legend` renames
    curves in the legend only (e.g. a release with its code set); colours follow the curve's own name
    (ui/colours.py).
    """
    fig = go.Figure()
    frame = cdf_frame(curves)
    colours = colour_map([n for n in curves if adversary_style(n) is None])
    top = 1.0  # the x-axis ends at the data's range (and at k), never at an axis default
    for name in curves:
        f = frame[frame["curve"] == name]
        if f.empty:
            continue
        x = f["distinguishability"].to_numpy(dtype=float)
        y = f["share"].to_numpy(dtype=float)
        # start the step at 0 so a curve begins at its smallest value; keep x > 0 for the log axis
        x = np.concatenate([[max(x[0], 1.0)], x])
        y = np.concatenate([[0.0], y])
        top = max(top, float(x[np.isfinite(x)].max(initial=1.0)))
        width = 4 if highlight is not None and name == highlight else 2
        # an adversary: its own colour family (cohort blues, population reds) and line style (single
        # visit solid, all visits dashed); a release: its study colour (ui/colours.py)
        colour, dash = adversary_style(name) or (colours[str(name)], "dash" if name in dashed else "solid")
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines",
                name=str((legend or {}).get(name, name)),
                line={
                    "shape": "hv",
                    "width": width,
                    "dash": dash,
                    "color": colour,
                },
                opacity=1.0 if highlight is None or name == highlight else 0.85,
                hovertemplate="distinguishability ≤ %{x}<br>share %{y:.1%}<extra>" + str(name) + "</extra>",
            )
        )
    # k as a trace in data coordinates: add_vline's label on a log axis takes x as log10 (k = 10 put
    # the label, and the autorange, at 10^10)
    fig.add_trace(
        go.Scatter(
            x=[max(int(k), 1)] * 2,
            y=[0, 1.02],
            mode="lines",
            name=f"k = {k}",
            line={"dash": "dot", "color": "crimson", "width": 2},
            hoverinfo="skip",
        )
    )
    top = max(top, float(k))
    fig.update_xaxes(
        type="log",
        range=[0, np.log10(top) + 0.05],
        title_text="Distinguishability (number of consistent candidates)",
    )
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%", title_text="Share of records at or below")
    fig.update_layout(
        title=title or None,
        height=480,
        # the legend below the axis: above it, a legend of two rows ran over the title (issue 26)
        legend={"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0},
        margin={"l": 10, "r": 10, "t": 50 if title else 20, "b": 10},
        hovermode="x unified",
    )
    return fig


def describe_patterns(patterns: pd.DataFrame, names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """`engine.risk.riskiest_patterns`' table with its `descriptions` column written by
    `engine.vocab.describe` from the `codes` column ("; "-joined items, `×n` for repeats): ICD-9-CM and
    ICD-10-CM alike, an OMOP CDM's concepts by their concept names `names` (issue 37), "—" and a reason
    where a code has none (issue 26)."""
    out = patterns.copy()
    out["descriptions"] = [
        "; ".join(describe(item.rsplit(" ×", 1)[0], names=names) for item in str(codes).split("; "))
        for codes in out["codes"]
    ]
    return out
