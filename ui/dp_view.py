"""The Report page's "Differentially private tables" expander (issue 39): the officer states a recipient's
privacy budget, picks a table (patients per code, per phecode, or the PheWAS case/control counts when
genotypes are loaded) and its (epsilon, delta), and draws it through OpenDP
(`engine.disclosure.dp_tables`, `dp_phewas`). Each table drawn is spent at once in this session's budget
ledger (`engine.disclosure.dp_budget`: a table the budget cannot take is refused before any noise is
drawn), kept in the session's study too (`Study.dp_budget`, saved with the study file; the session's
ledger keeps every spend even when the study is undone); the error against the exact table is shown for
the officer; the noisy table leaves through
`ui.downloads.table_download` (spreadsheet-safe, audited)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from engine.disclosure.dp_budget import BudgetLedger, Spend
from engine.disclosure.dp_tables import DEFAULT_MAX_CODES, MAX_EPSILON, PatientSets
from engine.io.errors import UserError
from engine.io.export import safe_csv_bytes
from ui import errors, literal
from ui import study as session_study
from ui.downloads import table_download
from ui.state import ABSENT, declare

LEDGER, DRAWN = "_dp_ledger", "_dp_drawn"  # this session's budget ledger; the last table drawn
declare(__name__, held={LEDGER: ABSENT, DRAWN: ABSENT})
BUDGET_DELTA = 1e-5  # the recipient's delta budget: ten Gaussian tables at delta 1e-6
KINDS = ("patients per code", "patients per phecode", "PheWAS case/control counts")


@dataclass(frozen=True)
class Drawn:
    """A table drawn: what leaves (`table`), the officer's error table and the budget line."""

    name: str
    table: pd.DataFrame
    error: pd.DataFrame
    said: str


def _prevalence(
    ctx, kind: str, epsilon: float, delta: float | None, bound: int
) -> tuple[pd.DataFrame, dict, str]:
    from engine.disclosure.dp_tables import dp_prevalence, exact_prevalence

    if kind == KINDS[1]:
        sets = PatientSets.of_phecodes(ctx.cohort)
        categories = [str(c) for c in sets.labels]
    else:
        sets = PatientSets.of_codes(ctx.cohort)
        categories = sorted(map(str, ctx.population.items))
    t = dp_prevalence(sets, categories, epsilon, delta, bound)
    err = t.error(exact_prevalence(sets, categories))
    said = f"OpenDP {t.mechanism}, scale {t.scale:.3g}; each cell within {t.accuracy:.1f} patients (95%)"
    return t.table, {**err, "patients truncated by the bound": t.truncated}, said


def _phewas(ctx, epsilon: float, delta: float | None, bound: int) -> tuple[pd.DataFrame, dict, str]:
    from engine.disclosure.dp_phewas import associations_kept, dp_phewas, phewas_of_dp
    from engine.utility.phewas import phewas_of_records

    genotypes = ctx.dataset.genotypes
    r = dp_phewas(ctx.cohort, genotypes, epsilon, delta, bound)
    kept = associations_kept(phewas_of_records(ctx.cohort, genotypes), phewas_of_dp(r))
    error = {f"associations (p <= 0.05): {k}": v for k, v in kept.items()}
    said = (
        f"OpenDP {r.noise.mechanism}, sensitivity {r.sensitivity}, scale {r.noise.scale:.3g}; "
        f"each cell within {r.noise.accuracy:.1f} patients (95%)"
    )
    return r.table, {**error, "patients truncated by the bound": r.truncated}, said


def _draw(
    ctx, recipient: str, budget: float, kind: str, epsilon: float, delta: float | None, bound: int
) -> None:
    """Check the recipient's budget, draw the table, spend it in the session's ledger."""
    study = session_study.session(ctx)
    ledger: BudgetLedger = st.session_state.get(LEDGER, BudgetLedger()).merged(study.dp_budget)
    ledger = ledger.with_budget(recipient, budget, BUDGET_DELTA)
    ledger.check(recipient, epsilon, delta or 0.0)  # before any noise is drawn
    if kind == KINDS[2]:
        table, error, said = _phewas(ctx, epsilon, delta, bound)
    else:
        table, error, said = _prevalence(ctx, kind, epsilon, delta, bound)
    name = f"dp_{kind.split()[-1].replace('/', '_')}_eps{epsilon:g}.csv"
    spend = Spend(recipient, name, epsilon, delta or 0.0, hashlib.sha256(safe_csv_bytes(table)).hexdigest())
    st.session_state[LEDGER] = ledger = ledger.with_spend(spend)
    session_study.update(study.with_dp_budget(ledger))  # saved with the study file
    spent = ledger.spent(recipient)[0]
    said += f". {recipient} has spent epsilon {spent:g} of {budget:g}."
    error_frame = pd.DataFrame(
        {"measure": list(error), "value": [round(float(v), 3) for v in error.values()]}
    )
    st.session_state[DRAWN] = Drawn(name, table, error_frame, said)


def show(ctx) -> None:
    """The expander (module docstring)."""
    with st.expander("Differentially private tables (prevalence, PheWAS counts; OpenDP)"):
        st.caption(
            "A table of counts with noise calibrated to a privacy budget (epsilon, and delta for the Gaussian "
            "mechanism). Each table drawn spends the recipient's budget at once; beyond it, nothing is drawn. "
            "A patient's codes (or phecodes) are first bounded: the bound is the sensitivity. The recipient's "
            f"delta budget is {BUDGET_DELTA:g}; a stated budget is not changed in the session."
        )
        c1, c2 = st.columns(2)
        recipient = c1.text_input("Recipient", "recipient", key="dp_recipient").strip()
        budget = c2.number_input("Recipient's budget (epsilon)", 0.01, MAX_EPSILON, 3.0, key="dp_budget")
        kinds = KINDS if ctx.dataset.genotypes is not None else KINDS[:2]
        kind = st.radio("Table", kinds, key="dp_kind", horizontal=True)
        c3, c4, c5 = st.columns(3)
        epsilon = c3.number_input("epsilon of this table", 0.01, MAX_EPSILON, 1.0, key="dp_epsilon")
        delta_text = c4.selectbox("delta", ("none (Laplace)", "1e-6", "1e-8"), key="dp_delta")
        bound = int(c5.number_input("bound per patient", 1, 2000, DEFAULT_MAX_CODES, key="dp_bound"))
        delta = None if delta_text.startswith("none") else float(delta_text)
        if st.button("Draw the noisy table (spends the budget)", key="dp_draw"):
            try:
                _draw(ctx, recipient, float(budget), str(kind), float(epsilon), delta, bound)
            except UserError as exc:
                literal.error(errors.message(exc))
        drawn: Drawn | None = st.session_state.get(DRAWN)
        if drawn is None:
            return
        st.caption(literal.md(drawn.said))
        st.dataframe(drawn.error, hide_index=True, key="dp_error")
        st.dataframe(drawn.table.head(200), hide_index=True, key="dp_table")
        table_download(drawn.table, "Download the noisy table (CSV)", drawn.name, "dl_dp_table")
