"""Heatherly view of the Anonymize and Trade-offs pages (Heatherly 2013, Methods, Figures 13-15,
Tables 1-3).

`render_anonymize(ctx)`: utility constraints (PheWAS codes by default, the ICD-9-CM hierarchy at a
level, or none), the completion pass, k from the sidebar; the three scopes of Figure 14 (DEMO_D,
DEMO_B, DEMO_S) computed side by side, each verified by the risk engine under single-visit knowledge;
Tables 1-3 live; risk before and after; a Figure 13 view of a few records; the download once verified.
`render_tradeoffs(ctx)`: Diagnosis Count, Code Count and the residual share below k against k.

The sidebar's adversary scope picks the release shown first: cohort -> DEMO_D, population -> DEMO_S.
Engine calls are cached per session on the records' fingerprints and the parameters.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import streamlit as st

from engine import risk
from engine.anonymize.population import (
    COMPLETION_WORDS,
    ICD9_LEVELS,
    SCOPE_NAMES,
    GroupRelease,
    ScopeComparison,
    cdm_depth,
    compare_scopes,
    example_patients,
    export_label,
    figure13_table,
    release_summary,
    scope_summary,
)
from engine.records import Records
from engine.release import Release
from engine.report.glossary import help_for
from engine.study.experiments import heatherly_sweep_k
from engine.study.parameters import parameter_of
from engine.study.runs import HeatherlySettings, biobank_between
from ui import cache, honest, persist
from ui import format as fmt
from ui.context import Context
from ui.downloads import (
    release_downloads,
    release_table_download,
    report_download,
    sidebar_verification,
)
from ui.downloads import table_download as _download
from ui.heatherly_charts import tradeoff_figure
from ui.method_view import MethodView, Run, Shown, run
from ui.parameter_widgets import choices_of
from ui.risk_charts import cdf_frame, distinguishability_cdf_figure
from ui.study import remember

CDM_CONSTRAINTS = "OMOP CDM's own hierarchy (concept_ancestor)"  # offered for a CDM's standard concepts only
CONSTRAINT_MODES = {
    "PheWAS codes (the paper's)": "phecode",
    "ICD-9-CM hierarchy at a level": "icd9",
    "No constraint": "none",
    CDM_CONSTRAINTS: "cdm",  # issue 37: codes under one concept two levels below the CDM tree's root
}
TRADEOFF_KS = (2, 3, 5, 10, 20)
LOCAL_HELP = {  # the paper's measures, explained where their columns are shown (issue 16)
    "release": st.column_config.TextColumn("release", help=help_for("demo"), pinned=True),
    "DC Local %": st.column_config.NumberColumn("DC Local %", help=help_for("dc_local"), format="%.1f"),
    "CC Local %": st.column_config.NumberColumn("CC Local %", help=help_for("cc_local"), format="%.1f"),
}
# widget keys kept across page switches (ui/persist.py)
persist.register(
    {
        "hea_constraints": "PheWAS codes (the paper's)",
        "hea_level": ICD9_LEVELS[2],
        "hea_complete": HeatherlySettings.complete,  # on: the paper's procedure left records below k
        "hea_completion": HeatherlySettings.completion,
        "hea_export": "One set of codes per patient (papers' form)",
        "hea_shown_cohort": persist.LAZY,
        "hea_shown_population": persist.LAZY,
        "heat_constraints": "PheWAS codes (the paper's)",
        "heat_level": ICD9_LEVELS[2],
        "heat_complete": False,
        "heat_ks": [2, 5, 10],
        "profiles_export": "One set of codes per patient (papers' form)",
    }
)
EXPORTS = {
    "One set of codes per patient (papers' form)": False,
    "Keep visits": True,
}


def export_choice(key: str, *, allowed: bool = True) -> bool:
    """The release's export structure (issue 12): one set of codes per patient, or visits kept. The
    release is verified (and completed) for the structure chosen; returns `with_visits`."""
    label = st.radio(
        "Export",
        list(EXPORTS),
        horizontal=True,
        key=key,
        disabled=not allowed,
        help="What the release file holds: patient_id, code (one set per patient, as the papers release) "
        "or patient_id, visit, code. With visits, a look-alike must hold the known codes within one of "
        "its visits, so reaching k costs more.",
    )
    return EXPORTS[label] and allowed


# ------------------------------------------------------------------------- groups and engine calls
def _groups(ctx: Context) -> dict[str, Records]:
    """Cohort and population, and the biobank when the dataset names one lying between them
    (`engine.study.runs.biobank_between`, the rule the study's runs use)."""
    groups = {"cohort": ctx.cohort, "population": ctx.population}
    bio = biobank_between(ctx.dataset, ctx.population_group, ctx.cohort_group, ctx.cohort, ctx.population)
    if bio is not None:
        groups["biobank"] = bio
    return groups


_COMPARISONS, _BEFORE = 24, 16  # bounds of the view's memos (ui.cache)


def scope_comparison(ctx: Context, settings: HeatherlySettings, label: str) -> ScopeComparison:
    """`compare_scopes` of `settings` (its scope aside) under a progress bar with Cancel
    (`_comparison_run`); a cancelled comparison stops the page's run here."""
    key, one = _comparison_run(ctx, settings, label)
    result = run(ctx, key, settings, one)
    if result is None:
        st.stop()
    return result


def _comparison_run(
    ctx: Context, settings: HeatherlySettings, label: str
) -> tuple[str, Run[ScopeComparison]]:
    """The run of `compare_scopes` of `settings` (`ui.method_view.Run`; their scope aside) and its
    progress key: memoized per groups' content fingerprints and parameters
    (`ui.cache`: shared by the server's sessions on the shipped sample, else in this session),
    computed with the scopes in processes of their own (fan-out). Without the completion pass the
    strategy is moot: one key for the paper's procedure, whichever is asked."""
    s = settings if settings.complete else replace(settings, completion=HeatherlySettings.completion)
    groups = _groups(ctx)
    concepts = ctx.dataset.concepts if cdm_depth(s.constraints) is not None else None  # the CDM's tree
    key = (
        tuple((g, r.fingerprint) for g, r in sorted(groups.items())),
        int(s.k),
        s.constraints,
        bool(s.complete),
        bool(s.with_visits),
        s.completion,
        None if concepts is None else concepts.fingerprint,
    )

    # read here, in the script run: the comparison runs in a pool worker, which has no session
    shown_first = (
        ctx.adversary.scope == "cohort" and st.session_state.get("hea_shown_cohort", "DEMO_D") == "DEMO_D"
    )

    def compare(step) -> ScopeComparison:
        return compare_scopes(
            groups,
            ctx.cohort.patient_ids,
            s.k,
            constraints=s.constraints,
            complete=s.complete,
            with_visits=s.with_visits,
            progress=step,
            parallel=True,
            while_waiting=(lambda res: _shown_first(ctx, s, res)) if shown_first else None,
            completion=s.completion,
            concepts=concepts,
        )

    def compute(step) -> ScopeComparison:
        held = cache.held("scope comparisons", key, data=ctx)
        if held is not None:
            return held
        return cache.memo("scope comparisons", key, lambda: compare(step), size=_COMPARISONS, data=ctx)

    return f"hea_cmp_{s.k}_{s.complete}_{s.completion}", Run(label, compute, stale=False)


def shown_release(ctx: Context, settings: HeatherlySettings, res: GroupRelease) -> Release:
    """The release of `settings` as the tab shows it: checked against the cohort it was made from,
    and recorded as the preview of `settings` (`ui.study.remember`: "Add to study" reuses it). Recorded
    first, so that every figure of it the run memoizes is held where the study's preview is (the
    server's store on the shipped sample, else the session's)."""
    release = res.release.checked(ctx.cohort)
    remember(ctx, settings, release)
    return release


def _shown_first(ctx: Context, settings: HeatherlySettings, res: GroupRelease) -> None:
    """What the tab reads of DEMO_D, the release it shows first under a cohort adversary (the caller
    asks only then), once the comparison is back: its headline and file figures and the download's
    verification under the sidebar's adversary (`render_anonymize`). Made while the other scopes are
    anonymized (`compare_scopes(while_waiting=...)`, in the worker) and kept in the cache, so the page's
    run finds them. The download's gate itself (with the study's other releases, issue 35) is judged in
    the page's run: the worker has no session, hence no study."""
    release = shown_release(ctx, replace(settings, scope="cohort"), res)
    honest.figures(release, ctx.cohort)
    honest.file_figures(release, ctx.cohort)
    if release.source is not None and res.verification.ok:
        sidebar_verification(release, res.verification, ctx.adversary, settings.k, ctx.population)


def compare_three_scopes(
    ctx: Context,
    k: int,
    constraints: str = "phecode",
    complete: bool = False,
    with_visits: bool = False,
    completion: str = HeatherlySettings.completion,
) -> ScopeComparison:
    """The three scopes at k, for this tab and the PheWAS page's comparison: a comparison only,
    nothing enters the study (only the "Add to study" button does)."""
    settings = HeatherlySettings(
        k=k, constraints=constraints, complete=complete, with_visits=with_visits, completion=completion
    )
    return scope_comparison(ctx, settings, "Anonymizing the three scopes")


def _before(ctx: Context, group: Records, adversary) -> np.ndarray:
    """Distinguishability of the original cohort against the original group (same adversary), keyed
    on both groups' content fingerprints and the adversary."""
    return cache.memo(
        "heatherly before",
        (ctx.cohort.fingerprint, group.fingerprint, adversary.label),
        lambda: risk.original_distinguishability(ctx.cohort, adversary, group),
        size=_BEFORE,
        data=ctx,
    )


# ------------------------------------------------------------------------------------ views
def _constraints(prefix: str, ctx: Context) -> str:
    cdm = ctx.dataset.concepts is not None  # events read from a CDM in standard concepts, with its tables
    offered = [m for m in CONSTRAINT_MODES if cdm or m != CDM_CONSTRAINTS]
    persist.seed_choice(f"{prefix}constraints", offered[0], offered)  # a CDM's choice, other data loaded
    mode = st.selectbox(
        "Utility constraints",
        offered,
        key=f"{prefix}constraints",
        help="Which codes may be generalized together: codes of one PheWAS code (Heatherly's choice), "
        "codes sharing an ICD-9-CM ancestor at the chosen level, any codes, or (an OMOP CDM read in "
        "standard concepts) codes under one concept two levels below the root of the CDM's own hierarchy.",
    )
    value = CONSTRAINT_MODES[mode]
    if value == "icd9":
        level = st.selectbox("ICD-9-CM level", ICD9_LEVELS, key=f"{prefix}level")
        value = f"icd9:{level}"
    return value


# ------------------------------------------------------------------------------- Anonymize tab
def _settings_section(ctx: Context) -> HeatherlySettings:
    st.subheader("Generalization under utility constraints (Heatherly 2013)")
    st.caption(
        "Codes held by fewer than k records are binned by frequency and generalized together within each "
        "bin as the utility constraints allow; adjacent bins are then merged (1-2, 3-4, ...) until every "
        "frequency below k is one bin; what is still below k is suppressed. The paper's privacy model asks "
        "that every single visit's codes be held by k records; its procedure guarantees it for single "
        "codes only, so every release is verified by the risk engine and the records still below k are "
        f"shown. k = **{ctx.k}** from the sidebar; the attacker knows the codes of one visit (the paper's "
        "model, whatever the sidebar's knowledge), and the sidebar's scope picks the release shown first. "
        "A download is verified again under the sidebar's adversary and k."
    )
    c1, c2 = st.columns([3, 2])
    with c1:
        constraints = _constraints("hea_", ctx)
    with c2:
        complete = st.checkbox(
            "Completion pass (beyond the paper)",
            key="hea_complete",
            help="Generalize further, then suppress, until every visit of the cohort meets k. Off: the "
            "paper's procedure alone, which guarantees single codes only: records may stay below k.",
        )
        completion = st.selectbox(
            "Completion strategy",
            choices_of(parameter_of(HeatherlySettings, "completion")),
            key="hea_completion",
            format_func=COMPLETION_WORDS.get,
            disabled=not complete,
            help="Which items the completion pass suppresses first: the rarest, or those whose loss "
            "changes the fewest PheWAS case and control statuses (issue 36; the PheWAS page compares both).",
        )
    with_visits = export_choice("hea_export", allowed=ctx.cohort.has_visits)
    return HeatherlySettings(
        k=int(ctx.k),
        constraints=constraints,
        complete=complete,
        with_visits=with_visits,
        completion=completion,
    )  # the scope is the release shown's (`_results`)


def _runs(ctx: Context, settings: HeatherlySettings) -> dict[str, Run[ScopeComparison]]:
    return dict([_comparison_run(ctx, settings, "Anonymizing the three scopes")])


def _results(
    ctx: Context, settings: HeatherlySettings, outcomes: dict[str, ScopeComparison], shown_as: Shown
) -> None:
    """The comparison's tables, the release shown (its verdict, files, "Add to study"), its risk and
    records."""
    (cmp_,) = outcomes.values()
    k, complete = settings.k, settings.complete
    if "biobank" not in cmp_.results:
        st.info("No biobank group between the cohort and the population: DEMO_B is left out.")

    st.markdown("**The three scopes of Figure 14, side by side**")
    summary = scope_summary(cmp_)
    st.dataframe(summary, hide_index=True, column_config=LOCAL_HELP)
    _download(summary, "Download the three-scope comparison (CSV)", "heatherly_scopes.csv", "hea_dl_scopes")

    if complete:
        plain = scope_comparison(
            ctx, replace(settings, complete=False), "The paper's procedure, for the cost of completion"
        )
        cost = scope_summary(plain)[["release", "records below k", "DC Local %", "CC Local %"]].merge(
            summary[["release", "records below k", "DC Local %", "CC Local %"]],
            on="release",
            suffixes=(" (paper)", " (completed)"),
        )
        st.markdown("**Extra cost of the completion pass**")
        st.dataframe(cost, hide_index=True)
        _download(cost, "Download the completion cost (CSV)", "heatherly_completion.csv", "hea_dl_cost")

    titles = ["Table 1: summary", "Table 2: Diagnosis Count", "Table 3: Code Count"]
    counted = {  # the tables' counts of people, under the small-cell policy (issue 28)
        "table1": lambda f: ["Population Size", "Diagnosis Count"],
        "table2": lambda f: [c for c in f.columns if str(c).endswith(": count")],
        "table3": lambda f: [],  # codes, not people
    }
    for tab, title, (frame, name) in zip(
        st.tabs(titles),
        titles,
        ((cmp_.table1(), "table1"), (cmp_.table2(), "table2"), (cmp_.table3(), "table3")),
        strict=True,
    ):
        with tab:
            st.dataframe(fmt.shown_frame(frame), hide_index=True)  # issue 26: "—", never "None"
            _download(
                frame,
                f"Download {title} (CSV)",
                f"heatherly_{name}.csv",
                f"hea_dl_{name}",
                counts=counted[name](frame),  # patients, (patient, diagnosis) pairs (issue 28)
            )
    st.caption(
        "Diagnosis Count: (record, diagnosis) pairs, a generalized item counting once. Code Count: ICD-9 "
        "codes some released item stands for (so an extracted cohort may cover codes it did not hold). "
        "SD %: share of the whole population's figure; Local %: of the same records' original figure. "
        "Without generalization: codes below k removed instead of grouped. A dash (—): the figure does "
        "not apply (an original dataset is not a share of itself)."
    )

    names = [SCOPE_NAMES[s] for s in cmp_.results]
    default = "DEMO_S" if ctx.adversary.scope == "population" else "DEMO_D"
    persist.seed(f"hea_shown_{ctx.adversary.scope}", default)
    if st.session_state[f"hea_shown_{ctx.adversary.scope}"] not in names:
        st.session_state[f"hea_shown_{ctx.adversary.scope}"] = default
    shown = st.radio("Release shown", names, horizontal=True, key=f"hea_shown_{ctx.adversary.scope}")
    scope = next(s for s in cmp_.results if SCOPE_NAMES[s] == shown)
    res = cmp_.results[scope]
    settings = replace(settings, scope=scope)
    # the release with the cohort it was made from (the download helper and the study need it), the
    # comparison's run recorded as the preview: Add does not rerun it
    release, verification = shown_release(ctx, settings, res), res.verification
    st.caption(f"Export: {export_label(release.shows_visits)}.")
    row = summary.set_index("release").loc[shown]
    honest.headline(
        release,
        ctx.cohort,
        internal=[
            (
                "Diagnosis Count, Local % (the paper's measure)",
                f"{row['DC Local %']:.1f}%",
                help_for("dc_local", "method_internal"),
            ),
            (
                "Code Count, Local % (the paper's measure)",
                f"{row['CC Local %']:.1f}%",
                help_for("cc_local", "method_internal"),
            ),
        ],
    )
    if verification.ok:
        st.success(verification.message())
    elif not complete:
        st.info("The completion pass (above) generalizes and suppresses until every visit meets k.")
    # the files, only through the export gate under the sidebar's adversary and k
    offered = release_downloads(
        release, verification, ctx.adversary, k, ctx.population, name=f"heatherly_{shown}", key="hea_dl"
    )
    if offered:
        report_download(
            lambda: json.dumps(release_summary(res, cmp_), indent=2, default=str),  # built on click
            "Download the report (JSON)",
            f"heatherly_{shown}_report.json",
            "hea_dl_report",
        )
    shown_as.add(settings, f"Heatherly {shown} k={k}", "hea_study")

    left, right = st.columns(2)
    with left:
        st.markdown(f"**Risk before and after** ({verification.adversary.label})")
        group = _groups(ctx)[scope]
        before = _before(ctx, group, verification.adversary)
        curves = {"original": before, shown: verification.distinguishability}
        st.plotly_chart(distinguishability_cdf_figure(curves, k, highlight=shown), key="hea_cdf")
        _download(
            cdf_frame(curves),
            "Download the risk CDF, before and after (CSV)",
            "heatherly_cdf.csv",
            "hea_dl_cdf",
        )
    with right:
        st.markdown("**Records before and after** (Figure 13; generalized items in ⟨ ⟩)")
        options = [str(p) for p in release.records.patient_ids]
        patients = st.multiselect(
            "Records", options, default=example_patients(release), key=f"hea_patients_{shown}"
        )
        if patients:
            view = figure13_table(ctx.cohort, release, patients)
            st.dataframe(view, hide_index=True)
            release_table_download(
                view,
                release,
                verification,
                ctx.adversary,
                k,
                ctx.population,
                label="Download these records (CSV)",
                file_name="heatherly_examples.csv",
                key="hea_dl_examples",
            )
    with st.expander(f"Procedure figures ({shown})"):
        st.json(release.loss)


# the Heatherly tab on the view protocol: its run, the three scopes compared, never waits for "Run":
# nothing held to grey
render_anonymize = MethodView("heatherly", _settings_section, _runs, _results)


# ------------------------------------------------------------------------------ Trade-offs tab


def render_tradeoffs(ctx: Context) -> None:
    """Retention (DC, CC Local %) and residual risk against k for the three scopes."""
    st.subheader("Generalization (Heatherly 2013): retention and residual risk against k")
    c1, c2 = st.columns([3, 2])
    with c1:
        constraints = _constraints("heat_", ctx)
    with c2:
        complete = st.checkbox("Completion pass", key="heat_complete")
    ks = st.multiselect("k values", list(TRADEOFF_KS), key="heat_ks")
    if not ks:
        st.warning("Choose at least one k.")
        return
    frame = heatherly_sweep_k(
        ks,
        lambda k: scope_comparison(
            ctx, HeatherlySettings(k=k, constraints=constraints, complete=complete), f"k = {k}"
        ),
    )
    st.plotly_chart(tradeoff_figure(frame), key="heat_fig")
    st.dataframe(frame, hide_index=True, column_config=LOCAL_HELP)
    _download(frame, "Download the sweep (CSV)", "heatherly_tradeoffs.csv", "heat_dl_sweep")
