"""Glossary: every term the app uses, in one sentence, with the paper and where it defines it
(`engine.report.glossary`; the same sentences are the help texts of the widgets and headlines)."""

import streamlit as st

from engine.report.glossary import glossary_frame
from ui.context import through_entry_point
from ui.downloads import table_download
from ui.teach import intro

through_entry_point()  # a deep link on a fresh server: through app.py (ui/context.py)
st.title("Glossary")
intro("glossary")
st.caption(
    "Each term in one sentence, with the paper and the place that defines it. The same sentence appears "
    "as the help (?) of every figure and control that uses the term."
)
frame = glossary_frame()
st.dataframe(
    frame,
    hide_index=True,
    width="stretch",
    column_config={
        "term": st.column_config.TextColumn(width="small", pinned=True),
        "meaning": st.column_config.TextColumn(width="large"),
    },
    key="glossary_table",
)
table_download(frame, "Download the glossary (CSV)", "cohortshield_glossary.csv", "glossary_dl")
