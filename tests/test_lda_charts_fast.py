"""ui/lda_charts.py's DGH-level bars and loss-per-trajectory histogram, built as graph objects since issue
24, are the figures plotly.express built (tests/reference_lda_charts.py): the same JSON, the one Streamlit
sends to the browser (traces' x, y, text, names, colours, axes, titles, facet labels, orders), on random
inputs, under the default template and without one, and on the shipped sample's LDA run."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.io as pio
import pytest
import reference_lda_charts as R
from hypothesis import given, settings
from hypothesis import strategies as st

from ui import lda_charts as C

SETTINGS = settings(derandomize=True, database=None, max_examples=40, deadline=None)
LEVELS = ["3-digit", "section", "chapter", "Any", "1-year", "2-year", "16-year", "128-year", "90+"]


def same_json(a, b) -> None:
    assert json.loads(a.to_json()) == json.loads(b.to_json())


class _template:
    """The default plotly template as the app has it (`keep`), or none."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep

    def __enter__(self):
        self.saved = pio.templates.default
        if not self.keep:
            pio.templates.default = None

    def __exit__(self, *exc):
        pio.templates.default = self.saved


@st.composite
def level_frames(draw) -> pd.DataFrame:
    """`engine.utility.loss.level_shares`'s frame: per attribute (ICD, Age, sometimes others, in any
    order) its levels, counts and shares in percent."""
    attributes = draw(
        st.lists(st.sampled_from(["ICD", "Age", "Sex", "ZIP"]), min_size=1, max_size=4, unique=True)
    )
    rows = []
    for a in attributes:
        for level in draw(st.lists(st.sampled_from(LEVELS), min_size=1, max_size=6, unique=True)):
            count = draw(st.integers(0, 10_000))
            rows.append((a, level, count, draw(st.floats(0, 100, allow_nan=False))))
    return pd.DataFrame(rows, columns=["attribute", "level", "count", "share"])


@SETTINGS
@given(level_frames(), st.booleans())
def test_the_level_bars_are_the_express_ones(shares, with_template):
    with _template(with_template):
        same_json(C.level_shares_figure(shares), R.level_shares_figure(shares))


@st.composite
def loss_frames(draw) -> pd.DataFrame:
    """`engine.utility.loss.record_losses`'s frame; ILM or ALM sometimes whole numbers (a dtype of
    their own, which the melted column express read does not keep)."""
    n = draw(st.integers(1, 60))
    losses = st.lists(st.floats(0, 1, allow_nan=False), min_size=n, max_size=n)
    frame = pd.DataFrame(
        {
            "patient_id": [f"P{i:06d}" for i in range(n)],
            "pairs": 3,
            "suppressed": 0,
            "ILM": draw(losses),
            "ALM": draw(losses),
        }
    )
    whole = draw(st.sampled_from([None, "ILM", "ALM"]))
    if whole is not None:
        frame[whole] = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return frame


@SETTINGS
@given(loss_frames(), st.booleans())
def test_the_loss_histogram_is_the_express_one(rl, with_template):
    with _template(with_template):
        same_json(C.record_loss_figure(rl), R.record_loss_figure(rl))


@pytest.mark.parametrize("default", [None, "plotly_dark", "simple_white"])
def test_the_figures_follow_the_template_as_express_did(default):
    shares = pd.DataFrame(
        {
            "attribute": ["ICD", "ICD", "Age"],
            "level": ["3-digit", "Any", "1-year"],
            "count": [1, 2, 3],
            "share": [10.0, 20.0, 70.0],
        }
    )
    rl = pd.DataFrame(
        {
            "patient_id": ["a", "b"],
            "pairs": [2, 2],
            "suppressed": [0, 1],
            "ILM": [0.0, 0.5],
            "ALM": [0.25, np.float64(1)],
        }
    )
    saved = pio.templates.default
    pio.templates.default = default
    try:
        same_json(C.level_shares_figure(shares), R.level_shares_figure(shares))
        same_json(C.record_loss_figure(rl), R.record_loss_figure(rl))
    finally:
        pio.templates.default = saved


def test_on_the_shipped_sample(sample_dataset):
    """The figures of the Anonymize page's LDA run on the sample (the thesis' D4 codes, k = 5)."""
    from engine.study.runs import LDASettings, RunInputs
    from engine.utility.loss import level_shares, record_losses

    cohort = sample_dataset.group_records("cohort")
    res = LDASettings(k=5).run_result(RunInputs(cohort, cohort))
    shares, rl = level_shares(res), record_losses(res)
    assert set(shares["attribute"]) == {"ICD", "Age"} and len(rl) > 100
    same_json(C.level_shares_figure(shares), R.level_shares_figure(shares))
    same_json(C.record_loss_figure(rl), R.record_loss_figure(rl))
    figure = C.level_shares_figure(shares)  # what the panels say, beside the JSON's equality
    assert [a.text for a in figure.layout.annotations] == ["ICD", "Age"]
    assert [t.marker.color for t in C.record_loss_figure(rl).data] == [C.PALETTE[0], C.PALETTE[1]]
