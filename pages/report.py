"""Report: what an IRB needs, exportable as Markdown and JSON."""

from __future__ import annotations

import streamlit as st

from engine.report import ReleaseEntry, build_report, report_json, report_markdown
from ui import releases
from ui.context import current, warn_if_whole_population
from ui.downloads import report_download

ctx = current()
st.title("Report")
warn_if_whole_population(ctx)
st.caption(
    "Inputs with their hashes, the groups, the adversary and k, the original risk under every adversary, "
    "and each release made in this session with its parameters and the risk engine's verification."
)
published = releases.available()
chosen = st.multiselect(
    "Releases to include", list(published), default=list(published), key="report_releases"
)
entries = [ReleaseEntry(n, published[n].release, published[n].verification) for n in chosen]
with st.spinner("Assembling the report…"):
    report = build_report(
        ctx.dataset,
        ctx.population_group,
        ctx.cohort_group,
        ctx.population,
        ctx.cohort,
        ctx.adversary,
        ctx.k,
        entries,
    )
md = report_markdown(report)
c1, c2 = st.columns(2)
report_download(md, "Report (Markdown)", "cohortshield_report.md", where=c1)
report_download(report_json(report), "Report (JSON)", "cohortshield_report.json", where=c2)
unverified = [r["name"] for r in report["releases"] if not r["verified"]]
if unverified:
    st.warning(
        f"Not verified at k = {ctx.k}: {', '.join(unverified)}. They are reported, but not offered for release."
    )
st.markdown(md)
