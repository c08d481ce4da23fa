"""Frequency-bin generalization under utility constraints, then suppression (Heatherly 2013, Methods,
"Clinical Concept Anonymization Process"), at the three scopes of Figure 14.

The procedure (paper, Methods; the step names below are used in the code):

1. *frequency*: a code's support is the number of records holding it in one or more visits.
2. *bins*: codes go into bins by support. For each bin below k, the codes of the bin are generalized
   together as far as the utility constraints allow (all codes of one bin and one constraint group
   become one generalized item, written as its set of codes `{401.0,401.1}`); the support of each new
   item is recomputed (records holding any of its codes) and it moves to that bin.
3. *adjacent bins*: bins below k are then grouped pairwise (1-2, 3-4, ...), then by fours, and so on
   (bin width 1, 2, 4, ... by support value), generalizing again within each grouped bin, until one
   bin holds every support below k.
4. *suppression*: items whose support is still below k are suppressed (their events are removed).

Conventions where the paper leaves a choice (stated here and in the report):
- A bin groups items by support value: at width w, bin j holds supports j*w+1 .. (j+1)*w.
- Only items below k take part; an item at or above k is never merged (as in the paper).
- Merged items are named by their smallest code (codes sorted as text): ties are broken by code order.
- Utility constraints: `phecode` (default; codes of one PheWAS code, ICD-9-CM and ICD-10-CM alike
  through the phecode map v1.2 of each vocabulary; an ICD-10-CM code the map gives several phecodes
  counts under the lowest of them, `engine.vocab.primary_phecode_of_item`; a code the map lacks forms
  a group of its own, so it is never joined to anything), `icd9:LEVEL` (codes sharing their ICD
  ancestor at LEVEL: 5-digit, 4-digit, 3-digit, section, chapter, Any; an ICD-10-CM code is read at the
  ICD-10-CM counterpart of LEVEL, `icd_ancestor`: 3-digit -> category, section -> block, ...; codes of
  the two vocabularies share a group only at `Any`), `none` (any codes), `cdm` / `cdm:DEPTH` (issue 37:
  an OMOP CDM read in standard concepts with its vocabulary tables; codes sharing their concept at DEPTH,
  default `CDM_GROUP_DEPTH` = 2 as UGACLIP's CDM policy, of the CDM's own hierarchy as the methods climb
  it, `ConceptParents.hierarchy`: a concept with several parents keeps the one with the most of the
  group's codes below it; `Hierarchy.groups_at`, a code shallower than DEPTH under its parent; a code the
  CDM does not name, or one whose group would be the root, is a group of its own).
- Within one visit a generalized item is written once, at the place of its first code (Figure 13b);
  repeats of an original code are kept as given.

The paper states that the result meets its privacy model (every single visit's code set is held by
at least k records), but its procedure guarantees only that every single released item is held by at
least k records. `anonymize` verifies every release with `engine.risk.verify` under single-visit
knowledge and reports the residual violations. Beyond the paper, `complete=True` adds a completion pass
(`_complete`): for visits of the released cohort still below k it first generalizes further (merges the
visit's rarest item with the most frequent other item of its constraint group, at most
`COMPLETION_GENERALIZE_ROUNDS` rounds), then suppresses items of each failing visit, rarest first, until
the visit's code set is held by at least k candidate records; repeated until no visit fails
(strategy "rarest", `COMPLETIONS`). Strategy "phewas" (issue #36) preserves the PheWAS: it generalizes
within the constraint groups for as many rounds as lower the failing visits, then drops the items whose loss
changes the fewest case and control statuses, weighted per phecode (`_Pool.case_cost`). (How it
is computed, with the same result as counting every visit in every round: `_Pool`, `_complete`; what
does not depend on k is kept per data content: `_memoized`.)

Export structure (`with_visits`): by default the release is exported as the paper's Figure 13b shows
it, one set of items per patient (`Release.shows_visits` False), and a candidate matches a known visit
with its whole record. With `with_visits=True` the file keeps the visit grouping; a candidate then
matches only when one of its released visits holds the whole known set, so the completion pass counts
supports within visits (distinct patients owning such a visit) and suppresses an item from the failing
visit alone. Without visits it suppresses the item from the target's whole record: a reader of a file
without visits would still see an item suppressed in one visit but kept in another of the same
patient, and could match on it.

Scopes (Figure 14): `cohort` anonymizes the research cohort alone (DEMO_D; candidates are the released
cohort); `biobank` / `population` anonymize the biobank / whole population and extract the cohort
(DEMO_B / DEMO_S; `Release.population` is the released biobank / population, the candidate pool).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from engine.adversary import Adversary, Knowledge
from engine.anonymize.association_ledger import AssociationLedger
from engine.anonymize.merged_sets import merged_item_sets, with_patient_item_sets
from engine.io.progress import Progress
from engine.memo import memo
from engine.records import CODE, PATIENT, VISIT, Records, concat_ranges
from engine.release import Release, set_item_label
from engine.risk import KnownSetCounter, Matching, Verification, count_known_sets, verify
from engine.scale import pool
from engine.utility.phewas import PhewasSettings
from engine.utility.retention import Figures, RetentionRow, count_table, figures, summary_table

if TYPE_CHECKING:
    from engine.io.concepts import ConceptParents

METHOD = "Heatherly"
SCOPE_NAMES: dict[str, str] = {"cohort": "DEMO_D", "biobank": "DEMO_B", "population": "DEMO_S"}
ICD9_LEVELS: tuple[str, ...] = ("5-digit", "4-digit", "3-digit", "section", "chapter", "Any")
CDM_GROUP_DEPTH = 2  # `cdm` constraints: the concepts two levels below the CDM tree's root (issue 37)
CDM_NEEDS = (
    "the CDM's own hierarchy (an OMOP CDM read in standard concepts with concept and concept_ancestor)"
)
COMPLETION_GENERALIZE_ROUNDS = 2
# the "phewas" completion: a phecode with fewer cases in the cohort is never tested (the PheWAS's
# default), so a status it changes there costs nothing
MIN_TESTED_CASES = PhewasSettings().min_cases
# completion strategies (`_complete`): "rarest" the first pass (rarest item first, two generalization
# rounds), "phewas" the PheWAS-preserving one (issue #36)
COMPLETIONS: tuple[str, ...] = ("rarest", "phewas")
# engine and bench only (docs/architecture.md section 4): chosen by the cohort's genotype associations
ASSOCIATIONS = "associations"
COMPLETION_WORDS: dict[str, str] = {
    "rarest": "rarest items suppressed first",
    "phewas": "PheWAS-preserving: case statuses kept where possible",
}


_MEMO_KEPT = 24  # entries of per-data work (least recently used dropped)
_T = TypeVar("_T")


def _memoized(key: tuple, make: Callable[[], _T]) -> _T:
    """`make()`, kept under `key` (a content fingerprint and the parameters it depends on): what the
    procedure needs of a dataset that does not depend on k (utility groups, original figures, the
    visit supports of the targets) is computed once per data, the frequency bins once per k.
    Held where the caller's scope says (`engine.memo`: the app's session). Values are never modified
    by their users (arrays are read-only)."""
    return memo("population", key, make, size=_MEMO_KEPT)


def _frozen(a: np.ndarray) -> np.ndarray:
    """`a`, read-only (a memoized value)."""
    a.setflags(write=False)
    return a


def _frozen_first(pair: tuple[np.ndarray, dict]) -> tuple[np.ndarray, dict]:
    return _frozen(pair[0]), pair[1]


def export_label(with_visits: bool) -> str:
    """How a single-visit release is exported, in words (CLI and pages say which)."""
    if with_visits:
        return "visits kept (patient_id, visit, code); verified within released visits"
    return "one set of codes per patient (patient_id, code), the papers' form; verified on whole records"


# ------------------------------------------------------------------------------ utility constraints
def parse_constraints(text: str) -> str:
    """Validate a constraint choice: `phecode`, `icd9:LEVEL`, `cdm`, `cdm:DEPTH` or `none`; ValueError
    names the options."""
    if text in ("phecode", "none", "cdm"):
        return text
    if text.startswith("icd9:") and text.split(":", 1)[1] in ICD9_LEVELS:
        return text
    depth = text.split(":", 1)[1] if text.startswith("cdm:") else ""
    if depth.isdigit() and depth.isascii() and int(depth) >= 1:
        return text
    raise ValueError(
        f"unknown utility constraints {text!r}: use 'phecode', 'none', 'icd9:LEVEL' "
        f"with LEVEL one of {', '.join(ICD9_LEVELS)}, or 'cdm' / 'cdm:DEPTH' (DEPTH 1, 2, ...: an OMOP "
        "CDM's own hierarchy)"
    )


def cdm_depth(constraints: str) -> int | None:
    """The depth of `cdm` / `cdm:DEPTH` constraints in the CDM's tree, None for the others."""
    if constraints == "cdm":
        return CDM_GROUP_DEPTH
    return int(constraints.split(":", 1)[1]) if constraints.startswith("cdm:") else None


def utility_groups(
    codes: Sequence[str] | np.ndarray, constraints: str = "phecode", concepts: ConceptParents | None = None
) -> np.ndarray:
    """(len(codes),) int: codes with equal values may be generalized together (Heatherly, Methods:
    "utility constraints"). Each code the chosen hierarchy does not know is a group of its own.
    `concepts`: the CDM's hierarchy, required by `cdm` constraints (ValueError naming it otherwise)."""
    constraints = parse_constraints(constraints)
    codes = [str(c) for c in codes]
    depth = cdm_depth(constraints)
    keys: list[str | None]
    if constraints == "none":
        return np.zeros(len(codes), dtype=np.int64)
    if depth is not None:
        if concepts is None:
            raise ValueError(f"utility constraints {constraints!r} need {CDM_NEEDS}")
        tree = concepts.hierarchy(codes)
        group_of = {c: g for g, held in tree.groups_at(codes, depth).items() for c in held}
        keys = [None if group_of[c] == tree.root else group_of[c] for c in codes]
    elif constraints == "phecode":
        from engine.vocab import primary_phecode_of_item

        keys = [primary_phecode_of_item(c) for c in codes]
    else:
        level = constraints.split(":", 1)[1]
        keys = [icd_ancestor(c, level) for c in codes]
    labels = [f"={k}" if k is not None else f"!{c}" for k, c in zip(keys, codes, strict=True)]
    return pd.factorize(np.asarray(labels, dtype=object), sort=True)[0].astype(np.int64)


# ICD-10-CM level read for each ICD-9-CM level name of `icd9:LEVEL` (one level each: a 7-character code
# is grouped by its 5-character ancestor under `icd9:5-digit`)
ICD10_GROUP_LEVEL: dict[str, str] = {
    "5-digit": "5-character",
    "4-digit": "4-character",
    "3-digit": "category",
    "section": "block",
    "chapter": "chapter",
    "Any": "Any",
}


def icd_ancestor(item: str, level: str) -> str | None:
    """The ancestor of an ICD item label at an ICD-9-CM `level` name: `icd9_ancestor` for ICD-9-CM
    codes; for ICD-10-CM codes the ancestor in `Hierarchy.icd10cm()` at the counterpart level
    (`ICD10_GROUP_LEVEL`; E11.9 at 3-digit -> E11, at section -> E08-E13); None when unknown."""
    from engine.vocab import ICD10CM, vocabulary_of_item

    if vocabulary_of_item(item) != ICD10CM:
        return icd9_ancestor(item, level)
    if level == "Any":
        return "Any"
    from engine.hierarchy import Hierarchy

    hierarchy = Hierarchy.icd10cm()
    target = ICD10_GROUP_LEVEL[level]
    if item not in hierarchy:
        return None
    for node in hierarchy.ancestors(item, include_self=True):
        if hierarchy.level(node) == target:
            return str(node)
    return None


def icd9_ancestor(code: str, level: str) -> str | None:
    """The ICD-9-CM ancestor of `code` at `level` (5-digit, 4-digit, 3-digit, section, chapter, Any)
    in `engine.hierarchy.Hierarchy.icd9()`, or None when the hierarchy does not know the code. A
    hierarchy that cannot be built is an error, never a fallback with other groups."""
    from engine.hierarchy import Hierarchy

    hierarchy = Hierarchy.icd9()
    if code not in hierarchy:
        return None
    if hierarchy.level(code) == level:
        return code
    for node in hierarchy.ancestors(code):
        if hierarchy.level(node) == level:
            return str(node)
    return None


# ------------------------------------------------------------------------------ the procedure
@dataclass
class _State:
    """Mutable bookkeeping of one anonymization: which item each code belongs to, which events stay."""

    group: Records  # the records being anonymized (original codes)
    item_of_code: np.ndarray  # (n_codes,) representative code index of the code's item; -1 suppressed
    utility: np.ndarray  # (n_codes,) utility-constraint group of each code
    keep: np.ndarray  # (n_events,) False for events suppressed by the completion pass
    stats: dict = field(default_factory=dict)
    # (n_codes, n_phecodes) 0/1, the phecodes each code counts toward and those whose controls its
    # holders leave (`engine.utility.phewas.code_phecodes`): set for the "phewas" completion
    phecodes: tuple[sp.csr_matrix, sp.csr_matrix] | None = None
    phecode_weight: np.ndarray | None = None  # (n_phecodes,) weight of each phecode's tests, default 1
    genotypes: pd.DataFrame | None = None  # the cohort's, for the engine-only "associations" completion


def frequency_bin_generalization(
    group: Records, k: int, utility: np.ndarray
) -> tuple[np.ndarray, dict[str, int]]:
    """Steps 1-4 of the module docstring on `group`: (n_codes,) representative code index of each
    code's item (the smallest code index of the item), -1 for suppressed codes and codes absent from
    `group`; and the procedure's own figures."""
    sets = group.patient_item_sets
    n_codes = group.n_items
    support = np.bincount(sets.indices, minlength=n_codes)
    present = support > 0
    item_of_code = np.where(present, np.arange(n_codes), -1)
    rare = present & (support < k)
    stats = {"codes": int(present.sum()), "codes below k": int(rare.sum()), "stages": 0}
    if not rare.any():
        stats.update({"codes generalized": 0, "generalized items": 0, "codes suppressed": 0})
        return item_of_code, stats
    # (record, code) postings of the rare codes only: all that changes support
    row_of = np.repeat(np.arange(sets.shape[0]), np.diff(sets.indptr))
    m = rare[sets.indices]
    post_rec, post_code = row_of[m], sets.indices[m].astype(np.int64)
    item_support = support.astype(np.int64).copy()  # indexed by representative code
    width = 1
    while True:
        stats["stages"] += 1
        reps = np.unique(item_of_code[rare])
        active = reps[item_support[reps] < k]
        if len(active):
            bins = (item_support[active] - 1) // width
            key = bins * (int(utility.max()) + 1) + utility[active]
            order = np.lexsort((active, key))  # within a key, smallest representative first
            key_sorted, act_sorted = key[order], active[order]
            first = np.ones(len(order), dtype=bool)
            first[1:] = key_sorted[1:] != key_sorted[:-1]
            new_rep_sorted = act_sorted[np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))]
            remap = np.arange(n_codes)
            remap[act_sorted] = new_rep_sorted
            item_of_code[rare] = remap[item_of_code[rare]]
            # recompute support of every rare item: records holding any of its codes
            it = item_of_code[post_code]
            pairs = np.unique(post_rec * n_codes + it)
            counts = np.bincount(pairs % n_codes, minlength=n_codes)
            touched = np.unique(item_of_code[rare])
            item_support[touched] = counts[touched]
        if width >= k - 1:
            break
        width *= 2
    final = item_of_code[rare]
    below = item_support[final] < k
    suppressed_codes = np.flatnonzero(rare)[below]
    item_of_code[suppressed_codes] = -1
    sizes = np.bincount(item_of_code[item_of_code >= 0], minlength=n_codes)
    generalized = sizes >= 2
    stats.update(
        {
            "codes generalized": int(sizes[generalized].sum()),
            "generalized items": int(generalized.sum()),
            "codes suppressed": len(suppressed_codes),
        }
    )
    return item_of_code, stats


def _released(state: _State) -> tuple[Records, dict[str, frozenset[str]], np.ndarray]:
    """The released group from the state: events recoded to their items, suppressed events removed,
    a generalized item kept once per visit; vocabulary compacted to the items present, sorted.
    Also returns the item map and, per released item, its representative code index."""
    g = state.group
    codes = g.items
    ev_rep = state.item_of_code[g.event_item]
    keep = state.keep & (ev_rep >= 0)
    sizes = np.bincount(state.item_of_code[state.item_of_code >= 0], minlength=g.n_items)
    generalized_ev = keep & (sizes[np.maximum(ev_rep, 0)] >= 2)
    if generalized_ev.any():
        idx = np.flatnonzero(generalized_ev)
        key = g.event_visit[idx].astype(np.int64) * g.n_items + ev_rep[idx]
        _, first = np.unique(key, return_index=True)
        dup = np.ones(len(idx), dtype=bool)
        dup[first] = False
        keep = keep.copy()
        keep[idx[dup]] = False
    present = np.zeros(g.n_items, dtype=bool)
    present[ev_rep[keep]] = True
    reps = np.flatnonzero(present)
    members: dict[int, list[str]] = {}
    gen_codes = np.flatnonzero((state.item_of_code >= 0) & (sizes[np.maximum(state.item_of_code, 0)] >= 2))
    for c, r in zip(codes[gen_codes].tolist(), state.item_of_code[gen_codes].tolist(), strict=True):
        members.setdefault(r, []).append(str(c))
    label_of = {r: set_item_label(m) for r, m in members.items() if present[r]}
    labels = np.array([label_of[r] if r in label_of else str(codes[r]) for r in reps.tolist()], dtype=object)
    order = np.argsort(labels, kind="stable")
    rep_to_item = np.zeros(g.n_items, dtype=np.int32)
    rep_to_item[reps[order]] = np.arange(len(reps), dtype=np.int32)
    recoded = Records(
        patient_ids=g.patient_ids,
        items=labels[order],
        visit_ptr=g.visit_ptr,
        visit_ids=g.visit_ids,
        event_ptr=g.event_ptr,
        event_item=rep_to_item[np.maximum(ev_rep, 0)],
        event_age=g.event_age,
        has_visits=g.has_visits,
    ).keep_events(keep)
    item_codes = {label: frozenset(members[r]) for r, label in label_of.items()}
    return recoded, item_codes, reps[order]


def _suppressed_frame(state: _State, patients: np.ndarray) -> pd.DataFrame:
    """Long-form rows of the events of `patients` that were suppressed (not merely merged)."""
    g = state.group
    lost = ~state.keep | (state.item_of_code[g.event_item] < 0)
    in_patients = np.zeros(g.n_patients, dtype=bool)
    in_patients[patients] = True
    idx = np.flatnonzero(lost & in_patients[g.event_patient])
    cols: dict[str, np.ndarray] = {PATIENT: g.patient_ids[g.event_patient[idx]]}
    if g.has_visits:
        cols[VISIT] = g.visit_ids[g.event_visit[idx]]
    cols[CODE] = g.items[g.event_item[idx]]
    return pd.DataFrame(cols)


# ------------------------------------------------------------------------------ completion pass
def visit_support(
    released: Records,
    patients: np.ndarray,
    candidates: Records | None = None,
    *,
    within_visits: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Non-empty visits of `patients` in `released`, and for each the number of candidate records
    (default: `released` itself) holding all of its items, in the whole record or, `within_visits`,
    in one visit; counted by the risk engine (`engine.risk.count_known_sets`, each visit one known
    set)."""
    patients = np.asarray(patients, dtype=np.int64)
    visits = concat_ranges(released.visit_ptr[patients], np.diff(released.visit_ptr)[patients])
    return _support_of_visits(released, visits, candidates, within_visits)


def _support_of_visits(
    released: Records, visits: np.ndarray, candidates: Records | None = None, within_visits: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The non-empty `visits` (order kept) and the candidates holding each one's item set (in one
    visit, `within_visits`)."""
    visits = np.asarray(visits, dtype=np.int64)
    visits = visits[np.diff(released.event_ptr)[visits] > 0]
    return visits, _holders(released, _item_sets(released, visits), candidates, within_visits)


def _item_sets(released: Records, visits: np.ndarray) -> sp.csr_matrix:
    """(len(visits), n_items) 0/1, sorted indices: the item set of each of `visits` (built from their
    events alone, not from the whole `visit_item_sets`)."""
    lengths = np.diff(released.event_ptr)[visits]
    events = concat_ranges(released.event_ptr[visits], lengths)
    rows = np.repeat(np.arange(len(visits), dtype=np.int64), lengths)
    m = sp.csr_matrix(
        (np.ones(len(events), dtype=np.int8), (rows, released.event_item[events])),
        shape=(len(visits), released.n_items),
    )
    m.sum_duplicates()
    m.data[:] = 1
    m.sort_indices()
    return m


def _holders(
    released: Records,
    sets: sp.csr_matrix,
    candidates: Records | None = None,
    within_visits: bool = False,
    cap: int | None = None,
) -> np.ndarray:
    """Per row of `sets` (item sets over `released.items`), the candidate records (default:
    `released`) holding every item, in one visit when `within_visits` (distinct patients); an empty
    set is held by every candidate. Counted by the risk engine (`engine.risk.count_known_sets`), up
    to `cap` when given (min(support, cap))."""
    cand = released if candidates is None else candidates
    if sets.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    return count_known_sets(released.items, sets, cand, *_holding(within_visits, cap))


def _holding(within_visits: bool, cap: int | None) -> tuple[Knowledge, Matching]:
    """The knowledge and matching under which `_holders` counts a visit's set as one known set."""
    knowledge: Knowledge = "single_visit" if within_visits else "all_visits"
    return knowledge, Matching(within_visits=within_visits, cap=cap)


@dataclass(frozen=True, eq=False)
class _Layout:
    """Where the target records lie in a group (independent of k; `_split_layout`)."""

    visits: np.ndarray  # the targets' visits (group indexes), record by record
    local: np.ndarray  # (n_visits,) position of a group visit among `visits`, -1 for others' visits
    events: np.ndarray  # the targets' events (group indexes), in the order of `target_base`
    other_events: np.ndarray  # the other records' events, in the order of `other_base`
    target_base: Records  # the target records (original items, no ages)
    other_base: Records | None  # the other records, None when every record is a target


def _split_layout(group: Records, targets: np.ndarray) -> _Layout:
    """The group split into its target records and the others. Not memoized: it is a few index arrays
    and two `take`s (15 ms for the sample's three scopes), while a memoized copy is as large as the
    group (15 MB on the sample), which a worker would pickle back to the app's session after every
    completion pass (ui/worker.py) at a greater cost than making it again."""
    targets = np.asarray(targets, dtype=np.int64)
    g = group
    visits = concat_ranges(g.visit_ptr[targets], np.diff(g.visit_ptr)[targets])
    local = np.full(g.n_visits, -1, dtype=np.int64)
    local[visits] = np.arange(len(visits))
    is_target = np.zeros(g.n_patients, dtype=bool)
    is_target[targets] = True
    others = np.flatnonzero(~is_target)
    o_visits = concat_ranges(g.visit_ptr[others], np.diff(g.visit_ptr)[others])
    return _Layout(
        visits=_frozen(visits),
        local=_frozen(local),
        events=_frozen(concat_ranges(g.event_ptr[visits], np.diff(g.event_ptr)[visits])),
        other_events=_frozen(concat_ranges(g.event_ptr[o_visits], np.diff(g.event_ptr)[o_visits])),
        target_base=replace(g.take(targets), event_age=None),
        other_base=replace(g.take(others), event_age=None) if len(others) else None,
    )


def _original_support(
    group: Records, targets: np.ndarray, within_visits: bool, layout: _Layout
) -> np.ndarray:
    """Per visit of the target records (`layout`: `_split_layout(group, targets)`), the group's
    records holding its original code set (within one visit when `within_visits`); memoized per the
    group's content and the targets (`_memoized`)."""
    targets = np.asarray(targets, dtype=np.int64)
    key = ("support", group.fingerprint, hashlib.sha256(targets.tobytes()).hexdigest(), within_visits)

    def make() -> np.ndarray:
        sets = _item_sets(group, layout.visits)
        return _frozen(_holders(group, sets, None, within_visits))

    return _memoized(key, make)


class _Pool:
    """The released group during the completion pass, in code space: each event's item is the
    representative code of its item (`_State.item_of_code`), suppressed events left out (a repeated
    generalized item within a visit changes no set, so it is not removed here). It is split into the
    target records (`targets`, rebuilt after every round: only they lose events) and the others
    (recoded only after merges, their item sets derived from the previous ones:
    `engine.anonymize.merged_sets`). Supports over disjoint groups of records add up
    (`engine.risk.count_known_sets`), so a count is the targets' part plus the others' part, and the
    others' part of a target visit's set is kept until merges or a change of the visit's set.

    Item order is the release's: by label (`label_rank`), as `_released` sorts its vocabulary."""

    def __init__(self, state: _State, targets: np.ndarray, within_visits: bool):
        self.state, self.within_visits = state, within_visits
        layout = _split_layout(state.group, targets)
        self.visits, self.local, self.events = layout.visits, layout.local, layout.events
        self.other_events, self.target_base, self.other_base = (
            layout.other_events,
            layout.target_base,
            layout.other_base,
        )
        # per target visit, a lower bound of its support: the original visit's (generalizing never
        # lowers a support and the frequency bins suppress whole codes), then the last count, less the
        # records that lost events since
        self.lower = _original_support(state.group, targets, within_visits, layout).copy()
        # `lower` is the visit's support (or, counted up to k within visits, both are at least k)
        self.exact = np.zeros(len(self.visits), dtype=bool)
        self.other_count = np.full(len(self.visits), -1, dtype=np.int64)  # its others' part; -1 unknown
        self.target: Records  # the target records
        self.target_events: np.ndarray  # the group indexes of their events
        self.others: Records | None  # the other records (None: every record is a target)
        # k and the counter of the others' supports (`others_counter`)
        self._others_counter: tuple[int, KnownSetCounter] | None = None
        # per phecode, the weight of one case and of one control changing (`case_cost`)
        self.flip_weight: tuple[np.ndarray, np.ndarray] | None = None
        if state.phecodes is not None:
            sets = self.target_base.patient_item_sets.astype(np.int32)
            cases, excluded = (np.asarray(((sets @ m) > 0).sum(axis=0)).ravel() for m in state.phecodes)
            controls = self.target_base.n_patients - excluded
            w = np.ones(len(cases)) if state.phecode_weight is None else state.phecode_weight
            # a phecode with fewer cases than a PheWAS tests (`PhewasSettings.min_cases`) has no test a
            # changed status could move: the completion only lowers case counts, so it never will
            w = w * (cases >= MIN_TESTED_CASES)
            self.flip_weight = (w / np.maximum(cases, 1), w / np.maximum(controls, 1))
        self._rebuild()

    def _code_space(self, base: Records, events: np.ndarray) -> tuple[Records, np.ndarray]:
        """`base` (records whose events are the group's `events`) in code space, and the group
        indexes of the events it keeps."""
        rep = self.state.item_of_code[self.state.group.event_item[events]]
        alive = self.state.keep[events] & (rep >= 0)
        return replace(base, event_item=np.maximum(rep, 0).astype(np.int32)).keep_events(alive), events[alive]

    def merged(self, merged_reps: np.ndarray) -> None:
        """Items were merged (`merged_reps`: per code index, the representatives merged with others):
        both parts take the new representatives (merging removes no event). A visit holding none of
        them keeps its support (the holders of its items are unchanged), and its others' part."""
        old = self.target
        hit = np.bincount(old.event_visit, weights=merged_reps[old.event_item], minlength=old.n_visits) > 0
        self.exact[hit] = False
        self.other_count[hit] = -1
        ioc = self.state.item_of_code  # a representative is a code of its item: its new representative
        self.target = replace(old, event_item=ioc[old.event_item].astype(np.int32))
        if self.others is not None:  # their item sets derived from those before (issue 36)
            sets = merged_item_sets(self.others.patient_item_sets, ioc, merged_reps)
            others = replace(self.others, event_item=ioc[self.others.event_item].astype(np.int32))
            self.others = with_patient_item_sets(others, sets)
            self._others_counter = None
        self._derived()

    def _rebuild(self) -> None:
        """Both parts from the state."""
        self.others = None
        self._others_counter = None
        if self.other_base is not None:
            self.others, _ = self._code_space(self.other_base, self.other_events)
        self.target, self.target_events = self._code_space(self.target_base, self.events)
        self._derived()

    def _derived(self) -> None:
        """The label order and the others' supports."""
        self.label_rank = _label_rank(self.state)
        n = self.state.group.n_items
        self.other_support = (
            np.zeros(n, dtype=np.int64)
            if self.others is None
            else np.bincount(self.others.patient_item_sets.indices, minlength=n)
        )

    def suppressed(self) -> np.ndarray:
        """Target events removed: rebuild the targets' part and return, per code index, whether its
        item lost holding units (target records, or visits when `within_visits`). The others' counts
        of changed visits are forgotten; a lower bound drops by at most the units that lost one of
        the visit's items (a record leaves a set's holders only by losing one of its items), and by
        at most the records that lost any event."""
        old, before = self.target, self.target_units()
        alive = self.state.keep[self.target_events]
        self.target, self.target_events = old.keep_events(alive), self.target_events[alive]
        lost = before - self.target_units()
        changed = np.diff(old.event_ptr) != np.diff(self.target.event_ptr)
        self.other_count[changed] = -1
        n_changed = len(np.unique(self.target.visit_patient[changed]))
        at_most = np.bincount(old.event_visit, weights=lost[old.event_item], minlength=old.n_visits)
        self.lower -= np.minimum(at_most.astype(np.int64), n_changed)
        self.exact &= (at_most == 0) & ~changed  # a visit holding no item that lost units keeps its support
        return lost > 0

    def _count(self, sets: sp.csr_matrix, candidates: Records | None, k: int) -> np.ndarray:
        """`_holders` of the pool's records: within visits counted only up to k (the compiled capped
        walk: 0.42 to 0.30 s for the sample's population scope; every decision here compares a
        support, or a sum of the targets' and the others' parts, with k, and min(a, k) + min(b, k)
        >= k exactly when a + b >= k, so the release is the same). Across a record's visits the full
        count is kept: there the bitmap intersections are faster than the capped walk."""
        cap = k if self.within_visits else None
        if candidates is None or not sets.shape[0]:
            return _holders(self.target, sets, candidates, self.within_visits, cap)
        return self.others_counter(k).count(sets)

    def others_counter(self, k: int) -> KnownSetCounter:
        """The risk engine's counter of the others' supports (`_holders` with the others as
        candidates), its candidate index built once per state of the others: they change only in a
        merge round (`merged`, `_rebuild` forget it). Before, each count rebuilt it (22 calls of a
        pass at the paper's population scope, 0.1-0.4 s each: issue 36)."""
        kept = self._others_counter
        if kept is None or kept[0] != k or kept[1].target_items is not self.target.items:
            assert self.others is not None
            cap = k if self.within_visits else None
            kept = self._others_counter = (
                k,
                KnownSetCounter(self.target.items, self.others, *_holding(self.within_visits, cap)),
            )
        return kept[1]

    def held(self, sets: sp.csr_matrix, k: int) -> np.ndarray:
        """Per row of `sets` (over code indexes): is it held by at least k records of the released
        group? The others are counted only for the sets the targets alone leave below k."""
        count = self._count(sets, None, k)
        if self.others is not None:
            low = np.flatnonzero(count < k)
            count[low] += self._count(sets[low], self.others, k)
        return count >= k

    def below(self, visits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The non-empty target `visits` (group indexes) and whether fewer than k records of the
        released group hold each one's set. Only visits whose support is not known and whose lower
        bound is below k are counted; the others are counted only for the sets the targets alone
        leave below k, and their count is kept per visit (`other_count`) while it holds."""
        local = self.local[visits]
        keep = np.diff(self.target.event_ptr)[local] > 0
        visits, local = visits[keep], local[keep]
        need = ~self.exact[local] & (self.lower[local] < k)
        counted = local[need]
        sets = _item_sets(self.target, counted)
        count = self._count(sets, None, k)
        exact = np.full(len(counted), self.others is None)
        if self.others is not None:
            low = count < k
            unknown = np.flatnonzero(low & (self.other_count[counted] < 0))
            self.other_count[counted[unknown]] = self._count(sets[unknown], self.others, k)
            count[low] += self.other_count[counted[low]]
            exact = low
        self.lower[counted] = count
        self.exact[counted] = exact
        return visits, self.lower[local] < k

    def item_support(self) -> np.ndarray:
        """Per code index, the released group's records holding the item it represents."""
        n = self.state.group.n_items
        return self.other_support + np.bincount(self.target.patient_item_sets.indices, minlength=n)

    def target_units(self) -> np.ndarray:
        """Per code index, the target units (records, or visits when `within_visits`) holding it."""
        units = self.target.visit_item_sets if self.within_visits else self.target.patient_item_sets
        return np.bincount(units.indices, minlength=self.state.group.n_items)

    def rarest_first(self, visits: np.ndarray, item_support: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The distinct items of each target visit of `visits` (group indexes), rarest first, ties by
        label: (items, ptr), `items[ptr[i]:ptr[i + 1]]` those of `visits[i]`."""
        sets = _item_sets(self.target, self.local[visits])
        row = np.repeat(np.arange(len(visits), dtype=np.int64), np.diff(sets.indptr))
        order = np.lexsort((self.label_rank[sets.indices], item_support[sets.indices], row))
        return sets.indices[order].astype(np.int64), sets.indptr.astype(np.int64)

    def case_cost(self, local_visits: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Per (target visit, item) pair (target-local visit index, representative code), the PheWAS
        cost of dropping the item (issue #36): over the phecodes the item counts toward and its record
        holds through no other occurrence, 1 / (that phecode's cases among the target records in the
        original data) each (a case status it flips, weighted by how much one case moves that
        phecode's tests), plus over the phecodes whose controls the item alone keeps its record out
        of, 1 / (that phecode's controls) each (the record would become a control). An occurrence is
        a distinct item of the record (a (visit, item) pair when `within_visits`, as the item is then
        dropped from the visit alone). 0 when the record keeps every phecode of the item and every
        exclusion through another occurrence: no case or control status changes."""
        assert self.state.phecodes is not None and self.flip_weight is not None
        t = self.target
        if self.within_visits:
            units = t.visit_item_sets.astype(np.int32)
            owner = sp.csr_matrix(
                (np.ones(t.n_visits, np.int32), (t.visit_patient, np.arange(t.n_visits))),
                shape=(t.n_patients, t.n_visits),
            )
        else:
            units = t.patient_item_sets.astype(np.int32)
        patient_of = t.visit_patient[local_visits]
        cost = np.zeros(len(items))
        for phecodes, weight, any_code in zip(
            self.state.phecodes, self.flip_weight, (False, True), strict=True
        ):
            m = _item_phecodes(self.state.item_of_code, phecodes, any_code)
            held = (units @ m).tocsr()
            if self.within_visits:
                held = (owner @ held).tocsr()
            held.data = (held.data == 1).astype(np.float64)  # held through this occurrence only
            held.eliminate_zeros()
            cost += np.asarray(m[items].multiply(held[patient_of]) @ weight).ravel()
        return cost


def _item_phecodes(
    item_of_code: np.ndarray, phecodes: sp.csr_matrix, any_code: bool = False
) -> sp.csr_matrix:
    """(n_codes, n_phecodes) int32 0/1: for each representative code, the phecodes of `phecodes`
    (rows per code) every code of its item has (`engine.utility.phewas`: a generalized item counts
    toward a phecode only when all its codes do), or, `any_code`, some code has (it excludes from the
    controls when any code does); empty rows for codes that represent no item."""
    n = len(item_of_code)
    valid = np.flatnonzero(item_of_code >= 0)
    members = sp.csr_matrix((np.ones(len(valid), np.int32), (item_of_code[valid], valid)), shape=(n, n))
    counts = (members @ phecodes.astype(np.int32)).tocsr()
    size = np.bincount(item_of_code[valid], minlength=n)
    rows = np.repeat(np.arange(n), np.diff(counts.indptr))
    all_of = counts.data > 0 if any_code else counts.data == size[rows]
    return sp.csr_matrix(
        (np.ones(int(all_of.sum()), np.int32), (rows[all_of], counts.indices[all_of])), shape=counts.shape
    )


def _label_rank(state: _State) -> np.ndarray:
    """(n_codes,) the position of each representative code's item label among all items' labels
    (the order of `_released`'s vocabulary); 0 for codes that represent no item."""
    codes, ioc = state.group.items, state.item_of_code
    valid = np.flatnonzero(ioc >= 0)
    sizes = np.bincount(ioc[valid], minlength=len(codes))
    reps = np.flatnonzero(sizes > 0)
    members: dict[int, list[str]] = {}
    gen = valid[sizes[ioc[valid]] >= 2]
    for c, r in zip(codes[gen].tolist(), ioc[gen].tolist(), strict=True):
        members.setdefault(r, []).append(str(c))
    labels = np.array(
        [set_item_label(members[r]) if r in members else str(codes[r]) for r in reps.tolist()], dtype=object
    )
    rank = np.zeros(len(codes), dtype=np.int64)
    rank[reps[np.argsort(labels, kind="stable")]] = np.arange(len(reps))
    return rank


def _complete(
    state: _State,
    targets: np.ndarray,
    k: int,
    progress: Progress | None = None,
    within_visits: bool = False,
    completion: str = "rarest",
) -> None:
    """The completion pass (beyond the paper; module docstring): until every visit of the `targets`
    records is held by at least k records of the released group (within one visit when
    `within_visits`), generalize further (at most COMPLETION_GENERALIZE_ROUNDS rounds), then suppress
    items of failing visits, rarest first (ties by item label): from the visit alone when visits are
    exported, else from the target's whole record.

    Only visits that can have changed are rechecked: after a generalization round the failing ones
    (merging items never lowers a visit's count), after a suppression round the failing ones and the
    visits holding an item that lost holding units (records, or visits when `within_visits`). A
    rechecked visit is counted only when neither its support nor a lower bound of at least k is known
    (`_Pool.below`), so the decisions, hence the release, are those of counting every one. The released
    group is kept in code space and split (`_Pool`); the release is built once, after.

    `completion="phewas"` (issue #36, the PheWAS-preserving completion; needs `state.phecodes`):
    generalization rounds (within the constraint groups: under `phecode` constraints, within the
    phecode, which changes no case status) go on, not two, while they merge anything and the last one
    lowered the number of failing visits; then each
    failing visit drops its items cheapest first by `_Pool.case_cost` (an item whose phecodes the
    record keeps through another occurrence costs 0, so it goes first), ties rarest first, then by
    item label. The costs are those at the start of the round. The verification is the risk engine's,
    as for every release."""
    by_cost = completion in ("phewas", ASSOCIATIONS)
    max_gen_rounds = state.group.n_items if by_cost else COMPLETION_GENERALIZE_ROUNDS
    gen_rounds = suppress_rounds = merges = 0
    events_before = int(state.keep.sum())
    failing_by_round: list[int] = []
    pool = _Pool(state, np.asarray(targets, dtype=np.int64), within_visits)
    ledger = None
    if completion == ASSOCIATIONS:
        assert state.phecodes is not None and state.genotypes is not None
        ledger = AssociationLedger(
            pool.target_base, state.phecodes, state.genotypes, within_visits=within_visits
        )
    check = pool.visits
    while True:
        visits, below = pool.below(check, k)
        failing = visits[below]
        failing_by_round.append(len(failing))
        if len(failing) == 0:
            break
        item_support = pool.item_support()
        if by_cost and gen_rounds and len(failing) >= failing_by_round[-2]:
            gen_rounds = max_gen_rounds  # the last generalization round fixed no visit: suppress
        if gen_rounds < max_gen_rounds:
            done, merged_reps = _generalize_failing(state, pool, failing, item_support)
            if done:
                gen_rounds += 1
                merges += done
                if progress:
                    progress(
                        0.7, f"completion: generalization round {gen_rounds}, {len(failing)} visits below k"
                    )
                pool.merged(merged_reps)
                check = failing
                continue
            gen_rounds = max_gen_rounds  # nothing left to generalize: go on to suppression
        suppress_rounds += 1
        if progress:
            progress(0.8, f"completion: suppression round {suppress_rounds}, {len(failing)} visits below k")
        if ledger is not None:
            ledger.sync(pool.target, *_item_phecode_pair(state))
        _suppress_failing(state, pool, failing, item_support, k, by_cost, ledger)
        lost = pool.suppressed()  # only target records lose events
        # target visits holding an item that lost holding units
        t = pool.target
        holding = np.zeros(t.n_visits, dtype=bool)
        holding[t.event_visit[lost[t.event_item]]] = True
        check = np.union1d(failing, pool.visits[holding])
    state.stats.update(
        {
            "completion visits below k by round": failing_by_round,
            "completion merges": merges,
            "completion suppression rounds": suppress_rounds,
            "completion events suppressed": events_before - int(state.keep.sum()),
        }
    )


def _generalize_failing(
    state: _State, pool: _Pool, failing: np.ndarray, item_support: np.ndarray
) -> tuple[int, np.ndarray]:
    """One completion generalization round: for each failing visit, merge its rarest item (ties by
    label) that has a partner in its constraint group with that group's most frequent other released
    item (ties by label). Returns the number of merges (0 when no failing visit has such an item) and,
    per code index, whether it represents an item merged with another.

    The merges of a round join the connected components of the (item, partner) pairs, whatever their
    order; each component takes the smallest representative code of its items."""
    n = state.group.n_items
    present = np.flatnonzero(item_support > 0)  # the released items' representatives
    util = state.utility[present]
    order = present[np.lexsort((pool.label_rank[present], -item_support[present], util))]
    g_sorted = state.utility[order]  # per constraint group, most frequent first
    first = np.ones(len(order), dtype=bool)
    first[1:] = g_sorted[1:] != g_sorted[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    size = np.bincount(start, minlength=len(order))[start]
    top1 = np.full(n, -1, dtype=np.int64)
    top2 = np.full(n, -1, dtype=np.int64)
    top1[order] = order[start]
    top2[order[size >= 2]] = order[start[size >= 2] + 1]
    items, ptr = pool.rarest_first(failing, item_support)
    row = np.repeat(np.arange(len(failing), dtype=np.int64), np.diff(ptr))
    partnered = top2[items] >= 0  # a partner exists when the item's group holds another item
    rows_with, at = np.unique(row[partnered], return_index=True)  # each visit's first partnered item
    if len(rows_with) == 0:
        return 0, np.zeros(n, dtype=bool)
    i = items[np.flatnonzero(partnered)[at]]
    partner = np.where(top1[i] != i, top1[i], top2[i])
    graph = sp.coo_matrix((np.ones(len(i), dtype=np.int8), (i, partner)), shape=(n, n))
    n_comp, comp = connected_components(graph, directed=False)
    merges = n - n_comp
    if merges == 0:
        return 0, np.zeros(n, dtype=bool)
    smallest = np.full(n_comp, n, dtype=np.int64)
    np.minimum.at(smallest, comp, np.arange(n))
    ok = state.item_of_code >= 0
    state.item_of_code[ok] = smallest[comp][state.item_of_code[ok]]
    return merges, np.bincount(comp, minlength=n_comp)[comp] >= 2


def _item_phecode_pair(state: _State) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Per representative code, the phecodes its item counts toward and those whose controls it
    leaves (`_item_phecodes`), as the released PheWAS reads them."""
    assert state.phecodes is not None
    return (
        _item_phecodes(state.item_of_code, state.phecodes[0]),
        _item_phecodes(state.item_of_code, state.phecodes[1], any_code=True),
    )


def _suppress_failing(
    state: _State,
    pool: _Pool,
    failing: np.ndarray,
    item_support: np.ndarray,
    k: int,
    by_cost: bool = False,
    ledger: AssociationLedger | None = None,
) -> None:
    """One completion suppression round: in each failing visit drop items, rarest first (ties by item
    label), until the records holding all remaining items (in one visit, `within_visits`) number at
    least k (a visit with nothing left is consistent with every record). An item is dropped from the
    failing visit when visits are exported, else from every visit of its record.

    `by_cost` (the "phewas" completion): the items are also ordered cheapest first
    (`_Pool.case_cost`, ties rarest first, then by label), and each visit drops the prefix, of the two
    orders, whose summed cost is lower (the rarest-first one on a tie): a cheap order can need more
    items dropped than a rare one."""
    items, ptr = pool.rarest_first(failing, item_support)
    drop_count = _first_held(state, pool, failing, items, ptr, k)
    if by_cost:
        row = np.repeat(np.arange(len(failing), dtype=np.int64), np.diff(ptr))
        cost = pool.case_cost(pool.local[failing][row], items)
        cheap = np.lexsort((np.arange(len(items)), cost, row))  # rarest-first order breaks ties
        cheap_count = _first_held(state, pool, failing, items[cheap], ptr, k)
        rare_cost = _prefix_sums(cost, ptr, drop_count)
        cheap_cost = _prefix_sums(cost[cheap], ptr, cheap_count)
        if ledger is not None:
            orders = [(items, drop_count, rare_cost), (items[cheap], cheap_count, cheap_cost)]
            items, drop_count = _choose_by_associations(
                state, pool, failing, ptr, row, cost, orders, k, ledger
            )
        else:
            take = cheap_cost < rare_cost
            if take.any():
                in_take = take[row]
                items = np.where(in_take, items[cheap], items)
                drop_count = np.where(take, cheap_count, drop_count)
    _drop(state, pool, failing, items, ptr, drop_count)


def _choose_by_associations(
    state: _State,
    pool: _Pool,
    failing: np.ndarray,
    ptr: np.ndarray,
    row: np.ndarray,
    cost: np.ndarray,
    orders: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    k: int,
    ledger: AssociationLedger,
) -> tuple[np.ndarray, np.ndarray]:
    """The "associations" completion's choice (engine and bench only, `engine.anonymize.association_ledger`):
    besides the rarest-first and cheapest-first orders (`orders`: items, prefix length, the prefix's
    `case_cost`), a third order puts first the items whose drop alone changes the Table 4 count least
    now. Failing visits are then taken in their order, and each drops the prefix whose exact change of
    the count, after the drops chosen before it, is lowest (ties: the lower `case_cost`, then the order
    listed: rarest, cheapest, exact). Returns each visit's items in its chosen order and the prefix
    lengths, as `_drop` takes them."""
    patient = pool.target.visit_patient[pool.local[failing]].astype(np.int64)
    items = orders[0][0]
    # a visit of one or two items has no option the first two orders lack: its exact order is not
    # needed (each item's cost alone left 0 there)
    alone = np.zeros(len(items), dtype=np.int64)
    for j in np.flatnonzero(np.diff(ptr)[row] >= 3).tolist():
        alone[j] = ledger.cost(int(patient[row[j]]), items[j : j + 1])
    exact = np.lexsort((np.arange(len(items)), cost, alone, row))
    exact_count = _first_held(state, pool, failing, items[exact], ptr, k)
    orders = [*orders, (items[exact], exact_count, _prefix_sums(cost[exact], ptr, exact_count))]
    chosen = np.zeros(len(failing), dtype=np.int64)
    for i in range(len(failing)):
        a, r = int(ptr[i]), int(patient[i])
        options = [order[0][a : a + int(order[1][i])] for order in orders]
        costs: dict[frozenset[int], int] = {}  # the orders often drop the same set
        for opt in options:
            key = frozenset(opt.tolist())
            if key not in costs:
                costs[key] = ledger.cost(r, opt)
        best = min(
            range(len(orders)),
            key=lambda o: (costs[frozenset(options[o].tolist())], float(orders[o][2][i]), o),
        )
        chosen[i] = best
        ledger.apply(r, options[best])
    pick = chosen[row]
    out = np.select([pick == o for o in range(len(orders))], [order[0] for order in orders])
    return out, np.choose(chosen, [order[1] for order in orders])


def _prefix_sums(values: np.ndarray, ptr: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Per row i, the sum of `values[ptr[i] : ptr[i] + count[i]]`."""
    before = np.concatenate([[0.0], np.cumsum(values)])
    return before[ptr[:-1] + count] - before[ptr[:-1]]


def _first_held(
    state: _State, pool: _Pool, failing: np.ndarray, items: np.ndarray, ptr: np.ndarray, k: int
) -> np.ndarray:
    """Per failing visit (its items in drop order: `items[ptr[i]:ptr[i + 1]]`), the number of its
    first items to drop so that the rest is held by at least k records (all of them when no proper
    suffix is; a visit with nothing left is consistent with every record). Every proper suffix of
    each visit is counted at once."""
    n_items_of = np.diff(ptr)
    # suffix j = items[ptr + j : ptr + n] for j = 1 .. n - 1, visit by visit
    n_suffix = np.maximum(n_items_of - 1, 0)
    suffix_row = np.repeat(np.arange(len(failing), dtype=np.int64), n_suffix)
    j = concat_ranges(np.ones(len(failing), dtype=np.int64), n_suffix)
    suffix_len = n_items_of[suffix_row] - j
    entries = items[concat_ranges(ptr[suffix_row] + j, suffix_len)]
    sets = sp.csr_matrix(
        (np.ones(len(entries), dtype=np.int8), entries, np.concatenate([[0], np.cumsum(suffix_len)])),
        shape=(len(j), state.group.n_items),
    )
    sets.sort_indices()
    held = pool.held(sets, k)
    drop_count = n_items_of.copy()
    np.minimum.at(drop_count, suffix_row[held], j[held])
    return drop_count


def _drop(
    state: _State,
    pool: _Pool,
    failing: np.ndarray,
    items: np.ndarray,
    ptr: np.ndarray,
    drop_count: np.ndarray,
) -> None:
    """Suppress the first `drop_count[i]` items of each failing visit (`items[ptr[i]:ptr[i + 1]]`):
    from the visit alone when visits are exported, else from every visit of its record."""
    g = state.group
    drop_visits = np.repeat(failing, drop_count)
    drop_items = items[concat_ranges(ptr[:-1], drop_count)]
    # the events of the units an item is dropped from: the visit, or the whole record
    if pool.within_visits:
        unit_of_drop, unit_visits = drop_visits, failing
    else:  # a reader without visits would see the item in another visit
        unit_of_drop = g.visit_patient[drop_visits].astype(np.int64)
        units = np.unique(unit_of_drop)
        unit_visits = concat_ranges(g.visit_ptr[units], np.diff(g.visit_ptr)[units])
    events = concat_ranges(g.event_ptr[unit_visits], np.diff(g.event_ptr)[unit_visits])
    ev_rep = state.item_of_code[g.event_item[events]]
    ev_unit = (g.event_visit if pool.within_visits else g.event_patient)[events].astype(np.int64)
    key_ev = ev_unit * g.n_items + ev_rep
    key_drop = unit_of_drop * g.n_items + drop_items
    state.keep[events[(ev_rep >= 0) & np.isin(key_ev, key_drop)]] = False


# ------------------------------------------------------------------------------ entry points
@dataclass(frozen=True, eq=False)
class GroupRelease:
    """A scope's full result: the release (cohort extracted), the released group, its verification."""

    release: Release
    released_group: Records
    adversary: Adversary
    k: int

    @cached_property
    def verification(self) -> Verification:
        """The risk engine's verdict on `release` (single-visit knowledge; candidates as `anonymize`
        says), computed when first read unless `anonymize` was asked to verify at once: a caller that
        verifies the release itself (`engine.study.study.make_release`) verifies it once (issue 38)."""
        return verify(self.release, self.adversary, self.k)


def anonymize(
    group: Records,
    cohort_ids: Sequence[str] | np.ndarray,
    k: int,
    *,
    scope: str = "cohort",
    constraints: str = "phecode",
    complete: bool = False,
    with_visits: bool = False,
    progress: Progress | None = None,
    completion: str = "rarest",
    phecode_weight: np.ndarray | None = None,
    concepts: ConceptParents | None = None,
    genotypes: pd.DataFrame | None = None,
    verify_now: bool = True,
) -> GroupRelease:
    """Anonymize `group` (the cohort, biobank or population: Figure 14's DATA SELECT) with Heatherly's
    procedure, extract the cohort (DEMO EXTRACT) and verify it with the risk engine under single-visit
    knowledge (scope `cohort`: candidates are the released cohort; else the released group).

    `with_visits`: the release is exported with its visit grouping (`Release.shows_visits`) and the
    completion pass works within visits; default: one set of items per patient (Figure 13b).
    `completion`: the completion pass's strategy (`COMPLETIONS`, `_complete`), used when `complete`.
    `concepts`: the CDM's hierarchy of `cdm` constraints (issue 37; ignored by the others).
    `genotypes`: the cohort's (columns patient_id and one per SNP), which `completion="associations"`
    needs and reads (engine and bench only: `engine.anonymize.association_ledger`).
    `verify_now=False`: the verification is left to the first reader of `GroupRelease.verification`
    (none when the caller verifies the release itself)."""
    if with_visits and not group.has_visits:
        raise ValueError("with_visits: the events have no visit column, so there are no visits to keep")
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    if scope not in SCOPE_NAMES:
        raise ValueError(f"scope must be one of {tuple(SCOPE_NAMES)}, not {scope!r}")
    constraints = parse_constraints(constraints)
    if completion not in COMPLETIONS and not (completion == ASSOCIATIONS and genotypes is not None):
        raise ValueError(f"completion must be one of {COMPLETIONS}, not {completion!r}")
    cohort_idx = group.index_of(cohort_ids)
    if progress:
        progress(0.05, f"{SCOPE_NAMES[scope]}: utility groups")
    items_key = hashlib.sha256("\x1f".join(map(str, group.items.tolist())).encode()).hexdigest()
    tree = concepts.fingerprint if concepts is not None and cdm_depth(constraints) is not None else None
    utility = _memoized(
        ("utility", items_key, constraints, tree),
        lambda: _frozen(utility_groups(group.items, constraints, concepts)),
    )
    if progress:
        progress(0.15, f"{SCOPE_NAMES[scope]}: frequency bins of {group.n_patients:,} records")
    binned, stats = _memoized(  # shared by the paper's release and the completed one at this k
        ("bins", group.fingerprint, items_key, constraints, tree, int(k)),
        lambda: _frozen_first(frequency_bin_generalization(group, k, utility)),
    )
    state = _State(group, binned.copy(), utility, np.ones(group.n_events, dtype=bool), dict(stats))
    adversary = Adversary("cohort" if scope == "cohort" else "population", "single_visit")
    if complete:
        if progress:
            progress(0.6, f"{SCOPE_NAMES[scope]}: completion pass")
        if completion in ("phewas", ASSOCIATIONS):
            from engine.utility.phewas import code_phecodes

            state.phecodes = _memoized(("phecodes", items_key), lambda: code_phecodes(group.items))
            state.phecode_weight = phecode_weight
            state.genotypes = genotypes
        _complete(state, cohort_idx, k, progress, with_visits, completion)
    released_group, item_codes, _ = _released(state)
    cohort = _compact(released_group.take(cohort_idx))
    present = set(cohort.items.tolist()) | (
        set() if scope == "cohort" else set(released_group.items.tolist())
    )
    release = Release(
        method=f"{METHOD} {SCOPE_NAMES[scope]}",
        records=cohort,
        item_codes={i: c for i, c in item_codes.items() if i in present},
        suppressed=_suppressed_frame(state, cohort_idx),
        population=None if scope == "cohort" else released_group,
        counts_repeats=False,
        params={
            "k": int(k),
            "scope": scope,
            "constraints": constraints,
            "complete": bool(complete),
            **({"completion": completion} if complete and completion != "rarest" else {}),
            "with_visits": bool(with_visits),
        },
        loss=state.stats,
        shows_visits=bool(with_visits),
    )
    out = GroupRelease(release, released_group, adversary, k)
    if verify_now:
        if progress:
            progress(0.9, f"{SCOPE_NAMES[scope]}: verification by the risk engine")
        out.verification  # noqa: B018 (computed here, in the caller's process)
    return out


def suppress_rare(group: Records, cohort_ids: Sequence[str] | np.ndarray, k: int) -> tuple[Records, Records]:
    """The "without generalization" variant of Tables 2-3: codes held by fewer than k records of
    `group` are removed instead of grouped. Returns (released group, extracted cohort)."""
    support = np.bincount(group.patient_item_sets.indices, minlength=group.n_items)
    released = _compact(group.keep_events(support[group.event_item] >= k))
    return released, _compact(released.take(group.index_of(cohort_ids)))


def _plain_figures(group: Records, cohort_ids: Sequence[str] | np.ndarray, k: int) -> tuple[Figures, Figures]:
    """`figures` of both results of `suppress_rare(group, cohort_ids, k)` (released group, extracted
    cohort), counted from the group's per-record item sets without building them: a record keeps the
    items held by at least k records; every item is an original code (Code Count = released items)."""
    sets = group.patient_item_sets
    kept = np.bincount(sets.indices, minlength=group.n_items) >= k
    kept_entry = kept[sets.indices]
    before = np.concatenate([[0], np.cumsum(kept_entry, dtype=np.int64)])
    per_record = before[sets.indptr[1:]] - before[sets.indptr[:-1]]  # items kept per record
    cohort_idx = group.index_of(cohort_ids)
    in_cohort = concat_ranges(sets.indptr[cohort_idx], np.diff(sets.indptr)[cohort_idx])
    cohort_items = np.zeros(group.n_items, dtype=bool)
    cohort_items[sets.indices[in_cohort][kept_entry[in_cohort]]] = True

    def figures_of(per: np.ndarray, n_items: int) -> Figures:
        return Figures(
            diagnosis_count=int(per.sum()),
            code_count=n_items,
            released_items=n_items,
            population_size=int((per > 0).sum()),
        )

    return figures_of(per_record, int(kept.sum())), figures_of(
        per_record[cohort_idx], int(cohort_items.sum())
    )


def _compact(r: Records) -> Records:
    """The same records with the vocabulary reduced to the items present (order kept)."""
    used = np.zeros(r.n_items, dtype=bool)
    used[r.event_item] = True
    if used.all():
        return r
    new_index = np.cumsum(used) - 1
    return Records(
        patient_ids=r.patient_ids,
        items=r.items[used],
        visit_ptr=r.visit_ptr,
        visit_ids=r.visit_ids,
        event_ptr=r.event_ptr,
        event_item=new_index[r.event_item].astype(np.int32),
        event_age=r.event_age,
        has_visits=r.has_visits,
    )


# ------------------------------------------------------------------------------ Figure 14 and Tables 1-3
@dataclass(frozen=True, eq=False)
class ScopeComparison:
    """The three anonymizations of Figure 14 computed from one dataset, and Tables 1-3 of them."""

    results: dict[str, GroupRelease]  # scope ("cohort", "biobank", "population") -> result
    originals: dict[str, Figures]  # "population*", "biobank*", "cohort*" -> original figures
    rows: list[RetentionRow]  # anonymized datasets of Tables 2-3

    def table1(self) -> pd.DataFrame:
        return summary_table(self.originals, self.rows)

    def table2(self) -> pd.DataFrame:
        return count_table(self.rows, "diagnosis_count")

    def table3(self) -> pd.DataFrame:
        return count_table(self.rows, "code_count")


def _original_figures(records: Records) -> Figures:
    """`figures` of original records (no item map), memoized per their content (`_memoized`)."""
    return _memoized(("figures", records.fingerprint), lambda: figures(records))


_Parts = tuple[GroupRelease, RetentionRow | None, RetentionRow]  # a scope's result, its rows of Tables 2-3


@dataclass(frozen=True)
class _ScopePart:
    """One scope of `compare_scopes`: its anonymization and its rows of Tables 2-3. A module-level
    class of picklable fields (the records go to a pool worker as shared-memory handles,
    `engine.scale.pool.dumps`), so it runs in a pool worker as well as here (issue 38, finding 4)."""

    n: int  # its place among the scopes (its share of the progress)
    n_scopes: int
    scope: str
    group: Records
    cohort: Records
    cohort_ids: Sequence[str] | np.ndarray
    k: int
    options: dict  # `anonymize`'s keyword arguments but scope and progress
    group_original: Figures | None  # the group's original figures (None for the cohort)
    cohort_original: Figures
    whole: Figures

    def __call__(self, progress: Progress | None = None) -> _Parts:
        def step(frac: float, msg: str) -> None:
            if progress:
                progress((self.n + frac) / self.n_scopes, msg)

        res = anonymize(self.group, self.cohort_ids, self.k, scope=self.scope, progress=step, **self.options)
        plain_group, plain_cohort = _plain_figures(self.group, self.cohort_ids, self.k)
        group_row = None
        if self.group_original is not None:
            group_row = RetentionRow(
                f"{self.scope}-Anon",
                figures(res.released_group, res.release.item_codes, self.group),
                plain_group,
                self.group_original,
                self.whole,
            )
        cohort_row = RetentionRow(
            SCOPE_NAMES[self.scope],
            figures(res.release.records, res.release.item_codes, self.cohort),
            plain_cohort,
            self.cohort_original,
            self.whole,
        )
        return res, group_row, cohort_row


def compare_scopes(
    groups: dict[str, Records],
    cohort_ids: Sequence[str] | np.ndarray,
    k: int,
    *,
    constraints: str = "phecode",
    complete: bool = False,
    with_visits: bool = False,
    progress: Progress | None = None,
    parallel: bool = False,
    while_waiting: Callable[[GroupRelease], object] | None = None,
    completion: str = "rarest",
    concepts: ConceptParents | None = None,
) -> ScopeComparison:
    """Anonymize each group of `groups` (keys among "cohort", "biobank", "population"; the cohort is
    required), extract the cohort from each (DEMO_D, DEMO_B, DEMO_S) and build Tables 1-3, with the
    "without generalization" variant (codes below k removed instead of grouped).

    `parallel`: the scopes after the first are anonymized in pool workers while this process does
    the cohort's (`engine.scale.pool.fan_out`, which stores here what they memoized; one after the
    other where it does not fan out). The scopes are independent, so the comparison is the same either
    way; the progress shown is the cohort's (only the call run here reports, and only it calls
    `while_waiting`: what the caller's callbacks hold is never pickled). `while_waiting(cohort's
    result)` is then called here while the other scopes are made (only when they are fanned out; its
    value is ignored): the app reads what its page shows first of that release in the time it would
    otherwise wait. `concepts`: the CDM's hierarchy of `cdm` constraints (`anonymize`)."""
    if "cohort" not in groups:
        raise ValueError("compare_scopes needs the cohort's records")
    scopes = [s for s in ("cohort", "biobank", "population") if s in groups]
    whole_records = groups.get("population", groups.get("biobank", groups["cohort"]))
    originals = {
        f"{s}*": _original_figures(groups[s]) for s in ("population", "biobank", "cohort") if s in groups
    }
    whole = _original_figures(whole_records)
    options = {
        "constraints": constraints,
        "complete": complete,
        "with_visits": with_visits,
        "completion": completion,
        "concepts": concepts,
    }
    parts = [
        _ScopePart(
            n,
            len(scopes),
            scope,
            groups[scope],
            groups["cohort"],
            cohort_ids,
            k,
            options,
            None if scope == "cohort" else originals[f"{scope}*"],
            originals["cohort*"],
            whole,
        )
        for n, scope in enumerate(scopes)
    ]
    if parallel and pool.fan_out_enabled() and len(parts) > 1:

        def first() -> _Parts:
            out = parts[0](progress)
            if progress:
                progress(1 / len(parts), f"{SCOPE_NAMES[parts[0].scope]} done; waiting for the other scopes")
            if while_waiting is not None:
                while_waiting(out[0])
            return out

        calls: list[Callable[[], _Parts]] = [first, *parts[1:]]
        done = pool.fan_out(calls)
    else:
        done = [part(progress) for part in parts]
    results: dict[str, GroupRelease] = {}
    rows_group: list[RetentionRow] = []
    rows_cohort: list[RetentionRow] = []
    for part, (res, group_row, cohort_row) in zip(parts, done, strict=True):
        results[part.scope] = res
        if group_row is not None:
            rows_group.append(group_row)
        rows_cohort.append(cohort_row)
    # Table order of the paper: SD-Anon, BioVU-Anon, DEMO_D, DEMO_S, DEMO_B
    rows_group.sort(key=lambda r: r.name != "population-Anon")
    order = {"DEMO_D": 0, "DEMO_S": 1, "DEMO_B": 2}
    rows_cohort.sort(key=lambda r: order[r.name])
    return ScopeComparison(results, originals, rows_group + rows_cohort)


def records_below_k(verification: Verification) -> int:
    """Records of a release the arbiter (`engine.risk.verify`) finds below its k."""
    return int((np.asarray(verification.distinguishability) < verification.k).sum())


def scope_summary(cmp_: ScopeComparison) -> pd.DataFrame:
    """One row per scope: group anonymized, verification, residual records below k, retention."""
    by_name = {r.name: r for r in cmp_.rows}
    rows = []
    for scope, res in cmp_.results.items():
        name = SCOPE_NAMES[scope]
        ret = by_name[name]
        rows.append(
            {
                "release": name,
                "anonymized group": scope,
                "group records": res.released_group.n_patients,
                "verified": res.verification.ok,
                "records below k": records_below_k(res.verification),
                "DC Local %": 100
                * ret.with_generalization.diagnosis_count
                / max(ret.local.diagnosis_count, 1),
                "CC Local %": 100 * ret.with_generalization.own_code_count / max(ret.local.code_count, 1),
                "generalized items": res.release.loss.get("generalized items", 0),
                "codes suppressed": res.release.loss.get("codes suppressed", 0),
                "cohort events suppressed": len(res.release.suppressed),
            }
        )
    return pd.DataFrame(rows)


def released_frame(release: Release) -> pd.DataFrame:
    """The release file's rows (`Release.exported_frame`): `patient_id`, `visit` (only when the release
    shows its visits), `code` (the released item), one row per (patient, (visit), item). Ages are left
    out: Heatherly releases diagnosis codes only, and the risk engine verified codes only."""
    frame = release.exported_frame()
    return frame[[c for c in (PATIENT, VISIT, CODE) if c in frame.columns]]


# ------------------------------------------------------------------- records shown (Figure 13)
def _item_text(item: str, release: Release) -> str:
    """Figure 13's notation: a generalized item in angle brackets, ⟨401.0, 401.1⟩."""
    codes = release.item_codes.get(item)
    return f"⟨{', '.join(sorted(codes))}⟩" if codes else item


def figure13_table(original: Records, release: Release, patients: list[str]) -> pd.DataFrame:
    """Figure 13: records before (visits in braces) and after (generalized items in angle brackets)."""
    oi, ri = original.index_of(patients), release.records.index_of(patients)
    rows = []
    for p, o, r in zip(patients, oi, ri, strict=True):
        before = ", ".join("{" + ", ".join(v) + "}" for v in original.patient_visits(int(o)))
        after = ", ".join(
            "{" + ", ".join(_item_text(i, release) for i in v) + "}"
            for v in release.records.patient_visits(int(r))
            if v
        )
        rows.append({"record": p, "original (visits)": before, "released (visits)": after})
    return pd.DataFrame(rows)


def example_patients(release: Release, n: int = 5) -> list[str]:
    """Records holding a generalized item first (record order), then any."""
    rec = release.records
    gen = np.array([str(i) in release.item_codes for i in rec.items], dtype=bool)
    has = np.zeros(rec.n_patients, dtype=bool)
    if rec.n_events:
        has[rec.event_patient[gen[rec.event_item]]] = True
    order = np.concatenate([np.flatnonzero(has), np.flatnonzero(~has)])
    return [str(rec.patient_ids[i]) for i in order[:n]]


def release_summary(res: GroupRelease, cmp_: ScopeComparison) -> dict:
    """One release of Heatherly's method as JSON-ready data: parameters, the procedure's figures, the
    retention of its scope (Table 2's rows) and the verification."""
    name = SCOPE_NAMES[res.release.params["scope"]]
    ret = next(r for r in cmp_.rows if r.name == name)
    v = res.verification
    return {
        "method": f"Heatherly 2013, {name}",
        "parameters": res.release.params,
        "procedure": res.release.loss,
        "retention": {
            "original": ret.local.__dict__,
            "with generalization": ret.with_generalization.__dict__,
            "without generalization": ret.without_generalization.__dict__,
        },
        "verification": {"ok": v.ok, "adversary": v.adversary.label, "k": v.k, "message": v.message()},
    }
