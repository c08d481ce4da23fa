"""The Lab orders view: uniqueness, one-day re-identification and the latent-space release (Johnson 2018).

`render(ctx)` draws the page (pages/labs.py is its entry); the measures are engine.labs.reident's and
engine.labs.vae's, the charts ui/labs_charts.py's.

The sidebar's adversary maps onto the paper's attack: knowledge single visit -> "one day known",
all visits -> "all days known"; scope cohort -> "99 others", population -> "whole population".
Lab orders of the sidebar's population group are analysed, each step run by the page's
`engine.study.runs.LabRecallSettings` (as the `labs recall` command and bench/labs.py run it). The page
opens on the raw results; the autoencoder trains when the user presses "Train" (issue 24), once per
data and training settings, and torch is imported (engine.labs.vae) only then. Every step is memoized
(`ui.cache`) on the lab orders' content fingerprint and its settings: shared by the server's sessions
on the shipped sample, in this session only on uploaded lab orders.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pandas as pd
import streamlit as st

from engine.adversary import papers_knowledge
from engine.dataset import Dataset
from engine.labs import reident as L
from engine.labs.latent_verdict import latent_verdict, verdict_lines
from engine.labs.vae_config import VAEConfig
from engine.report.glossary import help_for
from engine.study.parameters import parameter_of
from engine.study.runs import LabRecallSettings
from ui import cache, errors, persist
from ui import format as fmt
from ui import progress as progress_ui
from ui.context import Context
from ui.downloads import table_download
from ui.fingerprints import ids_fingerprint, labs_fingerprint
from ui.labs_charts import (
    curve_frame,
    paired_figure,
    pr_figure,
    recall_figure,
    recall_frame,
    roc_figure,
    spread_figure,
    spread_frame,
    uniqueness_figure,
)
from ui.parameter_widgets import widget_kwargs
from ui.teach import intro

KNOWLEDGE = {"single_visit": ("one_day", "one day known"), "all_visits": ("all_days", "all days known")}
SCOPE = {"cohort": ("99", "99 others"), "population": ("population", "whole population")}
LATENT_SIZES = [2, 4, 8, 16, 32, 64]
# bounds of the view's memos (ui.cache): patient-days, uniqueness, restrictions, draws, Recall@n runs,
# trained models, a model's other release
_DAYS, _UNIQUENESS, _RESTRICTED, _DRAWS, _RECALLS, _MODELS, _OTHER = 4, 4, 8, 16, 16, 4, 4
# widget keys kept across page switches (ui/persist.py); the two data-dependent ones are seeded below
persist.register(
    {
        "labs_max_days": persist.LAZY,
        "labs_min_orders": persist.LAZY,
        "labs_trials": 100,
        "labs_simulations": 50,
        "labs_seed": 0,
        "labs_train_vae": True,
        "labs_latent_dim": 16,
        "labs_epochs": 10,
        "labs_max_train": 20_000,
        "labs_spread_n": 1,
    }
)


# Every step below takes the Context the lab orders come from (`data`, for ui.cache) and a key that
# names them by content: the patient-days' key is the lab orders' content fingerprint (`labs_fingerprint`:
# the shipped sample's from its file's bytes, an upload's once per frame) and the group's ids'; every later
# key starts from the patient-days' own content fingerprint.
def lab_days(
    data: Context | Dataset,
    labs_key: str,
    labs: pd.DataFrame,
    ids: tuple[str, ...] | None,
    spinner: str | None = "Building patient-day vectors…",
) -> L.PatientDays:
    """Patient-days of the lab orders (`labs_key`: their content fingerprint; `data`: what they come
    from, for ui.cache): of every row (`ids` None) or of the rows of the patients `ids`."""

    def build() -> L.PatientDays:
        return L.patient_days(labs if ids is None else labs[labs["patient_id"].astype(str).isin(set(ids))])

    key = (labs_key, "all" if ids is None else ids_fingerprint(ids))
    return cache.memo("lab days", key, build, size=_DAYS, data=data, spinner=spinner)


def read_ahead(dataset: Dataset) -> L.PatientDays:
    """The patient-days of every lab order of `dataset` (the shipped sample's, read ahead in the server
    by `ui.sidebar.read_labs_ahead`), kept where the page's `lab_days` finds them: the server's store."""
    return lab_days(dataset, labs_fingerprint(dataset, data=dataset), dataset.labs, None, spinner=None)


def population_days(ctx: Context, labs: pd.DataFrame, population_ids) -> tuple[L.PatientDays, str]:
    """The patient-days analysed and which: "all" (every lab order belongs to the population group),
    "none" (none does: every lab order is analysed) or "group" (the group's lab orders only).
    Membership is read on the patients with lab orders, not on every row, once per lab orders and group
    (both by content). `labs` are `ctx.dataset.labs`."""
    labs_key = labs_fingerprint(ctx.dataset, data=ctx)
    ids = tuple(map(str, population_ids))

    def decide() -> tuple[L.PatientDays, str]:
        every = lab_days(ctx, labs_key, labs, None)
        member = L.among(every.patient_ids, ids)
        if member.all():
            return every, "all"
        if not member.any():
            return every, "none"
        return lab_days(ctx, labs_key, labs, ids), "group"

    return cache.memo("lab population days", (labs_key, ids_fingerprint(ids)), decide, size=_DAYS, data=ctx)


def uniqueness(ctx: Context, key: str, days: L.PatientDays) -> L.Uniqueness:
    return cache.memo(
        "lab uniqueness",
        key,
        lambda: L.uniqueness(days),
        size=_UNIQUENESS,
        data=ctx,
        spinner="Counting unique lab sets…",
    )


def restricted(ctx: Context, key: str, settings: LabRecallSettings, days: L.PatientDays) -> L.PatientDays:
    """`settings.restricted` (keyed on its min_orders, the only one of its fields it reads)."""
    return cache.memo(
        "lab restrictions",
        (key, settings.min_orders),
        lambda: settings.restricted(days),
        size=_RESTRICTED,
        data=ctx,
    )


def draws(ctx: Context, key: str, draw_key: tuple, settings: LabRecallSettings, days: L.PatientDays):
    """`settings.draws` (`draw_key`: the settings' fields that decide the draws)."""
    return cache.memo("lab draws", (key, draw_key), lambda: settings.draws(days), size=_DRAWS, data=ctx)


def recall(ctx: Context, key: object, compute: Callable[[], L.Recall]) -> L.Recall:
    """`key` names data, draws and vectors (raw or a trained model); `compute` is a step of
    `LabRecallSettings` (`raw_recall` or `latent_recall`), which may move a progress bar drawn
    outside it (`ui.cache` replays nothing, unlike `st.cache_*`: issue 13's CacheReplayClosureError)."""
    return cache.memo("lab recalls", key, compute, size=_RECALLS, data=ctx)


def vae(
    ctx: Context,
    key: str,
    settings: LabRecallSettings,
    days: L.PatientDays,
    progress: Callable[[float, str], None],
):
    """A trained model per data fingerprint and training settings (`settings.train`, torch only here;
    seeded: the same key trains the same model), trained once and kept (`trained` reads it)."""
    return cache.memo(
        "lab models", (key, settings.vae), lambda: settings.train(days, progress), size=_MODELS, data=ctx
    )


def trained(ctx: Context, key: str, settings: LabRecallSettings):
    """The model `vae` trained for this data and these settings, None when not trained yet."""
    return cache.held("lab models", (key, settings.vae), data=ctx)


def other_release(ctx: Context, key: str, model, days: L.PatientDays, release: str):
    """The trained model under the other release (`engine.labs.vae.with_release`): its vectors."""

    def vectors():
        from engine.labs.vae import with_release  # torch only here

        return with_release(model, days.matrix, release)  # type: ignore[arg-type]

    return cache.memo("lab other releases", (key, release), vectors, size=_OTHER, data=ctx)


def progress_bar(text: str) -> tuple[Callable[[float, str], None], Callable[[], None]]:
    """The shared progress callback (ui/progress.py: stops a superseded run, safe in cached functions)."""
    step = progress_ui.tracker(text)
    return step, step.bar.empty


def cdm_labs_note() -> str | None:
    """Where the lab orders of an imported OMOP CDM come from (issue 37; `engine.io.omop._labs`), None
    for other data."""
    from ui.data_choice import IMPORT
    from ui.import_view import applied

    got = applied()
    if st.session_state.get("dataset_choice") != IMPORT or got is None or got[0].source != "omop":
        return None
    if got[0].omop_codes == "standard":
        return (
            "Lab orders from the imported OMOP CDM's measurement table: one lab per measured standard "
            "concept (LOINC, named through the CDM's concept table; its source value where the concept is "
            "0 or unknown), on its measurement_date. The measured values are not used."
        )
    return (
        "Lab orders from the imported OMOP CDM's measurement table: one lab per measurement_source_value "
        "(the test as the source ordered it; else its concept id), on its measurement_date. Choose standard "
        "concepts on the Cohort page to read them by LOINC concept. The measured values are not used."
    )


def render(ctx: Context) -> None:
    """The Lab orders page for the sidebar's data, groups and adversary."""
    st.title("Lab orders")
    intro("labs")
    st.caption(
        "Johnson et al. 2018: how unique are the labs ordered for a patient, can one day of orders re-identify "
        "them, and does releasing a variational autoencoder's latent vectors instead protect them?"
    )
    labs = ctx.dataset.labs
    if labs is None or len(labs) == 0:
        st.warning(
            "This dataset has no lab orders: load a labs file (patient_id, day, lab) on the Cohort page, "
            "or import an OMOP CDM that has a measurement table."
        )
        return
    note = cdm_labs_note()
    if note:
        st.caption(note)

    days, which = population_days(ctx, labs, ctx.dataset.group_ids(ctx.population_group))
    if which == "none":
        st.warning(
            f"No lab orders belong to the population group `{ctx.population_group}`: analysing every lab order."
        )
        group_label = "all patients with lab orders"
    else:
        group_label = f"population group `{ctx.population_group}`"
    key = days.fingerprint
    query, query_label = KNOWLEDGE[papers_knowledge(ctx.adversary.knowledge)]  # whole record: all days
    against, against_label = SCOPE[ctx.adversary.scope]
    st.info(
        f"Attacker (from the sidebar): **{query_label}**, ranked against the **{against_label}**. "
        f"Data: {group_label}: {days.n_patients:,} patients, {days.n_days:,} patient-days, {days.n_labs:,} labs."
    )

    # ------------------------------------------------------------------------------------ Figure 3
    st.header("Uniqueness of lab sets (Figure 3)")
    u = uniqueness(ctx, key, days)
    table = u.by_days()
    c1, c2, c3 = st.columns(3)
    unique_help = help_for("lab_uniqueness")
    c1.metric("Unique, all patients", fmt.percent(u.share_unique), help=f"{unique_help}\n\nThe paper: 56.1%.")
    for col, d, paper in ((c2, 2, "72.3%"), (c3, 9, "98.4%")):
        row = table[table["days"] == d]
        value = fmt.percent(row["share_unique"].iloc[0]) if len(row) else fmt.DASH
        col.metric(f"Unique, at least {d} days", value, help=f"{unique_help}\n\nThe paper: {paper}.")
        if not len(row):
            col.caption(f"no patient with {d} days of lab orders")
    days_max = max(6, int(table["days"].max()))
    persist.seed("labs_max_days", min(30, days_max))
    st.session_state["labs_max_days"] = min(max(int(st.session_state["labs_max_days"]), 5), days_max)
    max_days = st.slider("Days shown", 5, days_max, key="labs_max_days")
    st.plotly_chart(uniqueness_figure(table, max_days), width="stretch", key="labs_uniqueness_chart")
    table_download(table, "Uniqueness by days (CSV)", "labs_uniqueness.csv", "labs_dl_uniq")
    if ctx.adversary.knowledge == "all_visits":
        st.caption(
            "With all days known, a patient whose set of labs is unique is re-identified exactly: the share "
            "above is the share of patients at risk 1."
        )

    # ------------------------------------------------------------------------------------ Figure 4
    st.header("Re-identification from lab orders (Figure 4)")
    c1, c2, c3, c4 = st.columns(4)
    default_n = L.default_min_orders(days.n_days)
    persist.seed("labs_min_orders", default_n)
    min_orders = c1.number_input(
        "Labs ordered on at least N patient-days",
        **widget_kwargs(
            parameter_of(LabRecallSettings, "min_orders"),
            help=f"The paper's 500 at 6.4 million patient-days, scaled to these {days.n_days:,}: {default_n}.",
        ),
        key="labs_min_orders",
    )
    trials = c2.number_input("Breached records per simulation", 10, 2000, step=10, key="labs_trials")
    simulations = c3.number_input(
        "Simulations", 1, 500, key="labs_simulations", help="the paper: 100, and 250 for the spread"
    )
    seed = c4.number_input("Seed", **widget_kwargs(parameter_of(LabRecallSettings, "seed")), key="labs_seed")
    settings = LabRecallSettings(int(min_orders), int(trials), int(simulations), against, query, int(seed))
    r_days = restricted(ctx, key, settings, days)
    st.caption(
        f"{r_days.n_labs:,} labs kept; {r_days.n_patients:,} patients and {r_days.n_days:,} patient-days with at "
        "least one of them. One-day queries need a patient with at least two days."
    )
    try:
        settings.validate()
        draw_key = (settings.min_orders, settings.trials, settings.simulations, against, query, settings.seed)
        d = draws(ctx, key, draw_key, settings, r_days)
    except Exception as exc:  # a UserError's message, else a reference (ui/errors.py)
        errors.show(exc)
        return
    update, done = progress_bar("Ranking the true patients…")
    raw = recall(ctx, (key, draw_key, "raw"), lambda: settings.raw_recall(r_days, d, update))
    done()
    curves = {"raw": raw.to_frame()}
    c1, c2, c3 = st.columns(3)
    recall_help = help_for("recall_at_n")
    c1.metric("Recall@1", fmt.percent(raw.at(1)), help=f"{recall_help}\n\nThe paper: 25%.")
    c1.caption(f"by chance: {fmt.percent(raw.random[0], 2)}")  # issue 26: no delta badge, no arrow
    c2.metric("Recall@10", fmt.percent(raw.at(10)), help=f"{recall_help}\n\nThe paper: 47%.")
    c2.caption(f"by chance: {fmt.percent(raw.random[9], 2)}")
    c3.metric("Candidates per query", fmt.count(raw.n_candidates), help=recall_help)

    # ------------------------------------------------------------------------------------ Figures 5-6
    st.header("Latent-space release (Figures 5 and 6)")
    train = st.toggle("Latent-space release (train the variational autoencoder)", key="labs_train_vae")
    model = None
    if train:
        c1, c2, c3 = st.columns(3)
        latent_dim = c1.select_slider(
            "Latent size", LATENT_SIZES, key="labs_latent_dim", help="the paper: 16"
        )
        epochs = c2.number_input("Epochs", 1, 200, key="labs_epochs")
        max_train = c3.number_input(
            "Training days (subsample)",
            500,
            500_000,
            step=500,
            key="labs_max_train",
            help="Training uses at most this many patient-days (random, seeded) to stay fast.",
        )
        release = st.radio(
            "Released vectors",
            ["mean", "sampled"],
            format_func=lambda r: {"mean": "encoder means", "sampled": "sampled z ~ N(mu, sigma), seeded"}[r],
            horizontal=True,
            key="labs_release",
            help="The paper does not say which; sampled draws add the encoder's noise to every patient-day.",
        )
        try:
            config = VAEConfig(
                latent_dim=int(latent_dim),
                release=release,
                epochs=int(epochs),
                max_train_days=int(max_train),
                seed=settings.seed,
            )
            settings = dataclasses.replace(settings, vae=config)
            model = trained(ctx, f"{key}:{min_orders}", settings)
            if model is None:  # trained when asked (issue 24): the page opens on the raw results
                c1, c2 = st.columns([4, 1])
                c1.info(
                    f"The autoencoder is trained when you ask: {config.epochs} epoch(s) on at most "
                    f"{config.max_train_days:,} patient-days. A model trained once for these data and "
                    "settings is kept and shown at once."
                )
                if c2.button("Train", key="labs_vae_train", type="primary", help="Train the autoencoder"):
                    model = progress_ui.run(
                        "Training the autoencoder",
                        lambda step: vae(ctx, f"{key}:{min_orders}", settings, r_days, step),
                        key="labs_vae_run",
                        job=(key, min_orders, config),
                    )
        except Exception as exc:
            errors.show(exc)
    if model is not None:
        lat = recall(
            ctx, (key, draw_key, "latent", model.config), lambda: settings.latent_recall(r_days, d, model)
        )
        curves["latent"] = lat.to_frame()
        c1, c2, c3, c4 = st.columns(4)
        auc_help = help_for("auc")
        c1.metric(
            "ROC AUC (held-out days)", fmt.number(model.roc_auc), help=f"{auc_help}\n\nThe paper: 0.94."
        )
        c2.metric(
            "PR AUC (average precision)", fmt.number(model.pr_auc), help=f"{auc_help}\n\nThe paper: 0.91."
        )
        c3.metric(
            "Latent Recall@1",
            fmt.percent(lat.at(1)),
            help=f"{help_for('recall_at_n', 'vae')}\n\nThe paper: 5% against 25% raw.",
        )
        c4.metric("Training", f"{model.seconds:.1f} s", help=help_for("vae"))
        c4.caption(f"on {len(model.train_days):,} patient-days")
        roc = curve_frame(*model.roc, "false_positive_rate", "true_positive_rate")
        pr = curve_frame(*model.pr, "recall", "precision")
        c1, c2 = st.columns(2)
        c1.plotly_chart(roc_figure(roc, model.roc_auc), width="stretch", key="labs_roc_chart")
        table_download(roc, "ROC curve (CSV)", "labs_roc.csv", "labs_dl_roc", where=c1)
        c2.plotly_chart(pr_figure(pr, model.pr_auc, model.prevalence), width="stretch", key="labs_pr_chart")
        table_download(pr, "PR curve (CSV)", "labs_pr.csv", "labs_dl_pr", where=c2)

    st.subheader(f"Recall@n, {query_label}, against the {against_label}")
    all_curves = recall_frame(curves)
    st.plotly_chart(recall_figure(curves), width="stretch", key="labs_recall_chart")
    table_download(all_curves, "Recall@n curves (CSV)", "labs_recall.csv", "labs_dl_recall")
    if query == "one_day" and raw.at(1) < raw.random[0]:
        st.caption(
            "Recall@1 is below the random line here. The true patient is scored on their other days only (the "
            "breached day is withheld), while candidates are scored on all their days; candidates with one or "
            "two days have widely spread scores and often land closest to a query when one day of orders says "
            "little about who ordered it. (With the identity of the true patient shuffled, the engine's Recall@n "
            "sits on the random line: see tests/test_labs.py.)"
        )
    spread_n = st.number_input("Spread over simulations at n =", 1, 100, key="labs_spread_n")
    per_sim = {"raw": raw.per_simulation} | ({"latent": lat.per_simulation} if model is not None else {})
    spread = spread_frame(per_sim, int(spread_n))
    st.plotly_chart(spread_figure(spread, int(spread_n)), width="stretch", key="labs_spread_chart")
    table_download(spread, "Recall per simulation (CSV)", "labs_spread.csv", "labs_dl_spread")

    if model is not None:
        st.subheader("Raw against latent Recall@n at every n, paired t-test over simulations (Figure 6)")
        # one verdict for every n (issue #36): the same model's other release (encoder means or
        # sampled draws) too, on the same draws; the sentences are the engine's (latent_verdict)
        other = "sampled" if model.config.release == "mean" else "mean"
        other_model = other_release(ctx, f"{key}:{min_orders}:{model.config}", model, r_days, other)
        lat_other = recall(
            ctx,
            (key, draw_key, "latent", model.config, other),
            lambda: settings.latent_recall(r_days, d, other_model),
        )
        verdict = latent_verdict(raw, lat, model.config.release, model.config.latent_dim)
        st.plotly_chart(paired_figure(verdict.table), width="stretch", key="labs_paired_chart")
        lines = verdict_lines(raw, {model.config.release: lat, other: lat_other}, model.config.latent_dim)
        (st.success if verdict.mitigates else st.warning)(lines[0])
        for line in lines[1:]:
            st.caption(line)
        st.dataframe(verdict.table, hide_index=True, width="stretch", key="labs_paired_table")
        table_download(verdict.table, "Paired test (CSV)", "labs_paired.csv", "labs_dl_paired")

    with st.expander("Definitions and conventions"):
        st.markdown(L.__doc__ or "")
