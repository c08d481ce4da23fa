"""`check_invariant` as it was before issue 24 (engine/release.py at 41de5b2): every event's unit
(patient, or patient and visit label) as a joined string, the cohort's (unit, code) pairs merged with
the released items through pandas. Kept as the plain reference the integer-coded check is compared
with (tests/test_release_check.py, bench/release_check.py). Not used by the engine."""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.records import Records
from engine.release import Release, ReleaseInvariantError


def reference_check_invariant(release: Release, cohort: Records) -> None:
    """Raise `ReleaseInvariantError` unless every released patient is a cohort patient and every
    released item of a patient stands for at least one code that patient had, within the same visit
    (matched by visit label) when both the release and the cohort have visits. For `age_pairs`
    releases the cohort's items must be `code|age` pairs too (the method's input)."""
    rec = release.records
    pids = rec.patient_ids.astype(str)
    known = pd.Index(cohort.patient_ids.astype(str))
    outside = pids[known.get_indexer(pids) < 0]
    if len(outside):
        raise ReleaseInvariantError(
            f"{release.method}: {len(outside)} released patient(s) are not in the cohort, "
            f"e.g. {', '.join(map(str, outside[:5]))}"
        )
    if rec.n_events == 0:
        return
    by_visit = rec.has_visits and cohort.has_visits

    def unit_keys(r: Records) -> np.ndarray:
        """Per event, its unit: the patient, or `patient \\x1f visit label` when matched by visit."""
        pid = pd.Series(r.patient_ids.astype(str)[r.event_patient])
        if by_visit:
            vis = pd.Series([str(v) for v in r.visit_ids], dtype=object)[r.event_visit].reset_index(drop=True)
            pid = pid + "\x1f" + vis
        return pid.to_numpy(dtype=object)

    rel_units = unit_keys(rec)
    src_units = unit_keys(cohort)
    units = pd.Index(pd.unique(np.concatenate([rel_units, src_units])))
    present = release.present_items()
    item_pos = pd.Index(present)
    # every released item present, and the codes it stands for
    code_item_rows, code_item_cols = [], []
    code_index: dict[str, int] = {}
    for j, item in enumerate(present.tolist()):
        for c in release.codes_of(str(item)):
            code_item_rows.append(code_index.setdefault(c, len(code_index)))
            code_item_cols.append(j)
    covered = np.zeros(0, dtype=np.int64)
    src_code_idx = pd.Index(list(code_index)).get_indexer(cohort.items.astype(str))
    ev_code = src_code_idx[cohort.event_item]
    ok = ev_code >= 0
    if ok.any():
        inv = pd.DataFrame({"code": code_item_rows, "item": code_item_cols})
        src = pd.DataFrame({"unit": units.get_indexer(src_units[ok]), "code": ev_code[ok]}).drop_duplicates()
        pairs = src.merge(inv, on="code")
        covered = np.unique(
            pairs["unit"].to_numpy(np.int64) * len(present) + pairs["item"].to_numpy(np.int64)
        )
    rel_item = item_pos.get_indexer(rec.items[rec.event_item])
    rel_key = units.get_indexer(rel_units).astype(np.int64) * len(present) + rel_item
    bad = ~np.isin(rel_key, covered)
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        where = f"visit {rec.visit_ids[rec.event_visit[e]]} of " if by_visit else ""
        raise ReleaseInvariantError(
            f"{release.method}: {int(bad.sum())} released event(s) stand for no code the patient had"
            f"{' in that visit' if by_visit else ''}, e.g. item {rec.items[rec.event_item[e]]!r} in "
            f"{where}patient {rec.patient_ids[rec.event_patient[e]]}"
        )
