"""Issue 39: the privacy budget in the study file. A study keeps each recipient's budget and the DP
tables spent against it across save and reopen; a study file whose tables exceed a budget, or whose
budget is malformed, is refused by name; a study written before the field reads as no budget."""

from __future__ import annotations

import json

import pytest

from engine.disclosure.dp_budget import BudgetLedger, Spend
from engine.study.study import DataRef, Study, StudyError

DATA = DataRef("sample", "a" * 64)


def _ledger() -> BudgetLedger:
    ledger = BudgetLedger().with_budget("lab", 2.0, 1e-5)
    return ledger.with_spend(Spend("lab", "dp_code_eps1.csv", 1.0, 0.0, "b" * 64))


def test_the_study_file_keeps_the_recipients_budget_and_spends():
    study = Study(DATA).with_dp_budget(_ledger())
    again = Study.from_json(study.to_json())
    assert again.dp_budget == study.dp_budget
    assert again.dp_budget.spent("lab") == (1.0, 0.0)
    with pytest.raises(Exception, match="would exceed it"):
        again.dp_budget.check("lab", 1.5)


def test_a_study_file_over_budget_or_malformed_is_refused_by_name():
    d = json.loads(Study(DATA).with_dp_budget(_ledger()).to_json())
    d["dp_budget"]["spends"][0]["epsilon"] = 3.0  # more than the budget of 2
    with pytest.raises(StudyError, match=r"^s\.json: .*would exceed it"):
        Study.from_json(json.dumps(d), "s.json")
    d["dp_budget"] = {"format": "something else"}
    with pytest.raises(StudyError, match=r"^s\.json: dp_budget: not a privacy budget ledger"):
        Study.from_json(json.dumps(d), "s.json")
    del d["dp_budget"]  # a study written before the field
    assert Study.from_json(json.dumps(d)).dp_budget == BudgetLedger()


def test_merging_two_ledgers_keeps_every_spend_once_and_refuses_another_budget():
    """The app's session ledger merged with its study's (an undo may restore an older study)."""
    older = _ledger()
    newer = older.with_spend(Spend("lab", "dp_phecode_eps0.5.csv", 0.5, 0.0, "c" * 64))
    assert older.merged(newer).spends == newer.spends
    assert newer.merged(older).spent("lab") == (1.5, 0.0)
    with pytest.raises(Exception, match="a stated budget is not changed"):
        older.merged(BudgetLedger().with_budget("lab", 3.0, 1e-5))
