"""Releases that add up: the ledger of a study's releases (issue 28).

Every release goes to a recipient (`StudyRelease.recipient`, default the study's
`determination.recipient`). Two releases that share patients are verified as one, under the worst
case that one recipient holds both and links them patient by patient: the steward's crosswalk joins
the two releases' records per source patient (inside the engine a release's records carry the source
ids, which is what the crosswalk maps the release ids back to), each patient's released items are
the union of the two releases' items (labels prefixed by the release, `A:` and `B:`, so a label two
methods use differently stays two items; each stands for the codes its own code map gives, prefixed
the same way), and the combined release is verified by `engine.risk.verify` under the study's
adversary and k against the study's population. The combined file is one record per patient without
visits (a recipient cannot tell which visit of one release is which of the other; repeats count where
a release counts them), and its source is the population's records of its patients, or for an LDA
release its `code|age` cohort (`combine`). A patient's figure is the least of the combined release's
and each release's alone (`pair_distinguishability`): the pair never shows less risk than either.

This is done for every pair, whoever the recipients are (they are shown): two recipients may share
what they hold. A pair is flagged when the combined release has records below k: releases that each
meet k and together do not (`combine`'s docstring has the smallest example). Pairs of three or more
releases are not combined here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

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


def _side_events(prefix: str, rel: Release) -> pd.DataFrame:
    """One release's part of the linked file: its events with labels prefixed, repeats kept when the
    release counts them (`counts_repeats`), else one row per (patient, item)."""
    r = rel.records
    f = pd.DataFrame(
        {
            "patient_id": r.patient_ids[r.event_patient].astype(str),
            "code": prefix + r.items[r.event_item].astype(str),
        }
    )
    return f if rel.counts_repeats else f.drop_duplicates()


def _side_codes(prefix: str, rel: Release) -> dict[str, frozenset[str]]:
    """Every item of the release, prefixed, standing for its own codes prefixed the same way: an item
    of release A is matched only by items of release A (the linked file shows which file holds what)."""
    return {
        prefix + str(item): frozenset(prefix + c for c in rel.codes_of(str(item)))
        for item in rel.records.items
    }


def _frame(r: Records, prefix: str, ids: set[str], visits: bool) -> pd.DataFrame:
    """`r`'s events of the patients `ids` (codes prefixed), with a `visit` column (str) when `visits`."""
    f = r.to_frame()
    f = f[f["patient_id"].astype(str).isin(ids)]
    out = pd.DataFrame(
        {"patient_id": f["patient_id"].astype(str).to_numpy(), "code": prefix + f["code"].astype(str)}
    )
    if visits:
        out["visit"] = f["visit"].astype(str).to_numpy() if "visit" in f.columns else "0"
    return out


def _own_codes(rel: Release) -> Records:
    """A release without a source read as its own source: each item expanded to the codes it stands for
    (nothing to check it against; the attacker's single-visit knowledge is then the whole record)."""
    r = rel.records
    rows = [
        (str(p), c)
        for p, item in zip(r.patient_ids[r.event_patient], r.items[r.event_item], strict=True)
        for c in rel.codes_of(str(item))
    ]
    return Records.from_frame(pd.DataFrame(rows, columns=["patient_id", "code"]))


def combine(a: Release, b: Release, population: Records | None = None) -> Release:
    """The release a recipient holding `a` and `b` has after linking them per source patient: one
    record per patient, the union of both releases' items (labels prefixed `A:` / `B:`).

    Items and codes. Each item stands for the codes of its own code map, prefixed by its release
    (`A:401.1` stands for `A:401.1`; an LDA item `A:401|[35-36]` for the `A:code|age` pairs it covers):
    a known item of one file is matched only by items of that file, as the recipient sees which file
    shows what (unprefixed codes would let a code file B shows for a candidate stand in for one file A
    does not show for it). Repeats are kept for a release that counts them (`counts_repeats`: GCCens,
    the LDA's multiset of pairs) and the combined release counts repeats when either does; the other
    release's items count once.

    Source (what the invariant is checked against and the single-visit attacker's knowledge is read
    from, `risk.attacker_known_visits`). A release of codes: `population`'s records of its patients
    (else its own `source`), with their original visits. An LDA release (`age_pairs`): its own source,
    the cohort's `code|age` pairs (`LDASettings.run`), which carry no visits: the engine verifies an
    LDA release alone with all its pairs as one visit, so here every pair is known in each of the
    patient's original visits (a single-visit known set is that visit's codes of the other release
    plus every pair of the LDA release: never less than either release alone gives the attacker).
    Two LDA releases: one visit, every pair of both.

    Smallest example of releases that add up: P1 {a,b}, P2 {a,c}, P3 {d,b}, P4 {d,c}; release A
    keeps {a, d}, release B keeps {b, c}: each has every record shared by 2 patients (k = 2 in the
    cohort), together every record is unique."""
    pair = tuple(zip(PREFIXES, (a, b), strict=True))
    frames = [_side_events(prefix, rel) for prefix, rel in pair if rel.records.n_events]
    codes: dict[str, frozenset[str]] = {}
    for prefix, rel in pair:
        codes.update(_side_codes(prefix, rel))
    events = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["patient_id", "code"])
    records = Records.from_frame(events)
    ids = set(np.asarray(records.patient_ids).astype(str).tolist())
    plain: list[pd.DataFrame] = []
    pairs: list[pd.DataFrame] = []
    for prefix, rel in pair:
        if rel.age_pairs:
            pairs.append(
                _frame(rel.source if rel.source is not None else _own_codes(rel), prefix, ids, False)
            )
            continue
        src = population if population is not None else rel.source
        plain.append(_frame(src if src is not None else _own_codes(rel), prefix, ids, True))
    base = (
        pd.concat(plain, ignore_index=True)
        if plain
        else pd.DataFrame(columns=["patient_id", "code", "visit"])
    )
    if pairs:
        known = pd.concat(pairs, ignore_index=True)
        visits = base[["patient_id", "visit"]].drop_duplicates()
        lone = sorted(set(known["patient_id"]) - set(visits["patient_id"]))
        visits = pd.concat([visits, pd.DataFrame({"patient_id": lone, "visit": "lda"})], ignore_index=True)
        base = pd.concat([base, known.merge(visits, on="patient_id")], ignore_index=True)
    source = Records.from_frame(base.drop_duplicates()[["patient_id", "visit", "code"]])
    return Release(
        method="combined",
        records=records,
        item_codes=codes,
        counts_repeats=a.counts_repeats or b.counts_repeats,
        params={"combined": [a.method, b.method]},
    ).checked(source)


def candidate_pool(a: Release, b: Release, population: Records) -> Records:
    """The population adversary's candidates for the combined release: every person of the pool as
    each file would show them, prefixed like `combine`'s items: for a release of codes its released
    pool (`Release.population`, Heatherly's DEMO_B / DEMO_S) or else `population`, repeats as the release
    counts them; for an LDA release nothing (the population holds no `code|age` pairs, so no candidate
    matches an LDA item: the same as the LDA release alone against the population)."""
    frames = []
    for prefix, rel in zip(PREFIXES, (a, b), strict=True):
        pool = rel.population if rel.population is not None else (None if rel.age_pairs else population)
        if pool is None or pool.n_events == 0:
            continue
        f = pool.to_frame()
        f = pd.DataFrame({"patient_id": f["patient_id"].astype(str), "code": prefix + f["code"].astype(str)})
        frames.append(f if rel.counts_repeats else f.drop_duplicates())
    events = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["patient_id", "code"])
    return Records.from_frame(events)


def event_patients(r: Records) -> np.ndarray:
    return r.patient_ids if r.n_events == 0 else np.unique(r.patient_ids[r.event_patient])


def pair_distinguishability(
    a: Release, b: Release, adversary: Adversary, population: Records
) -> dict[str, int]:
    """Per patient of either release, the fewest candidates the recipient holding both is left with:
    the minimum of the linked release's distinguishability (`combine`, verified by `risk.verify`)
    and each release's alone (the recipient may attack either file on its own: a release showing its
    visits, or a patient with nothing in the other file, can be riskier alone than linked). So the
    pair never reports less risk than either release alone."""
    combined = combine(a, b, population)
    if adversary.scope == "population":
        combined = replace(combined, population=candidate_pool(a, b, population))
    out: dict[str, int] = {}
    for rel in (combined, a, b):
        v = risk.release_distinguishability(rel, adversary, population)
        for pid, d in zip(map(str, rel.records.patient_ids), np.asarray(v).tolist(), strict=True):
            out[pid] = min(out.get(pid, d), int(d))
    return out


def verify_pair(
    a: LedgerRelease, b: LedgerRelease, adversary: Adversary, k: int, population: Records
) -> PairResult:
    """The pair verified as one release (module docstring, `pair_distinguishability`)."""
    ids_a = set(map(str, a.release.records.patient_ids))
    ids_b = set(map(str, b.release.records.patient_ids))
    dis = np.fromiter(
        pair_distinguishability(a.release, b.release, adversary, population).values(), dtype=np.int64
    )
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
