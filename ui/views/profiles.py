"""Clinical profiles view of the Anonymize and Trade-offs pages (Loukides et al. 2010, PNAS).

`render_anonymize(ctx)`: the filtering condition is the sidebar's knowledge (single visit / all
visits), k the sidebar's; the utility policy editor (add or remove a disease, edit its codes; CSV
upload and download), the suppression limit, UGACLIP, ACLIP or both. Shows the extracted privacy
policy, the policy check and the risk engine's verdict, Table 1 (utility constraints satisfied, side
by side), suppression, relative error of case-count queries, the risk CDF before and after, and the
download once verified.
`render_tradeoffs(ctx)`: Figures 2-4 live on the loaded data: the original distinguishability CDF for
both filtering conditions, utility constraints satisfied and relative error against k.

The attacker is the paper's (assumption iii): they know the target is in the released cohort, so
the cohort scope is verified whatever the sidebar's scope. Engine calls are cached per session.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from engine import risk
from engine.adversary import Adversary, papers_knowledge
from engine.anonymize.policy import PrivacyPolicy, Protection, extract_policy, policy_protection
from engine.anonymize.population import export_label
from engine.anonymize.profiles import (
    ProfilesRun,
    SuppressionLimitExceeded,
    measures_table,
    trace_frame,
)
from engine.records import Records
from engine.report.glossary import help_for
from engine.study.experiments import profiles_sweep
from engine.study.parameters import parameter_of
from engine.study.runs import ProfilesSettings, RunInputs
from engine.utility.queries import (
    UtilityPolicy,
    Workload,
    case_count_workload,
    read_utility_policy,
    satisfaction_table,
    satisfaction_words,
    utility_policy_from_frame,
)
from ui import cache, errors, honest, literal, persist, state
from ui import format as fmt
from ui import progress as progress_ui
from ui.context import Context
from ui.downloads import release_downloads
from ui.downloads import table_download as _download
from ui.method_view import MethodView, Run, Shown
from ui.parameter_widgets import choices_of, widget_kwargs
from ui.profiles_charts import (
    SWEEP_LABELS,
    relative_error_figure,
    satisfied_figure,
    suppression_figure,
    worded,
)
from ui.risk_charts import cdf_frame, distinguishability_cdf_figure
from ui.state import ABSENT
from ui.views.heatherly import export_choice

METHODS = ("UGACLIP", "ACLIP")
CHOICES = ("UGACLIP", "ACLIP", "Both")
KNOWLEDGES = tuple(choices_of(parameter_of(ProfilesSettings, "knowledge")))  # PPE's filtering conditions
SWEEP_KS = (2, 5, 10, 15, 20, 25)
# widget keys kept across page switches (ui/persist.py)
persist.register(
    {
        "profiles_method": CHOICES[0],
        "profiles_limit": None,
        "profiles_sweep_ks": list(SWEEP_KS),
        "profiles_sweep_conds": list(KNOWLEDGES),
    }
)
_POLICY_KEY = "profiles_utility_policy"
_CURRENT_KEY = "profiles_utility_policy_csv"
_DEFAULT_KEY = "profiles_utility_policy_default"  # which shipped default the editor started from
_UPLOAD_ID, _SWEPT = "profiles_upload_id", "profiles_swept"  # the policy file last read; the sweep ran
state.declare(
    __name__, held=dict.fromkeys((_POLICY_KEY, _CURRENT_KEY, _DEFAULT_KEY, _UPLOAD_ID, _SWEPT), ABSENT)
)


# ------------------------------------------------------------------------- cached engine calls
# Bounds of the view's memos (ui.cache). The privacy policy and the original risk are derived from the
# cohort alone (shared on the shipped sample); a run and a sweep point read the user's utility policy
# (edited or uploaded), so they stay in this session even on the sample.
_POLICIES, _RUNS, _ORIGINALS, _SWEEP_ROWS = 8, 8, 4, 512
_PROTECTIONS, _WORKLOADS = 4, 2  # k-independent: per cohort (and filtering condition, export)


def _protection(cohort: Records, knowledge: str, with_visits: bool) -> Protection:
    """PPE's k-independent part (`policy_protection`), shared by the server's sessions on the sample
    (issue 36: 1.39 s of every new k in a new session at paper scale)."""
    return cache.memo(
        "ppe protections",
        (cohort.fingerprint, knowledge, with_visits),
        lambda: policy_protection(cohort, knowledge, within_visits=with_visits),  # type: ignore[arg-type]
        size=_PROTECTIONS,
        data=cohort,
    )


def _workload(cohort: Records) -> Workload:
    """The relative error's case-count workload of the cohort (`case_count_workload`), shared like
    `_protection` (issue 36: 0.86 s of every new k in a new session at paper scale)."""
    return cache.memo(
        "profiles workloads",
        cohort.fingerprint,
        lambda: case_count_workload(cohort),
        size=_WORKLOADS,
        data=cohort,
    )


def _policy(cohort: Records, k: int, knowledge: str, with_visits: bool = False) -> PrivacyPolicy:
    return cache.memo(
        "ppe policies",
        (cohort.fingerprint, k, knowledge, with_visits),
        lambda: extract_policy(
            cohort,
            k,
            knowledge,  # type: ignore[arg-type]
            within_visits=with_visits,
            protection=_protection(cohort, knowledge, with_visits),
        ),
        size=_POLICIES,
        data=cohort,
    )


def _run(cohort: Records, settings: ProfilesSettings, progress=None):
    """The run of `settings` (`ProfilesSettings.run_result`: what "Add to study", the CLI and a study
    run with; PPE shared by both methods), or the SuppressionLimitExceeded it raised (memoized too, so
    the message stays). `progress`: the progress bar's callback (ui/progress.py; not in the key)."""

    def run():
        try:
            return settings.run_result(
                RunInputs(cohort, cohort),
                progress,
                policy=_policy(cohort, settings.k, settings.knowledge, settings.with_visits),
                workload=_workload(cohort),
            )
        except SuppressionLimitExceeded as exc:
            return exc

    return cache.memo("profiles runs", (cohort.fingerprint, settings), run, size=_RUNS)


def _original(cohort: Records, knowledge: str) -> np.ndarray:
    return cache.memo(
        "profiles original risk",
        (cohort.fingerprint, knowledge),
        lambda: risk.original_distinguishability(cohort, Adversary("cohort", knowledge)),  # type: ignore[arg-type]
        size=_ORIGINALS,
        data=cohort,
    )


def _sweep_row(cohort: Records, k: int, knowledge: str, method: str, policy_csv: str) -> dict:
    return cache.memo(
        "profiles sweep rows",
        (cohort.fingerprint, k, knowledge, method, policy_csv),
        lambda: _run(
            cohort,
            ProfilesSettings(algorithm=method, k=k, knowledge=knowledge, utility_policy_csv=policy_csv),
        ).summary(),
        size=_SWEEP_ROWS,
    )


# ------------------------------------------------------------------------------ utility policy
def _policy_editor(cohort: Records | None = None, concepts=None) -> UtilityPolicy:
    """The utility policy: the shipped default for the data's vocabulary (Table 1 in ICD-9-CM, its
    ICD-10-CM form, or both for mixed data; an OMOP CDM's own hierarchy for its standard concepts,
    `concepts`; `engine.io.imports.default_utility_policy`), an uploaded CSV, edited in place. Data
    of another vocabulary loaded later starts from its own default."""
    from engine.io.imports import default_utility_policy

    default, label = default_utility_policy(cohort.items if cohort is not None else [], concepts)
    if _POLICY_KEY not in st.session_state or st.session_state.get(_DEFAULT_KEY) != label:
        st.session_state[_POLICY_KEY] = default.to_frame()
        st.session_state[_DEFAULT_KEY] = label
    st.caption(f"Starting point: {label}.")
    up = st.file_uploader(
        "Load a utility policy (CSV: disease, icd9_codes, comment)", type=["csv"], key="profiles_upload"
    )
    if up is not None and st.session_state.get(_UPLOAD_ID) != up.file_id:
        try:
            st.session_state[_POLICY_KEY] = read_utility_policy(up, name=up.name).to_frame()
            st.session_state[_UPLOAD_ID] = up.file_id
        except Exception as exc:  # a UserError's message, else a reference (ui/errors.py)
            errors.show(exc)
    if st.button("Reset to the default policy", key="profiles_reset"):
        st.session_state[_POLICY_KEY] = default.to_frame()
    edited = st.data_editor(
        st.session_state[_POLICY_KEY],
        num_rows="dynamic",
        width="stretch",
        key="profiles_policy_editor",
        column_config={
            "disease": st.column_config.TextColumn("disease", required=True),
            "icd9_codes": st.column_config.TextColumn("codes (space-separated)", width="large"),
            "concept_codes": st.column_config.TextColumn("CDM concepts (space-separated)", width="large"),
            "comment": st.column_config.TextColumn("clinical reasoning"),
        },
    )
    policy = utility_policy_from_frame(edited, "utility policy table")  # refused: shown by `drive`
    _download(
        policy.to_frame(), "Download the utility policy (CSV)", "utility_policy.csv", "profiles_policy_dl"
    )
    st.session_state[_CURRENT_KEY] = policy.to_csv()  # the edited policy, for the Trade-offs tab
    return policy


# ------------------------------------------------------------------------------------ anonymize
@dataclass(frozen=True)
class _Parameters:
    """The tab's settings (`ui.method_view`); `methods`: UGACLIP, ACLIP or both, each run at its own
    key (a method already run is found in the cache, not asked for "Run" again)."""

    k: int
    knowledge: str
    policy_csv: str
    limit: int | None
    with_visits: bool
    methods: tuple[str, ...]

    def settings(self, method: str) -> ProfilesSettings:
        """The typed settings a study records of `method`'s run."""
        return ProfilesSettings(
            algorithm=method,
            k=self.k,
            knowledge=self.knowledge,
            utility_policy_csv=self.policy_csv,
            max_suppressed=self.limit,
            with_visits=self.with_visits,
        )


_RUN = "profiles_run_"  # the run key of each method: profiles_run_UGACLIP, profiles_run_ACLIP


def _settings_section(ctx: Context) -> _Parameters | None:
    st.subheader("Clinical profiles: PPE, UGACLIP and ACLIP (Loukides et al. 2010)")
    knowledge, k = (
        papers_knowledge(ctx.adversary.knowledge),
        int(ctx.k),
    )  # issue 39: whole record -> all visits
    st.caption(
        f"Filtering condition: **{knowledge.replace('_', ' ')}** (sidebar knowledge); k = {k} (sidebar). "
        "The attacker knows the target is in the released cohort (the paper's assumption iii): the cohort "
        "scope is verified"
        + ("" if ctx.adversary.scope == "cohort" else ", not the sidebar's population scope")
        + "."
    )
    c1, c2 = st.columns([1, 1])
    choice = c1.radio("Method", CHOICES, horizontal=True, key="profiles_method", help=help_for("ugaclip"))
    limit = c2.number_input(
        "Suppression limit (distinct codes; empty = none)",
        **widget_kwargs(parameter_of(ProfilesSettings, "max_suppressed")),
        value=None,
        step=1,
        key="profiles_limit",
    )
    # a release that keeps visits is protected against single-visit knowledge only
    with_visits = export_choice(
        "profiles_export", allowed=knowledge == "single_visit" and ctx.cohort.has_visits
    )
    with st.expander("Utility policy (diseases whose case counts must be preserved)", expanded=False):
        utility = _policy_editor(ctx.cohort, ctx.dataset.concepts)
    if k < 2:
        st.info("Choose k >= 2 in the sidebar.")
        return None
    with st.spinner("Extracting the privacy policy (PPE)..."):
        policy = _policy(ctx.cohort, k, knowledge, with_visits)
    _policy_summary(policy)
    methods = METHODS if choice == "Both" else (choice,)
    lim = None if limit is None else int(limit)
    return _Parameters(k, knowledge, utility.to_csv(), lim, with_visits, methods)


def _runs(ctx: Context, p: _Parameters) -> dict[str, Run]:
    label = f"on {ctx.cohort.n_patients:,} records"
    return {
        f"{_RUN}{m}": Run(f"{m} {label}", lambda step, m=m: _run(ctx.cohort, p.settings(m), step), ask=True)
        for m in p.methods
    }


def _stale_section(p: _Parameters) -> str:
    knowledge = p.knowledge.replace("_", " ")
    return f"Results of the previous parameters (k = {p.k}, {knowledge}): press Run to update"


def _results(ctx: Context, p: _Parameters, outcomes: dict, shown: Shown) -> None:
    """The runs' measures, Table 1, risk curves and releases; `shown.stale`: a previous run's, greyed."""
    runs: dict[str, ProfilesRun] = {}
    for key, out in outcomes.items():
        if isinstance(out, SuppressionLimitExceeded):  # memoized with the run: its message stays
            literal.error(out)  # names the constraint's codes
        else:
            runs[key.removeprefix(_RUN)] = out
    if not runs:
        return
    before = _original(ctx.cohort, p.knowledge)
    _measures(runs)
    _table_1(runs)
    curves = {"original": before} | {
        f"{m} released": r.verification.distinguishability for m, r in runs.items()
    }
    st.plotly_chart(
        distinguishability_cdf_figure(
            curves, p.k, "Distinguishability before and after", dashed=[f"{m} released" for m in runs]
        ),
        key="profiles_cdf",
    )
    _download(
        cdf_frame(curves),
        "Download the risk CDF, before and after (CSV)",
        "profiles_cdf.csv",
        "profiles_cdf_dl",
    )
    for m, r in runs.items():
        _release_block(ctx, m, r)
        # this run's release: Add does not rerun it
        shown.add(p.settings(m), f"{m} k={p.k}", f"profiles_{m}_study", r.release.checked(ctx.cohort))


# the clinical profiles tab on the view protocol: the settings section ends with PPE's privacy policy;
# one run per method, each waiting for "Run" after a change (1.7-2.6 s through the app on the sample)
render_anonymize = MethodView("profiles", _settings_section, _runs, _results, _stale_section)


def _policy_summary(policy: PrivacyPolicy) -> None:
    a, b, c, d = st.columns(4)
    a.metric("Privacy constraints", f"{len(policy):,}", help=help_for("ppe"))
    b.metric("Collected", f"{policy.n_collected:,}")
    c.metric("Already protected", f"{policy.n_already_protected:,}")
    d.metric("Covered by a superset", f"{policy.n_covered:,}")
    frame = policy.to_frame()
    largest = frame.sort_values(["size", "support"], ascending=[False, True], kind="stable").head(10)
    with st.expander("The extracted privacy policy (largest constraints first)"):
        st.dataframe(largest, hide_index=True, width="stretch")
        _download(frame, "Download the privacy policy (CSV)", "privacy_policy.csv", "profiles_pp_dl")


def _measures(runs: dict[str, ProfilesRun]) -> None:
    table = measures_table(runs)
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={
            "NCP": st.column_config.NumberColumn("NCP", help=help_for("ncp")),
            "RE mean": st.column_config.NumberColumn("RE mean", help=help_for("re")),
            "RE sd": st.column_config.NumberColumn("RE sd", help=help_for("re")),
            "utility constraints satisfied": st.column_config.TextColumn(
                "utility constraints satisfied", help=help_for("utility_constraint")
            ),
        },
    )
    _download(table, "Download the measures (CSV)", "profiles_measures.csv", "profiles_measures_dl")


def _table_1(runs: dict[str, ProfilesRun]) -> None:
    st.markdown("**Utility constraints satisfied** (the layout of the paper's Table 1)")
    table = satisfaction_table({m: r.satisfaction for m, r in runs.items()})
    st.dataframe(table, hide_index=True, width="stretch")
    _download(table, "Download Table 1 (CSV)", "profiles_table1.csv", "profiles_t1_dl")


def _release_block(ctx: Context, method: str, run: ProfilesRun) -> None:
    st.markdown(f"**{method} release**")
    st.caption(f"Export: {export_label(run.release.shows_visits)}.")
    if run.verified:
        st.success(f"{run.check.message()} {run.verification.message()}")
    else:
        st.error(f"{run.check.message()} {run.verification.message()} No download until verified.")
        st.dataframe(run.check.failing(), hide_index=True)
    s = run.summary()
    if s["utility_constraints"] and not s["utility_constraints_applying"]:
        # issue 37: PNAS Table 1's ICD codes on a SNOMED CDM were "18 of 18 met"
        st.warning(
            f"{method}: {satisfaction_words(run.satisfaction)}; no constraint measures what the release "
            "keeps. Load or edit a policy in the data's codes."
        )
    honest.headline(
        run.release,
        ctx.cohort,
        internal=[
            (
                "Utility constraints met (method-internal)",
                satisfaction_words(run.satisfaction),
                help_for("utility_constraint", "method_internal"),
            ),
            ("NCP (method-internal)", fmt.percent(s["ncp"], 2), help_for("ncp", "method_internal")),
            (
                "Mean relative error (method-internal)",
                fmt.percent(s["re_mean"]),
                help_for("re", "method_internal"),
            ),
        ],
    )
    # the files (gzip: items of many codes repeat long labels), only through the export gate under
    # the sidebar's adversary and k; a violated privacy policy refuses them too
    release_downloads(
        run.release.checked(ctx.cohort),  # with its source cohort, as the helper requires
        run.verification,
        ctx.adversary,
        int(ctx.k),
        ctx.population,
        name=method.lower(),
        key=f"profiles_{method}_dl",
        compress=True,
        blocked=None if run.check.ok else run.check.message(),
    )
    with st.expander(f"{method}: generalization and suppression steps"):
        concepts = ctx.dataset.concepts  # a CDM's steps name its concepts (issue 37)
        trace = trace_frame(run.release, None if concepts is None else concepts.names)
        st.dataframe(trace.head(500), hide_index=True, width="stretch")
        _download(
            trace,
            f"Download the {method} steps (CSV)",
            f"{method.lower()}_steps.csv",
            f"profiles_{method}_trace_dl",
        )


# ------------------------------------------------------------------------------------ trade-offs
def render_tradeoffs(ctx: Context) -> None:
    st.subheader("Clinical profiles: risk and utility against k (PNAS Figures 2-4)")
    curves = {f"{kn.replace('_', ' ')}": _original(ctx.cohort, kn) for kn in KNOWLEDGES}
    st.plotly_chart(
        distinguishability_cdf_figure(
            curves, int(ctx.k), "Figure 2: distinguishability of the original cohort"
        ),
        key="profiles_fig2",
    )
    fig2 = cdf_frame(curves)
    _download(fig2, "Download Figure 2 data (CSV)", "profiles_figure2.csv", "profiles_fig2_dl")
    summary = pd.DataFrame(
        [
            {
                "filtering condition": name,
                "unique": f"{np.mean(d <= 1):.1%}",
                f"below {ctx.k}": f"{np.mean(d < ctx.k):.1%}",
            }
            for name, d in curves.items()
        ]
    )
    st.dataframe(summary, hide_index=True)
    ks = st.multiselect("Values of k", list(range(2, 26)), key="profiles_sweep_ks")
    conds = st.multiselect("Filtering conditions", list(KNOWLEDGES), key="profiles_sweep_conds")
    current = st.session_state.get(_CURRENT_KEY)
    if current is None:  # the Anonymize tab not visited: the default for the data's vocabulary
        from engine.io.imports import default_utility_policy

        policy = default_utility_policy(ctx.cohort.items)[0]
    else:
        policy = read_utility_policy(io.StringIO(current))
    st.caption(
        f"Each point runs PPE and UGACLIP / ACLIP on {ctx.cohort.n_patients:,} records with the utility policy "
        f"of the Anonymize tab ({len(policy.diseases)} diseases); results are cached for the session."
    )
    if not st.button("Run the sweep", key="profiles_sweep_run") and not st.session_state.get(_SWEPT):
        return
    st.session_state[_SWEPT] = True
    jobs = [(k, kn, m) for kn in conds for k in sorted(ks) for m in METHODS]
    csv = policy.to_csv()

    def compute(step) -> pd.DataFrame:
        return profiles_sweep(
            lambda k, kn, m: _sweep_row(ctx.cohort, k, kn, m, csv),
            ks,
            conds,
            METHODS,
            progress=step,
        )

    sweep = progress_ui.run(
        "Sweep", compute, key="profiles_sweep", job=(ctx.cohort.fingerprint, tuple(jobs), csv)
    )
    if sweep is None or sweep.empty:
        return
    st.dataframe(worded(sweep).rename(columns=SWEEP_LABELS), hide_index=True, width="stretch")
    st.plotly_chart(satisfied_figure(sweep), key="profiles_fig3")
    st.plotly_chart(relative_error_figure(sweep), key="profiles_fig4")
    st.plotly_chart(suppression_figure(sweep), key="profiles_supp")
    _download(sweep, "Download the sweep (CSV)", "profiles_sweep.csv", "profiles_sweep_dl")
