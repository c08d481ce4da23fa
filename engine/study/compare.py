"""Every release of a study side by side (issue 16; ARX's utility view is the anchor).

One row per release, every figure measured against the ORIGINAL cohort and under the study's
adversary and k (`engine.risk.verify`, never the method's own bookkeeping):

- risk: verified or not, records below k and their share; maximum risk (1 / the smallest
  distinguishability), average risk (mean of 1 / distinguishability) and records at risk (risk above the
  threshold 1/k), all from `engine.risk.risk_measures` of the verification's distinguishability;
- what the research keeps, first (issue 35): PheWAS associations lost and false (Heatherly Table 4),
  when genotypes are given, and the utility constraints met;
- what is kept, read from the release's files (`release_figures`, `engine.utility.coverage.file_figures`,
  the one source of these figures for this table, the IRB report and its JSON): pairs retained
  (distinct (patient, original code) pairs of the cohort still represented by an item specific enough
  to use, `coverage.SPECIFIC_RULE`) and distinct codes kept,
  the rows and patients of the release file;
- records modified: cohort records whose released codes differ from their original codes (a code
  removed or generalized, or the record dropped; for LDA, its `code|age` pairs against the source pairs);
- utility constraints met: diseases of one utility policy (default: the PNAS Table 1 policy) whose
  record count is unchanged (`engine.utility.queries.utility_satisfaction`), the same policy for every
  release; PheWAS associations: Benjamini-Hochberg by default.

`headline` gives the same figures for one release (the pages' headlines) and `flags` the warnings a
release must carry wherever it is shown (a catch-all item; a fraction of the cohort's codes).
`best_rows` names the best release of each column (ties: every release with the best value).
No Streamlit here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine import risk
from engine.adversary import Adversary
from engine.io.pseudonyms import Pseudonyms
from engine.records import Records
from engine.release import Release
from engine.utility.coverage import (
    FileFigures,
    catch_all,
    code_coverage,
    code_part,
    file_figures,
    instances_retained,
)

FEW_CODES = 0.5  # a release covering less than this share of the cohort's distinct codes is flagged

# column -> "min" or "max": which value is best
BEST: dict[str, str] = {
    "share below k": "min",
    "maximum risk": "min",
    "average risk": "min",
    "pairs retained": "max",
    "distinct codes kept": "max",
    "records modified": "min",
    "utility constraints met": "max",
    "PheWAS associations lost": "min",
    "PheWAS associations false": "min",
}
KEY_COLUMNS = ("release", "method", "verified")


@dataclass(frozen=True)
class Headline:
    """What a release keeps of the original cohort (the pages' headline figures)."""

    instances_kept: float  # share of the cohort's code instances released
    instances_original: int
    instances_released: int
    codes_kept: float  # share of the cohort's distinct codes released (as themselves or generalized)
    codes_as_themselves: float
    codes_total: int
    records_modified: float
    catch_all_item: str | None
    catch_all_share: float
    catch_all_codes: int
    catch_all_flagged: bool
    code_set: tuple[str, ...] | None  # the codes a method chose to release (GCCens), else None


def code_set(release: Release) -> tuple[str, ...] | None:
    """The codes a release was restricted to, else None: GCCens releases only its selected codes (its
    caps name them); an LDA release holds (code, age) pairs of its selected codes (the code parts of its
    items)."""
    caps = release.params.get("caps") if isinstance(release.params, dict) else None
    if release.method.lower().startswith("gccens") and isinstance(caps, dict):
        return tuple(str(c) for c in caps)
    if release.age_pairs:
        codes: set[str] = set()
        for item in (str(x) for x in release.records.items):
            for pair in release.item_codes.get(item, frozenset((item,))):
                codes.add(code_part(pair, True))
        return tuple(sorted(codes))
    return None


def _record_counts(records: Records, patients: pd.Index, items: pd.Index) -> sp.csr_matrix:
    """The records' code instances as a patients x items count matrix (rows: `patients`, a patient
    absent from `records` an empty row, a patient not in `patients` left out; columns: the shared
    `items`, by their text)."""
    rows = patients.get_indexer(records.patient_ids.astype(str))[records.event_patient]
    cols = items.get_indexer(records.items.astype(str))[records.event_item]
    keep = rows >= 0
    data = np.ones(int(keep.sum()), dtype=np.int64)
    return sp.csr_matrix((data, (rows[keep], cols[keep])), shape=(len(patients), len(items)))


def records_modified(release: Release, cohort: Records) -> float:
    """Share of the cohort's records whose released code instances differ from their original ones
    (a record missing from the release counts as modified). An LDA release (`code|age` items) is
    compared with the pairs it was made from (`release.source`), not with the plain codes. Records
    are compared as multisets of item texts (sparse count matrices over the items of both)."""
    if cohort.n_patients == 0:
        return 0.0
    original = release.source if release.age_pairs and release.source is not None else cohort
    patients = pd.Index(cohort.patient_ids.astype(str))
    items = pd.Index(
        np.unique(np.concatenate([original.items.astype(str), release.records.items.astype(str)]))
    )
    diff = _record_counts(original, patients, items) - _record_counts(release.records, patients, items)
    diff.eliminate_zeros()
    return float((diff.getnnz(axis=1) > 0).mean())


def headline(release: Release, cohort: Records) -> Headline:
    """The figures of one release against the original cohort."""
    kept = instances_retained(release, cohort)
    cov = code_coverage(release, cohort)
    big = catch_all(release)
    shares = cov.shares()
    return Headline(
        instances_kept=kept.share,
        instances_original=kept.original,
        instances_released=kept.released,
        codes_kept=shares["as_themselves"] + shares["generalized"],
        codes_as_themselves=shares["as_themselves"],
        codes_total=cov.codes,
        records_modified=records_modified(release, cohort),
        catch_all_item=big.item,
        catch_all_share=big.share,
        catch_all_codes=big.codes,
        catch_all_flagged=big.flagged,
        code_set=code_set(release),
    )


def code_set_text(codes: tuple[str, ...] | None, total: int) -> str:
    """'codes 250, 272, 401, 724 (4 of 3,117 in the cohort)'; '' when the release has no code set."""
    if codes is None:
        return ""
    shown = ", ".join(codes[:8]) + (f", … ({len(codes) - 8} more)" if len(codes) > 8 else "")
    return f"codes {shown} ({len(codes):,} of {total:,} in the cohort)"


def flags(h: Headline, figures: FileFigures | None = None) -> list[str]:
    """The warnings a release carries on every page that shows it. With the figures of its files
    (`release_figures`: the Compare page and the report), what is kept is stated as pairs retained,
    the figure those show; else as code instances (the method pages' headline)."""
    out = []
    kept = (
        f"{h.instances_kept:.1%} of its code instances kept"
        if figures is None
        else f"{figures.pairs_share:.1%} of its (patient, code) pairs retained"
    )
    if h.catch_all_flagged:
        out.append(
            f"One catch-all item holds {h.catch_all_share:.0%} of the released rows and stands for "
            f"{h.catch_all_codes:,} codes: constraints can be met while the data say little."
        )
    if h.code_set is not None and len(h.code_set) < h.codes_total:
        out.append(
            f"Releases only {code_set_text(h.code_set, h.codes_total)}: everything else of the cohort is "
            f"left out ({kept})."
        )
    elif (h.codes_kept if figures is None else figures.codes_share) < FEW_CODES:
        share = h.codes_kept if figures is None else figures.codes_share
        out.append(f"Covers only {share:.1%} of the cohort's {h.codes_total:,} distinct codes ({kept}).")
    return out


def measuring_files(release: Release) -> dict[str, bytes]:
    """The release file and code map as the export gate writes them but naming patients by their
    source ids, for measuring a release that has no files (not verified): never written, never
    offered (the gate is the one way out, `engine.io.export`)."""
    from engine.io.export import CODE_MAP_FILE, RELEASE_FILE, safe_csv_bytes

    return {
        RELEASE_FILE: safe_csv_bytes(release.exported_frame()),
        CODE_MAP_FILE: safe_csv_bytes(release.exported_code_map()),
    }


def release_figures(
    release: Release,
    cohort: Records,
    files: Mapping[str, bytes] | None = None,
    pseudonyms: Pseudonyms | None = None,
) -> FileFigures:
    """The figures of a release's files (`engine.utility.coverage.file_figures`): of `files` (the
    export gate's, patients by release ids, read with the crosswalk of `pseudonyms`) when given, else
    of the same files as the gate would write them (`measuring_files`). Relabelling patients changes
    no count, so both give the same figures."""
    from engine.io.export import CODE_MAP_FILE, RELEASE_FILE, release_ids

    crosswalk: dict[str, str] | None = None
    if files:
        if pseudonyms is None:
            raise ValueError("the release files name patients by release ids: give the study's pseudonyms")
        crosswalk = {r: s for s, r in release_ids(release, pseudonyms).items()}
    else:
        files = measuring_files(release)
    return file_figures(cohort, files[RELEASE_FILE], files.get(CODE_MAP_FILE), crosswalk)


def phewas_changes(
    original: pd.DataFrame,
    released: Mapping[str, pd.DataFrame],
    alpha: float = 0.05,
    correction: str | None = None,
) -> dict[str, tuple[int, int]]:
    """Release name -> (associations lost, false) over every SNP (Table 4's Total row)."""
    from engine.utility import phewas

    corr = correction or phewas.DEFAULT_CORRECTION
    table = phewas.significance_table(original, released, alpha=alpha, correction=corr)  # type: ignore[arg-type]
    if table.empty:
        return {name: (0, 0) for name in released}
    total = table[table["snp"] == "Total"].iloc[0]
    return {name: (int(total[f"{name}: lost"]), int(total[f"{name}: false"])) for name in released}


def constraints_met(
    release: Release, cohort: Records, utility: Mapping[str, frozenset[str]] | None = None
) -> tuple[int, int]:
    """(met, of) the utility constraints (`engine.utility.queries.utility_satisfaction`): diseases whose
    record count the release keeps; `utility` defaults to the cohort's default policy (the PNAS Table 1
    diseases in the cohort's vocabulary), the comparison's for every release."""
    from engine.memo import memo
    from engine.utility.queries import default_utility_policy, utility_satisfaction

    if utility is None:  # read once per cohort, not per release (issue 36: 0.18 s of every new release's
        # headline at paper scale)
        utility = memo(
            "default utility policy",
            cohort.fingerprint,
            lambda: default_utility_policy([str(x) for x in cohort.items]).as_mapping(),
            size=4,
        )
    sat = utility_satisfaction(cohort, release, utility)
    return int(sat["satisfied"].sum()), len(sat)


def comparison_table(
    releases: Mapping[str, Release],
    cohort: Records,
    population: Records | None,
    adversary: Adversary,
    k: int,
    *,
    utility: Mapping[str, frozenset[str]] | None = None,
    phewas_lost_false: Mapping[str, tuple[int, int]] | None = None,
    verifications: Mapping[str, risk.Verification] | None = None,
    figures: Mapping[str, FileFigures] | None = None,
    files: Mapping[str, Mapping[str, bytes]] | None = None,
    pseudonyms: Pseudonyms | None = None,
    headlines: Mapping[str, Headline] | None = None,
) -> pd.DataFrame:
    """One row per release (study order): the columns of the module docstring, key columns first.
    `verifications`: a release's verification under `adversary` and `k` when already made (the
    report's); the others are verified here. `figures`: a release's `release_figures` when already
    measured (the report's); the others are measured here, from `files` (the gate's, read with the
    crosswalk of `pseudonyms`) when given. `headlines`: a release's `headline` when already made."""
    from engine.utility.queries import default_utility_policy

    if utility is None:
        utility = default_utility_policy([str(x) for x in cohort.items]).as_mapping()
    rows = []
    for name, release in releases.items():
        v = (verifications or {}).get(name)
        if v is None or v.adversary != adversary or v.k != int(k):
            v = risk.verify(release, adversary, int(k), population)
        dis = np.asarray(v.distinguishability)
        measures = risk.risk_measures(dis, risk.threshold_of_k(int(k)))
        h = (headlines or {}).get(name)
        if h is None:
            h = headline(release, cohort)
        f = (figures or {}).get(name)
        if f is None:
            f = release_figures(release, cohort, (files or {}).get(name), pseudonyms)
        met, of = constraints_met(release, cohort, utility)
        lost, false = (phewas_lost_false or {}).get(name, (None, None))
        rows.append(
            {
                "release": name,
                "method": release.method,
                "verified": bool(v.ok),
                "records below k": int((dis < int(k)).sum()),
                "share below k": float((dis < int(k)).mean()) if len(dis) else 0.0,
                "maximum risk": measures.prosecutor_max,
                "average risk": measures.average,
                "records at risk": measures.records_at_risk,
                # what the research keeps first (issue 35), then what the files hold
                "PheWAS associations lost": lost,
                "PheWAS associations false": false,
                "utility constraints met": met,
                "utility constraints": of,
                "pairs retained": f.pairs_share,
                "pairs kept": f.pairs_kept,
                "pairs in the cohort": f.pairs_of,
                "rows released": f.rows,
                "patients released": f.patients,
                "distinct codes kept": f.codes_share,
                "records modified": h.records_modified,
                "warnings": " ".join(flags(h, f)),
            }
        )
    table = pd.DataFrame(rows)
    if phewas_lost_false is None and len(table):
        table = table.drop(columns=["PheWAS associations lost", "PheWAS associations false"])
    if len(table):
        best = best_rows(table)
        table.insert(
            3, "best in", [", ".join(c for c, names in best.items() if n in names) for n in table["release"]]
        )
    return table


# what is kept can never be "best" in a release that carries a catch-all item (issue 35: ACLIP's one item
# standing for 4,921 codes was "(best)" at 100% of pairs retained)
KEPT_COLUMNS = ("pairs retained", "distinct codes kept")


def best_rows(table: pd.DataFrame) -> dict[str, set[str]]:
    """Column -> the releases with its best value (`BEST` says min or max); columns without values
    are left out, and a release flagged for a catch-all item is never best in `KEPT_COLUMNS`."""
    out: dict[str, set[str]] = {}
    catch_all = (
        table["warnings"].astype(str).str.contains("catch-all", regex=False)
        if "warnings" in table.columns
        else pd.Series(False, index=table.index)
    )
    for col, how in BEST.items():
        if col not in table.columns:
            continue
        values = pd.to_numeric(table[col], errors="coerce")
        if col in KEPT_COLUMNS:
            values = values.where(~catch_all)
        if values.notna().sum() == 0:
            continue
        target = values.min() if how == "min" else values.max()
        out[col] = set(table.loc[np.isclose(values, target), "release"].astype(str))
    return out


def comparison_data(table: pd.DataFrame) -> dict[str, Any]:
    """The comparison table JSON-ready (the IRB report's): its columns, one object per release (numbers
    as numbers, missing as None) and, per `BEST` column, the releases with the best value (sorted)."""
    rows = [{col: _plain(value) for col, value in row.items()} for row in table.to_dict("records")]
    best = {col: sorted(names) for col, names in best_rows(table).items()} if len(table) else {}
    return {"columns": [str(c) for c in table.columns], "rows": rows, "best": best}


def _plain(value: Any) -> Any:
    """A table cell as a JSON value: numpy scalars as Python ones, NaN and None as None."""
    if value is None:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and np.isnan(value):
        return None
    return value
