"""Anonymize: one tab per method (ui/tab_*.py)."""

import streamlit as st

from ui.context import current
from ui.tabs import render_tabs

ctx = current()
st.title("Anonymize")
st.caption(f"Adversary: {ctx.adversary.describe()}  k = {ctx.k}")
render_tabs(ctx, "render_anonymize")
