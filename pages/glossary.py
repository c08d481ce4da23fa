"""Glossary: every term the app shows, in one sentence, with an example and the paper that defines it
(`engine.report.glossary`; the same sentences are the help texts of the widgets and headlines).

Issue 26: a searchable, full-width list (the four-column grid cut its sentences), no source paths."""

import streamlit as st

from engine.report.glossary import TERMS, glossary_frame, search
from ui.context import through_entry_point
from ui.downloads import table_download
from ui.literal import md
from ui.teach import intro

through_entry_point()  # a deep link on a fresh server: through app.py (ui/context.py)
st.title("Glossary")
intro("glossary")
st.caption(
    f"{len(TERMS)} terms, each in one sentence with an example and the paper that defines it. The same "
    "sentence appears as the help (?) of every figure and control that uses the term."
)
query = st.text_input(
    "Search the glossary",
    key="glossary_search",
    placeholder="a term, an abbreviation or a word of its meaning: CUL, Recall@n, QQ-plot, risk…",
)
found = search(query)
if query and not found:
    st.info(f"No term matches “{md(query)}”: try fewer or shorter words.")
elif query:
    st.caption(f"{len(found)} of {len(TERMS)} terms match.")
for t in found:
    st.markdown(
        f"**{md(t.name)}**"
        + "  \n"
        + md(t.sentence)
        + "  \n"
        + md(f"Example: {t.example}")
        + "  \n"
        + f":gray[{md(f'{t.paper}: {t.where}.')}]"
    )
table_download(glossary_frame(), "Download the glossary (CSV)", "cohortshield_glossary.csv", "glossary_dl")
