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

import bisect
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from engine.io.loaders import Source, read_table
from engine.io.validation import (
    FileCheck,
    Text,
    ValidationReport,
    check_icd9_codes,
    match_columns,
    report_unknown_codes,
)
from engine.memo import memo
from engine.records import Records, item_bitsets
from engine.release import Release, released_item_of
from engine.vocab import REFERENCE_DIR, icd10cm_item

DEFAULT_UTILITY_POLICY = REFERENCE_DIR / "utility_policy_default.csv"
# the same 18 diseases in ICD-10-CM (column `icd10cm_codes`; bench/make_policy_icd10cm.py writes it)
DEFAULT_UTILITY_POLICY_ICD10CM = REFERENCE_DIR / "utility_policy_default_icd10cm.csv"
_SEP = re.compile(r"[\s,;]+")


# ------------------------------------------------------------------------------ utility policy
@dataclass(frozen=True)
class UtilityPolicy:
    """Diseases (utility constraints) as code sets, in file order, with the clinical reasoning.

    `report` holds the reader's warnings (e.g. codes unknown to ICD-9-CM, unused columns)."""

    diseases: dict[str, frozenset[str]]
    comments: dict[str, str]
    report: ValidationReport = field(default_factory=ValidationReport, compare=False, repr=False)
    # the codes' column in a file: ICD-9-CM (and mixed) policies `icd9_codes`; an OMOP CDM's standard
    # concepts `concept_codes` (item labels SNOMED:<code>, issue 37)
    code_column: str = field(default="icd9_codes", compare=False)

    def as_mapping(self) -> dict[str, frozenset[str]]:
        return dict(self.diseases)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "disease": list(self.diseases),
                self.code_column: [" ".join(sorted(c)) for c in self.diseases.values()],
                "comment": [self.comments.get(d, "") for d in self.diseases],
            }
        )

    def to_csv(self) -> str:
        return self.to_frame().to_csv(index=False)


def _policy(df: pd.DataFrame, fc: FileCheck) -> UtilityPolicy | None:
    """Validate a table of diseases like the events reader: every finding names file, row and column.

    Errors: missing columns, empty disease names, a disease listed twice, a disease without codes,
    values that are not ICD-9-CM codes (with the evident correction: undotted, lost zeros, ...), no
    disease at all. Warnings: codes well formed but unknown to ICD-9-CM (kept), unused columns.
    """
    report = fc.report
    n_err = len(report.errors)
    # a policy in ICD-10-CM names its code column icd10cm_codes (codes checked as ICD-10-CM)
    icd10 = "icd10cm_codes" in df.columns and "icd9_codes" not in df.columns
    concepts = "concept_codes" in df.columns and "icd9_codes" not in df.columns and not icd10
    code_col = "icd10cm_codes" if icd10 else "concept_codes" if concepts else "icd9_codes"
    cols = match_columns(df, fc, ("disease", code_col), ("comment", "provenance"))
    if len(report.errors) > n_err:
        return None
    cols["icd9_codes"] = cols.pop(code_col)
    extra = [c for c in df.columns if c not in cols.values()]
    if extra:
        fc.note(
            "warning",
            ", ".join(map(str, extra)),
            f"column(s) not used: {', '.join(map(str, extra))}",
            "only disease, icd9_codes, comment",
            "extra_columns",
        )
    names = [_text(v) for v in df[cols["disease"]].to_numpy(dtype=object)]
    code_cells = [_text(v) for v in df[cols["icd9_codes"]].to_numpy(dtype=object)]
    notes = (
        [_text(v, strip=False) for v in df[cols["comment"]].to_numpy(dtype=object)]
        if "comment" in cols
        else [""] * len(df)
    )
    diseases: dict[str, frozenset[str]] = {}
    comments: dict[str, str] = {}
    code_rows: list[tuple[int, str]] = []  # (position, code) of every listed code
    for i, (name, cell, note) in enumerate(zip(names, code_cells, notes, strict=True)):
        row = (int(fc.rownum[i]),)
        if not name and not cell:
            continue  # an empty row (e.g. the table editor's last line)
        if not name:
            fc.note("error", cols["disease"], "empty disease name", "a disease name", "blank_value", row)
            continue
        if name in diseases:
            fc.note(
                "error", cols["disease"], f"{name!r} is listed twice", "each disease once", "duplicate", row
            )
            continue
        codes = [c for c in _SEP.split(cell) if c]
        if not codes:
            fc.note(
                "error",
                cols["icd9_codes"],
                f"no codes for {name!r}",
                "ICD-9-CM codes separated by spaces, commas or semicolons",
                "blank_value",
                row,
            )
            continue
        diseases[name] = frozenset(codes)
        comments[name] = note
        code_rows.extend((i, c) for c in codes)
    if code_rows:
        pos = np.array([i for i, _ in code_rows], dtype=np.int64)
        text = Text.of(pd.Series([c for _, c in code_rows], dtype=object))
        per_code = FileCheck(fc.file, fc.rownum[pos], report)
        if concepts:
            _check_concept_items([c for _, c in code_rows], per_code, cols["icd9_codes"])
        elif icd10:
            _check_icd10cm_codes([c for _, c in code_rows], per_code, cols["icd9_codes"])
            diseases = {d: frozenset(icd10cm_item(c) for c in cs) for d, cs in diseases.items()}
        else:
            unknown, counts = check_icd9_codes(text, per_code, cols["icd9_codes"])
            if unknown.any():
                report_unknown_codes(per_code, cols["icd9_codes"], unknown, counts, "keep")
    if not diseases and len(report.errors) == n_err:
        fc.note(
            "error", None, "no diseases in the policy", "at least one disease with its codes", "empty_file"
        )
    if len(report.errors) > n_err:
        return None
    return UtilityPolicy(
        diseases, comments, report, code_column="concept_codes" if concepts else "icd9_codes"
    )


def _check_concept_items(codes: list[str], fc: FileCheck, column: str) -> None:
    """Every code of a CDM policy is an item label with its vocabulary (`SNOMED:22298006`, as
    `engine.vocab.concept_item` writes them; issue 37): an error naming row and column otherwise."""
    for i, code in enumerate(codes):
        vocabulary, sep, value = code.partition(":")
        if not (sep and vocabulary and value):
            fc.note(
                "error",
                column,
                f"{code!r} names no vocabulary",
                "a CDM concept as VOCABULARY:code (SNOMED:22298006, RxNorm:1191)",
                "bad_code",
                (int(fc.rownum[i]),),
            )


def _check_icd10cm_codes(codes: list[str], fc: FileCheck, column: str) -> None:
    """Every code of an ICD-10-CM policy is a dotted ICD-10-CM code (error naming row and column);
    a well-formed code unknown to the CMS list and to the phecode map is a warning (kept)."""
    from engine.vocab import ICD10_CODE, is_known_icd10cm

    for i, code in enumerate(codes):
        row = (int(fc.rownum[i]),)
        if not ICD10_CODE.match(code):
            fc.note(
                "error",
                column,
                f"{code!r} is not an ICD-10-CM code",
                "dotted ICD-10-CM codes (E11.9)",
                "bad_code",
                row,
            )
        elif not is_known_icd10cm(code):
            fc.note(
                "warning",
                column,
                f"{code!r} is not a known ICD-10-CM code (kept)",
                "a code of ICD-10-CM",
                "unknown_code",
                row,
            )


def default_utility_policy(items: Iterable[str] | None = None) -> UtilityPolicy:
    """The shipped default policy (PNAS Table 1's 18 diseases) in the vocabularies of these item
    labels: ICD-9-CM (`DEFAULT_UTILITY_POLICY`; also when items is None or names no ICD code),
    ICD-10-CM (`DEFAULT_UTILITY_POLICY_ICD10CM`), or on mixed data each disease with the codes of both
    (the ICD-9-CM file's order and comments, the ICD-10-CM comment appended)."""
    from engine.vocab import ICD9CM, ICD10CM, vocabulary_of_item

    found = {vocabulary_of_item(str(x)) for x in (() if items is None else items)} - {None}
    if ICD10CM not in found:
        return read_utility_policy()
    icd10 = read_utility_policy(DEFAULT_UTILITY_POLICY_ICD10CM)
    if ICD9CM not in found:
        return icd10
    icd9 = read_utility_policy()
    names = [*icd9.diseases, *(d for d in icd10.diseases if d not in icd9.diseases)]
    return UtilityPolicy(
        {d: icd9.diseases.get(d, frozenset()) | icd10.diseases.get(d, frozenset()) for d in names},
        {d: " ".join(x for x in (icd9.comments.get(d, ""), icd10.comments.get(d, "")) if x) for d in names},
    )


def utility_policy_from_frame(frame: pd.DataFrame, source: str = "utility policy") -> UtilityPolicy:
    """Validate a table of diseases (e.g. the page's editor; rows numbered as in a file: header = row 1).

    Raises DataError (a ValueError) naming source, row and column of every problem (see `_policy`)."""
    report = ValidationReport()
    df = frame.reset_index(drop=True)
    df.columns = [str(c) for c in df.columns]
    policy = _policy(df, FileCheck(source, np.arange(len(df), dtype=np.int64) + 2, report))
    report.raise_if_errors()
    assert policy is not None
    return policy


def read_utility_policy(
    source: str | Path | io.IOBase | None = None, name: str | None = None
) -> UtilityPolicy:
    """Read a utility policy CSV (default: the shipped Table 1 policy), validated as any input file.

    `source` is a path or a file-like object (text or bytes, e.g. an upload). Raises DataError (a
    ValueError) naming file, row and column; FileNotFoundError when a path does not exist."""
    src = DEFAULT_UTILITY_POLICY if source is None else source
    if isinstance(src, str | Path):
        data = Source.from_path(src)
        data = Source(name or str(src), data.data)
    else:
        raw = src.read()
        data = Source(name or getattr(src, "name", None) or "uploaded utility policy", _bytes(raw))
    report = ValidationReport()
    read = read_table(data, report)
    policy = None
    if read is not None:
        df, fc = read
        policy = _policy(df, fc)
    report.raise_if_errors()
    assert policy is not None
    return policy


def _bytes(raw: str | bytes) -> bytes:
    return raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)


def _text(v: object, strip: bool = True) -> str:
    if _blank(v):
        return ""
    return str(v).strip() if strip else str(v)


def _blank(v: object) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v)) or str(v).strip() == ""


# ---------------------------------------------------------------------- constraint satisfaction
def disease_counts(
    records: Records, codes: frozenset[str], item_codes: Mapping[str, frozenset[str]] | None
) -> int:
    """Records holding an item whose codes all belong to `codes` (original data: any code of it)."""
    return int(_disease_counts(records, (codes,), item_codes)[0])


def _disease_counts(
    records: Records, diseases: Sequence[frozenset[str]], item_codes: Mapping[str, frozenset[str]] | None
) -> np.ndarray:
    """Per disease, the records holding an item whose codes all belong to it (`disease_counts`), all
    diseases in one product of the records' item sets with an items x diseases 0/1 matrix."""
    labels = [str(x) for x in records.items.tolist()]
    generalized = item_codes or {}
    of_code: dict[str, list[int]] = {}  # code -> the diseases holding it
    for d, codes in enumerate(diseases):
        for c in codes:
            of_code.setdefault(c, []).append(d)
    counts_for = np.zeros((len(labels), len(diseases)), dtype=np.int64)
    for j, label in enumerate(labels):
        stands = generalized.get(label)
        if stands is None:  # the item stands for itself: it counts for every disease holding it
            counts_for[j, of_code.get(label, [])] = 1
        else:
            counts_for[j] = [stands <= codes for codes in diseases]
    if not len(diseases) or not len(labels):
        return np.zeros(len(diseases), dtype=np.int64)
    return np.asarray((records.patient_item_sets @ counts_for > 0).sum(axis=0), dtype=np.int64)


_ORIGINAL_KEPT = 8  # (cohort, policy) pairs whose original counts are kept (least recently used dropped)


def original_disease_counts(cohort: Records, diseases: Sequence[frozenset[str]]) -> np.ndarray:
    """`_disease_counts` of the original cohort (no generalized items), memoized per cohort content
    (`Records.fingerprint`) and diseases where the caller's scope says (`engine.memo`: the app's
    session): they depend on neither the release nor k."""

    def make() -> np.ndarray:
        counts = _disease_counts(cohort, diseases, None)
        counts.setflags(write=False)
        return counts

    return memo("utility original counts", (cohort.fingerprint, tuple(diseases)), make, size=_ORIGINAL_KEPT)


def utility_satisfaction(
    cohort: Records, release: Release, utility: UtilityPolicy | Mapping[str, frozenset[str]]
) -> pd.DataFrame:
    """One row per disease: records with it before and after, and whether the constraint is satisfied."""
    diseases = utility.diseases if isinstance(utility, UtilityPolicy) else dict(utility)
    sets = list(diseases.values())
    before = original_disease_counts(cohort, sets).tolist()
    after = _disease_counts(release.records, sets, release.item_codes).tolist()
    rows = [(name, b, a, b == a) for name, b, a in zip(diseases, before, after, strict=True)]
    return pd.DataFrame(rows, columns=["disease", "original_records", "released_records", "satisfied"])


def constraints_applying(satisfaction: pd.DataFrame) -> int:
    """The utility constraints that match a code of the data (`utility_satisfaction`'s rows with an
    original record): a constraint of none holds 0 records before and after, satisfied vacuously."""
    return int((satisfaction["original_records"] > 0).sum())


def satisfaction_words(satisfaction: pd.DataFrame) -> str:
    """Utility constraints satisfied in words, for the CLI and the view (issue 37: PNAS Table 1's ICD
    policy matches no code of a SNOMED CDM, and its 18 constraints were "18/18 satisfied"): "12/18",
    "12/18 (3 match no code of these data)", or "the utility policy matches no code of these data:
    0 of 18 constraints apply"."""
    n = len(satisfaction)
    applying = constraints_applying(satisfaction)
    if n and not applying:
        return f"the utility policy matches no code of these data: 0 of {n} constraints apply"
    done = f"{int(satisfaction['satisfied'].sum())}/{n}"
    return done if applying == n else f"{done} ({n - applying} match no code of these data)"


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
        # the join pairs a with each later b of the same prefix, in the order of `keys` (issue 36: the
        # scan of every later b for its prefix took 48 s of an UGACLIP run's measures at paper scale)
        same_prefix: dict[tuple[int, ...], list[int]] = {}
        for i, a in enumerate(keys):
            same_prefix.setdefault(a[:-1], []).append(i)
        for a_i, a in enumerate(keys):
            group = same_prefix[a[:-1]]
            for b_i in group[bisect.bisect_right(group, a_i) :]:
                b = keys[b_i]
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


@dataclass(frozen=True, eq=False)
class Workload:
    """The relative error's case-count queries on one cohort with their counts there: what does not
    depend on the release (nor on k)."""

    queries: list[tuple[str, ...]]
    actual: np.ndarray  # (n_queries,) int64: the cohort's records holding every code of each query
    cohort: str  # the cohort's `Records.fingerprint`


_WORKLOADS_KEPT = 4  # cohorts whose workload is kept (`engine.memo`, "case-count workloads")


def case_count_workload(
    cohort: Records, min_share: float = 0.10, queries: list[tuple[str, ...]] | None = None
) -> Workload:
    """`queries` (default: the combinations held by at least `min_share` of the records,
    `frequent_itemsets`) with their counts in `cohort`. The default is memoized per the cohort's
    content where the caller's scope says (`engine.memo`: the app's session); a caller that shares it
    wider (the app's view on the shipped sample, issue 36) passes it to `relative_error`."""

    def make(qs: list[tuple[str, ...]]) -> Workload:
        if not qs:
            return Workload(qs, np.zeros(0, dtype=np.int64), cohort.fingerprint)
        obits = item_bitsets(cohort.patient_item_sets)
        opos = {str(c): i for i, c in enumerate(cohort.items.tolist())}
        actual = [
            int(np.bitwise_count(np.bitwise_and.reduce(obits[[opos[c] for c in q]], axis=0)).sum())
            for q in qs
        ]
        return Workload(qs, np.asarray(actual, dtype=np.int64), cohort.fingerprint)

    if queries is not None:
        return make(queries)
    key = (cohort.fingerprint, float(min_share))
    return memo(
        "case-count workloads", key, lambda: make(frequent_itemsets(cohort, min_share)), size=_WORKLOADS_KEPT
    )


def relative_error(
    cohort: Records,
    release: Release,
    min_share: float = 0.10,
    workload: list[tuple[str, ...]] | Workload | None = None,
) -> RelativeError:
    """RE of the case-count workload on the release (module docstring); `workload` defaults to the
    combinations held by at least `min_share` of the original records (`case_count_workload`)."""
    if not isinstance(workload, Workload):
        workload = case_count_workload(cohort, min_share, workload)
    elif workload.cohort != cohort.fingerprint:
        raise ValueError("the workload was counted on another cohort: pass case_count_workload(cohort)")
    queries = workload.queries
    if not queries:
        return RelativeError(
            pd.DataFrame(columns=["query", "actual", "estimate", "relative_error"]),
            float("nan"),
            float("nan"),
        )
    rbits = item_bitsets(release.records.patient_item_sets)
    rpos = {str(c): i for i, c in enumerate(release.records.items.tolist())}
    item_of = released_item_of(release)
    rows = []
    for q, act in zip(queries, workload.actual.tolist(), strict=True):
        est = estimated_count(q, release, item_of, rbits, rpos)
        rows.append((" ".join(q), act, est, abs(act - est) / act if act else float("nan")))
    df = pd.DataFrame(rows, columns=["query", "actual", "estimate", "relative_error"])
    re_ = df["relative_error"].to_numpy(dtype=float)
    return RelativeError(df, float(np.nanmean(re_)), float(np.nanstd(re_)))
