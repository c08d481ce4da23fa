"""GCCens view of the Anonymize and Trade-offs pages (Tamersoy 2010; thesis chapter III).

`render_anonymize(ctx)`: codes to release, a universal cap or an editable per-code cap table, the
variant (faithful Algorithm 1 or targeted), k from the sidebar; the risk engine's verdict; the risk
CDF before and after; CUL statistics and distribution; faithful vs targeted retention; released
records beside the originals; the download (long-form CSV + JSON report) once verified.
`render_tradeoffs(ctx)`: Tables 1 and 2 live on the loaded data (k from 2 to 25 at caps 3; universal
cap from 3 to 10 at k = 5), as tables and charts.

The attacker knows every code of the target with its repeat count (the paper's model); the scope
(k-map against the population, or k-anonymity within the cohort) is the sidebar's. Engine calls are
memoized (`ui.cache`) on the records' fingerprints and the parameters: shared by the server's sessions
on the shipped sample, in this session only on an upload.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine import risk
from engine.adversary import Adversary
from engine.anonymize.censor import (
    VARIANTS,
    CensorProblem,
    gccens_run,
    report,
)
from engine.records import Records
from engine.release import Release
from engine.report.glossary import help_for
from engine.study.compare import code_set_text
from engine.study.experiments import GCCENS_COLUMNS, gccens_point
from engine.study.parameters import parameter_of
from engine.study.runs import (
    OPENING_CODES,
    CodeSelection,
    GCCensInput,
    GCCensSettings,
    RunInputs,
    code_cap,
    code_frequency_order,
)
from engine.utility.censoring import (
    CULStatistics,
    censoring_loss,
    cul_statistics,
    records_side_by_side,
    release_cul,
)
from ui import cache, figure_memo, honest, persist
from ui import format as fmt
from ui import progress as progress_ui
from ui.context import Context
from ui.downloads import release_downloads, release_table_download, report_download
from ui.downloads import table_download as _download
from ui.fingerprints import release_key
from ui.gccens_charts import (
    LABELS,
    cul_histogram,
    labelled,
    retention_figure,
    sweep_figure,
)
from ui.literal import md
from ui.method_view import MethodView, Run, Shown, run
from ui.parameter_widgets import choices_of, widget_kwargs
from ui.risk_charts import cdf_frame, distinguishability_cdf_figure
from ui.study import data_of, derived_from, previewed, verify_under

CODE_MODES = (
    "Tamersoy's four codes: 250, 272, 401, 724 (3-digit; E11, E78, I10, M54 on ICD-10-CM data)",
    "Most frequent codes",
    "Chosen codes",
    "All codes",
)
_MODE_NAMES = dict(zip(CODE_MODES, ("paper", "top", "chosen", "all"), strict=True))
CAP_MODES = ("Per-code caps", "Universal cap")  # per-code first: the paper's scan of S is the default
TABLE1_KS = tuple(range(2, 26))
TABLE2_CAPS = tuple(range(3, 11))
# widget keys kept across page switches (ui/persist.py); per-code cap edits too (`_caps`)
# the Anonymize tab opens on `runs.OPENING_CODES` (the paper's codes: they verify and stay live, issue 35
# finding 6); the Trade-offs tab's
# Tables 1-2 sweep Tamersoy's four codes, as the paper
_FIRST_MODE = {
    "gcc_": next(m for m, n in _MODE_NAMES.items() if n == OPENING_CODES.mode),
    "gcct_": CODE_MODES[0],
}
for _p in ("gcc_", "gcct_"):
    persist.register(
        {
            f"{_p}mode": _FIRST_MODE[_p],
            f"{_p}top": parameter_of(CodeSelection, "top_n").default,
            f"{_p}codes": persist.LAZY,
            f"{_p}variant": parameter_of(GCCensSettings, "variant").default,
            f"{_p}capmode": CAP_MODES[0],
            f"{_p}cap": 3,
        }
    )

# Bounds of the view's memos (ui.cache). Measures of a release and the cohort's code order: every
# rerun (a change of k) drew them again: a fifth of the Anonymize page's time under load (bench/load_ws.py).
_MEASURES, _CODE_ORDERS, _RELEASES, _INPUTS, _BASELINES, _SWEEP_ROWS = 32, 8, 32, 6, 24, 256


def _release_measures(release):
    """(per-record CUL, CUL statistics against the capped record, against the original record),
    keyed on everything they read (`release_key`): the export fingerprint alone mixed the measures of
    two cohorts' releases (found by `make test` in a loop). The statistics are those `gccens_run`
    measured on this release (`loss["cul"]`, `loss["cul_vs_original"]`: the same function on the same
    records), computed here only for a release that lacks them (issue 24: they were computed twice)."""

    def compute():
        loss = censoring_loss(release)
        return loss, *_statistics(release, loss)

    return cache.memo("gccens measures", release_key(release), compute, size=_MEASURES, data=release)


def _statistics(release, loss: pd.DataFrame) -> tuple[CULStatistics, CULStatistics]:
    held = release.loss
    if "cul" in held and "cul_vs_original" in held:
        return CULStatistics(**held["cul"]), CULStatistics(**held["cul_vs_original"])
    return (
        cul_statistics(loss["cul"].to_numpy(), release),
        cul_statistics(release_cul(release, "original"), release, "original"),
    )


def _code_order(cohort: Records) -> list[str]:
    """`code_frequency_order` of the cohort, memoized on its content."""
    return cache.memo(
        "code order", cohort.fingerprint, lambda: code_frequency_order(cohort), size=_CODE_ORDERS, data=cohort
    )


def code_set_label(problem: CensorProblem, cohort: Records) -> str:
    """The codes this GCCens run releases, against the cohort's distinct codes (every headline and
    legend states it: the default is Tamersoy's four codes)."""
    return code_set_text(tuple(map(str, problem.code_labels)), len(_code_order(cohort)))


# ------------------------------------------------------------------------- cached engine calls
def _prepared(cohort: Records, population: Records, scope: str, selection: tuple) -> GCCensInput:
    """The engine's own preparation (`GCCensSettings.prepare_input`) of the selected codes, once per
    data and selection: the view's baseline and cap table and every release of the view (both
    variants, any k and caps) are made from it (issue 24: it was prepared three times on opening)."""
    return cache.memo(
        "gccens inputs",
        (cohort.fingerprint, population.fingerprint, scope, selection),
        lambda: GCCensSettings(scope=scope, codes=_code_selection(selection)).prepare_input(
            RunInputs(population, cohort)
        ),
        size=_INPUTS,
        data=(cohort, population),
    )


def _problem(
    cohort: Records, population: Records, scope: str, selection: tuple
) -> tuple[CensorProblem, dict[str, frozenset[str]], Records]:
    """The prepared problem on the selected codes, the released items' original codes, and the
    selected (GCCens input) cohort, so the view draws what the release is made of."""
    got = _prepared(cohort, population, scope, selection)
    return got.problem, got.item_codes or {}, got.cohort


def _release_run(ctx: Context, settings: GCCensSettings, label: str) -> Run[Release]:
    """The run of `settings`' release (`ui.method_view`): made from the view's prepared input
    (`settings.release_of`, what `settings.run` gives), or the study's preview when it is made. Every
    code asks for "Run" after a change, and before the first run when it reads many events
    (`_asks_first`)."""
    selection, _ = view_parameters(settings)
    prepared = _prepared(ctx.cohort, ctx.population, settings.scope, selection)
    job = (data_of(ctx).key, settings)

    def compute(step) -> Release:
        done = previewed(ctx, settings)
        if done is not None:
            return done
        return cache.memo(
            "gccens releases",
            job,
            lambda: settings.release_of(prepared, ctx.cohort, step),
            size=_RELEASES,
            data=derived_from(ctx, settings),
        )

    slow = selection[0] == CODE_MODES[3]  # every code: about 3 s on the sample, not a live preview
    return Run(label, compute, slow, slow and _asks_first(ctx, settings.scope), preview_of=settings)


_UNASKED_EVENTS = 100_000  # the shipped sample's cohort: 78,972 events, all codes in 1-3 s


def _asks_first(ctx: Context, scope: str) -> bool:
    """Whether GCCens on every code waits for "Run" before its first run: when it reads more than
    `_UNASKED_EVENTS` events (the cohort's, and the population's in the population scope), a minute on
    a large cohort never started unasked (issue 26); the sample's cohort runs at once, the view opening
    on all codes (issue 35, finding 6)."""
    read = ctx.cohort.n_events + (ctx.population.n_events if scope == "population" else 0)
    return read > _UNASKED_EVENTS


def _code_selection(selection: tuple) -> CodeSelection:
    mode, top_n, chosen = selection
    return CodeSelection(_MODE_NAMES[mode], int(top_n), tuple(map(str, chosen)))


def view_parameters(settings: GCCensSettings) -> tuple[tuple, tuple]:
    """The view's (selection, cap key) of `settings`: the inverse of `settings_of`, to draw a previous
    run's results under its own parameters."""
    codes = settings.codes
    mode = next(label for label, name in _MODE_NAMES.items() if name == codes.mode)
    cap_key = ("universal", settings.cap) if settings.cap is not None else ("per_code", settings.caps)
    return (mode, codes.top_n, codes.chosen), cap_key


def settings_of(scope: str, selection: tuple, k: int, cap_key: tuple, variant: str) -> GCCensSettings:
    """The view's parameters as the typed settings a study records (engine.study.runs)."""
    codes = _code_selection(selection)
    kind, value = cap_key
    if kind == "universal":
        return GCCensSettings(k=k, scope=scope, codes=codes, cap=int(value), variant=variant)
    return GCCensSettings(
        k=k, scope=scope, codes=codes, caps=tuple((str(c), int(v)) for c, v in value), variant=variant
    )


def _cap_arguments(cap_key: tuple) -> dict:
    kind, value = cap_key
    return {"cap": int(value)} if kind == "universal" else {"caps": dict(value)}


def _baseline(
    cohort: Records, population: Records, scope: str, selection: tuple, cap_key: tuple
) -> tuple[np.ndarray, np.ndarray]:
    """The distinguishability of the selected records before and after capping (k = 1: caps only);
    independent of k and the variant, so a change of k does not recompute it."""
    return cache.memo(
        "gccens baselines",
        (cohort.fingerprint, population.fingerprint, scope, selection, cap_key),
        lambda: _baseline_of(cohort, population, scope, selection, cap_key),
        size=_BASELINES,
        data=(cohort, population),
    )


def _baseline_of(
    cohort: Records, population: Records, scope: str, selection: tuple, cap_key: tuple
) -> tuple[np.ndarray, np.ndarray]:
    problem, _, sel_cohort = _problem(cohort, population, scope, selection)
    adversary = Adversary(scope, "all_visits")
    sel_pop = problem.population if scope == "population" else None
    before = risk.original_distinguishability(
        sel_cohort, adversary, sel_pop, risk.Matching(count_repeats=True)
    )
    capped = gccens_run(problem, 1, **_cap_arguments(cap_key))  # k = 1: caps only
    return before, risk.release_distinguishability(capped, adversary, sel_pop)


def _sweep_row(
    cohort: Records,
    population: Records,
    scope: str,
    selection: tuple,
    k: int,
    cap: int,
    variant: str,
    progress=None,
) -> dict:
    """One point of the Tables 1-2 sweeps (`gccens_point`), memoized per data and parameters."""

    def point() -> dict:
        problem, _, _ = _problem(cohort, population, scope, selection)
        return gccens_point(problem, k, cap, variant, progress=progress)

    key = (cohort.fingerprint, population.fingerprint, scope, selection, k, cap, variant)
    return cache.memo("gccens sweep rows", key, point, size=_SWEEP_ROWS, data=(cohort, population))


# ------------------------------------------------------------------------------------ settings
def _selection(ctx: Context, prefix: str) -> tuple | None:
    mode = st.selectbox("Codes released", CODE_MODES, key=f"{prefix}mode")
    top_n, chosen = 10, ()
    freq = _code_order(ctx.cohort)
    if mode == CODE_MODES[1]:
        top_n = int(
            st.number_input(
                "Number of codes", **widget_kwargs(parameter_of(CodeSelection, "top_n")), key=f"{prefix}top"
            )
        )
    elif mode == CODE_MODES[2]:
        options = freq[:500]
        persist.seed(f"{prefix}codes", options[:4], options)
        chosen = tuple(st.multiselect("Codes", options, key=f"{prefix}codes"))
        if not chosen:
            st.warning("Choose at least one code.")
            return None
    elif mode == CODE_MODES[3] and len(freq) > 200:
        st.warning(
            f"{len(freq):,} distinct codes: with every code and its repeats known, almost every record is "
            "unique and GCCens censors most of them (the paper released four codes)."
        )
    return mode, top_n, chosen


def _cap_table(problem: CensorProblem) -> pd.DataFrame:
    """Each code's records, mean and maximum repeats, and its default cap (the paper's scan of S: the
    maximum repeat count in the cohort). Never modified by its readers."""
    counts = problem.counts
    table = pd.DataFrame(
        {
            "code": problem.code_labels,
            "records": (counts > 0).sum(axis=0),
            "mean repeats": np.round(counts.sum(axis=0) / np.maximum((counts > 0).sum(axis=0), 1), 2),
            "max repeats": counts.max(axis=0) if len(counts) else 0,
        }
    )
    table["cap"] = table["max repeats"]  # default: the paper's scan of S
    return table


def _caps(problem: CensorProblem, prefix: str) -> tuple:
    kind = st.radio("Caps", CAP_MODES, horizontal=True, key=f"{prefix}capmode", help=help_for("cap"))
    if kind == CAP_MODES[1]:
        cap = int(
            st.number_input(
                "Universal cap (paper: 3)",
                **widget_kwargs(parameter_of(GCCensSettings, "cap"), help=help_for("cap")),
                key=f"{prefix}cap",
            )
        )
        return ("universal", cap)
    table = cache.memo(
        "gccens cap tables", id(problem), lambda: (problem, _cap_table(problem)), size=_INPUTS
    )[1]
    st.caption(
        "Per-code caps (default: each code's maximum repeat count in the cohort). Edit the cap column."
    )
    edited = persist.edited_column(  # the cap edits survive page switches (issue 13)
        f"{prefix}capedits",
        table,
        "code",
        "cap",
        key=f"{prefix}captable:{','.join(problem.code_labels[:50])}",
        disabled=["code", "records", "mean repeats", "max repeats"],
        hide_index=True,
        height=min(38 + 35 * len(table), 320),
    )
    caps = []
    for code, value in zip(
        edited["code"].astype(str), pd.to_numeric(edited["cap"], errors="coerce"), strict=True
    ):
        whole = bool(np.isfinite(value)) and float(value).is_integer()
        # each cap as a study file takes it (the declaration of `cap`, issue 38): never truncated; a
        # refused one is shown by `ui.method_view.drive`
        caps.append(
            (code, code_cap(code).check(int(value) if whole else float(value), GCCensSettings.method))
        )
    return ("per_code", tuple(caps))


# ------------------------------------------------------------------------------- Anonymize tab
def _settings_section(ctx: Context) -> GCCensSettings | None:
    st.subheader("GCCens: censoring repeated codes (Tamersoy 2010; thesis chapter III)")
    scope = ctx.adversary.scope
    st.caption(
        "The attacker knows every released code of the target with its repeat count. Caps first censor "
        "each code down to its cap; then, while some record has fewer than k candidates, one instance of "
        "the code held at its cap by the fewest records is censored from those records and its cap lowered "
        f"(ties: code order). Scope from the sidebar: **{scope}** "
        f"({'k-map against the population' if scope == 'population' else 'k-anonymity within the cohort'}); "
        f"k = **{ctx.k}** from the sidebar."
    )
    c1, c2 = st.columns([3, 2])
    with c1:
        selection = _selection(ctx, "gcc_")
    if selection is None:
        return None
    problem, _, _ = _problem(ctx.cohort, ctx.population, scope, selection)
    if not len(problem.codes):
        st.warning("None of the chosen codes occurs in the cohort; choose other codes.")
        return None
    with c2:
        variant = st.radio(
            "Variant",
            choices_of(parameter_of(GCCensSettings, "variant")),
            horizontal=True,
            key="gcc_variant",
            help=help_for("faithful", "targeted"),
        )
    cap_key = _caps(problem, "gcc_")
    return settings_of(scope, selection, int(ctx.k), cap_key, variant)


def _runs(ctx: Context, settings: GCCensSettings) -> dict[str, Run[Release]]:
    return {"gcc_run": _release_run(ctx, settings, f"GCCens ({settings.variant})")}


def _stale_caption(settings: GCCensSettings) -> str:
    caps = "per-code caps" if settings.cap is None else f"universal cap {settings.cap}"
    return (
        f"Results of the previous parameters (k = {settings.k}, {settings.codes.describe()}, {caps}, "
        f"{settings.variant}): press Run to update"
    )


def _cdf_figure(curves: dict[str, np.ndarray], k: int, codes_label: str) -> go.Figure:
    """Figure 4's CDF, the code set named over its legend (memoized whole: `ui.figure_memo`)."""
    cdf = distinguishability_cdf_figure(curves, k, highlight="released", dashed=["capped"])
    cdf.update_layout(legend_title_text=codes_label)
    return cdf


def _results(ctx: Context, settings: GCCensSettings, outcomes: dict[str, Release], shown: Shown) -> None:
    """The release's verdicts, measures, charts, downloads and records, under the parameters it was
    made with (`settings`); `shown.stale`: a previous run's, drawn greyed, with neither "Add to study"
    nor the release's files (issue 26, finding 5)."""
    stale, release = shown.stale, outcomes["gcc_run"]
    selection, cap_key = view_parameters(settings)
    scope, k, variant = settings.scope, settings.k, settings.variant
    problem, _, sel_cohort = _problem(ctx.cohort, ctx.population, scope, selection)
    adversary = settings.adversary  # GCCens' own attacker: every code with its repeat counts
    sidebar = Adversary(scope, ctx.adversary.knowledge)  # the sidebar's (the settings' scope)
    verification = verify_under(release, ctx, adversary, k)
    before, capped_dis = _baseline(ctx.cohort, ctx.population, scope, selection, cap_key)
    loss, stats, orig = _release_measures(release)
    codes_label = code_set_label(problem, ctx.cohort)
    # headline (issue 16): against the original cohort first; Tamersoy's CUL (against the capped
    # record, which does not see what the caps removed) beside it, labelled method-internal
    st.markdown(f"**What the release keeps of the original cohort** ({md(codes_label)})")
    honest.headline(release, ctx.cohort)
    cols = st.columns(3)  # issue 26: labels cut at five columns ('Mean CUL against the ori…')
    cols[0].metric(
        "Instances of these codes kept, caps included",
        fmt.percent(orig.share_codes_retained),
        help=help_for("instances_retained", "cap"),
    )
    cols[1].metric(
        "Mean CUL against the original record", fmt.percent(orig.mean), help=help_for("cul_original")
    )
    cols[2].metric(
        "Censored by caps / by the loop",
        f"{release.loss['censored_by_caps']:,} / {release.loss['censored_by_loop']:,}",
        help=help_for("cap", "gccens"),
    )
    cols[2].caption("code instances (events) censored")
    inner = st.columns(2)
    inner[0].metric(
        "Mean CUL, capped record (Tamersoy, method-internal)",
        fmt.percent(stats.mean),
        help=help_for("cul", "method_internal"),
    )
    inner[1].metric(
        "Codes kept of the capped record (method-internal)",
        fmt.percent(stats.share_codes_retained),
        help=help_for("cul", "cap", "method_internal"),
    )
    # issue 26: one attacker per verdict. GCCens' own model (every code with its repeats) and the
    # sidebar's attacker, which "Add to study" and the downloads record, each named
    shown_v = verify_under(release, ctx, sidebar, k)
    own = "GCCens' own attacker (every code with its repeat counts)"
    if shown_v.adversary == adversary:
        (st.success if verification.ok else st.info)(verification.message())
    else:
        (st.success if shown_v.ok else st.warning)(
            f"{shown_v.message()} This is the sidebar's attacker, the one 'Add to study' records."
        )
        (st.success if verification.ok else st.info)(f"{own}: {verification.message()}")
    if not verification.ok:
        st.info("Even censoring every code leaves fewer than k candidates for these records.")
    # the files, only through the export gate under the sidebar's adversary and k
    if not stale and release_downloads(
        release, verification, sidebar, k, ctx.population, name="gccens", key="gcc_dl"
    ):

        def report_json() -> str:  # built when the button is clicked
            rep = report(
                release,
                verification,
                before,
                original_codes=sel_cohort.n_events,
                population_size=ctx.population.n_patients,
                sources=dict(ctx.dataset.sources),
            )
            return json.dumps(rep, indent=2, default=str)

        report_download(
            report_json,
            "Download the report (JSON)",
            "gccens_report.json",
            "gcc_dl_report",
        )
    shown.add(settings, f"GCCens k={k}", "gcc_study")

    left, right = st.columns(2)
    with left:
        st.markdown("**Risk before and after** (distinguishability CDF, Figure 4)")
        curves = {"original": before, "capped": capped_dis, "released": verification.distinguishability}
        st.plotly_chart(
            figure_memo.built(_cdf_figure, curves, k, codes_label, data=derived_from(ctx, settings)),
            key="gcc_cdf",
        )
        _download(
            cdf_frame(curves), "Download the risk CDF, before and after (CSV)", "gccens_cdf.csv", "gcc_dl_cdf"
        )
    with right:
        st.markdown("**CUL distribution** (censored codes / codes in the capped record, method-internal)")
        st.plotly_chart(
            figure_memo.built(cul_histogram, loss, data=derived_from(ctx, settings)), key="gcc_culhist"
        )
        both = pd.DataFrame(
            [
                {
                    "measured against": "the capped record (Tamersoy's CUL, method-internal)",
                    **stats.as_dict(),
                },
                {"measured against": "the original record (caps included)", **orig.as_dict()},
            ]
        )
        st.dataframe(
            both.rename(
                columns={c: LABELS.get(c, c).replace(" (method-internal)", "") for c in both.columns}
            ),
            hide_index=True,
        )
        _download(loss, "Download per-record CUL (CSV)", "gccens_cul.csv", "gcc_dl_cul")

    st.markdown("**Faithful vs targeted** (retention side by side, same k, caps and codes)")
    rows = []
    for v in VARIANTS:
        rel_v = release
        if v != variant:  # greyed: only a compared run already made, no "Run" of its own
            other = replace(settings, variant=v)
            found = (
                previewed(ctx, other)
                if stale
                else run(ctx, "gcc_run_other", other, _release_run(ctx, other, f"GCCens ({v}, compared)"))
            )
            if not isinstance(found, Release):
                continue
            rel_v = found
        ver_v = verify_under(rel_v, ctx, adversary, k)
        _, st_v, orig_v = _release_measures(rel_v)
        rows.append(
            {
                "variant": v,
                "share_retained_vs_original": orig_v.share_codes_retained,
                "share_codes_retained": st_v.share_codes_retained,
                "share_modified": st_v.share_modified,
                "mean_cul": st_v.mean,
                "censored_by_loop": rel_v.loss["censored_by_loop"],
                "iterations": rel_v.loss["iterations"],
                "verified": ver_v.ok,
            }
        )
    compare = pd.DataFrame(rows)
    l2, r2 = st.columns([3, 2])
    with l2:
        st.dataframe(labelled(compare), hide_index=True)
        _download(
            compare,
            "Download the faithful vs targeted comparison (CSV)",
            "gccens_variants.csv",
            "gcc_dl_variants",
        )
    with r2:
        st.plotly_chart(
            figure_memo.built(retention_figure, compare, data=derived_from(ctx, settings)), key="gcc_variants"
        )

    st.markdown("**Released records beside the originals** (the selected codes of each record)")
    modified = loss.loc[loss["censored"] > 0, "patient_id"].astype(str).tolist()
    default = (modified or loss["patient_id"].astype(str).tolist())[:5]
    patients = st.multiselect(
        "Patients", loss["patient_id"].astype(str).tolist(), default=default, key="gcc_patients"
    )
    if patients:
        table = records_side_by_side(sel_cohort, release, loss, patients)
        st.dataframe(table, hide_index=True)
    if patients and not stale:
        release_table_download(
            table,
            release,
            verification,
            sidebar,
            k,
            ctx.population,
            label="Download these records (CSV)",
            file_name="gccens_examples.csv",
            key="gcc_dl_examples",
        )
    with st.expander(f"Censoring steps ({len(release.loss['steps'])})"):
        steps = pd.DataFrame(
            release.loss["steps"], columns=["code", "from_count", "records", "below_k_before"]
        )
        st.dataframe(steps, hide_index=True)
        _download(steps, "Download the steps (CSV)", "gccens_steps.csv", "gcc_dl_steps")


# the GCCens tab on the view protocol: its settings are the typed `GCCensSettings`, its run the release
# (the study's preview of them: "Add to study" reuses it)
render_anonymize = MethodView("gccens", _settings_section, _runs, _results, _stale_caption)


# ------------------------------------------------------------------------------ Trade-offs tab
def _sweep_table(
    ctx: Context, selection: tuple, variant: str, points: list[tuple[int, int]], label: str
) -> pd.DataFrame | None:
    """The sweep's rows under a progress bar with Cancel (ui/progress.py); None when cancelled."""
    scope = ctx.adversary.scope

    def compute(step) -> list[dict]:
        rows = []
        for n, (k, cap) in enumerate(points):
            at = f"run {n + 1} of {len(points)} (k = {k}, cap = {cap})"
            step(n / len(points), at)
            one = lambda f, m, n=n, at=at: step((n + f) / len(points), f"{at}: {m}")  # noqa: E731
            rows.append(_sweep_row(ctx.cohort, ctx.population, scope, selection, k, cap, variant, one))
        return rows

    rows = progress_ui.run(label, compute, key=f"gcct_sweep_{points[0]}", job=(scope, selection, variant))
    return None if rows is None else pd.DataFrame(rows, columns=GCCENS_COLUMNS)


def render_tradeoffs(ctx: Context) -> None:
    """Tables 1 and 2 of Tamersoy 2010, computed live on the loaded data."""
    st.subheader("GCCens: CUL against k and against the cap (Tamersoy 2010, Tables 1-2)")
    st.markdown("CUL: " + help_for("cul"))
    st.caption(
        f"Scope from the sidebar: {ctx.adversary.scope}. Each row is a full GCCens run verified by the "
        "risk engine (column `verified`)."
    )
    c1, c2 = st.columns([3, 2])
    with c1:
        selection = _selection(ctx, "gcct_")
    if selection is None:
        return
    with c2:
        variant = st.radio(
            "Variant",
            choices_of(parameter_of(GCCensSettings, "variant")),
            horizontal=True,
            key="gcct_variant",
            help=help_for("faithful", "targeted"),
        )
    problem, _, _ = _problem(ctx.cohort, ctx.population, ctx.adversary.scope, selection)
    if not len(problem.codes):
        st.warning("None of the chosen codes occurs in the cohort; choose other codes.")
        return
    t1 = _sweep_table(ctx, selection, variant, [(k, 3) for k in TABLE1_KS], "Table 1 (caps 3)")
    t2 = _sweep_table(ctx, selection, variant, [(5, c) for c in TABLE2_CAPS], "Table 2 (k = 5)")
    if t1 is None or t2 is None:
        return
    st.caption(
        md(f"Code set: {code_set_label(problem, ctx.cohort)}. ")
        + "The paper's columns measure CUL against the capped record (method-internal: what the caps "
        "remove is not counted, so a low cap looks loss-free); the columns 'against the original' and "
        "'caps included' count every removed instance."
    )
    if len(problem.code_labels) < len(_code_order(ctx.cohort)):
        st.warning(
            md(f"These sweeps release only {code_set_label(problem, ctx.cohort)}")
            + ": every figure below is about those codes; the rest of the cohort is not released."
        )
    left, right = st.columns(2)
    with left:
        st.markdown("**Table 1**: all caps 3, k from 2 to 25")
        st.dataframe(labelled(t1.drop(columns=["cap", "variant"]).round(3)), hide_index=True)
        st.plotly_chart(sweep_figure(t1, "k"), key="gcct_t1")
        _download(t1, "Download Table 1 (CSV)", "gccens_table1.csv", "gcct_dl_t1")
    with right:
        st.markdown("**Table 2**: k = 5, universal cap from 3 to 10")
        st.dataframe(labelled(t2.drop(columns=["k", "variant"]).round(3)), hide_index=True)
        st.plotly_chart(sweep_figure(t2, "cap"), key="gcct_t2")
        _download(t2, "Download Table 2 (CSV)", "gccens_table2.csv", "gcct_dl_t2")
