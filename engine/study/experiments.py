"""Experiments: each paper's method run over a grid of parameters, measured, one row per point.

Every sweep of the tool lives here, for the Trade-offs tabs, the CLI and the benchmarks alike. This
module imports the methods (`engine.anonymize`) and the measures (`engine.utility`); a measure never
imports a method, so the two packages stay free of each other.

- GCCens (Tamersoy 2010, Tables 1-2): `gccens_point`, `gccens_sweep_k`, `gccens_sweep_caps`.
- LDA (Tamersoy 2011 thesis, Figures 9-12 and 15): `lda_sweep_k`, `lda_sweep_weights`, `lda_point`.
- Heatherly 2013 (retention and residual risk against k, three scopes): `heatherly_sweep_k`.
- Clinical profiles (Loukides 2010, PNAS Figures 3-4): `profiles_sweep`, `profiles_point`.

A sweep that the UI caches point by point takes the point function as an argument (`compare`,
`point`; the LDA sweeps optionally): the loop, its order and the table are the same whichever way a point is computed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import pandas as pd

from engine import risk
from engine.adversary import Adversary
from engine.anonymize.censor import CensorProblem, gccens_run
from engine.anonymize.population import ScopeComparison, scope_summary
from engine.anonymize.profiles import run_profiles
from engine.anonymize.trajectories import Trajectories, lda
from engine.io.progress import Progress
from engine.records import Records
from engine.utility.censoring import cul_statistics, release_cul
from engine.utility.loss import avg_re, dataset_loss
from engine.utility.queries import UtilityPolicy

# ------------------------------------------------------------------------------------ GCCens
GCCensVariant = Literal["faithful", "targeted"]
GCCENS_COLUMNS = [
    "k",
    "cap",
    "variant",
    "mean",
    "std",
    "median",
    "skewness",
    "share_modified",
    "share_codes_retained",
    "mean_vs_original",
    "share_modified_vs_original",
    "share_retained_vs_original",
    "iterations",
    "k_reached",
    "verified",
]


def gccens_point(
    problem: CensorProblem,
    k: int,
    cap: int | None,
    variant: GCCensVariant = "faithful",
    *,
    verify: bool = True,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """One row of Table 1/2: GCCens at (k, universal cap) on a prepared `CensorProblem`, its CUL
    statistics (Tamersoy's, against the capped record, and against the original record: caps
    counted), and (with `verify`) the risk engine's verdict on the release. `progress`: GCCens's
    (`censor_counts`; it may raise to cancel)."""
    release = gccens_run(problem, k, cap=cap, variant=variant, progress=progress)
    st = cul_statistics(release_cul(release), release)
    orig = cul_statistics(release_cul(release, "original"), release, "original")  # caps counted
    verified = None
    if verify:
        adversary = Adversary(problem.scope, "all_visits")
        verified = risk.verify(release, adversary, k, problem.population).ok
    return {
        "k": int(k),
        "cap": cap,
        "variant": variant,
        "mean": st.mean,
        "std": st.std,
        "median": st.median,
        "skewness": st.skewness,
        "share_modified": st.share_modified,
        "share_codes_retained": st.share_codes_retained,
        "mean_vs_original": orig.mean,
        "share_modified_vs_original": orig.share_modified,
        "share_retained_vs_original": orig.share_codes_retained,
        "iterations": release.loss["iterations"],
        "k_reached": release.loss["k_reached"],
        "verified": verified,
    }


def _gccens_sweep(
    problem: CensorProblem,
    settings: list[tuple[int, int]],
    variant: GCCensVariant,
    verify: bool,
    progress: Progress | None,
) -> pd.DataFrame:
    rows = []
    for i, (k, cap) in enumerate(settings):
        _step(progress, i, len(settings), f"k = {k}, cap = {cap}")
        rows.append(gccens_point(problem, k, cap, variant, verify=verify))
    _step(progress, len(settings), len(settings), "done")
    return pd.DataFrame(rows, columns=GCCENS_COLUMNS)


def gccens_sweep_k(
    problem: CensorProblem,
    ks: Iterable[int] = range(2, 26),
    cap: int = 3,
    variant: GCCensVariant = "faithful",
    *,
    verify: bool = True,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Table 1: CUL statistics for each k at a universal cap (paper: caps 3, k from 2 to 25);
    `verify` adds the risk engine's verdict; `progress` as `_step` says."""
    return _gccens_sweep(problem, [(int(k), int(cap)) for k in ks], variant, verify, progress)


def gccens_sweep_caps(
    problem: CensorProblem,
    caps: Iterable[int] = range(3, 11),
    k: int = 5,
    variant: GCCensVariant = "faithful",
    *,
    verify: bool = True,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Table 2: CUL statistics for each universal cap at a fixed k (paper: k = 5, caps 3 to 10)."""
    return _gccens_sweep(problem, [(int(k), int(c)) for c in caps], variant, verify, progress)


# ------------------------------------------------------------------------------------ LDA
LDAPoint = Callable[[int, float, str], dict[str, Any]]


def lda_measures(res: Any, *, avgre: bool = True) -> dict[str, Any]:
    """ILM and ALM (thesis Definition 7, `dataset_loss`) and, with `avgre`, AvgRE of an LDA result."""
    ilm, alm = dataset_loss(res)
    out: dict[str, Any] = {"ILM": ilm, "ALM": alm}
    if avgre:
        out["AvgRE"] = avg_re(res).value
    return out


def lda_point(traj: Trajectories, *, avgre: bool = True, **lda_kwargs: Any) -> LDAPoint:
    """The uncached point of the LDA sweeps: `point(k, w_icd, method)` runs `lda` on `traj` and
    returns `lda_measures`. The app passes a memoized point of its own (same measures)."""

    def point(k: int, w_icd: float, method: str) -> dict[str, Any]:
        return lda_measures(lda(traj, k, w_icd=w_icd, method=method, **lda_kwargs), avgre=avgre)

    return point


def _step(progress: Progress | None, n: int, total: int, label: str) -> None:
    """Every sweep's progress (`engine.io.progress.Progress`): before point n (0-based) of `total`,
    `progress(n / total, "<label>: point n+1 of total")`; after the last, `progress(1.0, ...)`."""
    if progress is not None:
        what = f"{label}: point {n + 1:,} of {total:,}" if n < total else f"{total:,} points done"
        progress(n / total if total else 1.0, what)


def lda_sweep_k(
    traj: Trajectories | None,
    ks: Sequence[int] = tuple(range(2, 16)),
    methods: Sequence[str] = ("baseline", "a-gs"),
    *,
    w_icd: float = 0.5,
    avgre: bool = True,
    progress: Progress | None = None,
    point: LDAPoint | None = None,
    **lda_kwargs: Any,
) -> pd.DataFrame:
    """ILM, ALM (and AvgRE) per method and k: thesis Figures 9-12. One row per (method, k), methods
    in the order given, k as given. `point(k, w_icd, method)` computes a point (default
    `lda_point(traj, ...)`); `progress` as `_step` says."""
    point = point or lda_point(_need(traj), avgre=avgre, **lda_kwargs)
    runs = [(m, int(k)) for m in methods for k in ks]
    rows = []
    for n, (m, k) in enumerate(runs):
        _step(progress, n, len(runs), f"{m}, k = {k}")
        measures = point(k, w_icd, m)
        row: dict[str, Any] = {"method": m, "k": k, "ILM": measures["ILM"], "ALM": measures["ALM"]}
        if avgre:
            row["AvgRE"] = measures["AvgRE"]
        rows.append(row)
    _step(progress, len(runs), len(runs), "")
    return pd.DataFrame(rows)


def lda_sweep_weights(
    traj: Trajectories | None,
    k: int = 2,
    weights: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    *,
    method: str = "a-gs",
    progress: Progress | None = None,
    point: LDAPoint | None = None,
    **lda_kwargs: Any,
) -> pd.DataFrame:
    """ILM and ALM per w_ICD (w_Age = 1 - w_ICD): thesis Figure 15. `point` and `progress` as in
    `lda_sweep_k`."""
    point = point or lda_point(_need(traj), avgre=False, **lda_kwargs)
    rows = []
    for n, w in enumerate(weights):
        _step(progress, n, len(weights), f"w_ICD = {w:g}")
        measures = point(int(k), float(w), method)
        rows.append({"w_icd": w, "w_age": round(1 - w, 6), "ILM": measures["ILM"], "ALM": measures["ALM"]})
    _step(progress, len(weights), len(weights), "")
    return pd.DataFrame(rows)


def _need(traj: Trajectories | None) -> Trajectories:
    if traj is None:
        raise ValueError("an LDA sweep needs the trajectories, or a point function")
    return traj


# ------------------------------------------------------------------------------------ Heatherly
def heatherly_tradeoff_frame(points: dict[int, ScopeComparison]) -> pd.DataFrame:
    """Per k and release: DC and CC Local % (Heatherly's Tables 2-3 against the local original) and
    the residual share of records below k."""
    rows = []
    for k, cmp_ in points.items():
        summary = scope_summary(cmp_)
        for _, r in summary.iterrows():
            n = cmp_.results[r["anonymized group"]].release.records.n_patients
            rows.append(
                {
                    "k": k,
                    "release": r["release"],
                    "DC Local %": r["DC Local %"],
                    "CC Local %": r["CC Local %"],
                    "share below k %": 100 * r["records below k"] / max(n, 1),
                }
            )
    return pd.DataFrame(rows)


def heatherly_sweep_k(ks: Iterable[int], compare: Callable[[int], ScopeComparison]) -> pd.DataFrame:
    """Retention and residual risk of the three scopes against k, k in increasing order.

    `compare(k)` anonymizes the scopes at k: `functools.partial(compare_scopes, groups, cohort_ids,
    constraints=..., complete=...)`, or a memoized version of it (the app's)."""
    return heatherly_tradeoff_frame({int(k): compare(int(k)) for k in sorted(ks)})


# ------------------------------------------------------------------------------------ clinical profiles
PROFILES_METHODS = ("UGACLIP", "ACLIP")


def profiles_point(cohort: Records, utility: UtilityPolicy) -> Callable[[int, str, str], dict[str, Any]]:
    """The uncached point of `profiles_sweep`: `run_profiles(...).summary()` on `cohort`."""

    def point(k: int, knowledge: str, method: str) -> dict[str, Any]:
        return run_profiles(cohort, k, knowledge, method, utility.as_mapping()).summary()

    return point


def profiles_sweep(
    point: Callable[[int, str, str], dict[str, Any]],
    ks: Iterable[int],
    knowledges: Iterable[str],
    methods: Sequence[str] = PROFILES_METHODS,
    *,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """PNAS Figures 3-4: one row (`ProfilesRun.summary`) per filtering condition, k (increasing) and
    method, in that order; `progress` as `_step` says."""
    jobs = [(int(k), kn, m) for kn in knowledges for k in sorted(ks) for m in methods]
    rows = []
    for n, (k, kn, m) in enumerate(jobs):
        _step(progress, n, len(jobs), f"{m}, {kn.replace('_', ' ')}, k = {k}")
        rows.append(point(k, kn, m))
    _step(progress, len(jobs), len(jobs), "")
    return pd.DataFrame(rows)
