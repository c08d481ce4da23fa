"""The synthetic sample in ICD-10-CM and in mixed ICD-9-CM / ICD-10-CM (issue 14).

The generator (`engine.synth.generator`) bills ICD-9-CM codes. Its ICD-10-CM variant replaces every code through
one crosswalk written from the two vendored phecode maps v1.2 (`sample_data/reference/`), so a code
keeps its phecode (the PheWAS sees the same phenotypes) and the planted associations survive:

- for each ICD-9-CM code with phecode P, the ICD-10-CM code of phecode P that the ICD-10-CM map lists
  first (file order, rows where P is the code's own phecode, not a rolled-up one), preferring, in this
  order, a billable code of the CMS FY2026 list (a leaf of `Hierarchy.icd10cm()`), then any code of
  that list, then any code of the map, and only codes ICD-9-CM's syntax cannot read (no `ICD10CM:`
  prefix needed);
- when no ICD-10-CM code has phecode P, the same search at P's rollup parents (250.11 -> 250.1 ->
  250), nearest first;
- when neither has one (phecodes the ICD-10-CM beta map does not use, such as 1000-1015, injuries and
  poisonings), the same search at the numerically nearest phecode of the same phecode category
  (`category` of the ICD-9 map; ties to the lower phecode) that has one, or, when that category has
  none (category `other`, phecodes 1000-1015: complications of care, foreign bodies), the numerically
  nearest phecode of any category: a placeholder keeping the event, not a clinical equivalent (the
  crosswalk's `rule` column names each fallback; `sample_data/README.md` gives the shares);
- a code with no phecode, or none found, stays unmapped (`crosswalk` says which; the sample has none).

This is a phecode-preserving, many-to-one crosswalk, not CMS' General Equivalence Mappings: several
ICD-9-CM codes of one phecode become one ICD-10-CM code, so the ICD-10-CM sample has fewer distinct
codes than the ICD-9-CM one (calibration figures in `sample_data/CALIBRATION.md`).

The mixed variant codes each patient's first half of visits (visit number <= n_visits // 2) in
ICD-9-CM and the rest in ICD-10-CM (the history before the 2015-10-01 switch); an ICD-9-CM code that
ICD-10-CM could read as a real code of its own (V codes: `V01.1`) is written in ICD-10-CM in every
visit, so without dates no row is ambiguous to the loader. Groups, genotypes and labs are those of the
ICD-9-CM sample (the same patient ids).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from engine.vocab import ICD9_CODE, ICD9_RANGE, REFERENCE_DIR, phecode_map, phecode_map_icd10cm

CROSSWALK_FILE = REFERENCE_DIR / "icd9_to_icd10cm_sample_crosswalk.csv"


def _phecode_parents(phecode: str) -> list[str]:
    """The phecode and its rollup parents by dropping the last digit (250.11, 250.1, 250)."""
    out = [phecode]
    s = phecode
    while "." in s:
        s = s[:-1].rstrip(".")
        out.append(s)
    return out


@lru_cache(maxsize=1)
def _first_icd10_of_phecode() -> dict[str, tuple[str, str]]:
    """phecode -> (ICD-10-CM code, how chosen) by the module docstring's preference."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import simple_icd_10_cm as cm

    m = phecode_map_icd10cm()
    own = m[(m["phecode"] == m["phecode_unrolled"])]
    best: dict[str, tuple[int, str, str]] = {}
    rank_name = {0: "first billable FY2026 code", 1: "first FY2026 code", 2: "first code of the map"}
    for code, pc in zip(own["icd10cm"].tolist(), own["phecode"].tolist(), strict=True):
        if ICD9_CODE.match(code) or ICD9_RANGE.match(code):
            continue
        rank = (0 if cm.is_leaf(code) else 1) if cm.is_valid_item(code) else 2
        if pc not in best or rank < best[pc][0]:
            best[pc] = (rank, code, rank_name[rank])
    return {pc: (code, how) for pc, (_, code, how) in best.items()}


def crosswalk(icd9_codes) -> pd.DataFrame:
    """One row per ICD-9-CM code: `icd9`, `phecode`, `icd10cm` ('' when unmapped), `via_phecode` (the
    phecode the match was found at), `rule` (which preference chose it)."""
    pc_of = dict(zip(phecode_map()["icd9"], phecode_map()["phecode"], strict=True))
    first = _first_icd10_of_phecode()
    rows = []
    for c in icd9_codes:
        pc = pc_of.get(c, "")
        hit = ("", "", "no phecode" if not pc else "no ICD-10-CM code of this phecode or its parents")
        for p in _phecode_parents(pc) if pc else []:
            if p in first:
                code, how = first[p]
                hit = (code, p, how + ("" if p == pc else " of a rollup parent phecode"))
                break
        if pc and not hit[0]:
            near = _nearest_in_category(pc)
            if near is not None:
                code, how = first[near]
                same = category_of(near) == category_of(pc)
                hit = (
                    code,
                    near,
                    how
                    + " of the nearest phecode"
                    + (" of the same category" if same else " (any category)"),
                )
        rows.append((c, pc, *hit))
    return pd.DataFrame(rows, columns=["icd9", "phecode", "icd10cm", "via_phecode", "rule"])


@lru_cache(maxsize=4096)
def _nearest_in_category(phecode: str) -> str | None:
    """The phecode of the same category (ICD-9 map's `category`) nearest in value that has an ICD-10-CM
    code (`_first_icd10_of_phecode`); ties to the lower phecode; None when there is none."""
    from engine.vocab import phecode_sort_key

    category = _categories()
    cat = category.get(phecode)
    first = _first_icd10_of_phecode()
    value = phecode_sort_key(phecode)[0]
    options = [p for p in first if category.get(p) == cat] or list(first)
    if not options:
        return None
    return min(options, key=lambda p: (abs(phecode_sort_key(p)[0] - value), phecode_sort_key(p)))


@lru_cache(maxsize=1)
def _categories() -> dict[str, str]:
    m = phecode_map()
    return dict(zip(m["phecode"], m["category"], strict=False))


def category_of(phecode: str) -> str:
    """The phecode's category in the ICD-9 map ('' when unknown)."""
    return _categories().get(phecode, "")


def _ambiguous_icd9(codes) -> set[str]:
    """ICD-9-CM codes that ICD-10-CM reads as a real code too (the loader could not tell them apart)."""
    from engine.vocab import is_known_icd10cm

    return {c for c in codes if is_known_icd10cm(c)}


def icd10cm_variants(events: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(ICD-10-CM events, mixed events, the crosswalk of the codes present) from ICD-9-CM events
    (`patient_id, visit, code, age`); raises ValueError naming codes the crosswalk cannot map."""
    codes = sorted(set(events["code"].astype(str)))
    cw = crosswalk(codes)
    missing = cw.loc[cw["icd10cm"] == "", "icd9"].tolist()
    if missing:
        raise ValueError(f"no ICD-10-CM code of the same phecode for {len(missing)} codes: {missing[:5]}")
    to10 = dict(zip(cw["icd9"], cw["icd10cm"], strict=True))
    code = events["code"].astype(str)
    icd10 = events.assign(code=pd.array(code.map(to10).to_numpy(), dtype="str"))
    n_visits = events.groupby("patient_id", sort=False)["visit"].transform("max")
    early = (events["visit"] <= n_visits // 2).to_numpy().copy()
    early &= ~code.isin(_ambiguous_icd9(codes)).to_numpy()
    mixed = events.assign(
        code=pd.array(np.where(early, code.to_numpy(), icd10["code"].to_numpy()), dtype="str")
    )
    return icd10, mixed, cw


def write_variants(events: pd.DataFrame, out_dir: str | Path) -> dict[str, Path]:
    """Write `icd10cm/events.parquet`, `mixed/events.parquet` under `out_dir` and the crosswalk of the
    codes present next to them (`icd10cm/crosswalk.csv`)."""
    out = Path(out_dir)
    icd10, mixed, cw = icd10cm_variants(events)
    paths = {
        "icd10cm events": out / "icd10cm" / "events.parquet",
        "mixed events": out / "mixed" / "events.parquet",
        "crosswalk": out / "icd10cm" / "crosswalk.csv",
    }
    for p in paths.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    kw = {"index": False, "compression": "zstd"}
    icd10.to_parquet(paths["icd10cm events"], **kw)
    mixed.to_parquet(paths["mixed events"], **kw)
    cw.to_csv(paths["crosswalk"], index=False, lineterminator="\n")
    return paths
