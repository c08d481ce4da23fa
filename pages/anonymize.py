"""Anonymize: one tab per method (ui/views/)."""

import streamlit as st

from ui import threshold
from ui.context import current, warn_if_whole_population
from ui.teach import intro
from ui.views import render_method

ctx = current()
st.title("Anonymize")
intro("anonymize")
warn_if_whole_population(ctx)
st.caption(f"Adversary: {ctx.adversary.describe()}  k = {ctx.k}")
threshold.caption(ctx)  # the threshold every release here is verified against (issue 27)
render_method(ctx, "render_anonymize")
