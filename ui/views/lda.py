"""Trajectories (LDA) view of the Anonymize and Trade-offs pages (Tamersoy 2011 thesis, chapter IV).

`render_anonymize(ctx)`: codes, hierarchies, k, w_ICD, Baseline or A-GS; the risk engine's verdict;
ILM / ALM / AvgRE; DGH-level shares (Figures 13-14); example clusters (Table 4); the download once
verified; and the teaching view: two trajectories, the matrices i, a and r of Figure 7 with the
traceback path highlighted, the anonymized trajectory, and each cell's three options explained.
`render_tradeoffs(ctx)`: Baseline against A-GS over k (Figures 9-12) and the weight sweep (Figure 15).

Engine calls are memoized (`ui.cache`) on the cohort's fingerprint and the parameters: shared by the
server's sessions on the shipped sample with a built-in hierarchy, in this session only on an upload or
with an uploaded hierarchy; the charts (ui/lda_charts.py) take the engine's plain DataFrames.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import streamlit as st

from engine import risk
from engine.adversary import Adversary
from engine.anonymize.alignment import Alignment, align, alignment_long, parse_trajectory
from engine.anonymize.trajectories import LDAResult, Trajectories, default_age_domain, lda
from engine.hierarchy import ICD9_LEVELS, ICD9_THESIS_LEVELS, Hierarchy, HierarchyError
from engine.records import Records
from engine.release import Release
from engine.report.glossary import help_for
from engine.risk import Verification
from engine.study.experiments import LDAPoint, lda_measures, lda_sweep_k, lda_sweep_weights
from engine.study.parameters import parameter_of
from engine.study.runs import ICD_HIERARCHIES, CodeSelection, LDASettings, RunInputs
from engine.utility.loss import avg_re, cluster_table, level_shares, record_losses
from ui import cache, honest, persist, state
from ui import format as fmt
from ui import progress as progress_ui
from ui.context import Context
from ui.downloads import release_downloads, release_table_download
from ui.downloads import table_download as _download
from ui.lda_charts import level_shares_figure, record_loss_figure, sweep_k_figure, weights_figure
from ui.literal import md
from ui.method_view import MethodView, Run, Shown, guarded
from ui.parameter_widgets import choices_of, widget_kwargs
from ui.state import ABSENT

D4_CODES = ("250", "272", "401", "724")
CODE_MODES = ("Thesis D4: 250, 272, 401, 724 (3-digit)", "Most frequent codes", "Chosen codes", "All codes")
_MODE_NAMES = dict(zip(CODE_MODES, ("paper", "top", "chosen", "all"), strict=True))
ICD_CHOICES = (
    "ICD-9-CM, thesis 5 levels",
    "ICD-9-CM with 4-digit level",
    "PheWAS codes",
    "Custom (CSV upload)",
    "OMOP CDM's own hierarchy (concept_ancestor)",  # offered for a CDM's standard concepts only
)
# the choices a study records, in the order of `runs.ICD_HIERARCHIES`
_RECORDED = dict(zip((*ICD_CHOICES[:3], ICD_CHOICES[4]), ICD_HIERARCHIES, strict=True))
# widget keys kept across page switches (ui/persist.py); age bounds and chosen codes follow the data.
# Both tabs open on the thesis' D4 codes (`runs.opening_settings`: they verify on the sample; all codes
# verify too but take ~34 s there, not a live page); the sweeps as its Figures 9-12 and 15
_FIRST_MODE = {"lda_": CODE_MODES[0], "ldat_": CODE_MODES[0]}
for _p in ("lda_", "ldat_"):
    persist.register(
        {
            f"{_p}mode": _FIRST_MODE[_p],
            f"{_p}top": parameter_of(CodeSelection, "top_n").default,
            f"{_p}codes": persist.LAZY,
            f"{_p}icd": ICD_CHOICES[0],
            f"{_p}lo": persist.LAZY,
            f"{_p}hi": persist.LAZY,
            f"{_p}w": parameter_of(LDASettings, "w_icd").default,
            f"{_p}method": parameter_of(LDASettings, "alignment").default,
        }
    )
# the Trade-offs sweeps' parameters last run (k sweep, weight sweep)
_K_PARAMS, _W_PARAMS = "ldat_k_params", "ldat_w_params"
state.declare(__name__, held={_K_PARAMS: ABSENT, _W_PARAMS: ABSENT})
ARROWS = {"diag": "↘", "up": "↑", "left": "←", "": ""}
ADVERSARY = Adversary("cohort", "all_visits")
FIG6 = {"401.0": "401", "401.1": "401", "401.9": "401"}
FIG7_X = [("401.9", 33), ("401.1", 33), ("401.1", 34), ("401.1", 35)]  # T4 of Figure 3a (rows)
FIG7_Y = [("401.1", 33), ("401.1", 34), ("401.1", 35)]  # T1 (columns)


# ------------------------------------------------------------------------- cached engine calls
_TRAJECTORIES, _RUNS, _MEASURES, _RELEASES = 8, 48, 48, 16  # bounds of the view's memos (ui.cache)


def _data(cohort: Records, hier: tuple) -> Records | None:
    """What a run is derived from, for `ui.cache`: the cohort, or nothing shareable with an uploaded
    ICD hierarchy (`hier[1]`: the file's name and bytes)."""
    return cohort if hier[1] is None else None


def _trajectories(cohort: Records, selection: tuple) -> Trajectories:
    return cache.memo(
        "lda trajectories",
        (cohort.fingerprint, selection),
        lambda: _trajectories_of(cohort, selection),
        size=_TRAJECTORIES,
        data=cohort,
    )


def _trajectories_of(cohort: Records, selection: tuple) -> Trajectories:
    mode, top_n, codes = selection
    df = cohort.to_frame()
    if mode == CODE_MODES[0]:
        df = df.assign(code=Hierarchy.icd9().roll_up(df["code"].astype(str).tolist(), "3-digit"))
        return Trajectories.from_frame(df, patient_ids=cohort.patient_ids, codes=D4_CODES)
    if mode == CODE_MODES[1]:
        return Trajectories.from_frame(df, patient_ids=cohort.patient_ids, top_codes=int(top_n))
    if mode == CODE_MODES[3]:
        return Trajectories.from_frame(df, patient_ids=cohort.patient_ids)
    return Trajectories.from_frame(df, patient_ids=cohort.patient_ids, codes=list(codes))


def _settings_trajectories(cohort: Records, settings: LDASettings) -> Trajectories:
    """`settings.trajectories(cohort)`, memoized on the cohort's content and what shapes them (the codes
    and their roll-up; not k, the hierarchies, the weights or the alignment) in `ui.cache`: shared by
    the server's sessions on the shipped sample, where the engine's own memo of them (`LDASettings.inputs`)
    lives in one session and a new session at a new k built them again (issue 24)."""
    return cache.memo(
        "lda settings trajectories",
        (cohort.fingerprint, settings.codes, settings.roll_up),
        lambda: settings.trajectories(cohort),
        size=_TRAJECTORIES,
        data=cohort,
    )


def _icd_hierarchy(choice: str, upload: tuple[str, bytes] | None) -> Hierarchy:
    if choice == ICD_CHOICES[0]:
        return Hierarchy.icd9(ICD9_THESIS_LEVELS)
    if choice == ICD_CHOICES[1]:
        return Hierarchy.icd9(ICD9_LEVELS)
    if choice == ICD_CHOICES[2]:
        return Hierarchy.phecodes()
    if upload is None:
        raise HierarchyError("upload a CSV with header child,parent for the custom ICD hierarchy")
    return Hierarchy.from_csv_bytes(upload[1], upload[0])


def _run(
    cohort: Records, selection: tuple, hier: tuple, k: int, w_icd: float, method: str, progress=None
) -> LDAResult:
    """The LDA result; with recordable parameters it is `LDASettings.run_result` itself, so the study's
    "Add to study" gets this very release. `progress`: the progress bar's callback (not in the key)."""
    return cache.memo(
        "lda runs",
        (cohort.fingerprint, selection, hier, k, w_icd, method),
        lambda: _run_of(cohort, selection, hier, k, w_icd, method, progress),
        size=_RUNS,
        data=_data(cohort, hier),
    )


def _run_of(
    cohort: Records, selection: tuple, hier: tuple, k: int, w_icd: float, method: str, progress=None
) -> LDAResult:
    settings = settings_of(selection, hier, k, w_icd, method)
    if settings is not None:
        trajectories = _settings_trajectories(cohort, settings)
        inputs = RunInputs(cohort, cohort, concepts=hier[5])  # the CDM's hierarchy, if it has one
        return settings.run_result(inputs, progress, trajectories=trajectories)
    choice, upload, lo, hi, _, _ = hier
    traj = _trajectories(cohort, selection)
    return lda(
        traj,
        k,
        w_icd=w_icd,
        method=method,
        icd_hierarchy=_icd_hierarchy(choice, upload),
        age_hierarchy=Hierarchy.ages(lo, hi, top_code_90=True),  # ages > 89 always 90+ (issue 23)
        progress=progress,
    )


def _measures(cohort: Records, selection: tuple, hier: tuple, k: int, w_icd: float, method: str) -> dict:
    """`engine.study.experiments.lda_measures` of the run, with AvgRE's query workload."""

    def compute() -> dict:
        res = _run(cohort, selection, hier, k, w_icd, method)
        return lda_measures(res, avgre=False) | {
            "AvgRE": (are := avg_re(res)).value,
            "workload": are.workload,
        }

    key = (cohort.fingerprint, selection, hier, k, w_icd, method)
    return cache.memo("lda measures", key, compute, size=_MEASURES, data=_data(cohort, hier))


def _release(
    cohort: Records, selection: tuple, hier: tuple, k: int, w_icd: float, method: str
) -> tuple[Release, Verification]:
    """The run's release with its source (as the download helper requires), verified by the risk engine."""

    def compute() -> tuple[Release, Verification]:
        res = _run(cohort, selection, hier, k, w_icd, method)
        rel = res.release().checked(res.source_pairs())
        return rel, risk.verify(rel, ADVERSARY, k)

    key = (cohort.fingerprint, selection, hier, k, w_icd, method)
    return cache.memo("lda releases", key, compute, size=_RELEASES, data=_data(cohort, hier))


# ------------------------------------------------------------------------------- chart builders


# ------------------------------------------------------------------------------------ settings
def _settings(ctx: Context, prefix: str, *, with_method: bool = True) -> tuple | None:
    """Draw the tab's parameters (k is the sidebar's); returns (selection, hier, k, w_icd, method) or None."""
    cohort = ctx.cohort
    if cohort.event_age is None:
        st.info("The loaded events have no `age` column: trajectories need the age at each code.")
        return None
    c1, c2, c3 = st.columns([2, 2, 2])
    with c1:
        modes = CODE_MODES if prefix == "lda_" else CODE_MODES[:3]  # no sweep over every code
        mode = st.selectbox("Codes in the trajectories", modes, key=f"{prefix}mode")
        top_n, codes = 50, ()
        if mode == CODE_MODES[1]:
            top_n = st.number_input(
                "Number of codes (thesis D50: 50)",
                **widget_kwargs(parameter_of(CodeSelection, "top_n")),
                key=f"{prefix}top",
            )
        elif mode == CODE_MODES[2]:
            counts = pd.Series(cohort.items[cohort.event_item]).value_counts()
            options = counts.index.tolist()
            persist.seed(f"{prefix}codes", options[:4], options)
            codes = tuple(st.multiselect("Codes", options, key=f"{prefix}codes"))
            if not codes:
                st.warning("Choose at least one code.")
                return None
    with c2:
        concepts = ctx.dataset.concepts  # an OMOP CDM's own hierarchy, when the events are one's
        offered = ICD_CHOICES if concepts is not None else ICD_CHOICES[:4]
        persist.seed_choice(f"{prefix}icd", ICD_CHOICES[0], offered)  # a CDM's choice, other data loaded
        choice = st.selectbox("ICD hierarchy", offered, key=f"{prefix}icd", help=help_for("dgh"))
        upload = None
        if choice == ICD_CHOICES[3]:
            f = st.file_uploader("Hierarchy CSV (child,parent)", type=["csv"], key=f"{prefix}upload")
            if f is None:
                st.info("Upload a CSV with header `child,parent`.")
                return None
            upload = (f.name, f.getvalue())
        lo0, hi0 = default_age_domain(cohort.event_age)
        a1, a2 = st.columns(2)
        persist.seed(f"{prefix}lo", lo0)
        persist.seed(f"{prefix}hi", hi0)
        lo = int(
            a1.number_input(
                "Ages from", **widget_kwargs(parameter_of(LDASettings, "age_low")), key=f"{prefix}lo"
            )
        )
        hi = int(
            a2.number_input("to", **widget_kwargs(parameter_of(LDASettings, "age_high")), key=f"{prefix}hi")
        )
        top90 = True  # ages above 89 are always one category (issue 23)
        st.caption("Ages above 89 are one category, 90+ (HIPAA safe harbor), always.")
    with c3:
        k = int(ctx.k)
        st.caption(f"k = {k} (sidebar)")
        w_icd = float(
            st.slider(
                "w_ICD (w_Age = 1 - w_ICD)",
                **widget_kwargs(parameter_of(LDASettings, "w_icd")),
                step=0.1,
                key=f"{prefix}w",
            )
        )
        st.caption(f"w_ICD = {w_icd:.1f}, w_Age = {1 - w_icd:.1f}")
        alignment = parameter_of(LDASettings, "alignment")
        method = alignment.default
        if with_method:
            method = st.radio(
                "Alignment",
                choices_of(alignment),
                horizontal=True,
                key=f"{prefix}method",
                format_func={"a-gs": "A-GS (least loss)", "baseline": "Baseline (pair by position)"}.get,
                help=help_for("ags"),
            )
    if hi <= lo:
        st.error(f"The age domain {lo}-{hi} is empty: 'to' must exceed 'from'.")
        return None
    cdm = concepts if choice == ICD_CHOICES[4] else None
    return (mode, int(top_n), codes), (choice, upload, lo, hi, top90, cdm), k, w_icd, method


def settings_of(selection: tuple, hier: tuple, k: int, w_icd: float, method: str) -> LDASettings | None:
    """The view's parameters as the typed settings a study records (None: an uploaded hierarchy,
    which a study file cannot carry)."""
    mode, top_n, codes = selection
    choice, _, lo, hi, _top90, _ = hier
    icd = _RECORDED.get(choice)
    if icd is None:
        return None
    return LDASettings(
        k=int(k),
        codes=CodeSelection(_MODE_NAMES[mode], int(top_n), tuple(map(str, codes))),
        icd_hierarchy=icd,
        age_low=int(lo),
        age_high=int(hi),
        top_code_90=True,
        w_icd=float(w_icd),
        alignment=method,
    )


def _unrecordable(hier: tuple) -> str | None:
    """Why a release over an uploaded ICD hierarchy is not added to the study (issue 13)."""
    upload = hier[1]
    if upload is None:
        return None
    return (
        f"Not added to the study: this release uses the uploaded ICD hierarchy {upload[0]} (sha256 "
        f"{hashlib.sha256(upload[1]).hexdigest()}), and a study file records settings, not the "
        "hierarchy, so the release could not be rebuilt or checked from it. Choose a built-in hierarchy "
        "to add the release; this one can still be downloaded above."
    )


# ------------------------------------------------------------------------------- Anonymize tab
def _settings_section(ctx: Context) -> tuple | None:
    st.subheader("Longitudinal Data Anonymizer (Tamersoy 2011, chapter IV)")
    st.caption(
        "Each patient's (ICD, Age) pairs form a trajectory. MDAV groups at least k trajectories and "
        "A-GS aligns them into one anonymized trajectory per cluster. The attacker knows every "
        "(code, age) pair, with repeats; the risk engine counts candidates in the released cohort "
        "(k-anonymity), whatever the sidebar's adversary."
    )
    return _settings(ctx, "lda_")  # (selection, hier, k, w_icd, method), k from the sidebar


def _runs(ctx: Context, settings: tuple) -> dict[str, Run[LDAResult]]:
    selection, hier, k, w_icd, method = settings
    return {
        "lda_run": Run(
            f"LDA: clustering trajectories ({method}, k = {k})",
            lambda step: _run(ctx.cohort, selection, hier, k, w_icd, method, step),
            ask=True,
        )
    }


def _stale_section(settings: tuple) -> str:
    _, _, k, w_icd, method = settings
    return f"Results of the previous parameters (k = {k}, w_ICD = {w_icd:.1f}, {method}): press Run to update"


def _results(ctx: Context, settings: tuple, outcomes: dict[str, LDAResult], shown: Shown) -> None:
    """The run's verdict, measures, charts, downloads and teaching view; `shown.stale`: a previous
    run's, drawn greyed (nothing added to the study from it)."""
    (selection, hier, k, w_icd, method), res = settings, outcomes["lda_run"]

    rel, ver = _release(ctx.cohort, selection, hier, k, w_icd, method)
    meas = _measures(ctx.cohort, selection, hier, k, w_icd, method)
    summary = res.trajectories.summary()
    honest.headline(
        rel,
        ctx.cohort,
        internal=[
            ("ICD loss, ILM (method-internal)", fmt.percent(meas["ILM"]), help_for("ilm", "method_internal")),
            ("Age loss, ALM (method-internal)", fmt.percent(meas["ALM"]), help_for("alm", "method_internal")),
            (
                "Query error, AvgRE (method-internal)",
                fmt.percent(meas["AvgRE"]),
                help_for("avgre", "method_internal"),
            ),
        ],
    )
    cols = st.columns(3)
    cols[0].metric("Trajectories", f"{summary['trajectories']:,}")
    cols[1].metric("Clusters (MDAV)", f"{len(res.clusters):,}", help=help_for("mdav"))
    cols[2].metric("Pairs suppressed", f"{len(rel.suppressed):,}")
    with st.expander("Dataset summary (thesis Table 3)"):
        st.dataframe(pd.DataFrame([summary]), hide_index=True)
    if ver.ok:
        st.success(ver.message())
    # the files (patient_id, code, age), only through the export gate under the sidebar's adversary and k
    release_downloads(rel, ver, ctx.adversary, int(ctx.k), ctx.population, name="lda", key="lda_dl")
    # LDASettings.run's release: Add does not rerun it
    shown.add(
        settings_of(selection, hier, k, w_icd, method), f"LDA k={k}", "lda_study", rel, _unrecordable(hier)
    )

    left, right = st.columns(2)
    with left:
        st.markdown("**Values at each hierarchy level** (Figures 13-14)")
        shares = level_shares(res)
        st.plotly_chart(level_shares_figure(shares), key="lda_levels")
        _download(
            shares, "Download the hierarchy level shares (CSV)", "lda_level_shares.csv", "lda_dl_levels"
        )
    with right:
        st.markdown("**Information loss per trajectory** (Definition 7, normalized by length)")
        rl = record_losses(res)
        st.plotly_chart(record_loss_figure(rl), key="lda_losshist")
        _download(rl, "Download the loss per trajectory (CSV)", "lda_record_loss.csv", "lda_dl_loss")

    st.markdown("**Example clusters** (Table 4: the clusters with the most generalization and suppression)")
    clusters = cluster_table(res)
    st.dataframe(clusters.head(5), hide_index=True)
    release_table_download(  # the anonymized trajectories with their patients: the release itself
        clusters,
        rel,
        ver,
        ctx.adversary,
        int(ctx.k),
        ctx.population,
        label="Download all clusters (CSV)",
        file_name="lda_clusters.csv",
        key="lda_dl_clusters",
    )
    with st.expander(
        f"AvgRE workload: {len(meas['workload'])} queries (pairs in at least 1% of trajectories)"
    ):
        st.dataframe(meas["workload"], hide_index=True)
        _download(
            meas["workload"], "Download the AvgRE query workload (CSV)", "lda_avgre_workload.csv", "lda_dl_wl"
        )
    st.divider()
    _teaching_view(res, w_icd, method)


# the LDA tab on the view protocol: one run, waiting for "Run" after a change (0.8 s through the app on
# the sample since issue 24); its settings are `_settings`' (selection, hier, k, w_icd, method)
render_anonymize = MethodView("lda", _settings_section, _runs, _results, _stale_section)


# -------------------------------------------------------------------------------- teaching view


def _teaching_view(res: LDAResult, w_icd: float, method: str) -> None:
    st.markdown("### Teaching view: aligning two trajectories (Figure 7)")
    src = st.radio(
        "Trajectories",
        ("Thesis Figure 7 (T4 and T1 of Figure 3a)", "Two cohort patients", "Type them"),
        horizontal=True,
        key="lda_t_src",
    )
    icd_h, age_h = res.model.icd, res.model.age
    if src.startswith("Thesis"):
        icd_h, age_h = Hierarchy.from_parents(FIG6, name="hypertension (Figure 6)"), Hierarchy.ages(33, 40)
        x, y = FIG7_X, FIG7_Y
        st.caption(
            "Hierarchies of Figures 5 and 6: ages 33-40 as a binary tree, 401 over 401.0, 401.1, 401.9."
        )
    elif src == "Two cohort patients":
        t = res.trajectories
        ok = np.flatnonzero((t.lengths > 0) & (t.lengths <= 12))[:2000]
        if len(ok) < 2:
            st.info("Fewer than two cohort trajectories of at most 12 pairs.")
            return
        ids = t.patient_ids[ok].tolist()
        c1, c2 = st.columns(2)
        px_ = c1.selectbox("X (rows)", ids, index=0, key="lda_t_x")
        py_ = c2.selectbox("Y (columns)", ids, index=1, key="lda_t_y")
        x = t.pairs(int(ok[ids.index(px_)]))
        y = t.pairs(int(ok[ids.index(py_)]))
    else:
        c1, c2 = st.columns(2)
        tx = c1.text_area("X (rows)", "(401.9, 33) (401.1, 33) (401.1, 34) (401.1, 35)", key="lda_t_tx")
        ty = c2.text_area("Y (columns)", "(401.1, 33) (401.1, 34) (401.1, 35)", key="lda_t_ty")
        x, y = parse_trajectory(tx), parse_trajectory(ty)  # a typing error: shown by `drive`
        al_icd = Hierarchy.icd9(ICD9_THESIS_LEVELS)
        icd_h = al_icd.restrict(sorted({*icd_h.leaves(), *(c for c, _ in x + y)}))
    al = align(x, y, icd_h, age_h, w_icd=w_icd, w_age=round(1 - w_icd, 10), method=method)
    st.markdown(
        f"**{method.upper()} result:** "
        + (md(" ".join(f"({c}, {a})" for c, a in al.trajectory)) or "(everything suppressed)")
        + f" — ILM {al.ilm:.4g}, ALM {al.alm:.4g}, total {al.total:.4g} "
        f"(weights {w_icd:g} / {1 - w_icd:g}; |ICD| = {icd_h.domain_size}, |Age| = {age_h.domain_size})"
    )
    frames = alignment_frames(al)
    path = set(al.path)
    cols = st.columns(3)
    for col, name in zip(cols, ("i", "a", "r"), strict=True):
        with col:
            st.markdown(
                f"**{name}**" + (" (ILM)" if name == "i" else " (ALM)" if name == "a" else " (operation)")
            )
            st.dataframe(_styled(frames[name], path), key=f"lda_t_{name}")
    long = alignment_long(al)
    _download(long, "Download the three matrices (CSV)", "lda_alignment.csv", "lda_dl_align")
    _explain_cells(al)


def alignment_frames(al: Alignment) -> dict[str, pd.DataFrame]:
    """The matrices i, a and r as labelled DataFrames (rows X, columns Y, both starting with ∅)."""
    rows = ["∅"] + [f"{h}. {c}, {a}" for h, (c, a) in enumerate(al.x, start=1)]
    cols = ["∅"] + [f"{j}. {c}, {a}" for j, (c, a) in enumerate(al.y, start=1)]
    r = np.vectorize(lambda v: ARROWS.get(v, v))(al.r) if al.r.size else al.r
    return {
        "i": pd.DataFrame(al.i, index=rows, columns=cols),
        "a": pd.DataFrame(al.a, index=rows, columns=cols),
        "r": pd.DataFrame(r, index=rows, columns=cols),
    }


def _styled(df: pd.DataFrame, path: set[tuple[int, int]]):
    def color(data: pd.DataFrame) -> pd.DataFrame:
        out = pd.DataFrame("", index=data.index, columns=data.columns)
        for h, j in path:
            out.iat[h, j] = "background-color: #ffd54f; font-weight: bold"
        return out

    sty = df.style.apply(color, axis=None)
    if all(pd.api.types.is_numeric_dtype(d) for d in df.dtypes):
        sty = sty.format(lambda v: "" if pd.isna(v) else f"{v:.4g}")
    return sty


def _explain_cells(al: Alignment) -> None:
    m, n = al.i.shape[0] - 1, al.i.shape[1] - 1
    if m == 0 or n == 0:
        return
    with st.expander("Explain a cell", expanded=False):
        c1, c2 = st.columns(2)
        h = int(c1.number_input("row h", 1, m, 1, key="lda_t_h"))
        j = int(c2.number_input("column j", 1, n, 1, key="lda_t_j"))
        st.markdown(explain_cell(al, h, j))


def explain_cell(al: Alignment, h: int, j: int) -> str:
    """Plain-language account of cell (h, j): the three options of Algorithm 3 and the choice."""
    xh, yj = [md(v) for v in al.x[h - 1]], [md(v) for v in al.y[j - 1]]  # codes and ages: literal
    if al.method == "baseline":
        if not al.r[h, j]:
            return f"Baseline does not visit cell ({h}, {j}): it only pairs x_t with y_t (Algorithm 2)."
        return (
            f"Baseline step at ({h}, {j}): {al.r[h, j]}; running ILM {al.i[h, j]:.4g}, ALM {al.a[h, j]:.4g}."
        )
    cand = al.candidates[h, j]
    names = (
        f"generalize x_{h} = ({xh[0]}, {xh[1]}) with y_{j} = ({yj[0]}, {yj[1]}), from cell ({h - 1}, {j - 1})",
        f"suppress x_{h} = ({xh[0]}, {xh[1]}), from cell ({h - 1}, {j})",
        f"suppress y_{j} = ({yj[0]}, {yj[1]}), from cell ({h}, {j - 1})",
    )
    lines = [f"Cell ({h}, {j}): the three options of Algorithm 3 (steps 16-21), weighted losses:"]
    for arrow, name, (ci, ca) in zip(("↘", "↑", "←"), names, cand, strict=True):
        lines.append(f"- {arrow} {name}: ILM {ci:.4g} + ALM {ca:.4g} = **{ci + ca:.4g}**")
    chosen = ARROWS[al.r[h, j]]
    lines.append(
        f"\nChosen: {chosen} (the minimum; ties go to generalization, then to suppressing x). "
        f"i = {al.i[h, j]:.4g}, a = {al.a[h, j]:.4g}."
    )
    return "\n".join(lines)


# ------------------------------------------------------------------------------- Trade-offs tab
@guarded  # an error (an uploaded hierarchy's) ends the tab with its message
def render_tradeoffs(ctx: Context) -> None:
    """Baseline vs A-GS over k (Figures 9-12) and the weight sweep (Figure 15), on the loaded cohort."""
    st.subheader("Trajectories (LDA): Baseline against A-GS, and attribute weights")
    s = _settings(ctx, "ldat_", with_method=False)
    if s is None:
        return
    selection, hier, _, w_icd, _ = s
    c1, c2 = st.columns(2)
    k_lo, k_hi = c1.slider("k from / to (thesis: 2 to 15)", 2, 30, (2, 15), key="ldat_krange")
    step = int(c2.number_input("step", 1, 10, 1, key="ldat_kstep"))
    ks = list(range(k_lo, k_hi + 1, step))
    if st.button(f"Run the k sweep ({2 * len(ks)} runs)", key="ldat_run_k"):
        st.session_state[_K_PARAMS] = (selection, hier, w_icd, tuple(ks))
    params = st.session_state.get(_K_PARAMS)
    if params is not None and params[:3] == (selection, hier, w_icd):
        df = _sweep(ctx, selection, hier, w_icd, params[3])
        if df is not None:
            for col, measure, figs in zip(
                st.columns(3), ("ILM", "ALM", "AvgRE"), ("9-11", "9-11", "12"), strict=True
            ):
                with col:
                    st.markdown(f"**{measure} against k** (Figures {figs})")
                    st.plotly_chart(sweep_k_figure(df, measure), key=f"ldat_fig_{measure}")
            _download(df, "Download the k sweep (CSV)", "lda_sweep_k.csv", "ldat_dl_k")
    st.divider()
    k_w = int(st.number_input("k for the weight sweep (thesis: 2)", 2, 50, 2, key="ldat_kw"))
    if st.button("Run the weight sweep (9 runs, w_ICD 0.1 to 0.9)", key="ldat_run_w"):
        st.session_state[_W_PARAMS] = (selection, hier, k_w)
    wp = st.session_state.get(_W_PARAMS)
    if wp is not None and wp == (selection, hier, k_w):
        weights = [round(0.1 * i, 1) for i in range(1, 10)]

        def compute(step) -> pd.DataFrame:  # engine/study/experiments.py's sweep, this view's cached points
            return lda_sweep_weights(None, k_w, weights, point=_point(ctx, selection, hier), progress=step)

        wdf = progress_ui.run("Weight sweep", compute, key="ldat_wsweep", job=(selection, hier, k_w))
        if wdf is None:
            return
        st.markdown("**ILM and ALM by attribute weights** (Figure 15)")
        st.plotly_chart(weights_figure(wdf), key="ldat_fig_w")
        _download(wdf, "Download the weight sweep (CSV)", "lda_sweep_weights.csv", "ldat_dl_w")


def _point(ctx: Context, selection, hier) -> LDAPoint:
    """The sweeps' point: this view's cached LDA measures (`_measures`) at (k, w_ICD, method)."""
    return lambda k, w_icd, method: _measures(ctx.cohort, selection, hier, k, w_icd, method)


def _sweep(ctx: Context, selection, hier, w_icd: float, ks: tuple[int, ...]) -> pd.DataFrame | None:
    """Baseline and A-GS over k: `engine.study.experiments.lda_sweep_k` on this view's cached points."""

    def compute(step) -> pd.DataFrame:
        return lda_sweep_k(
            None, ks, ("baseline", "a-gs"), w_icd=w_icd, point=_point(ctx, selection, hier), progress=step
        )

    return progress_ui.run("k sweep", compute, key="ldat_ksweep", job=(selection, hier, w_icd, ks))
