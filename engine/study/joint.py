"""Releases judged together per recipient: the joint gate (issue 35, finding 2 and "Judged as a whole").

A recipient holds every release sent to them and every release marked public (`StudyRelease.public`,
held by every recipient). Each release may meet k alone while the set, linked patient by patient,
does not (`engine.study.ledger`: the sample's DEMO_D + LDA leave most patients below k). So before
anything leaves for a recipient (the bundle of `study report` and of the Report page, a release's own
download in the app), the set of releases the recipient would then hold is verified as one under the
worst case of perfect linkage: every pair sharing patients (`ledger.verify_pair`) and, when the set
holds three releases or more, the whole set (`ledger.verify_set`: `combine_all` links them all). A set
of which a pair or the whole fails is refused by the one gate, `refuse_unless_verified`
(`JointRefused`, naming the pairs or the set, the patients below k and the remedies). A pair or set
that cannot be combined (`ReleaseInvariantError`) counts as not verified, as on the report's ledger.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.adversary import Adversary
from engine.io.errors import UserError
from engine.records import Records
from engine.release import Release, ReleaseInvariantError
from engine.study.ledger import (
    LedgerRelease,
    PairCache,
    PairResult,
    SetResult,
    given_pair,
    study_ledger_releases,
    verify_pair,
    verify_set,
)

REMEDIES = (
    "withdraw a release (leave it out of what this recipient receives, or `study remove` it), or derive "
    "the releases from one anonymization so that their union is one verified release"
)


class JointRefused(UserError, ValueError):
    """A set of releases for one recipient that fails jointly under linkage; the message names the
    pairs (or the set), the patients below k and the remedies."""


@dataclass(frozen=True, eq=False)
class JointVerdict:
    """The releases one recipient holds, verified together (module docstring)."""

    recipient: str
    held: tuple[LedgerRelease, ...]
    pairs: tuple[PairResult, ...]  # every pair sharing patients
    whole: SetResult | None  # the whole set, when it holds three releases or more
    unlinkable: tuple[str, ...]  # pairs or the set that could not be combined: why
    adversary: Adversary
    k: int

    @property
    def failing(self) -> tuple[PairResult, ...]:
        return tuple(p for p in self.pairs if not p.ok)

    @property
    def ok(self) -> bool:
        return not self.failing and not self.unlinkable and (self.whole is None or self.whole.ok)

    @property
    def who(self) -> str:
        return self.recipient or "the recipient"

    def _scope(self) -> str:
        n = len(self.held)
        what = "every pair sharing patients" + (f" and all {n} as one" if self.whole is not None else "")
        return f"{n} release(s) held by {self.who} ({what}; {self.adversary.label}, k = {self.k})"

    def failures(self) -> list[str]:
        """One phrase per failing pair, per set that failed, per pair or set that could not be linked."""
        out = [
            f"{p.a.label} + {p.b.label}: {p.below_k:,} of {p.records:,} patients below k ({p.unique:,} unique)"
            for p in self.failing
        ]
        if self.whole is not None and not self.whole.ok:
            out.append(
                f"all {len(self.held)} together ({self.whole.label}): {self.whole.below_k:,} of "
                f"{self.whole.records:,} patients below k ({self.whole.unique:,} unique)"
            )
        return out + list(self.unlinkable)

    def message(self) -> str:
        """The joint verdict in one sentence (the report's page 1, the app's pages)."""
        if self.ok:
            return f"Verified together under perfect linkage: {self._scope()}."
        return (
            f"NOT verified together under perfect linkage: {self._scope()}: "
            + "; ".join(self.failures())
            + "."
        )

    def refusal(self, what: str) -> str:
        """Why `what` (e.g. "bundle.zip") may not leave for this recipient: the failures and the remedies."""
        return (
            f"{what} refused: the releases {self.who} would hold fail jointly under perfect linkage "
            f"({self.adversary.label}, k = {self.k}): "
            + "; ".join(self.failures())
            + f". Remedies: {REMEDIES}."
        )

    def to_dict(self) -> dict[str, Any]:
        whole = self.whole
        return {
            "recipient": self.recipient,
            "releases": [r.label for r in self.held],
            "public": [r.label for r in self.held if r.public],
            "verified": self.ok,
            "checked": "every pair sharing patients" + (" and the whole set" if whole is not None else ""),
            "failing pairs": [
                {
                    "a": p.a.label,
                    "b": p.b.label,
                    "records": p.records,
                    "below k": p.below_k,
                    "unique": p.unique,
                }
                for p in self.failing
            ],
            "whole set": None
            if whole is None
            else {
                "records": whole.records,
                "below k": whole.below_k,
                "unique": whole.unique,
                "verified": whole.ok,
            },
            "not linkable": list(self.unlinkable),
            "message": self.message(),
            "remedies": REMEDIES,
        }


def held_by(study: Any, releases: Mapping[str, Release], recipient: str | None = None) -> list[LedgerRelease]:
    """The study's current releases in `releases` (by name) that `recipient` holds: those going to
    them (a release's own recipient, else the study's: `study.determination.recipient`, the default of
    `recipient`) and every public one."""
    who = study.determination.recipient if recipient is None else recipient
    return [r for r in study_ledger_releases(study, releases) if r.public or r.recipient == who]


def joint_verdict(
    held: Sequence[LedgerRelease],
    adversary: Adversary,
    k: int,
    population: Records,
    *,
    recipient: str = "",
    given: Sequence[PairResult] = (),
    cache: PairCache | None = None,
) -> JointVerdict:
    """`held` verified together (module docstring). `given`: pairs already verified against
    `population` (a page's ledger), used for the same two releases under `adversary` and k."""
    cache = cache if cache is not None else PairCache()
    ids = [set(map(str, r.release.records.patient_ids)) for r in held]
    pairs, unlinkable = [], []
    for i, a in enumerate(held):
        for j in range(i + 1, len(held)):
            b = held[j]
            if not ids[i] & ids[j]:
                continue
            try:
                p = given_pair(given, a, b, adversary, k) or verify_pair(
                    a, b, adversary, k, population, cache
                )
            except ReleaseInvariantError as exc:
                unlinkable.append(f"{a.label} + {b.label}: could not be verified as one ({exc})")
                continue
            pairs.append(p)
    whole = None
    if len(held) >= 3:
        try:
            whole = verify_set(held, adversary, k, population, cache)
        except ReleaseInvariantError as exc:
            unlinkable.append(f"all {len(held)} together: could not be verified as one ({exc})")
    return JointVerdict(recipient, tuple(held), tuple(pairs), whole, tuple(unlinkable), adversary, int(k))


def refuse_unless_verified(verdict: JointVerdict | None, what: str) -> None:
    """The joint gate: raise `JointRefused` when the releases a recipient would hold fail together.
    Every export for a recipient passes here (`study report`'s bundle.zip, the app's bundle and
    release downloads)."""
    if verdict is not None and not verdict.ok:
        raise JointRefused(verdict.refusal(what))
