"""PheWAS: original vs released data (Heatherly 2013, Table 4 and Figures 1-12)."""

from __future__ import annotations

from dataclasses import astuple

import numpy as np
import pandas as pd
import streamlit as st

from engine.anonymize.population import SCOPE_NAMES, GroupRelease
from engine.release import Release
from engine.report.glossary import help_for
from engine.report.table4 import NOT_REPRODUCED, Table4Release, guarantee_table, guarantee_words
from engine.utility import phewas
from ui import cache, figure_memo, honest, measures, threshold
from ui import format as fmt
from ui import phewas_charts as charts  # looked up at each run (tests count the figures built)
from ui import study as session_study
from ui.context import Context, warn_if_whole_population
from ui.downloads import table_download
from ui.fingerprints import frame_fingerprint, release_key
from ui.literal import md
from ui.state import ABSENT, declare
from ui.teach import intro
from ui.views.heatherly import compare_three_scopes

_SNP = "phewas_snp"  # the SNP shown
declare(__name__, held={_SNP: ABSENT})
_MEMBERSHIPS = 2  # membership attack results held (ui.cache, this session)


def r2_over(pairs: pd.DataFrame, snp: str) -> str:
    """'18 of 1,842 of the original's tests': what a release's r² is taken over (the tests run on both)."""
    df = pairs[pairs["snp"] == snp]
    both = df.dropna(subset=["neglog10_original", "neglog10_released"])
    original = int(df["neglog10_original"].notna().sum())
    return f"{len(both):,} of {original:,} of the original's tests"


def r2_note(pairs: pd.DataFrame, snp: str) -> str:
    """Why a release's QQ panel is empty or it has no r² ('' when neither): no test ran on the
    released data (no phenotype left with enough cases), or nothing to correlate."""
    df = pairs[pairs["snp"] == snp]
    both = df.dropna(subset=["neglog10_original", "neglog10_released"])
    if both.empty:
        return (
            "no associations left: no phenotype of the release has enough cases for a test, so its QQ "
            "panel is empty and there is no r²"
        )
    if len(both) < 2 or both["neglog10_original"].std() == 0 or both["neglog10_released"].std() == 0:
        return f"nothing to correlate: {len(both)} test(s) ran on both, with no spread in p, so no r²"
    return ""


def _opening_snp(ctx, snps: list[str]) -> str:
    """The SNP with the most significant associations in the original data at the page's settings
    (the first on a tie, or when none has any): the page no longer opens on an empty table."""
    get = st.session_state.get
    settings = phewas.PhewasSettings(
        min_code_count=int(get("phewas_mincount", 1)),
        min_cases=int(get("phewas_mincases", 20)),
        test=get("phewas_test", "allelic"),
    )
    table = measures.original_phewas(ctx, settings)
    p_col = {"none": "p", "bonferroni": "p_bonferroni", "bh": "p_bh"}[get("phewas_correction", "bh")]
    found = table[table[p_col] <= float(get("phewas_alpha", 0.05))].groupby("snp").size()
    return max(snps, key=lambda s: int(found.get(s, 0))) if snps else ""


# issue 36: the paper's procedure beside the verified release, the arbiter's verdict on each
HEATHERLY_KINDS = {"paper's procedure": False, "verified": True}


def comparison_name(scope_name: str, kind: str) -> str:
    return f"Heatherly {scope_name}, {kind} (comparison, not in the study)"


def render(ctx: Context) -> None:
    """The PheWAS page: the original PheWAS, each release's beside it, Table 4, the membership attack."""
    st.title("PheWAS")
    intro("phewas")
    warn_if_whole_population(ctx)
    threshold.caption(ctx)  # the releases listed are verified against it (issue 27)
    genotypes = ctx.dataset.genotypes
    if genotypes is None or genotypes.empty:
        st.warning("This dataset has no genotype file: load one on the Cohort page to run a PheWAS.")
        return

    snps = [c for c in genotypes.columns if c != "patient_id"]
    if _SNP not in st.session_state:  # issue 26: open on the SNP with the most associations
        st.session_state[_SNP] = _opening_snp(ctx, snps)
    c1, c2, c3, c4, c5 = st.columns(5)
    snp = c1.selectbox("SNP", snps, key="phewas_snp")
    test = c2.selectbox(
        "Test", ["allelic", "genotypic"], key="phewas_test", help="allelic: 2x2 allele table; genotypic: 2x3"
    )
    min_code_count = c3.number_input("Min. code count for a case", 1, 10, 1, key="phewas_mincount")
    min_cases = c4.number_input("Min. cases for a test", 1, 500, 20, key="phewas_mincases")
    alpha = c5.number_input("Significance level", 0.0001, 0.5, 0.05, format="%.4f", key="phewas_alpha")
    correction = st.radio(
        "Multiple testing",
        ["bh", "bonferroni", "none"],  # default: a correction (issue 16); Heatherly's setting kept, named
        horizontal=True,
        key="phewas_correction",
        format_func={
            "none": "none (Heatherly's Table 4)",
            "bonferroni": "Bonferroni",
            "bh": "Benjamini-Hochberg (default)",
        }.get,
        help=help_for("multiple_testing"),
    )
    with st.expander("Definitions and defaults"):
        st.markdown(phewas.__doc__ or "")

    settings = phewas.PhewasSettings(min_code_count=int(min_code_count), min_cases=int(min_cases), test=test)
    original = measures.original_phewas(ctx, settings)
    genotyped = measures.genotyped_count(ctx)
    st.caption(
        f"Cohort `{ctx.cohort_group}`: {ctx.cohort.n_patients:,} patients, {genotyped:,} genotyped; "
        f"{original['phecode'].nunique():,} phecodes tested per SNP, {len(original):,} tests in all."
    )

    heatherly = st.toggle(
        f"Compare Heatherly's three scopes at k = {ctx.k} (DEMO_D, DEMO_B, DEMO_S; PheWAS-code constraints)",
        value=False,  # off until asked (issue 13): six anonymizations, 13-32 s on the sample (bench/ui.py phewas)
        key="phewas_heatherly",
        help="Anonymizes the cohort, the biobank and the population at the sidebar's k, as in Heatherly's "
        "Table 4, twice: the paper's procedure (which leaves records below k under its own single-visit "
        "model) and the verified release (the completion pass that spares the PheWAS). A comparison only, never "
        "added to the study (add a release on the Anonymize page). Slow (six anonymizations, with progress "
        "and Cancel), so it runs only when switched on.\n\n" + help_for("demo"),
    )
    # name -> (Release, label): the study's releases (verified again under the sidebar's adversary and k),
    # then the comparison's releases, which are not the study's
    available: dict[str, tuple[Release, str]] = {}
    for name, (_entry, held) in session_study.current(ctx).items():
        v = session_study.reverify(ctx, held.release)
        available[name] = (
            held.release,
            name if v.ok else f"{name} (not verified at k = {v.k}, {v.adversary.label})",
        )
    scope_results: dict[str, dict[str, GroupRelease]] = {}
    if heatherly:
        for kind, complete in HEATHERLY_KINDS.items():
            cmp_ = compare_three_scopes(ctx, int(ctx.k), complete=complete, completion="phewas")
            scope_results[kind] = {SCOPE_NAMES[s]: res for s, res in cmp_.results.items()}
            for scope_name, res in scope_results[kind].items():
                name = comparison_name(scope_name, kind)
                label = name if res.verification.ok else f"{name}: {guarantee_words(res.verification)}"
                available[name] = (res.release, label)
    elsewhere = session_study.others_note(ctx)  # releases of other data: never "no release" beside it
    left_out = st.multiselect(
        "Releases to leave out of the comparison (every other one is compared)",
        list(available),
        key="phewas_left_out",
        format_func=lambda name: available[name][1],
        help="The study's releases of the data loaded now, and Heatherly's three scopes when compared; a "
        "release added later is compared unless left out here.",
    )
    chosen = [n for n in available if n not in left_out]
    if not available and not elsewhere:
        st.info(
            'No release in the study yet: make one on the Anonymize page and press "Add to study" to '
            "compare. The original PheWAS is below."
        )

    pairs: dict[str, pd.DataFrame] = {}
    with cache.spinner("PheWAS on the releases…"):
        for name in chosen:
            rel = available[name][0]
            rel_res = measures.released_phewas(ctx, rel, settings)
            pairs[name] = phewas.paired(original, rel_res)
            pairs[name]["release"] = name

    p_col = {"none": "p", "bonferroni": "p_bonferroni", "bh": "p_bh"}[correction]
    if pairs:
        st.subheader("Lost and false associations (Table 4)")
        released_results = {
            n: df.rename(columns=lambda c: c.replace("_released", ""))[
                ["snp", "phecode", "phenotype", "n_cases", "odds_ratio", "p", "p_bonferroni", "p_bh"]
            ].dropna(subset=["p"])
            for n, df in pairs.items()
        }
        table = phewas.significance_table(
            original, released_results, alpha=float(alpha), correction=correction
        )
        st.caption(help_for("lost_false"))
        st.dataframe(  # wide with many releases: it scrolls, the SNP column pinned
            table,
            hide_index=True,
            width="stretch",
            column_config={"snp": st.column_config.TextColumn("SNP", pinned=True)},
        )
        table_download(
            table,
            "Download Table 4, lost and false associations (CSV)",
            "phewas_table4.csv",
            "phewas_dl_table4",
        )
        if scope_results:
            st.markdown(f"**Heatherly's Table 4 with the guarantee (k = {ctx.k})**")
            t4 = {
                kind: {
                    n: Table4Release(released_results[comparison_name(n, kind)], r.verification)
                    for n, r in results.items()
                    if comparison_name(n, kind) in released_results
                }
                for kind, results in scope_results.items()
            }
            st.caption(
                "The paper's procedure guarantees single codes only: the arbiter (the risk engine) counts its "
                "records below k under the paper's own single-visit model. The verified release is completed "
                "(the completion pass that spares the PheWAS) until every record meets k. The issue's target for the verified "
                "DEMO_S is at most 2% of the associations lost and 2% false: the column 'verified within 2%' "
                "says whether it is reached. The paper's own figures were not verified."
            )
            st.dataframe(
                guarantee_table(
                    original,
                    t4["paper's procedure"],
                    t4["verified"],
                    alpha=float(alpha),
                    correction=correction,
                ),
                hide_index=True,
                key="phewas_table4_guarantee",
            )
            st.info(NOT_REPRODUCED)
        for name in pairs:
            honest.show_flags(available[name][0], ctx.cohort, name)
        # issue 35: an r² over the few tests a release still allows read 0.994 beside 13 of 13 associations
        # lost: it says over how many of the original's tests it is taken, after the table of what is lost
        r2 = pd.DataFrame(
            [
                {
                    "release": n,
                    "r² of -log10 p": fmt.number(
                        phewas.r_squared(df[df["snp"] == snp])
                    ),  # a dash, never "None"
                    "over tests": r2_over(df, snp),
                    "why no r²": r2_note(df, snp),
                }
                for n, df in pairs.items()
            ]
        )
        st.dataframe(r2, hide_index=True)

        st.subheader("QQ-plots (Figures 1-6)")
        for name, df in pairs.items():
            note = r2_note(df, snp)
            if note:
                st.caption(md(f"{name}: {note}"))
        st.plotly_chart(figure_memo.built(charts.qq_figure, pairs, snp, float(alpha)), width="stretch")
        st.caption(
            "The ringed points: the largest changes of each release (hover a point for its phenotype)."
        )
        st.dataframe(
            charts.largest_changes(pairs, snp), hide_index=True, width="stretch", key="phewas_largest"
        )
        st.subheader("Change in -log10 p (Figures 7-12)")
        st.plotly_chart(figure_memo.built(charts.change_histogram, pairs, snp), width="stretch")
        all_pairs = pd.concat(pairs.values(), ignore_index=True)
        table_download(
            all_pairs,
            "Download the QQ-plot and change data, every release (CSV)",
            "phewas_pairs.csv",
            "phewas_dl_pairs",
            counts=("n_cases_original", "n_cases_released"),
            derived=[
                c
                for c in all_pairs.columns
                if c.startswith(("odds_ratio", "p_", "neglog10")) or c == "change"
            ],
        )

    st.subheader("Manhattan plot")
    st.plotly_chart(
        figure_memo.built(charts.manhattan_figure, original, pairs, snp, float(alpha)), width="stretch"
    )
    st.subheader(f"Associations at {p_col} ≤ {alpha} in the original data, {md(snp)}")
    sig = original[(original["snp"] == snp) & (original[p_col] <= alpha)].sort_values("p")
    st.dataframe(sig.assign(neglog10_p=-np.log10(sig["p"])), hide_index=True, width="stretch")
    table_download(
        original,
        "Download the original PheWAS, all SNPs (CSV)",
        "phewas_original.csv",
        "phewas_dl_original",
        counts=("n_cases", "n_controls"),
    )

    # ------------------------------------------------------------------------------ issue 28
    st.subheader("Membership attack on the released PheWAS statistics")
    st.caption(help_for("membership_attack") + "\n\n" + help_for("detection_rate"))
    _mkey = (
        ctx.cohort.fingerprint,
        ctx.population.fingerprint,
        frame_fingerprint(genotypes),
        astuple(settings),
        tuple((n, release_key(available[n][0])) for n in chosen),
        session_study.session(ctx).small_cells,
    )
    _held = cache.held("phewas membership", _mkey)
    if _held is None and st.button(
        "Run the membership attack (about 15 s on the sample)", key="phewas_membership_run"
    ):
        from engine.utility import membership

        with st.spinner("Attacking the original and each release's PheWAS table under every option…"):
            _tables = {"original": original} | {
                n: measures.released_phewas(ctx, available[n][0], settings) for n in chosen
            }
            _res = membership.assess(
                _tables, ctx.cohort, ctx.population, genotypes, session_study.session(ctx).small_cells
            )
            _held = membership.results_frame(_res)
            cache.put("phewas membership", _mkey, _held, size=_MEMBERSHIPS)  # the session's study: its own
    if _held is not None:
        _frame = _held
        st.dataframe(
            _frame.pivot_table(index="option", columns="table", values="power", sort=False),
            key="phewas_membership",
        )
        st.caption(
            "Detection rate at 5% false positives (0.05 = guessing), for the table as computed and under each "
            "option: fewer rows, coarser statistics, bigger cells, the study's small-cell policy, all together."
        )
        table_download(
            _frame, "Download the membership attack (CSV)", "phewas_membership.csv", "phewas_dl_membership"
        )
