"""Table and chart builders for the Cohort page (no Streamlit here: plain pandas and plotly).

Describes a group's `Records` the way the papers describe their data sets: patients, visits,
distinct codes, diagnoses per patient (distinct codes, and events with repeats as in Tamersoy 2010),
visits per patient, the most frequent codes with their descriptions (`engine.vocab.describe`: ICD-9-CM,
ICD-10-CM or both), and the code frequency
distribution as a rank/frequency (Zipf) plot on log-log axes.
Ties in rankings are broken by code text (deterministic).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from engine.io.validation import ValidationReport
from engine.records import Records
from engine.vocab import describe as describe_code


def per_patient(records: Records) -> pd.DataFrame:
    """One row per patient: visits, distinct codes, diagnoses (events, repeats included)."""
    visits = np.diff(records.visit_ptr)
    events = records.event_ptr[records.visit_ptr[1:]] - records.event_ptr[records.visit_ptr[:-1]]
    distinct = np.diff(records.patient_item_sets.indptr)
    return pd.DataFrame(
        {
            "patient_id": records.patient_ids,
            "visits": visits,
            "distinct_codes": distinct,
            "diagnoses": events,
        }
    )


def describe(records: Records) -> dict[str, float]:
    """The summary figures of one group (means and medians over its patients)."""
    pp = per_patient(records)
    n = records.n_patients
    stat = {"patients": n, "visits": records.n_visits, "diagnoses (events)": records.n_events}
    stat["distinct codes"] = int(
        (np.bincount(records.patient_item_sets.indices, minlength=records.n_items) > 0).sum()
    )
    for col, label in (
        ("distinct_codes", "codes per patient"),
        ("diagnoses", "diagnoses per patient"),
        ("visits", "visits per patient"),
    ):
        stat[f"{label}, mean"] = float(pp[col].mean()) if n else 0.0
        stat[f"{label}, median"] = float(pp[col].median()) if n else 0.0
    return stat


def describe_groups(groups: dict[str, Records]) -> pd.DataFrame:
    """Measures as rows, one column per named group (e.g. population and cohort side by side)."""
    table = pd.DataFrame({name: describe(r) for name, r in groups.items()})
    table.index.name = "measure"
    return table.reset_index()


def code_frequencies(records: Records) -> pd.DataFrame:
    """Codes by number of patients holding them (descending, ties by code): rank, code, patients, events."""
    patients = np.bincount(records.patient_item_sets.indices, minlength=records.n_items)
    events = np.bincount(records.event_item, minlength=records.n_items)
    present = np.flatnonzero(patients > 0)
    codes = records.items[present].astype(str)
    order = np.lexsort((codes, -patients[present]))
    idx = present[order]
    return pd.DataFrame(
        {
            "rank": np.arange(1, len(idx) + 1),
            "code": records.items[idx].astype(str),
            "patients": patients[idx],
            "share_of_patients": patients[idx] / max(records.n_patients, 1),
            "events": events[idx],
        }
    )


def top_codes(records: Records, n: int = 20, names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The n codes held by most patients, with their descriptions (`engine.vocab.describe`; an OMOP
    CDM's concepts by the concept names `names`)."""
    top = code_frequencies(records).head(n).copy()
    top.insert(2, "description", [describe_code(c, names=names) for c in top["code"]])
    top["share_of_patients"] = (100 * top["share_of_patients"]).round(2)
    return top.rename(columns={"share_of_patients": "% of patients"})


def rank_frequency_data(groups: dict[str, Records]) -> pd.DataFrame:
    """Long form for the rank/frequency chart: group, rank, code, patients."""
    parts = []
    for name, r in groups.items():
        f = code_frequencies(r)[["rank", "code", "patients"]]
        f.insert(0, "group", name)
        parts.append(f)
    return pd.concat(parts, ignore_index=True)


def plotted_ranks(n: int, dense: int = 100, per_decade: int = 60) -> np.ndarray:
    """0-based ranks to draw: all of the first `dense`, then about `per_decade` log-spaced per decade.

    A log-log plot of thousands of codes looks the same with these points; the CSV keeps every rank.
    """
    if n <= dense:
        return np.arange(n)
    tail = np.unique(np.geomspace(dense, n, int(np.log10(n / dense) * per_decade) + 2).astype(np.int64) - 1)
    return np.unique(np.concatenate([np.arange(dense), tail[tail < n], [n - 1]]))


def rank_frequency_figure(data: pd.DataFrame) -> go.Figure:
    """Log-log rank/frequency plot: a straight line is a Zipf-like code distribution."""
    fig = go.Figure()
    for name, part in data.groupby("group", sort=False):
        part = part.iloc[plotted_ranks(len(part))]
        fig.add_trace(
            go.Scatter(
                x=part["rank"],
                y=part["patients"],
                mode="lines+markers",
                marker={"size": 3},
                name=str(name),
                customdata=part[["code"]],
                hovertemplate="rank %{x}<br>code %{customdata[0]}<br>%{y} patients<extra>"
                + str(name)
                + "</extra>",
            )
        )
    fig.update_xaxes(type="log", title="code rank (most frequent first)")
    fig.update_yaxes(type="log", title="patients with the code")
    fig.update_layout(margin={"l": 10, "r": 10, "t": 30, "b": 10}, height=380, legend_title_text="group")
    return fig


def distribution_data(per_patient_by_group: pd.DataFrame, column: str) -> pd.DataFrame:
    """Share of each group's patients at each value of a per-patient measure: group, value, patients, %."""
    counts = (
        per_patient_by_group.groupby(["group", column], sort=False).size().rename("patients").reset_index()
    )
    counts = counts.sort_values(["group", column], kind="stable")
    totals = counts.groupby("group")["patients"].transform("sum")
    counts["% of patients"] = 100 * counts["patients"] / totals
    return counts.rename(columns={column: "value"}).reset_index(drop=True)


def distribution_figure(data: pd.DataFrame, title: str) -> go.Figure:
    """Bars of `distribution_data`: share of patients at each value, one trace per group."""
    fig = go.Figure()
    for name, part in data.groupby("group", sort=False):
        fig.add_trace(go.Bar(x=part["value"], y=part["% of patients"], name=str(name), opacity=0.6))
    fig.update_layout(barmode="overlay", height=320, margin={"l": 10, "r": 10, "t": 30, "b": 10}, title=title)
    fig.update_xaxes(title=title)
    fig.update_yaxes(title="% of patients")
    return fig


def findings_table(report: ValidationReport) -> pd.DataFrame:
    """The report as a table (severity, file, rows, column, message, expected, affected rows)."""
    return report.to_frame()


def unknown_codes_table(report: ValidationReport) -> pd.DataFrame:
    """Codes unknown to ICD-9-CM with their row counts, per file (from the report's findings)."""
    rows = [
        {"file": f.file, "code": code, "rows": count}
        for f in report.of_kind("unknown_code")
        for code, count in f.counts.items()
    ]
    return pd.DataFrame(rows, columns=["file", "code", "rows"])


def sources_table(sources: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({"file": list(sources), "sha256": list(sources.values())})
