"""The synthetic sample in ICD-10-CM and in mixed ICD-9-CM / ICD-10-CM (issue 14; GEMs: issue 26).

The generator (`engine.synth.generator`) bills ICD-9-CM codes. Its ICD-10-CM variant replaces each
event's code through CMS' General Equivalence Mappings, ICD-9-CM to ICD-10-CM (GEMs; public domain,
vendored unchanged as `sample_data/reference/icd9toicd10cmgem.csv`, provenance in that folder's
README), so each ICD-10-CM code's prevalence follows that of the ICD-9-CM codes it stands for:

- a code's candidates are its GEMs targets in file order, no-map rows left out; for a combination
  entry (the ICD-9-CM code needs several ICD-10-CM codes together) only the targets of scenario 1,
  choice list 1 (the head concept: `806.10` -> `S14.101A`, not its fracture), since an event stays one
  event;
- a target is kept when it is a code of the CMS FY2026 list (`simple-icd-10-cm`), billable or not:
  this copy of GEMs predates FY2017, so some targets were subdivided since (`G35`, `E11.359`) and are
  kept as written (the phecode map knows 100 of the sample's 108 such targets, their FY2026 children
  17 of 494); a target FY2026 does not have (deleted since: `H40.11X0`; `T07`, a block's name) is left
  out;
- a code with several candidates spreads its patients over them: patient p's code c becomes candidate
  `blake2b(p, c) mod n`. GEMs' one-to-many entries are alternatives (mostly approximate: laterality,
  type, episode that ICD-9-CM lacks); taking the first would send every patient of `250.50` to
  `E11.311` (the lowest code, not the likeliest), while a fixed hash of (patient, code) splits the
  prevalence evenly (GEMs gives no frequencies), keeps a patient's repeats of a code on one target
  (repeats stay repeats, a patient never gets more distinct codes than in ICD-9-CM) and is the same on
  every run;
- a code GEMs does not map (no-map rows, codes GEMs lacks, codes whose targets FY2026 all lacks) falls
  back to the phecode-preserving rule below (`phecode_crosswalk`); `crosswalk`'s `rule` column says
  which, and `sample_data/README.md` gives the shares.

The phecode-preserving fallback (the whole crosswalk before issue 26), written from the two vendored
phecode maps v1.2, so a code keeps its phecode:

- for an ICD-9-CM code with phecode P, the ICD-10-CM code of phecode P that the ICD-10-CM map lists
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
  nearest phecode of any category: a placeholder keeping the event, not a clinical equivalent;
- a code with no phecode, or none found, stays unmapped (the sample has none).

That rule alone was many-to-one (several ICD-9-CM codes of a phecode became one ICD-10-CM code), which
put R65.21 (severe sepsis with septic shock) in 44% of the cohort: hence GEMs first.

The mixed variant codes each patient's first half of visits (visit number <= n_visits // 2) in
ICD-9-CM and the rest in ICD-10-CM (the history before the 2015-10-01 switch); an ICD-9-CM code that
ICD-10-CM could read as a real code of its own (V codes: `V01.1`) is written in ICD-10-CM in every
visit, so without dates no row is ambiguous to the loader. Groups, genotypes and labs are those of the
ICD-9-CM sample (the same patient ids).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from engine.vocab import (
    ICD9_CODE,
    ICD9_RANGE,
    REFERENCE_DIR,
    icd10cm_item,
    phecode_map,
    phecode_map_icd10cm,
)

GEMS_FILE = REFERENCE_DIR / "icd9toicd10cmgem.csv"
CROSSWALK_COLUMNS = ["icd9", "phecode", "icd10cm", "via_phecode", "rule"]
FALLBACK = "phecode fallback"  # in `crosswalk`'s rule of a code GEMs does not map


def _phecode_parents(phecode: str) -> list[str]:
    """The phecode and its rollup parents by dropping the last digit (250.11, 250.1, 250)."""
    out = [phecode]
    s = phecode
    while "." in s:
        s = s[:-1].rstrip(".")
        out.append(s)
    return out


def _cm():
    """simple-icd-10-cm (the CMS FY2026 list), imported without its DeprecationWarning."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import simple_icd_10_cm as cm
    return cm


@lru_cache(maxsize=1)
def _first_icd10_of_phecode() -> dict[str, tuple[str, str]]:
    """phecode -> (ICD-10-CM code, how chosen) by the module docstring's fallback preference."""
    cm = _cm()
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


def phecode_crosswalk(icd9_codes) -> pd.DataFrame:
    """The phecode-preserving rule (module docstring), one row per ICD-9-CM code: `icd9`, `phecode`,
    `icd10cm` ('' when unmapped), `via_phecode` (the phecode the match was found at), `rule` (which
    preference chose it)."""
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
    return pd.DataFrame(rows, columns=CROSSWALK_COLUMNS)


@lru_cache(maxsize=1)
def gems() -> pd.DataFrame:
    """The vendored GEMs file as is: `icd9cm`, `icd10cm` (dotless codes), `flags` and its five digits
    `approximate`, `no_map`, `combination`, `scenario`, `choice_list` (all strings)."""
    return pd.read_csv(GEMS_FILE, dtype=str, keep_default_na=False)


def _dotted_icd10cm(code: str) -> str:
    """GEMs' dotless ICD-10-CM code with its dot (`E1136` -> `E11.36`)."""
    return code if len(code) <= 3 else f"{code[:3]}.{code[3:]}"


@lru_cache(maxsize=1)
def _gems_candidates() -> dict[str, tuple[tuple[str, ...], str]]:
    """Dotless ICD-9-CM code -> (its candidate ICD-10-CM item labels in file order, the rule that chose
    them) by the module docstring; a code whose candidates FY2026 all lacks has () and says so. Codes
    GEMs maps only with no-map rows are absent."""
    cm = _cm()
    g = gems()
    g = g[(g["no_map"] == "0") & (g["scenario"].isin(["0", "1"])) & (g["choice_list"].isin(["0", "1"]))]
    rows: dict[str, tuple[list[str], list[str]]] = {}  # icd9 -> (targets, combination flags)
    for icd9, icd10, comb in zip(g["icd9cm"], g["icd10cm"], g["combination"], strict=True):
        targets, flags = rows.setdefault(icd9, ([], []))
        targets.append(_dotted_icd10cm(icd10))
        flags.append(comb)
    out: dict[str, tuple[tuple[str, ...], str]] = {}
    for icd9, (listed, flags) in rows.items():
        targets = list(dict.fromkeys(listed))
        kept = [t for t in targets if cm.is_valid_item(t) and not cm.is_chapter_or_block(t)]
        head = "GEMs combination, scenario 1 choice list 1" if "0" not in flags else "GEMs"
        if not kept:
            out[icd9] = ((), f"{head}: no target in the FY2026 list")
            continue
        rule = (
            f"{head}: the one target" if len(kept) == 1 else f"{head}: one of {len(kept)} targets per patient"
        )
        if len(kept) < len(targets):
            rule += f" ({len(targets) - len(kept)} not in the FY2026 list left out)"
        out[icd9] = (tuple(icd10cm_item(t) for t in kept), rule)
    return out


def crosswalk(icd9_codes) -> pd.DataFrame:
    """The sample's ICD-9-CM -> ICD-10-CM crosswalk (module docstring): one row per (ICD-9-CM code,
    candidate ICD-10-CM code), candidates in GEMs' order; columns `icd9`, `phecode` (the ICD-9-CM code's),
    `icd10cm` ('' when unmapped), `via_phecode` (the phecode of a fallback match, '' for GEMs), `rule`
    (GEMs' or the fallback's, and why the fallback)."""
    pc_of = dict(zip(phecode_map()["icd9"], phecode_map()["phecode"], strict=True))
    mapped = _gems_candidates()
    in_file = set(gems()["icd9cm"])
    codes = [str(c) for c in icd9_codes]
    gems_of = {c: mapped.get(c.replace(".", ""), ((), "")) for c in codes}
    why = {
        c: rule or ("GEMs: no-map" if c.replace(".", "") in in_file else "not in GEMs")
        for c, (targets, rule) in gems_of.items()
        if not targets
    }
    fb = {r[0]: r for r in phecode_crosswalk(list(why)).itertuples(index=False)} if why else {}
    rows: list[tuple[str, str, str, str, str]] = []
    for c in codes:
        if c in why:
            _, pc, code10, via, rule = fb[c]
            rows.append((c, pc, code10, via, f"{why[c]}; {FALLBACK}: {rule}"))
        else:
            targets, rule = gems_of[c]
            rows.extend((c, pc_of.get(c, ""), t, "", rule) for t in targets)
    return pd.DataFrame(rows, columns=CROSSWALK_COLUMNS)


def _bucket(patient_id: str, code: str, n: int) -> int:
    """The candidate index of (patient, code) among n: blake2b of both, mod n (fixed across runs)."""
    digest = hashlib.blake2b(f"{patient_id}\x1f{code}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % n


def icd10cm_codes(events: pd.DataFrame, cw: pd.DataFrame) -> pd.Series:
    """Each event's ICD-10-CM code through the crosswalk `cw` (`crosswalk`): the code's one candidate,
    or, with several, the one `_bucket` gives its (patient, code)."""
    targets = cw.groupby("icd9", sort=False)["icd10cm"].agg(tuple).to_dict()
    code = events["code"].astype(str)
    out = code.map({c: t[0] for c, t in targets.items()})
    spread = code.map({c: len(t) for c, t in targets.items()}).to_numpy() > 1
    if spread.any():
        pairs = events.loc[spread, ["patient_id", "code"]].astype(str).drop_duplicates()
        picks = [
            targets[c][_bucket(p, c, len(targets[c]))]
            for p, c in zip(pairs["patient_id"], pairs["code"], strict=True)
        ]
        chosen = pd.Series(picks, index=pd.MultiIndex.from_frame(pairs), dtype=object)
        key = pd.MultiIndex.from_frame(events.loc[spread, ["patient_id", "code"]].astype(str))
        out[spread] = chosen.reindex(key).to_numpy()
    return out


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
        raise ValueError(f"no ICD-10-CM code (GEMs or phecode) for {len(missing)} codes: {missing[:5]}")
    code = events["code"].astype(str)
    icd10 = events.assign(code=pd.array(icd10cm_codes(events, cw).to_numpy(), dtype="str"))
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
