"""Utility of anonymized clinical profiles (Loukides et al. 2010, PNAS "Results").

- Utility policies: diseases given as sets of ICD-9 codes, read from and written to CSV
  (`disease`, `icd9_codes` separated by spaces, commas or semicolons, optional `comment`).
- Utility constraint satisfaction (PNAS "Policies"): a disease is satisfied when the number of released
  records associated with it equals the number of original records harboring at least one of its
  codes. A released record is associated with the disease when it holds an anonymized item whose
  codes all belong to the disease (Fig. 1E: records harboring (493.00, 493.01, 493.02) have asthma).
- Relative error of case-count queries (PNAS "Support of clinical case counts"; RE of LeFevre et al.
  2006): the workload is every combination of codes held by at least 10% of the original records; a
  released anonymized item of m codes is read as any of its 2^m - 1 nonempty subsets with equal
  probability, so a record holding the items of a query's codes contains the q of them inside an item
  with probability 2^(m-q) / (2^m - 1), independently per item; suppressed codes contribute 0.
  RE = |actual - estimate| / actual.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from engine.anonymize.policy import item_bitsets, released_item_of
from engine.records import Records
from engine.release import Release
from engine.vocab import REFERENCE_DIR

DEFAULT_UTILITY_POLICY = REFERENCE_DIR / "utility_policy_default.csv"
_SEP = re.compile(r"[\s,;]+")


# ------------------------------------------------------------------------------ utility policy
@dataclass(frozen=True)
class UtilityPolicy:
    """Diseases (utility constraints) as code sets, in file order, with the clinical reasoning."""

    diseases: dict[str, frozenset[str]]
    comments: dict[str, str]

    def as_mapping(self) -> dict[str, frozenset[str]]:
        return dict(self.diseases)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "disease": list(self.diseases),
                "icd9_codes": [" ".join(sorted(c)) for c in self.diseases.values()],
                "comment": [self.comments.get(d, "") for d in self.diseases],
            }
        )

    def to_csv(self) -> str:
        return self.to_frame().to_csv(index=False)


def utility_policy_from_frame(frame: pd.DataFrame, source: str = "utility policy") -> UtilityPolicy:
    """Validate a table of diseases; ValueError naming the source, row (1-based, header = row 1) and
    column of the first problems."""
    cols = {str(c).strip().lower(): c for c in frame.columns}
    missing = [c for c in ("disease", "icd9_codes") if c not in cols]
    if missing:
        raise ValueError(f"{source}: missing column(s) {missing}; expected disease, icd9_codes[, comment]")
    diseases: dict[str, frozenset[str]] = {}
    comments: dict[str, str] = {}
    problems: list[str] = []
    for r, (name, codes, comment) in enumerate(
        zip(
            frame[cols["disease"]].to_numpy(dtype=object),
            frame[cols["icd9_codes"]].to_numpy(dtype=object),
            frame[cols["comment"]].to_numpy(dtype=object) if "comment" in cols else [""] * len(frame),
            strict=True,
        ),
        start=2,
    ):
        name = "" if _blank(name) else str(name).strip()
        code_text = "" if _blank(codes) else str(codes).strip()
        if not name and not code_text:
            continue  # an empty editor row
        if not name:
            problems.append(f"row {r}, column disease: empty disease name")
            continue
        if name in diseases:
            problems.append(f"row {r}, column disease: {name!r} is listed twice")
            continue
        cs = frozenset(c for c in _SEP.split(code_text) if c)
        if not cs:
            problems.append(f"row {r}, column icd9_codes: no codes for {name!r}")
            continue
        diseases[name] = cs
        comments[name] = "" if _blank(comment) else str(comment)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise ValueError(f"{source}: " + "; ".join(problems[:3]) + more)
    return UtilityPolicy(diseases, comments)


def read_utility_policy(
    source: str | Path | io.IOBase | None = None, name: str | None = None
) -> UtilityPolicy:
    """Read a utility policy CSV (default: the shipped Table 1 policy)."""
    src = DEFAULT_UTILITY_POLICY if source is None else source
    label = name or (str(src) if isinstance(src, str | Path) else "uploaded utility policy")
    try:
        frame = pd.read_csv(src, dtype=str, keep_default_na=False, comment=None)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise ValueError(f"{label}: not a readable CSV ({exc})") from exc
    return utility_policy_from_frame(frame, label)


def _blank(v: object) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v)) or str(v).strip() == ""


# ---------------------------------------------------------------------- constraint satisfaction
def disease_counts(
    records: Records, codes: frozenset[str], item_codes: Mapping[str, frozenset[str]] | None
) -> int:
    """Records holding an item whose codes all belong to `codes` (original data: any code of it)."""
    cols = [
        j
        for j, it in enumerate(records.items.tolist())
        if (item_codes or {}).get(str(it), frozenset((str(it),))) <= codes
    ]
    if not cols:
        return 0
    return int((records.patient_item_sets[:, cols].sum(axis=1) > 0).sum())


def utility_satisfaction(
    cohort: Records, release: Release, utility: UtilityPolicy | Mapping[str, frozenset[str]]
) -> pd.DataFrame:
    """One row per disease: records with it before and after, and whether the constraint is satisfied."""
    diseases = utility.diseases if isinstance(utility, UtilityPolicy) else dict(utility)
    rows = []
    for name, codes in diseases.items():
        before = disease_counts(cohort, codes, None)
        after = disease_counts(release.records, codes, release.item_codes)
        rows.append((name, before, after, before == after))
    return pd.DataFrame(rows, columns=["disease", "original_records", "released_records", "satisfied"])


def satisfaction_table(results: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Table 1's layout: one row per disease, one ✓ column per method."""
    out: pd.DataFrame | None = None
    for method, df in results.items():
        col = df[["disease", "original_records"]].copy()
        col[method] = np.where(df["satisfied"].to_numpy(dtype=bool), "✓", "")
        col[f"{method} records"] = df["released_records"].to_numpy()
        out = (
            col
            if out is None
            else out.merge(col, on=["disease", "original_records"], how="outer", sort=False)
        )
    return out if out is not None else pd.DataFrame(columns=["disease"])


# ---------------------------------------------------------------------------- case-count queries
def frequent_itemsets(
    records: Records, min_share: float = 0.10, max_queries: int = 20000
) -> list[tuple[str, ...]]:
    """Every combination of codes held by at least `min_share` of the records (Apriori, level-wise),
    in order of size then text; at most `max_queries` (the first ones in that order)."""
    n = records.n_patients
    if n == 0:
        return []
    need = int(np.ceil(min_share * n - 1e-9))
    need = max(need, 1)
    bits = item_bitsets(records.patient_item_sets)
    sup = np.bitwise_count(bits).sum(axis=1)
    items = records.items
    level: dict[tuple[int, ...], np.ndarray] = {(int(j),): bits[j] for j in np.flatnonzero(sup >= need)}
    out: list[tuple[int, ...]] = []
    while level and len(out) < max_queries:
        keys = sorted(level, key=lambda t: [items[x] for x in t])
        out.extend(keys)
        nxt: dict[tuple[int, ...], np.ndarray] = {}
        for a_i, a in enumerate(keys):
            for b in keys[a_i + 1 :]:
                if a[:-1] != b[:-1]:
                    continue
                u = tuple(sorted((*a, b[-1])))
                if u in nxt or not all(u[:x] + u[x + 1 :] in level for x in range(len(u))):
                    continue
                acc = level[a] & bits[b[-1]]
                if int(np.bitwise_count(acc).sum()) >= need:
                    nxt[u] = acc
        level = nxt
    return [tuple(str(items[x]) for x in t) for t in out[:max_queries]]


def estimated_count(
    query: Iterable[str],
    release: Release,
    item_of: Mapping[str, str],
    bits: np.ndarray,
    pos: Mapping[str, int],
) -> float:
    """Expected number of released records holding every code of `query` (module docstring)."""
    by_item: dict[str, int] = {}
    for c in query:
        it = item_of.get(c)
        if it is None:
            return 0.0
        by_item[it] = by_item.get(it, 0) + 1
    rows = [pos[it] for it in by_item]
    count = int(np.bitwise_count(np.bitwise_and.reduce(bits[rows], axis=0)).sum())
    p = 1.0
    for it, q in by_item.items():
        m = len(release.codes_of(it))
        if m > 1:
            p *= 2.0**-q / (1.0 - 2.0**-m)  # = 2^(m-q) / (2^m - 1), overflow-free
    return count * p


@dataclass(frozen=True)
class RelativeError:
    """RE over the workload: per query, and mean / standard deviation."""

    queries: pd.DataFrame  # query, actual, estimate, relative_error
    mean: float
    std: float


def relative_error(
    cohort: Records, release: Release, min_share: float = 0.10, workload: list[tuple[str, ...]] | None = None
) -> RelativeError:
    """RE of the case-count workload on the release (module docstring); `workload` defaults to the
    combinations held by at least `min_share` of the original records."""
    queries = frequent_itemsets(cohort, min_share) if workload is None else workload
    if not queries:
        return RelativeError(
            pd.DataFrame(columns=["query", "actual", "estimate", "relative_error"]),
            float("nan"),
            float("nan"),
        )
    obits = item_bitsets(cohort.patient_item_sets)
    opos = {str(c): i for i, c in enumerate(cohort.items.tolist())}
    rbits = item_bitsets(release.records.patient_item_sets)
    rpos = {str(c): i for i, c in enumerate(release.records.items.tolist())}
    item_of = released_item_of(release)
    rows = []
    for q in queries:
        act = int(np.bitwise_count(np.bitwise_and.reduce(obits[[opos[c] for c in q]], axis=0)).sum())
        est = estimated_count(q, release, item_of, rbits, rpos)
        rows.append((" ".join(q), act, est, abs(act - est) / act if act else float("nan")))
    df = pd.DataFrame(rows, columns=["query", "actual", "estimate", "relative_error"])
    re_ = df["relative_error"].to_numpy(dtype=float)
    return RelativeError(df, float(np.nanmean(re_)), float(np.nanstd(re_)))
