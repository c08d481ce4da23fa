"""Releases that add up: the ledger of a study's releases (issue 28).

Every release goes to a recipient (`StudyRelease.recipient`, default the study's
`determination.recipient`). Two releases that share patients are verified as one, under the worst
case that one recipient holds both and links them patient by patient: the steward's crosswalk joins
the two releases' records per source patient (inside the engine a release's records carry the source
ids, which is what the crosswalk maps the release ids back to), each patient's released items are
the union of the two releases' items (labels prefixed by the release, `A:` and `B:`, so a label two
methods use differently stays two items; each keeps the codes its own code map gives), and the
combined release is verified by `engine.risk.verify` under the study's adversary and k against the
study's population. The combined file is one set of items per patient (visits and repeat counts of
either release are not combined: a recipient cannot tell which visit of one release is which of the
other), and its source is the population's records of its patients (a single-visit attacker's
knowledge comes from the original visits, `risk.attacker_known_visits`).

This is done for every pair, whoever the recipients are (they are shown): two recipients may share
what they hold. A pair is flagged when the combined release has records below k: releases that each
meet k and together do not (`combine`'s docstring has the smallest example). Pairs of three or more
releases are not combined here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from engine import risk
from engine.adversary import Adversary
from engine.records import Records
from engine.release import Release

PREFIXES = ("A:", "B:")


@dataclass(frozen=True)
class LedgerRelease:
    """One release on the ledger: its study, name, recipient and the release itself."""

    study: str
    name: str
    recipient: str
    release: Release

    @property
    def label(self) -> str:
        return f"{self.study} / {self.name}" if self.study else self.name


@dataclass(frozen=True, eq=False)
class PairResult:
    """Two releases verified as one (module docstring)."""

    a: LedgerRelease
    b: LedgerRelease
    shared: int  # patients in both
    records: int  # patients in either
    below_k: int
    unique: int
    k: int
    adversary: Adversary

    @property
    def ok(self) -> bool:
        return self.below_k == 0

    @property
    def same_recipient(self) -> bool:
        return self.a.recipient == self.b.recipient

    def message(self) -> str:
        who = (
            f"both to {self.a.recipient or 'the study recipient'}"
            if self.same_recipient
            else f"to {self.a.recipient or '(unnamed)'} and {self.b.recipient or '(unnamed)'}"
        )
        verdict = (
            f"together verified: all {self.records:,} patients have distinguishability >= {self.k}"
            if self.ok
            else f"together NOT verified: {self.below_k:,} of {self.records:,} patients below k = {self.k} "
            f"({self.unique:,} unique)"
        )
        return f"{self.a.label} + {self.b.label} ({who}; {self.shared:,} shared patients): {verdict} ({self.adversary.label})"

    def to_dict(self) -> dict[str, object]:
        return {
            "a": self.a.label,
            "b": self.b.label,
            "recipient a": self.a.recipient,
            "recipient b": self.b.recipient,
            "shared patients": self.shared,
            "records": self.records,
            "below k": self.below_k,
            "unique": self.unique,
            "verified": self.ok,
        }


def combine(a: Release, b: Release, population: Records | None = None) -> Release:
    """The release a recipient holding `a` and `b` has after linking them per source patient: one set
    of items per patient, the union of both releases' items (labels prefixed `A:` / `B:`), each
    standing for the codes of its own code map. `population` (the records the releases' patients come
    from) becomes the source, else `a.source` with `b.source`'s patients appended.

    Smallest example of releases that add up: P1 {a,b}, P2 {a,c}, P3 {d,b}, P4 {d,c}; release A
    keeps {a, d}, release B keeps {b, c}: each has every record shared by 2 patients (k = 2 in the
    cohort), together every record is unique."""
    frames = []
    codes: dict[str, frozenset[str]] = {}
    for prefix, rel in zip(PREFIXES, (a, b), strict=True):
        r = rel.records
        if r.n_events == 0:
            continue
        f = pd.DataFrame(
            {
                "patient_id": r.patient_ids[r.event_patient].astype(str),
                "code": prefix + r.items[r.event_item].astype(str),
            }
        )
        frames.append(f.drop_duplicates())
        for item in map(str, r.items):
            codes[prefix + item] = frozenset(rel.codes_of(item))
    events = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["patient_id", "code"])
    records = Records.from_frame(events)
    ids = np.asarray(records.patient_ids).astype(str)
    if population is not None:
        source = population.subset(ids)
    else:
        parts = [s.to_frame() for s in (a.source, b.source) if s is not None]
        base = pd.concat(parts, ignore_index=True).drop_duplicates() if parts else events
        source = Records.from_frame(base[base["patient_id"].astype(str).isin(set(ids))])
    return Release(
        method="combined",
        records=records,
        item_codes=codes,
        params={"combined": [a.method, b.method]},
    ).checked(source)


def event_patients(r: Records) -> np.ndarray:
    return r.patient_ids if r.n_events == 0 else np.unique(r.patient_ids[r.event_patient])


def verify_pair(
    a: LedgerRelease, b: LedgerRelease, adversary: Adversary, k: int, population: Records
) -> PairResult:
    """The pair verified as one release (module docstring)."""
    ids_a = set(map(str, a.release.records.patient_ids))
    ids_b = set(map(str, b.release.records.patient_ids))
    combined = combine(a.release, b.release, population)
    v = risk.verify(combined, adversary, k, population)
    dis = np.asarray(v.distinguishability)
    return PairResult(
        a, b, len(ids_a & ids_b), len(dis), int((dis < k).sum()), int((dis <= 1).sum()), k, adversary
    )


def ledger(
    releases: list[LedgerRelease], adversary: Adversary, k: int, population: Records
) -> list[PairResult]:
    """Every pair of `releases` that shares a patient, verified as one."""
    out = []
    for i, a in enumerate(releases):
        for b in releases[i + 1 :]:
            if set(map(str, a.release.records.patient_ids)) & set(map(str, b.release.records.patient_ids)):
                out.append(verify_pair(a, b, adversary, k, population))
    return out


def check_addition(
    existing: list[LedgerRelease], new: LedgerRelease, adversary: Adversary, k: int, population: Records
) -> list[PairResult]:
    """The pairs the new release would form with those on the ledger, before it is added; the
    caller flags any that is not verified."""
    ids = set(map(str, new.release.records.patient_ids))
    return [
        verify_pair(e, new, adversary, k, population)
        for e in existing
        if ids & set(map(str, e.release.records.patient_ids))
    ]


def study_ledger_releases(
    study, releases: Mapping[str, Release], study_name: str = ""
) -> list[LedgerRelease]:
    """A study's releases on the ledger, each with its recipient (its own, else the study's)."""
    default = study.determination.recipient
    return [
        LedgerRelease(study_name, e.name, e.recipient or default, releases[e.name])
        for e in study.current()
        if e.name in releases
    ]


def ledger_frame(pairs: list[PairResult]) -> pd.DataFrame:
    return pd.DataFrame([p.to_dict() for p in pairs])
