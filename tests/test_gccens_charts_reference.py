"""ui/gccens_charts.py's CUL histogram and faithful-vs-targeted bars, built as graph objects since issue 24,
are the figures plotly.express built (tests/reference_gccens_charts.py): the same JSON, the one
Streamlit sends to the browser, on random inputs, under the default template and without one."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.io as pio
import pytest
import reference_gccens_charts as R
from hypothesis import given, settings
from hypothesis import strategies as st

from ui import gccens_charts as C


def same_json(a, b) -> None:
    assert json.loads(a.to_json()) == json.loads(b.to_json())


shares = st.floats(0, 1, allow_nan=False)


@settings(max_examples=40)
@given(st.lists(shares, min_size=1, max_size=60), st.booleans())
def test_the_cul_histogram_is_the_express_one(culs, with_template):
    loss = pd.DataFrame(
        {
            "patient_id": [f"P{i}" for i in range(len(culs))],
            "codes_before": 3,
            "censored": 1,
            "cul": culs,
        }
    )
    with _template(with_template):
        same_json(C.cul_histogram(loss), R.cul_histogram(loss))


@settings(max_examples=40)
@given(
    st.lists(
        st.tuples(st.sampled_from(["faithful", "targeted"]), shares, shares, shares),
        min_size=1,
        max_size=2,
        unique_by=lambda r: r[0],
    ),
    st.booleans(),
    st.booleans(),
)
def test_the_variant_bars_are_the_express_ones(rows, integer_shares, extra_column):
    compare = pd.DataFrame(
        rows, columns=["variant", "share_retained_vs_original", "share_codes_retained", "share_modified"]
    )
    if integer_shares:  # the melted column keeps its dtype, as express read it
        compare[["share_codes_retained", "share_modified"]] = 1
        compare["share_retained_vs_original"] = 0
    if extra_column:  # the page's table has more columns than the chart draws
        compare["mean_cul"] = 0.5
        compare["verified"] = True
    same_json(C.retention_figure(compare), R.retention_figure(compare))


def test_the_variant_bars_without_a_measure_column():
    compare = pd.DataFrame({"variant": ["faithful", "targeted"], "share_modified": [0.1, np.float64(0.2)]})
    same_json(C.retention_figure(compare), R.retention_figure(compare))


class _template:
    """The default plotly template as the app has it (`with_template`), or none."""

    def __init__(self, with_template: bool) -> None:
        self.keep = with_template

    def __enter__(self):
        self.saved = pio.templates.default
        if not self.keep:
            pio.templates.default = None

    def __exit__(self, *exc):
        pio.templates.default = self.saved


@pytest.mark.parametrize("default", [None, "plotly_dark", "simple_white"])
def test_the_histograms_colour_follows_the_template_as_express_did(default):
    loss = pd.DataFrame(
        {"patient_id": ["a", "b"], "codes_before": [2, 2], "censored": [0, 1], "cul": [0, 0.5]}
    )
    saved = pio.templates.default
    pio.templates.default = default
    try:
        same_json(C.cul_histogram(loss), R.cul_histogram(loss))
    finally:
        pio.templates.default = saved
