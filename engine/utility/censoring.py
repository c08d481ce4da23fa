"""Censoring Utility Loss (CUL) and its statistics: Tamersoy 2010, "Data Utility Measure", Tables 1-2
(thesis section III.6, Tables 1-2).

CUL of a record = censored codes in the record / codes in the record. Baselines:
- `capped` (default, the paper's tables): codes censored by the GCCens loop over the codes of the
  preprocessed (capped) record. Table 2 only makes sense this way: its loss grows with the cap,
  whereas censoring by the caps themselves would shrink as caps grow.
- `original`: every removed code (caps and loop) over the codes of the original record.
A record with no codes has CUL 0.

Statistics (Table 1/2 layout): mean; standard deviation (sample, ddof = 1); median; skewness (the
adjusted Fisher-Pearson moment coefficient G1, `scipy.stats.skew(bias=False)`, 0 when the CULs do
not vary or there are fewer than 3 records); share of records modified (CUL > 0); share of codes
retained (kept codes over baseline codes, pooled over records); mean retention (1 - mean CUL, the
paper's "retained 95.4% of the codes on average").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from engine.records import PATIENT, Records
from engine.release import Release

Baseline = Literal["capped", "original"]


def censoring_loss(release: Release, baseline: Baseline = "capped") -> pd.DataFrame:
    """Per released record: `patient_id`, `codes_before`, `censored`, `cul` (Tamersoy's CUL).

    Reads the release alone: kept codes from `release.records`, removed ones from
    `release.suppressed` (its `stage` column says `cap` or `censor`; without it all count)."""
    recs = release.records
    kept = np.diff(recs.event_ptr[recs.visit_ptr]).astype(np.int64)
    sup = release.suppressed
    removed_all = np.zeros(recs.n_patients, dtype=np.int64)
    censored = np.zeros(recs.n_patients, dtype=np.int64)
    if len(sup):
        idx = recs.index_of(sup[PATIENT].astype(str).to_numpy(dtype=object))
        removed_all = np.bincount(idx, minlength=recs.n_patients).astype(np.int64)
        if "stage" in sup.columns:
            loop = sup["stage"].astype(str).to_numpy(dtype=object) == "censor"
            censored = np.bincount(idx[loop], minlength=recs.n_patients).astype(np.int64)
        else:
            censored = removed_all
    if baseline == "capped":
        before = kept + censored
    elif baseline == "original":
        before = kept + removed_all
        censored = removed_all
    else:
        raise ValueError(f"baseline must be 'capped' or 'original', not {baseline!r}")
    cul = np.divide(censored, before, out=np.zeros(len(before)), where=before > 0)
    return pd.DataFrame(
        {"patient_id": recs.patient_ids, "codes_before": before, "censored": censored, "cul": cul}
    )


def release_cul(release: Release, baseline: Baseline = "capped") -> np.ndarray:
    """(n_records,) CUL of each released record."""
    return censoring_loss(release, baseline)["cul"].to_numpy(dtype=float)


@dataclass(frozen=True)
class CULStatistics:
    """The columns of Tamersoy's Tables 1-2, plus modification and retention shares."""

    records: int
    mean: float
    std: float
    median: float
    skewness: float
    share_modified: float
    share_codes_retained: float
    mean_retention: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def cul_statistics(
    cul: np.ndarray, release: Release | None = None, baseline: Baseline = "capped"
) -> CULStatistics:
    """Mean, std (ddof 1), median, skewness (G1) of CULs; shares modified and retained (pooled over
    the release's records when given, else 1 - mean CUL)."""
    cul = np.asarray(cul, dtype=float)
    n = len(cul)
    if n == 0:
        nan = float("nan")
        return CULStatistics(0, nan, nan, nan, nan, nan, nan, nan)
    std = float(np.std(cul, ddof=1)) if n > 1 else 0.0
    skew = float(stats.skew(cul, bias=False)) if n >= 3 and np.ptp(cul) > 0 else 0.0
    retained = 1.0 - float(cul.mean())
    if release is not None:
        loss = censoring_loss(release, baseline)
        total = int(loss["codes_before"].sum())
        retained = 1.0 - int(loss["censored"].sum()) / total if total else 1.0
    return CULStatistics(
        records=n,
        mean=float(cul.mean()),
        std=std,
        median=float(np.median(cul)),
        skewness=skew,
        share_modified=float(np.mean(cul > 0)),
        share_codes_retained=retained,
        mean_retention=1.0 - float(cul.mean()),
    )


def _multiset_text(codes: list[str]) -> str:
    return ", ".join(f"{c} ×{n}" if n > 1 else c for c, n in sorted(Counter(codes).items()))


def records_side_by_side(
    sel_cohort: Records, release: Release, loss: pd.DataFrame, patients: list[str]
) -> pd.DataFrame:
    """Chosen patients' codes before and after censoring, as multisets (`250 ×3`), with each record's
    CUL (`censoring_loss`'s `cul` column), as Tamersoy's Figure 3 lays records out."""
    idx = sel_cohort.index_of(patients)
    ridx = release.records.index_of(patients)
    cul = loss.set_index("patient_id")["cul"]
    return pd.DataFrame(
        {
            "patient_id": patients,
            "original": [_multiset_text(sel_cohort.patient_codes(i)) for i in idx],
            "released": [_multiset_text(release.records.patient_codes(i)) for i in ridx],
            "CUL": [round(float(cul[p]), 3) for p in patients],
        }
    )
