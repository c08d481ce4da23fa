"""Trade-offs: each method's sweep of k or caps, risk against utility (ui/views/)."""

import streamlit as st

from ui import threshold
from ui.context import current, warn_if_whole_population
from ui.teach import intro
from ui.views import render_method

ctx = current()
st.title("Trade-offs")
intro("tradeoffs")
warn_if_whole_population(ctx)
st.caption("Sweeps recompute live on the loaded data; each chart has its data for download.")
threshold.caption(ctx)
render_method(ctx, "render_tradeoffs")
