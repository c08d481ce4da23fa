"""The ledger as it was before issue 24 (engine/study/ledger.py at f9a2b91): `combine` through pandas
frames, the pair verified by `risk.release_distinguishability` on the combined release (its
attacker-known visits computed from the combined source). Kept as the plain reference the fast
ledger is compared with (tests/test_ledger_fast.py, bench/report.py). Not used by the engine."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from engine import risk
from engine.adversary import Adversary
from engine.records import Records
from engine.release import Release
from engine.study.ledger import PREFIXES, LedgerRelease, PairResult


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


def reference_combine(a: Release, b: Release, population: Records | None = None) -> Release:
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


def reference_candidate_pool(a: Release, b: Release, population: Records) -> Records:
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


def reference_pair_distinguishability(
    a: Release, b: Release, adversary: Adversary, population: Records
) -> dict[str, int]:
    """Per patient of either release, the fewest candidates the recipient holding both is left with:
    the minimum of the linked release's distinguishability (`combine`, verified by `risk.verify`)
    and each release's alone (the recipient may attack either file on its own: a release showing its
    visits, or a patient with nothing in the other file, can be riskier alone than linked). So the
    pair never reports less risk than either release alone."""
    combined = reference_combine(a, b, population)
    if adversary.scope == "population":
        combined = replace(combined, population=reference_candidate_pool(a, b, population))
    out: dict[str, int] = {}
    for rel in (combined, a, b):
        v = risk.release_distinguishability(rel, adversary, population)
        for pid, d in zip(map(str, rel.records.patient_ids), np.asarray(v).tolist(), strict=True):
            out[pid] = min(out.get(pid, d), int(d))
    return out


def reference_verify_pair(
    a: LedgerRelease, b: LedgerRelease, adversary: Adversary, k: int, population: Records
) -> PairResult:
    """The pair verified as one release (module docstring, `pair_distinguishability`)."""
    ids_a = set(map(str, a.release.records.patient_ids))
    ids_b = set(map(str, b.release.records.patient_ids))
    dis = np.fromiter(
        reference_pair_distinguishability(a.release, b.release, adversary, population).values(),
        dtype=np.int64,
    )
    return PairResult(
        a, b, len(ids_a & ids_b), len(dis), int((dis < k).sum()), int((dis <= 1).sum()), k, adversary
    )


def reference_ledger(
    releases: list[LedgerRelease], adversary: Adversary, k: int, population: Records
) -> list[PairResult]:
    """Every pair of `releases` that shares a patient, verified as one."""
    out = []
    for i, a in enumerate(releases):
        for b in releases[i + 1 :]:
            if set(map(str, a.release.records.patient_ids)) & set(map(str, b.release.records.patient_ids)):
                out.append(reference_verify_pair(a, b, adversary, k, population))
    return out
