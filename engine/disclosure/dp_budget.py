"""The privacy budget of a recipient across differentially private tables (issue 39, third bullet).

A ledger file states each recipient's budget (epsilon, delta) and records every table spent against
it. Tables given to one recipient compose sequentially (basic composition: their epsilons add, and
their deltas add), so a table whose spend would take the recipient's total past the budget is refused
before any noise is drawn (`BudgetLedger.check`). A budget, once stated, is not changed by a later call
(raising it after spending would void what was promised). The file holds no patient data: recipients,
budgets, table names, what each spent and the sha256 of the table written.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.io.errors import UserError

LEDGER_FORMAT = "cohortshield dp budget ledger 1"
_SLACK = 1e-12  # float sums: 0.1 + 0.2 of a budget 0.3 is within it


@dataclass(frozen=True)
class Spend:
    """One table given to a recipient: its name, the (epsilon, delta) it spent, its file's sha256."""

    recipient: str
    table: str
    epsilon: float
    delta: float
    sha256: str


@dataclass(frozen=True)
class BudgetLedger:
    """Budgets per recipient ((epsilon, delta)) and the spends recorded (module docstring)."""

    budgets: dict[str, tuple[float, float]] = field(default_factory=dict)
    spends: tuple[Spend, ...] = ()

    def spent(self, recipient: str) -> tuple[float, float]:
        """The recipient's total so far (sequential composition)."""
        mine = [s for s in self.spends if s.recipient == recipient]
        return math.fsum(s.epsilon for s in mine), math.fsum(s.delta for s in mine)

    def with_budget(self, recipient: str, epsilon: float, delta: float = 0.0) -> BudgetLedger:
        """The ledger with the recipient's budget stated; an other budget than the one stated is refused."""
        if not recipient:
            raise UserError("a privacy budget belongs to a named recipient: give --recipient")
        if not (0 < epsilon < math.inf) or not (0 <= delta < 1):
            raise UserError(f"a budget is epsilon > 0 and delta in [0, 1), not ({epsilon!r}, {delta!r})")
        stated = self.budgets.get(recipient)
        if stated is not None and stated != (epsilon, delta):
            raise UserError(
                f"recipient {recipient!r} already has the budget epsilon {stated[0]:g}, delta {stated[1]:g}: "
                "a stated budget is not changed"
            )
        return replace(self, budgets={**self.budgets, recipient: (float(epsilon), float(delta))})

    def check(self, recipient: str, epsilon: float, delta: float = 0.0) -> None:
        """Refuse (UserError) a spend the recipient's budget cannot take, naming what is left."""
        if recipient not in self.budgets:
            raise UserError(
                f"recipient {recipient!r} has no privacy budget in the ledger: state one with --budget"
            )
        b_eps, b_delta = self.budgets[recipient]
        s_eps, s_delta = self.spent(recipient)
        if s_eps + epsilon > b_eps + _SLACK or s_delta + delta > b_delta + _SLACK:
            raise UserError(
                f"recipient {recipient!r} has spent epsilon {s_eps:g}, delta {s_delta:g} of the budget epsilon "
                f"{b_eps:g}, delta {b_delta:g}: a table of epsilon {epsilon:g}, delta {delta:g} would exceed it"
            )

    def merged(self, other: BudgetLedger) -> BudgetLedger:
        """Both ledgers' budgets (a recipient's stated differently is refused) and spends (each once, in
        order): a spend recorded in either is never forgotten (the app's session and its study, whose
        undo may restore an older ledger)."""
        out = self
        for recipient, (eps, delta) in other.budgets.items():
            out = out.with_budget(recipient, eps, delta)
        for spend in other.spends:
            if spend not in out.spends:
                out = replace(out, spends=(*out.spends, spend))
        return out

    def with_spend(self, spend: Spend) -> BudgetLedger:
        self.check(spend.recipient, spend.epsilon, spend.delta)
        return replace(self, spends=(*self.spends, spend))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": LEDGER_FORMAT,
            "budgets": {r: {"epsilon": e, "delta": d} for r, (e, d) in sorted(self.budgets.items())},
            "spends": [vars(s) for s in self.spends],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str, name: str = "ledger") -> BudgetLedger:
        """Read a ledger; anything malformed is a UserError naming the file and the field."""
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{name}: not JSON (line {exc.lineno}, column {exc.colno})") from None
        return cls.from_dict(d, name)

    @classmethod
    def from_dict(cls, d: object, name: str = "ledger") -> BudgetLedger:
        """`from_json` of parsed JSON (e.g. a study file's `dp_budget`, `engine.study.study`)."""
        if not isinstance(d, dict) or d.get("format") != LEDGER_FORMAT:
            raise UserError(f"{name}: not a privacy budget ledger (format {LEDGER_FORMAT!r})")
        try:
            budgets = {
                str(r): (_number(b["epsilon"]), _number(b["delta"])) for r, b in dict(d["budgets"]).items()
            }
            spends = tuple(
                Spend(
                    str(s["recipient"]),
                    str(s["table"]),
                    _number(s["epsilon"]),
                    _number(s["delta"]),
                    str(s["sha256"]),
                )
                for s in d["spends"]
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UserError(f"{name}: a budget or spend is malformed ({exc})") from None
        ledger = cls(budgets)
        for s in spends:  # a ledger already over budget is refused, never believed
            ledger = ledger.with_spend(s)
        return ledger


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{value!r} is not a non-negative number")
    return float(value)


def read_ledger(path: str | Path) -> BudgetLedger:
    """The ledger in `path`, or an empty one when the file does not exist yet."""
    p = Path(path)
    if not p.exists():
        return BudgetLedger()
    try:
        return BudgetLedger.from_json(p.read_text("utf-8"), p.name)
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{p.name}: cannot read the ledger ({exc})") from None
