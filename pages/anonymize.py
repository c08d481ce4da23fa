"""Anonymize: one tab per method (ui/views/)."""

import streamlit as st

from ui import progress, threshold
from ui.context import current, warn_if_whole_population
from ui.teach import intro

ctx = current()
st.title("Anonymize")
intro("anonymize")
warn_if_whole_population(ctx)
st.caption(f"Adversary: {ctx.adversary.describe()}  k = {ctx.k}")
threshold.caption(ctx)  # the threshold every release here is verified against (issue 27)
# issue 26, finding 2: every second of a method's work (importing, preparing, running, verifying,
# measuring) under a spinner with words, not only the runs under a progress bar
with progress.busy("anonymize", "Working: preparing the data, running the method, verifying the release…"):
    from ui.views import render_method  # the first open imports every method: under the spinner

    render_method(ctx, "render_anonymize")
