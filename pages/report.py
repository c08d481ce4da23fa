"""Report: the IRB report of this session's releases (HTML, PDF, JSON) and the release bundle."""

from __future__ import annotations

import streamlit as st

from engine.bundle import make_bundle
from engine.report import build_report, session_study
from ui import releases
from ui.context import current, warn_if_whole_population
from ui.downloads import report_download

ctx = current()
st.title("Report")
warn_if_whole_population(ctx)
st.caption(
    "One page of plain-language summary, one section per release (parameters, risk, utility, the "
    "verification under all four adversaries), the records (version, commit, sha256 of every input and "
    "released file, load options) and the appendix. Every release is verified again under the sidebar's "
    "adversary and k; only verified releases' files go into the bundle."
)
published = releases.available()
left_out = st.multiselect(
    "Releases to leave out (every other release is reported)", list(published), key="report_left_out"
)
chosen = [n for n in published if n not in left_out]
recipient = st.text_input("To whom the data goes (filled in by the privacy officer)", key="report_recipient")
reproducible = st.checkbox(
    "Reproducible (no generation time: the same inputs give byte-identical files)", key="report_reproducible"
)
key = (ctx.key, tuple(chosen), recipient, reproducible, tuple(id(published[n].release) for n in chosen))
if st.button("Build the report", type="primary", key="report_build"):
    with st.spinner("Verifying every release under the study's attacker and building the report…"):
        study, inputs = session_study(
            ctx.dataset,
            ctx.population_group,
            ctx.cohort_group,
            ctx.population,
            ctx.cohort,
            ctx.adversary,
            ctx.k,
            {n: published[n].release for n in chosen},
        )
        report = build_report(
            study,
            inputs,
            ctx.population,
            ctx.cohort,
            genotypes=ctx.dataset.genotypes,
            recipient=recipient,
            reproducible=reproducible,
        )
        page = report.to_html()
        st.session_state["report_built"] = (key, report, page, report.to_pdf(), make_bundle(report))
built = st.session_state.get("report_built")
if built is None or built[0] != key:
    st.info("Build the report to download it; it reflects the releases and settings chosen above.")
else:
    _, report, page, pdf, bundle = built
    c1, c2, c3, c4 = st.columns(4)
    report_download(
        bundle, "Release bundle (zip: verified files, report, manifest)", "cohortshield_release.zip", where=c1
    )
    report_download(pdf, "IRB report (PDF)", "cohortshield_report.pdf", where=c2)
    report_download(page, "IRB report (HTML)", "cohortshield_report.html", where=c3)
    report_download(report.to_json(), "IRB report (JSON)", "cohortshield_report.json", where=c4)
    unverified = [r["name"] for r in report.data["releases"] if not r["verification"]["verified"]]
    if unverified:
        st.warning(
            f"Not verified at k = {ctx.k} ({ctx.adversary.label}): {', '.join(unverified)}. They are "
            "reported, but their files are not in the bundle."
        )
    # the page is self-contained, every text in it escaped, scripts forbidden by its own CSP
    st.iframe(page.decode("utf-8"), height=900)
