"""The Risk page's "Sensitive diagnoses" expander (issue 39): rho-uncertainty of the original cohort and
of every release of the study under the sidebar's adversary, per sensitive category
(`engine.disclosure.sensitive`). Computed only when the officer ticks it (about 0.4-1.8 s on the sample)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.disclosure.sensitive import (
    DEFAULT_M,
    RhoPolicy,
    SensitiveRisk,
    load_categories,
    release_rho_uncertainty,
)
from engine.io.errors import UserError
from engine.release import Release
from ui import cache, errors, literal
from ui import format as fmt
from ui.downloads import table_download


def _shipped_categories():
    """The shipped categories, read once per session (a CSV read and checked at every rerun of the Risk
    page cost about 1 % of the server's CPU at sixteen sessions: issue 40, finding 7)."""
    return cache.memo("sensitive categories", (), load_categories, size=1)


def _measure(release: Release, ctx, names: tuple[str, ...], rho: float, m: int) -> SensitiveRisk:
    def compute() -> SensitiveRisk:
        cats = _shipped_categories().select(list(names))
        return release_rho_uncertainty(release, ctx.adversary, cats, rho=rho, m=m, population=ctx.population)

    key = (release.content_fingerprint, ctx.adversary, names, rho, m)
    return cache.memo("risk sensitive", key, compute, size=8, data=(ctx.cohort, ctx.population))


def _state_in_study(ctx, names: tuple[str, ...], rho: float, m: int) -> None:
    """Issue 39: the categories, rho and a written reason stated in the session's study, which then
    refuses a release above rho ("Add to study", exports, the report), or no longer stated."""
    from ui import study as study_ui

    study = study_ui.session(ctx)
    stated = study.sensitive
    st.caption(
        "The study states no rho: releases are not checked for sensitive inferences."
        if stated is None
        else literal.md(
            f"The study states rho = {stated.rho:g} for {', '.join(stated.categories)}, up to {stated.m} "
            f"known codes ({stated.reason}): a release above it is refused, like one below k."
        )
    )
    reason = st.text_input("Why this rho (written in the study and the report)", key="risk_sensitive_reason")
    c1, c2 = st.columns(2)
    if c1.button("State this rho in the study", key="risk_sensitive_state", disabled=not names):
        try:
            study_ui.update(study.with_sensitive(RhoPolicy(names, rho, reason, m)))
        except UserError as exc:
            literal.error(errors.message(exc))
            return
        st.rerun()
    if stated is not None and c2.button("Stop checking rho", key="risk_sensitive_unstate"):
        study_ui.update(study.with_sensitive(None))
        st.rerun()


def show(ctx, releases: dict[str, Release]) -> None:
    """The expander: category picker, rho and m, then per release and category the records holding it,
    those inferred above rho and the rules above rho; the rules of the original as a download."""
    with st.expander(
        "Sensitive diagnoses (can a recipient infer HIV, mental health, substance use, pregnancy?)"
    ):
        shipped = _shipped_categories()
        st.caption(
            "rho-uncertainty (Cao, Karras, Raissi and Tan, VLDB 2010): for every set of up to m non-sensitive "
            "codes a record's attacker can know (the sidebar's adversary), the confidence that a record "
            "holding them holds the category. A record's sensitive code is inferred when a rule of its own "
            "exceeds rho. Categories and their sources: sample_data/reference/sensitive_categories.csv."
        )
        names = st.multiselect(
            "Sensitive categories",
            list(shipped.names),
            default=list(shipped.names),
            key="risk_sensitive_categories",
        )
        c1, c2 = st.columns(2)
        rho = c1.number_input(
            "rho (highest confidence allowed)", 0.0, 0.99, 0.5, 0.05, key="risk_sensitive_rho"
        )
        m = int(c2.number_input("known codes at most (m)", 1, 3, DEFAULT_M, key="risk_sensitive_m"))
        _state_in_study(ctx, tuple(names), float(rho), m)
        if not names or not st.checkbox("Measure", key="risk_sensitive_on"):
            return
        rows, original = [], None
        for name, rel in {"original": Release("original", ctx.cohort), **releases}.items():
            try:
                got = _measure(rel, ctx, tuple(names), float(rho), m)
            except UserError as exc:  # too many combinations, no population
                literal.error(f"{name}: {errors.message(exc)}")
                continue
            original = got if original is None else original
            for row in got.summary().itertuples(index=False):
                rows.append(
                    {
                        "release": name,
                        "category": row[0],
                        "records holding": row[1],
                        "inferred above rho": row[2],
                        "share of records inferred": fmt.percent(row[3]),
                        "rules above rho": row[5],
                        "highest confidence": round(float(row[4]), 3),
                    }
                )
        if not rows or original is None:
            return
        st.caption(
            f"{ctx.adversary.label}, rho = {rho:g}, m = {m}: {original.combinations:,} combinations enumerated "
            "for the original."
        )
        table = pd.DataFrame(rows)
        st.dataframe(table, hide_index=True, key="risk_sensitive_table")
        table_download(
            table,
            "Download the sensitive-code summary (CSV)",
            "risk_sensitive_summary.csv",
            "dl_risk_sensitive",
        )
        table_download(
            original.rules,
            "Download the original's rules above rho (CSV)",
            "risk_sensitive_rules.csv",
            "dl_risk_sensitive_rules",
        )
