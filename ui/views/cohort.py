"""Cohort: the validation report of the loaded files, and population and cohort side by side."""

import pandas as pd
import streamlit as st

from engine.records import Records
from ui import (
    cache,
    figure_memo,
    persist,  # noqa: F401 - declares this page's kept widgets (their defaults) before they are drawn
    steps,
)
from ui import cohort_view as cv
from ui.downloads import table_download
from ui.literal import md
from ui.teach import intro

_TABLES = 16  # the page's tables held (ui.cache: shared on the shipped sample's groups, else this session)


def _memo(what: str, groups: dict[str, Records], compute, *parameters):
    key = (what, tuple((name, r.fingerprint) for name, r in groups.items()), *parameters)
    return cache.memo("cohort tables", key, compute, size=_TABLES, data=tuple(groups.values()))


def _describe(groups: dict[str, Records]) -> pd.DataFrame:
    return _memo("describe", groups, lambda: cv.describe_groups(groups))


def _top(records: Records, n: int, concepts=None) -> pd.DataFrame:
    """The most frequent codes; an OMOP CDM's concepts described by their concept names (issue 37)."""
    names = None if concepts is None else concepts.names
    tree = None if concepts is None else concepts.fingerprint
    return _memo("top", {"": records}, lambda: cv.top_codes(records, n, names), n, tree)


def _rank_frequency(groups: dict[str, Records]) -> pd.DataFrame:
    return _memo("rank frequency", groups, lambda: cv.rank_frequency_data(groups))


def _distribution(groups: dict[str, Records], measure: str) -> pd.DataFrame:
    def compute() -> pd.DataFrame:
        parts = [cv.per_patient(r).assign(group=name) for name, r in groups.items()]
        return cv.distribution_data(pd.concat(parts, ignore_index=True), measure)

    return _memo("distribution", groups, compute, measure)


def render() -> None:
    """The Cohort page: the import view, the validation report, and population and cohort side by side."""
    st.title("Cohort")
    steps.render()  # issue 26: the four steps, where the user stands, teach mode one click away
    intro("cohort")

    # ------------------------------------------------------------------------------ import
    if st.session_state.get("dataset_choice") == "Import a source":
        from ui import import_view

        import_view.render()

    # ------------------------------------------------------------------------------ validation
    state = st.session_state.get("load_report")
    st.header("Validation")
    if state is None:
        st.info("Choose a dataset in the sidebar.")
    else:
        report = state.report
        st.caption(f"Data: {md(state.label)}")
        if state.failed and report.errors:
            st.error(
                f"Loading stopped: {len(report.errors)} error(s). Fix the file(s) as described below and upload "
                "again; nothing was loaded."
            )
        elif state.failed and st.session_state.get("dataset_choice") == "Import a source":
            st.info("Choose the source above, check its columns and press Load.")
        elif state.failed:
            st.info(
                "Upload an events file in the sidebar (CSV or Parquet: patient_id, code, optional visit, age)."
            )
        elif not report.findings:
            st.success("Every file passed validation: no errors, no warnings.")
        else:
            st.warning(
                f"Loaded with {len(report.warnings)} warning(s); nothing was dropped unless you chose so below."
            )
        if report.findings:
            findings = cv.findings_table(report)
            st.dataframe(findings, hide_index=True, width="stretch")
            table_download(
                findings, "Download the validation report (CSV)", "validation_report.csv", "dl_validation"
            )
        unknown = cv.unknown_codes_table(report)
        if len(unknown) or st.session_state.get("unknown_codes") == "drop":
            st.subheader("Codes unknown to ICD-9-CM")
            st.write(
                f"{len(unknown)} well-formed code(s) in {int(unknown['rows'].sum()) if len(unknown) else 0} rows are "
                "not in the ICD-9-CM tables or the phecode map. Keep them (they are treated like any code) or drop "
                "their rows."
            )
            st.radio(
                "Rows with unknown codes",
                ("keep", "drop"),
                key="unknown_codes",
                horizontal=True,
                format_func=lambda s: {"keep": "keep them", "drop": "drop them"}[s],
            )
            st.dataframe(unknown, hide_index=True, width="stretch", height=220)
            table_download(
                unknown, "Download the unknown codes (CSV)", "unknown_codes.csv", "dl_unknown_codes"
            )
        if report.of_kind("duplicate_rows") or st.session_state.get("drop_duplicates"):
            st.checkbox("Drop rows that repeat an earlier row exactly", key="drop_duplicates")
        if not state.failed and "context" in st.session_state:
            sources = cv.sources_table(st.session_state["context"].dataset.sources)
            with st.expander("Files and their sha256"):
                st.dataframe(sources, hide_index=True, width="stretch")

    # ------------------------------------------------------------------------------ description
    ctx = st.session_state.get("context")
    if ctx is None:
        return

    pop_label, cohort_label = f"population: {ctx.population_group}", f"cohort: {ctx.cohort_group}"
    groups = {pop_label: ctx.population, cohort_label: ctx.cohort}
    st.header("Population and cohort")
    st.caption(f"Adversary: {ctx.adversary.describe()}  k = {ctx.k}")

    with cache.spinner("Describing the groups…"):
        table = _describe(groups)
    # one group above the other, three figures a row: side by side, six figures in half the page were cut
    # at 1024 px ("30,…" for 30,000; issue 26's screenshots)
    for label in groups:
        stats = table.set_index("measure")[label]
        st.subheader(label)
        a, b, c = st.columns(3)
        a.metric("Patients", f"{int(stats['patients']):,}")
        b.metric("Visits", f"{int(stats['visits']):,}")
        c.metric("Distinct codes", f"{int(stats['distinct codes']):,}")
        a.metric("Codes / patient (mean)", f"{stats['codes per patient, mean']:.2f}")
        b.metric("Diagnoses / patient (mean)", f"{stats['diagnoses per patient, mean']:.2f}")
        c.metric("Visits / patient (mean)", f"{stats['visits per patient, mean']:.2f}")
    st.dataframe(table.round(2), hide_index=True, width="stretch")
    table_download(table, "Download the group summary (CSV)", "group_summary.csv", "dl_group_summary")

    st.subheader("Most frequent codes")
    n_top = st.slider("Codes to list", 5, 100, step=5, key="cohort_top_n")  # 20: persist.PAGE_DEFAULTS
    left, right = st.columns(2)
    for col, (label, records) in zip((left, right), groups.items(), strict=True):
        with col:
            st.markdown(f"**{label}**")
            top = _top(records, n_top, ctx.dataset.concepts)
            st.dataframe(top, hide_index=True, width="stretch")
            group = label.split(":")[0]
            table_download(
                top,
                f"Download the top codes, {group} (CSV)",
                f"top_codes_{group}.csv",
                f"dl_top_{group}",
                counts=("patients",),
                derived=("% of patients", "events"),
            )

    st.subheader("Code frequency distribution")
    freq = _rank_frequency(groups)
    st.plotly_chart(
        figure_memo.built(cv.rank_frequency_figure, freq, data=tuple(groups.values())),
        width="stretch",
        key="rank_frequency_chart",
    )
    table_download(
        freq,
        "Download the rank/frequency data (CSV)",
        "code_rank_frequency.csv",
        "dl_rank_freq",
        counts=("patients",),
    )

    st.subheader("Per-patient distributions")
    measure = st.selectbox(
        "Measure",
        ("distinct_codes", "diagnoses", "visits"),
        key="cohort_measure",
        format_func=lambda s: s.replace("_", " "),
    )
    dist = _distribution(groups, measure)
    st.plotly_chart(
        figure_memo.built(
            cv.distribution_figure,
            dist,
            f"{measure.replace('_', ' ')} per patient",
            data=tuple(groups.values()),
        ),
        width="stretch",
    )
    table_download(
        dist,
        f"Download {measure.replace('_', ' ')} per patient (CSV)",
        f"{measure}_per_patient.csv",
        "dl_distribution",
    )
