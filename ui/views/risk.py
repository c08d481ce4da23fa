"""Risk: distinguishability of the cohort under the four adversaries, before and after each release.

Tamersoy 2010 Figure 4 and the PNAS Figure 2 (share of records at or below each distinguishability),
with k marked; headline figures for the sidebar's adversary; the code patterns that single out the
riskiest records (codes only, never identifiers). Everything is computed by `engine.risk`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from engine import risk
from engine.adversary import ALL_ADVERSARIES, EVERY_ADVERSARY, Adversary
from engine.estimate import explain, kmap
from engine.records import Records
from engine.report.glossary import help_for
from engine.report.markdown import escape
from engine.vocab import describe
from ui import (
    cache,
    errors,
    figure_memo,
    honest,
    literal,
    persist,  # noqa: F401 - declares this page's kept widgets (their defaults) before they are drawn
    sensitive_view,
    threshold,
)
from ui import format as fmt
from ui import progress as progress_ui
from ui import risk_charts as charts  # looked up at each run (tests count the figures built)
from ui import study as session_study
from ui.context import Context, cohort_is_population, warn_if_whole_population
from ui.downloads import table_download
from ui.teach import intro


# ------------------------------------------------------------------------------ cached engine calls
def _memo(what: str, size: int, cohort: Records, population: Records | None, compute, *parameters):
    """`compute()` memoized per both groups' content and `parameters` (`ui.cache`: shared on the
    shipped sample's groups, else in this session)."""
    key = (cohort.fingerprint, None if population is None else population.fingerprint, *parameters)
    return cache.memo(f"risk {what}", key, compute, size=size, data=(cohort, population))


def _original(
    cohort: Records, population: Records, count_repeats: bool, adversaries: tuple[Adversary, ...]
) -> tuple[dict[str, np.ndarray], str]:
    """Distinguishability per adversary, and which backend and kernel counted each (issue 15)."""

    def compute() -> tuple[dict[str, np.ndarray], str]:
        with risk.record_kernels() as ran:
            together = risk.all_adversaries(
                cohort, population, risk.Matching(count_repeats=count_repeats), adversaries=adversaries
            )
        used = "; ".join(f"{adv.label}: {k}" for adv, k in zip(together, ran, strict=True))
        return {adv.label: dis for adv, dis in together.items()}, (
            f"Backend: in process, {risk.thread_count()} threads. Kernel: {used}."
        )

    return _memo("original", 16, cohort, population, compute, count_repeats, adversaries)


def _patterns(
    cohort: Records,
    population: Records,
    scope: str,
    knowledge: str,
    count_repeats: bool,
    n: int,
    concepts=None,
) -> pd.DataFrame:
    """The riskiest patterns, described by `engine.vocab.describe`; a CDM's concepts by their names."""
    names = None if concepts is None else concepts.names
    tree = None if concepts is None else concepts.fingerprint

    def compute() -> pd.DataFrame:
        cands = population if scope == "population" else cohort
        matching = risk.Matching(count_repeats=count_repeats)
        found = risk.riskiest_patterns(cohort, cands, knowledge, matching, n=n, names=names)
        return charts.describe_patterns(found, names)

    return _memo("patterns", 16, cohort, population, compute, scope, knowledge, count_repeats, n, tree)


def _explanations(
    cohort: Records, population: Records, scope: str, knowledge: str, k: int, row: int, concepts=None
):
    """The record's explanation at k; what every k shares (`explain.prepare`) built once per adversary.
    `concepts`: a CDM's hierarchy (its generalizations climb it, issue 37); its fingerprint keys both memos."""
    from engine.adversary import Adversary

    adversary = Adversary(scope, knowledge)  # type: ignore[arg-type]
    tree = None if concepts is None else concepts.fingerprint

    def prepared() -> explain.Prepared:
        return explain.prepare(cohort, adversary, population, concepts=concepts)

    def compute():
        ready = _memo("explanation inputs", 4, cohort, population, prepared, scope, knowledge, tree)
        return explain.explain_records(cohort, adversary, k, population, rows=[row], prepared=ready)[0]

    return _memo("explanations", 24, cohort, population, compute, scope, knowledge, k, row, tree)


def _estimate(
    cohort: Records, size: int, knowledge: str, k: int, selected_by: tuple[str, ...] | None
) -> kmap.KMapEstimate:
    def compute() -> kmap.KMapEstimate:
        return kmap.estimate_kmap(cohort, size, knowledge, k, selected_by=selected_by)  # type: ignore[arg-type]

    return _memo("estimates", 8, cohort, None, compute, size, knowledge, k, selected_by)


def _summary_table(curves: dict[str, np.ndarray], k: int) -> pd.DataFrame:
    """Per curve: the summary at k and `risk.risk_measures` at the threshold 1/k (issue 27)."""
    rows = []
    for name, dis in curves.items():
        s = risk.summarize(dis, k)
        m = risk.risk_measures(dis, risk.threshold_of_k(k))
        rows.append(
            {
                "curve": name,
                "records": s.n_records,
                "share unique": s.share_unique,
                f"share below k={k}": s.share_below_k,
                "median distinguishability": s.median,
                "maximum risk": m.prosecutor_max,
                "average risk": m.average,
                "records at risk": m.records_at_risk,
            }
        )
    return pd.DataFrame(rows)


WHOLE_RECORD_UNEXPLAINED = (
    "Under whole-record knowledge a record's class is the records with exactly its codes: the "
    "explanation and its fixes below model the papers' attacker (the codes a record holds), so they are "
    "not shown for this one. Choose single visit or all visits in the sidebar to see them."
)


def render(ctx: Context) -> None:
    """The Risk page: the four adversaries' distinguishability, the headline figures, the riskiest
    patterns, the study's releases, the k-map estimate and why a record is at risk."""
    adv, k = ctx.adversary, ctx.k
    st.title("Risk")
    intro("risk")
    warn_if_whole_population(ctx)
    threshold.caption(ctx)
    st.caption(
        f"Adversary (sidebar): **{adv.label}**. {adv.describe()} Distinguishability is the number of candidate "
        "records consistent with what the attacker knows; 1 means unique, below k means unpublishable."
    )
    count_repeats = st.checkbox(
        "Count repeated codes (all-visits knowledge includes how often each code was assigned, Tamersoy 2010)",
        value=False,
        key="risk_count_repeats",
        help=help_for("all_visits"),
    )

    # the papers' four, and the sidebar's whole-record attacker when chosen (issue 39)
    shown = ALL_ADVERSARIES + (() if adv.targeted_by_papers else (adv,))
    with cache.spinner("Computing distinguishability under the adversaries..."):
        curves, backend = _original(ctx.cohort, ctx.population, count_repeats, shown)
    with st.expander("For administrators: how the risk was computed"):  # issue 26: no server details above
        st.caption(backend)
    dis = curves[adv.label]
    s = risk.summarize(dis, k)

    st.header("Headline figures")
    # three a row, short labels, the definition in the hover: four a row were cut at 1024 px ("1,917 (71…",
    # "Median distingu…"; issue 26's screenshots)
    m = risk.risk_measures(dis, risk.threshold_of_k(k))
    above = f"above {fmt.percent(m.threshold)}"
    c1, c2, c3 = st.columns(3)
    c1.metric("Cohort records", f"{s.n_records:,}")
    c2.metric("Share unique", fmt.percent(s.share_unique), help=help_for("distinguishability"))
    c3.metric(f"Share below k = {k}", fmt.percent(s.share_below_k), help=help_for("k"))
    c1.metric("Median distinguishability", f"{s.median:g}", help=help_for("distinguishability"))
    c2.metric("Maximum risk", fmt.percent(m.prosecutor_max), help=help_for("prosecutor_risk"))
    c3.metric("Average risk", fmt.percent(m.average), help=help_for("average_risk"))
    c1.metric(f"Records at risk ({above})", f"{m.records_at_risk:,}", help=help_for("records_at_risk"))
    c2.metric(f"Share at risk ({above})", fmt.percent(m.share_at_risk), help=help_for("records_at_risk"))

    st.header("The four adversaries" + ("" if adv.targeted_by_papers else ", and the whole-record attacker"))
    st.caption(
        "Share of cohort records at or below each distinguishability (x on a log scale), one curve per adversary; "
        "the sidebar's adversary is drawn thicker."
    )
    fig = figure_memo.built(  # issue 40: a rerun at the same k does not build it again
        charts.distinguishability_cdf_figure,
        curves,
        k,
        "Original cohort: distinguishability by adversary",
        highlight=adv.label,
        data=(ctx.cohort, ctx.population),
    )
    st.plotly_chart(fig, key="risk_cdf_adversaries")
    summary = _summary_table(curves, k)
    st.dataframe(
        summary,
        hide_index=True,
        column_config={
            # every share and risk a percentage, as the headline figures above (issue 26: "0.6237" beside "62.4%")
            **{
                c: st.column_config.NumberColumn(format="percent")
                for c in ("share unique", f"share below k={k}", "maximum risk", "average risk")
            },
        },
        key="risk_summary_table",
    )
    d1, d2 = st.columns(2)
    with d1:
        table_download(
            charts.cdf_frame(curves),
            "Download the four adversaries' CDF (CSV)",
            "risk_cdf_adversaries.csv",
            "dl_risk_cdf",
        )
    with d2:
        table_download(
            summary,
            "Download the four adversaries' summary (CSV)",
            "risk_summary_adversaries.csv",
            "dl_risk_summary",
        )
    with st.expander("Who are the adversaries?"):
        for a in EVERY_ADVERSARY:
            st.markdown(f"- **{a.label}**: {a.describe()}")

    st.header("Riskiest code patterns")
    st.caption(
        "For each cohort record, the known set with the fewest consistent candidates (a visit's codes under "
        "single-visit knowledge, the whole record under all-visits), grouped by pattern. Codes only: no "
        "patient identifiers are shown."
    )
    n_patterns = st.slider(
        "Patterns to show", 5, 100, step=5, key="risk_n_patterns"
    )  # 20: persist.PAGE_DEFAULTS
    with cache.spinner("Finding the riskiest code patterns..."):
        patterns = _patterns(
            ctx.cohort,
            ctx.population,
            adv.scope,
            adv.knowledge,
            count_repeats and adv.knowledge == "all_visits",
            n_patterns,
            ctx.dataset.concepts,
        )
    _names = None if ctx.dataset.concepts is None else ctx.dataset.concepts.names  # a CDM's concept names
    st.dataframe(patterns, hide_index=True, key="risk_patterns_table")
    table_download(patterns, "Download the patterns (CSV)", "risk_riskiest_patterns.csv", "dl_risk_patterns")

    published = session_study.current(ctx)
    if not published:  # issue 26: no empty heading, and no "no release" under a note that there are some
        if not session_study.others_note(ctx):
            st.info(
                'No release in the study yet. Make one on the Anonymize page and press "Add to study"; it '
                "then appears here, before and after, against the original on the same axes."
            )
    else:
        st.header("Before and after")
        session_study.others_note(ctx)
        st.caption(f"Original cohort and every release of the study under **{adv.label}**, k = {k}.")
        before_after: dict[str, np.ndarray] = {"original": dis}
        status = []
        step = progress_ui.tracker("Verifying the study's releases")
        for i, (name, (entry, held)) in enumerate(published.items()):
            step(i / len(published), f"{name}: {i + 1} of {len(published)}")
            rel = held.release
            try:
                v = session_study.reverify(ctx, rel)
            except Exception as exc:  # e.g. a population adversary with no population (a UserError)
                status.append(
                    {"release": name, "method": rel.method, "recorded when added": errors.message(exc)}
                )
                continue
            rdis = np.asarray(v.distinguishability)
            before_after[name] = rdis
            status.append(
                {
                    "release": name,
                    "method": rel.method,
                    f"verified here ({adv.label}, k={k})": bool(v.ok),
                    "records below k": int((rdis < k).sum()),
                    "recorded when added": entry.verdict_message(),
                }
            )
        step.bar.empty()
        fig2 = figure_memo.built(
            charts.distinguishability_cdf_figure,
            before_after,
            k,
            "Before and after anonymization",
            highlight="original",
            dashed=list(before_after)[1:],
            legend={
                n: honest.legend_name(n, published[n][1].release, ctx.cohort) for n in list(before_after)[1:]
            },
        )
        st.plotly_chart(fig2, key="risk_cdf_before_after")
        st.dataframe(
            pd.DataFrame(status),
            hide_index=True,
            key="risk_release_status",
            column_config={"release": st.column_config.TextColumn("release", pinned=True)},
        )
        for name, (_entry, held) in published.items():  # issue 16: what each release leaves out
            honest.show_flags(held.release, ctx.cohort, name)
        b1, b2 = st.columns(2)
        with b1:
            table_download(
                charts.cdf_frame(before_after),
                "Download the before-and-after CDF (CSV)",
                "risk_cdf_before_after.csv",
                "dl_risk_cdf_ba",
            )
        with b2:
            table_download(
                _summary_table(before_after, k),
                "Download the before-and-after summary (CSV)",
                "risk_summary_before_after.csv",
                "dl_risk_summary_ba",
            )

    sensitive_view.show(ctx, {name: held.release for name, (_entry, held) in (published or {}).items()})

    if (
        cohort_is_population(ctx.cohort, ctx.population) and adv.targeted_by_papers
    ):  # the papers' attacker only
        st.header("k-map without the population (estimate)")
        st.warning(kmap.RANDOM_SAMPLE_WARNING)
        size = int(
            st.number_input(
                "Size of the institution's population (patients)",
                min_value=max(1, ctx.cohort.n_patients),
                value=max(1, ctx.cohort.n_patients) * 10,
                step=1000,
                key="risk_population_size",
                help=help_for("kmap_estimate"),
            )
        )
        typed = st.text_input(
            "How the cohort was selected: the codes that define it (comma-separated prefixes; empty: a random sample)",
            key="risk_selected_by",
            help="E.g. 250,401: every patient of the population with a code starting with 250 or 401 is in the "
            "cohort. Known sets holding such a code are then counted exactly.",
        )
        selected_by = tuple(c.strip() for c in typed.split(",") if c.strip()) or None
        est: kmap.KMapEstimate | None = None
        try:
            with cache.spinner("Estimating population risk from the cohort alone..."):
                est = _estimate(ctx.cohort, size, adv.knowledge, k, selected_by)
        except kmap.SelectionError as exc:
            st.error(f"Selection codes: {escape(exc)}")
        if est is not None and selected_by is not None:
            st.info(f"{est.warning} Known sets counted exactly: {est.exact_sets:,} of {est.n_sets:,}.")
        if est is not None:
            e1, e2 = st.columns(2)
            for col, name, share, bound in (
                (e1, "Estimated share unique", est.share_unique, est.cohort_only.share_unique),
                (e2, f"Estimated share below k = {k}", est.share_below_k, est.cohort_only.share_below_k),
            ):
                col.metric(name, f"{share.estimate:.1%}", help=help_for("kmap_estimate"))
                col.caption(
                    f"Spread under the model ({share.confidence:.0%}): {share.low:.1%} to {share.high:.1%}, not "
                    f"a measured error (model: {est.model}). At most {bound:.1%}: the cohort alone, an upper "
                    "bound whatever the selection."
                )

    st.header("Why a record is at risk, and what would fix it")
    below = np.flatnonzero(dis < k)
    if len(below) == 0:
        st.success(f"No record is below k = {k} under {adv.label}.")
    elif (
        not adv.targeted_by_papers
    ):  # issue 39: the explanation's fixes are the papers' (codes a record holds)
        st.info(WHOLE_RECORD_UNEXPLAINED)
    else:
        st.caption(
            "Records are named by their position in the cohort, not by their ids. The codes that single the "
            "record out: the smallest part of its riskiest known set held by fewer than k candidates (rarest "
            "code first, then every code not needed dropped). The change: generalize a code to its 3-digit code / "
            "category (on an OMOP CDM with its vocabulary tables: its parent concept in the CDM's hierarchy) "
            "where that is enough (no pair suppressed), else suppress codes, fewest pairs suppressed "
            "first. A generalization recodes the category to one item in EVERY record of the release (a "
            "release cannot recode one record alone: the others' specific codes would single it out); a "
            "suppression removes the code from this record. Each change is counted again by engine.risk on "
            "the release it makes, and its cost covers every record it touches."
        )
        row = st.selectbox(
            f"Record below k ({len(below):,})",
            below.tolist(),
            format_func=lambda r: f"record {r + 1} (distinguishability {int(dis[r])})",
            key="risk_explain_record",
        )
        with cache.spinner("Explaining the record..."):
            e = _explanations(
                ctx.cohort, ctx.population, adv.scope, adv.knowledge, k, int(row), ctx.dataset.concepts
            )
        where = "its whole record" if e.visit is None else "its riskiest visit"
        st.markdown(
            f"**Singles it out** ({where}; {e.singling_out_support} candidate(s) hold these codes, k = {k}):"
        )
        st.dataframe(
            pd.DataFrame(
                {
                    "code": list(e.singling_out),
                    "description": [describe(c, names=_names) for c in e.singling_out],
                }
            ),
            hide_index=True,
            key="risk_explain_codes",
        )
        st.markdown(
            literal.md(
                f"Cheapest change: {e.change_text()}. Distinguishability after, counted by engine.risk on the "
                f"release this change makes: {e.distinguishability_after}. Cost: {e.pairs_lost} of the "
                f"record's {e.record_pairs} pairs ({e.events_lost} events) suppressed; {e.records_recoded} "
                f"records, {e.pairs_recoded} pairs and {e.events_recoded} events recoded in the release."
            )
        )
