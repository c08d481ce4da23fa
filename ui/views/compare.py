"""Compare releases: every release of the study side by side (issue 16; ARX's utility view is the
anchor). One table and one chart, computed by `engine.study.compare` against the original cohort under the
study's adversary and k; the best value of each column is marked."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from engine import risk
from engine.report.glossary import help_for
from engine.study import compare
from engine.utility import phewas
from ui import cache, honest, literal, measures, threshold
from ui import study as session_study
from ui.colours import colour_map
from ui.context import Context, warn_if_whole_population
from ui.downloads import table_download
from ui.fingerprints import frame_fingerprint, release_key
from ui.teach import intro

_TABLES, _ORIGINALS = 2, 8  # comparison tables; the original cohort's distinguishability per adversary
SHARES = {  # chart measure (words) -> table column
    "Records below k": "share below k",
    "Pairs retained": "pairs retained",
    "Distinct codes kept": "distinct codes kept",
    "Records modified": "records modified",
    "Utility constraints met": "utility constraints met",
}
PERCENT = ("share below k", "pairs retained", "distinct codes kept", "records modified")
HELP = {
    "share below k": help_for("distinguishability", "k"),
    "records below k": help_for("distinguishability", "k"),
    "pairs retained": help_for("pairs_retained"),
    "pairs kept": help_for("pairs_retained"),
    "pairs in the cohort": help_for("pairs_retained"),
    "rows released": help_for("rows_released"),
    "patients released": help_for("rows_released"),
    "distinct codes kept": help_for("code_coverage"),
    "records modified": help_for("records_modified"),
    "utility constraints met": help_for("utility_constraint"),
    "PheWAS associations lost": help_for("lost_false", "multiple_testing"),
    "PheWAS associations false": help_for("lost_false", "multiple_testing"),
    "warnings": help_for("catch_all"),
    "maximum risk": help_for("prosecutor_risk"),
    "average risk": help_for("average_risk"),
    "records at risk": help_for("records_at_risk", "risk_threshold"),
}


def _phewas_counts(ctx, releases) -> dict[str, tuple[int, int]] | None:
    """Associations lost and false per release, from the PheWAS tables the PheWAS and Report pages
    hold too (`ui.measures`, default settings: k-independent, never run again at a new k)."""
    genotypes = ctx.dataset.genotypes
    if genotypes is None or genotypes.empty:
        return None
    settings = phewas.PhewasSettings()
    original = measures.original_phewas(ctx, settings)
    released = {name: measures.released_phewas(ctx, rel, settings) for name, rel in releases.items()}
    return compare.phewas_changes(original, released)


def comparison(ctx, releases, with_phewas: bool, files=None) -> pd.DataFrame:
    """`engine.study.compare.comparison_table` of the study's releases (memoized per release content,
    data, adversary, k and the PheWAS choice, in this session: the session's study). What does not
    depend on k is the pages' memos (issue 36: at 1.37 M patients a change of k measured every release
    again, 10 s): each release's verification (`ui.study.reverify`: k only thresholds it), its headline
    and the figures of its files (`ui.honest`, as the IRB report's: relabelling patients changes no
    count, `compare.release_figures`, so the gate's files give the same) and the PheWAS tables. `files`:
    the gate's files the session holds, by release name: those are measured, not written again."""
    geno = ctx.dataset.genotypes
    key = (
        tuple((n, release_key(r)) for n, r in releases.items()),
        ctx.key,
        ctx.adversary.label,
        int(ctx.k),
        with_phewas,
        frame_fingerprint(geno) if with_phewas and geno is not None else None,
    )

    pseudonyms = session_study.session(ctx).pseudonyms if files else None  # the gate's, for its files

    def table() -> pd.DataFrame:
        return compare.comparison_table(
            releases,
            ctx.cohort,
            ctx.population,
            ctx.adversary,
            int(ctx.k),
            phewas_lost_false=_phewas_counts(ctx, releases) if with_phewas else None,
            verifications={n: session_study.reverify(ctx, r) for n, r in releases.items()},
            figures={
                n: honest.file_figures(r, ctx.cohort, (files or {}).get(n), pseudonyms)
                for n, r in releases.items()
            },
            headlines={n: honest.figures(r, ctx.cohort) for n, r in releases.items()},
        )

    return cache.memo("compare tables", key, table, size=_TABLES)


def original_measures(ctx) -> risk.RiskMeasures:
    """`risk.risk_measures` of the original cohort under the study's adversary at 1/k: the
    distinguishability is memoized per data and adversary, k only thresholds it."""
    dis = cache.memo(
        "original distinguishability",
        (ctx.key, ctx.adversary.label),
        lambda: risk.original_distinguishability(ctx.cohort, ctx.adversary, ctx.population),
        size=_ORIGINALS,
        data=ctx,
    )
    return risk.risk_measures(dis, risk.threshold_of_k(int(ctx.k)))


def comparison_chart(table: pd.DataFrame):
    """One bar per release and measure, every measure as a share of the original cohort."""
    t = table.assign(
        **{
            "utility constraints met": table["utility constraints met"]
            / table["utility constraints"].clip(lower=1)
        }
    )
    long = t.melt(
        id_vars=["release"], value_vars=list(SHARES.values()), var_name="measure", value_name="share"
    )
    long["measure"] = long["measure"].map({v: k for k, v in SHARES.items()})
    fig = px.bar(  # bars lie down: the measures' names read level (issue 26: diagonal labels squashed them)
        long,
        y="measure",
        x="share",
        color="release",
        barmode="group",
        orientation="h",
        color_discrete_map=colour_map(t["release"]),
        labels={"measure": "Measure (against the original cohort)", "share": "Share", "release": "Release"},
    )
    fig.update_layout(
        height=max(320, 140 + 18 * len(long)),
        margin={"t": 30, "b": 10},
        xaxis_tickformat=".0%",
        xaxis_range=[0, 1.05],
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0, "title": {"text": "Release"}},
    )
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig


def styled(table: pd.DataFrame):
    """The table with the best value of each column highlighted (`engine.study.compare.best_rows`)."""
    best = compare.best_rows(table)

    def mark(col: pd.Series) -> list[str]:
        names = best.get(str(col.name), set())
        return [
            "background-color: #d9f2d9; font-weight: bold" if r in names else "" for r in table["release"]
        ]

    return table.style.apply(mark, axis=0)


def render(ctx: Context) -> None:
    """The Compare releases page: the study's releases side by side, one table and one chart."""
    st.title("Compare releases")
    intro("compare")
    warn_if_whole_population(ctx)
    threshold.caption(ctx)
    published = session_study.current(ctx)
    session_study.others_note(ctx)
    st.caption(
        f"Every release of the study on the data loaded now, verified again under the study's adversary "
        f"(**{ctx.adversary.label}**) and k = **{ctx.k}**, and measured against the original cohort "
        f"({ctx.cohort.n_patients:,} patients). Utility constraints: the shipped PNAS Table 1 policy, the same "
        "for every release. The best value of each column is marked in green and named in 'best in'."
    )
    if not published:
        st.info('No release in the study yet: make one on the Anonymize page and press "Add to study".')
        return
    original = original_measures(ctx)
    st.caption(
        f"Original cohort under {ctx.adversary.label}: maximum risk {original.prosecutor_max:.3f}, average risk "
        f"{original.average:.3f}, {original.records_at_risk:,} of {original.records:,} records at risk (above "
        f"1/k = {original.threshold:.2f}); each release's figures are in its row."
    )
    releases = {name: held.release for name, (_entry, held) in published.items()}
    has_genotypes = ctx.dataset.genotypes is not None and not ctx.dataset.genotypes.empty
    with_phewas = st.toggle(
        "PheWAS associations lost and false (one PheWAS per release, Benjamini-Hochberg at 0.05)",
        value=has_genotypes,
        disabled=not has_genotypes,
        key="compare_phewas",
        help=help_for("lost_false", "multiple_testing"),
    )
    with cache.spinner("Verifying and measuring every release…"):
        table = comparison(
            ctx,
            releases,
            with_phewas and has_genotypes,
            {n: held.files for n, (_e, held) in published.items()},
        )
    column_config = {c: st.column_config.NumberColumn(c, format="percent", help=HELP[c]) for c in PERCENT} | {
        c: st.column_config.Column(c, help=text)
        for c, text in HELP.items()
        if c in table.columns and c not in PERCENT
    }
    column_config["release"] = st.column_config.TextColumn("release", pinned=True)
    # long texts: wide columns the table scrolls to, never cut to a few letters
    for wide in ("best in", "warnings"):
        if wide in table.columns:
            column_config[wide] = st.column_config.TextColumn(wide, width="large", help=HELP.get(wide))
    st.dataframe(  # stretches to the page and scrolls inside a fixed height; the release column pinned
        styled(table),
        hide_index=True,
        width="stretch",
        height=min(35 * (len(table) + 1) + 3, 420),
        column_config=column_config,
        key="compare_table",
    )
    for name, text in zip(table["release"], table["warnings"], strict=True):
        if text:
            literal.warning(f"{name}: {text}")
    chart = comparison_chart(table)
    names = {n: honest.legend_name(n, r, ctx.cohort) for n, r in releases.items()}
    chart.for_each_trace(lambda t: t.update(name=names.get(t.name, t.name)))  # GCCens states its code set
    st.plotly_chart(chart, key="compare_chart")
    table_download(
        table, "Download the release comparison (CSV)", "cohortshield_release_comparison.csv", "compare_dl"
    )
