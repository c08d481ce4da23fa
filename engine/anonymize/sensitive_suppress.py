"""Suppression of the non-sensitive codes that imply a sensitive category (issue 39, the method option).

Global suppression, as Cao, Karras, Raissi and Tan's SuppressControl (VLDB 2010) removes an item from
every transaction: the rules q -> s above rho (`engine.disclosure.sensitive`) are taken highest
confidence first, and for each rule none of whose items is suppressed yet, the item of q with the
fewest released events is suppressed from every record (the least utility cost: events lost; ties by
the item's label). Removing an item removes every rule that holds it and changes no other rule's
confidence (a record holds a set without that item exactly as before, and the population's counts
are the population's), so one pass clears every rule of one or more codes; the measure is taken again
under every adversary asked for and the pass repeated until none is left. A prior above rho (q = {}:
the share of candidates holding s) cannot be cleared by suppressing other codes: refused by name.

Global suppression cannot lower a record's distinguishability (a candidate holding the target's codes
still holds them without the suppressed item, and the target knows fewer), so it cannot break k; it
does not make k either. `suppress_sensitive` verifies k with `engine.risk.verify` on the input and on
the result, and says which (`SensitiveSuppression.k_verified`; tests/test_sensitive_suppress.py checks
that no distinguishability falls).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from engine.adversary import Adversary
from engine.disclosure.sensitive import (
    DEFAULT_M,
    Categories,
    SensitiveRisk,
    release_rho_uncertainty,
)
from engine.io.errors import UserError
from engine.records import Records
from engine.release import Release
from engine.risk import Verification, verify


class PriorAboveRho(UserError, ValueError):
    """A category held by more than rho of the candidates: no suppression of other codes meets rho."""


@dataclass(frozen=True)
class SensitiveSuppression:
    """The release with the codes suppressed, the items suppressed (sorted), the measure
    before and after per adversary, and k verified per adversary on the input and on the result."""

    release: Release
    suppressed_items: tuple[str, ...]
    events_suppressed: int
    before: dict[Adversary, SensitiveRisk]
    after: dict[Adversary, SensitiveRisk]
    k_checks: dict[Adversary, Verification]
    k_before: dict[Adversary, Verification]

    @property
    def rho_verified(self) -> bool:
        return all(r.ok for r in self.after.values())

    @property
    def k_verified(self) -> bool:
        return all(v.ok for v in self.k_checks.values())

    def message(self) -> str:
        failing = [v.message().rstrip(".") for v in self.k_checks.values() if not v.ok]
        k_text = "k verified" if not failing else "k NOT verified: " + "; ".join(failing)
        return (
            f"Suppressed {len(self.suppressed_items)} codes ({self.events_suppressed} events) from every record: "
            f"{'rho verified' if self.rho_verified else 'rho NOT verified'} under "
            f"{', '.join(a.label for a in self.after)}; {k_text}."
        )


def items_to_suppress(risk: SensitiveRisk, records: Records, gone: set[int]) -> list[int]:
    """One pass of the rule (module docstring): for each rule above rho, highest confidence first (ties
    by category, then by known set in vocabulary order), not yet broken by `gone`, its item with the
    fewest events (ties by label)."""
    events = np.bincount(records.event_item, minlength=records.n_items)
    chosen: list[int] = []
    order, known = risk.rule_items()
    for r, row in zip(order.tolist(), known.tolist(), strict=True):
        items = [i for i in row if i >= 0]
        if not items:
            raise PriorAboveRho(
                f"{risk.categories[risk.rule_category[r]]} is held by {risk.rule_confidence[r]:.1%} of the "
                f"candidates, above rho = {risk.rho:g}: suppressing other codes cannot meet rho (raise rho, "
                "or leave the category out)"
            )
        if gone.intersection(items):
            continue
        cheapest = min(items, key=lambda i: (events[i], str(records.items[i])))
        gone.add(cheapest)
        chosen.append(cheapest)
    return chosen


def _without(release: Release, items: Sequence[int]) -> Release:
    """The release with every event of `items` suppressed (listed in `Release.suppressed`)."""
    rec = release.records
    drop = np.isin(rec.event_item, np.asarray(items, dtype=np.int64))
    frame = rec.to_frame()[drop]
    cols = [c for c in ("patient_id", "visit", "code") if c in frame.columns]
    suppressed = pd.concat([release.suppressed, frame[cols]], ignore_index=True)
    return replace(release, records=rec.keep_events(~drop), suppressed=suppressed)


def suppress_sensitive(
    release: Release,
    adversaries: Sequence[Adversary],
    categories: Categories,
    *,
    rho: float,
    k: int,
    m: int = DEFAULT_M,
    population: Records | None = None,
) -> SensitiveSuppression:
    """Suppress codes until no rule exceeds rho under every adversary (module docstring), then verify
    rho by `engine.disclosure.sensitive` and k by `engine.risk.verify` on the release made."""
    if not adversaries:
        raise UserError("name at least one adversary for the sensitive-code suppression")

    def measure(rel: Release) -> dict[Adversary, SensitiveRisk]:
        return {
            a: release_rho_uncertainty(rel, a, categories, rho=rho, m=m, population=population)
            for a in adversaries
        }

    before = after = measure(release)
    gone: set[int] = set()
    out = release
    while not all(r.ok for r in after.values()):
        chosen = [i for a in adversaries for i in items_to_suppress(after[a], out.records, gone)]
        if not chosen:  # cannot happen: a rule above rho always holds an item not yet suppressed
            break
        out = _without(out, sorted(gone))
        after = measure(out)
    items = tuple(str(release.records.items[i]) for i in sorted(gone))
    n_events = int(np.isin(release.records.event_item, sorted(gone)).sum())
    out = replace(
        out,
        method=f"{release.method}, rho suppression" if gone else release.method,
        params={**release.params, "rho": rho, "rho known codes": m, "sensitive": list(categories.names)},
    )
    checks = {a: verify(out, a, k, population) for a in adversaries}
    k_before = {a: verify(release, a, k, population) for a in adversaries}
    return SensitiveSuppression(out, items, n_events, before, after, checks, k_before)
