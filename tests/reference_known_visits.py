"""`_attacker_known_visits` as it was before its integer-coded rewrite (engine/risk.py at 5237086):
the source's events, the released items' codes and the patients' released item sets as pandas frames
of text, merged, then `Records.from_frame`. Kept as the plain reference the rewrite is compared with
(tests/test_known_visits_equal.py, bench/known_visits.py). Not used by the engine."""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.records import Records
from engine.release import Release


def reference_attacker_known_visits(release: Release) -> Records | None:
    """What a single-visit attacker can use of each ORIGINAL visit of a target when the release does
    not show visits: every released item of the target's whole record that stands for a code of that
    visit. A code suppressed in one visit but kept in another of the same patient stays visible in a
    file of one set per patient, so the released visit alone would understate the attacker. Needs the
    release's `source` (the original cohort); None without it, or when the release shows visits
    (then each released visit is matched on its own and the released visits' sets dominate).
    One visit per original visit, items in the release's vocabulary; a patient with nothing left to
    know is absent (consistent with every candidate)."""
    src = release.source
    if src is None or release.shows_visits:
        return None
    rec = release.records
    item_code = pd.DataFrame(
        [(j, c) for j, item in enumerate(rec.items.tolist()) for c in release.codes_of(str(item))],
        columns=["item", "code"],
    )
    held = rec.patient_item_sets.tocoo()
    shown = pd.DataFrame({"patient_id": rec.patient_ids[held.row].astype(str), "item": held.col})
    ev = pd.DataFrame(
        {
            "patient_id": src.patient_ids[src.event_patient].astype(str),
            "visit": src.event_visit.astype(np.int64),
            "code": src.items[src.event_item].astype(str),
        }
    ).drop_duplicates()
    known = ev.merge(item_code, on="code").merge(shown, on=["patient_id", "item"])
    known = known[["patient_id", "visit", "item"]].drop_duplicates()
    frame = pd.DataFrame(
        {
            "patient_id": known["patient_id"].to_numpy(dtype=object),
            "visit": known["visit"].to_numpy(),
            "code": rec.items[known["item"].to_numpy(dtype=np.int64)],
        }
    )
    return Records.from_frame(frame, items=rec.items)
