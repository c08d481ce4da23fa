"""Why a record is at risk, and the cheapest change that would bring it to k (issues 27, 35).

For a cohort record whose distinguishability is below k under an adversary (scope, knowledge) on the
ORIGINAL data (repeat counts not counted, the whole candidate record matched, as
`risk.original_distinguishability` with the default matching):

What singles it out. The known set examined is the record's riskiest one: under single-visit
knowledge the visit with the fewest consistent candidates (the first such visit in record order),
under all-visits knowledge the whole record. The support of a set of codes is the number of
candidates (the cohort, or the population) holding every code of it. The rule: take the known set's
codes from the rarest (smallest support alone; ties by code) and add them until the support of the
codes taken is below k; then drop, from the last code taken back to the first, every code whose
removal keeps the support below k. The result singles the record out among fewer than k candidates
and is minimal by inclusion (no code of it can be left out), not necessarily the smallest such set.

The cheapest change, as a release would make it (issue 35 finding 5). Two kinds of change:
- generalize a category: every code of an ICD-9-CM 3-digit code or ICD-10-CM category
  (`engine.hierarchy`) becomes the one released item `<category>*` in EVERY record of the release (the
  cohort), as a method recodes: the item then stands for every such code, so a candidate holding any
  of them matches it. On an OMOP CDM read in standard concepts with its vocabulary tables (`concepts`,
  issue 37) a code's category is its parent one level up in the CDM's own hierarchy, as the methods
  climb it (`ConceptParents.hierarchy` over the codes of the cohort and the candidates: a concept with
  several parents keeps the one with the most of those codes below it, `Hierarchy.from_poly_parents`);
  a concept directly under the root, or one the CDM does not name, has none. Recoding one record
  alone is no release: "generalize 746.83 to 746.8" in record 16 only leaves it unique against an
  attacker who knows 746.83 while every other record keeps its specific code.
- suppress a code in the record (in every visit): its (patient, code) pair is lost, other records keep
  theirs. While the record shows its category's item for another code, the attacker who knows the
  suppressed code still matches it there (`risk.attacker_known_visits`), so it stays known.
The cost is the real one, over every record a change touches: the record's pairs and events
suppressed, and the records, pairs and events of the release its generalizations recode. The
shortfall of the record is the sum over its known sets (each visit, or the whole record) of max(0, k -
support). The rule, greedy: at each step, among the single changes (generalize one of the record's
categories, suppress one of its codes) that reduce the shortfall, take the one suppressing the fewest
pairs, then changing the fewest pairs of the release (recoded, or suppressed), then reducing the
shortfall most, then the first; when no single change reduces it, suppress the rarest remaining code
the riskiest set still below k shows (its own, or one showing a category item it holds). Stop at
shortfall 0. Then, from the last change back, undo each change the record stays at k without. The supports here are
exact for that release: a category's support is the candidates holding any code of it, which are the
candidates holding its item once every record is recoded.

Every change proposed is then re-verified by the one arbiter, `engine.risk`, on the release it makes
(the categories recoded in every record, the codes suppressed in the record; the attacker's known sets
as `risk.release_distinguishability` forms them), every record below k in one count (`_verify`);
`distinguishability_after` is that count, and a change that would not bring its record to k is not
proposed (`verified` False). Suppressing a code of one record can lower other records' counts under
cohort scope, and a generalization changes every record: fixing records one at a time is not a
release. A record with every code suppressed leaves the release (`distinguishability_after` the
whole pool). A record with fewer than k candidates in the pool cannot be fixed (`fixable` False).

No Streamlit; source patient ids appear only in `Explanation.patient_id` (the CLI's steward-only CSV).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from engine import risk
from engine.adversary import Adversary, Knowledge
from engine.io.concepts import ConceptParents
from engine.records import Records

GENERALIZE, SUPPRESS = "generalize", "suppress"
_MASKS_KEPT = 64  # codes' masks an explanation keeps from record to record (n bytes each: 1.4 MB at 1.37 M)
CATEGORY_LEVELS = ("3-digit", "category")  # ICD-9-CM 3-digit code, ICD-10-CM category


def categories_of(items: Iterable[str], concepts: ConceptParents | None = None) -> dict[str, str]:
    """Each ICD code -> its ICD-9-CM 3-digit code or ICD-10-CM category (`engine.hierarchy`), for the
    codes that have one above them; codes unknown to the hierarchy, or already at that level, absent.
    With a CDM's `concepts` (issue 37): each code -> its parent in `concepts.hierarchy(items)`, the
    tree the methods climb (module docstring); codes directly under its root absent."""
    from engine.hierarchy import icd_hierarchy_for

    labels = sorted({str(x) for x in items})
    if not labels:
        return {}
    if concepts is not None:
        tree = concepts.hierarchy(labels)
        up = {code: tree.parent(code) for code in labels}
        return {code: p for code, p in up.items() if p is not None and p != tree.root}
    h = icd_hierarchy_for(labels)
    out: dict[str, str] = {}
    for code in labels:
        if code not in h:
            continue
        for a in h.ancestors(code):
            if h.level(a) in CATEGORY_LEVELS:
                out[code] = a
                break
    return out


@dataclass(frozen=True)
class Change:
    """One change of the release (module docstring): GENERALIZE recodes every code of `codes` (the
    codes of category `to` in the cohort and the candidates) to the item `<to>*` in EVERY record;
    SUPPRESS removes the code `held[0]` from the record. `held`: the record's codes it changes."""

    action: str  # GENERALIZE or SUPPRESS
    held: tuple[str, ...]
    to: str = ""
    codes: tuple[str, ...] = ()

    def text(self) -> str:
        if self.action == SUPPRESS:
            return f"suppress {self.held[0]}"
        more = f" and {len(self.codes) - 4} more" if len(self.codes) > 4 else ""
        under = ", ".join(self.codes[:4]) + more
        return (
            f"generalize {', '.join(self.held)} to {self.to} in every record (every code under it: {under})"
        )


@dataclass(frozen=True)
class Explanation:
    """Why one record is at risk and what would fix it (module docstring).

    row: the record's position in the cohort; patient_id: its SOURCE id (identifying).
    known_set: the codes of the riskiest known set (visit `visit`, or the whole record: visit None).
    singling_out / singling_out_support: the minimal subset and its number of candidates (< k).
    changes: the cheapest change found; distinguishability_after: the record's count after it, by
    `engine.risk` on the release it makes; verified: that count reaches k (else no change is proposed).
    Its cost over every record it touches: pairs_lost / events_lost, the record's (patient, code)
    pairs and events suppressed (of `record_pairs` pairs); records_recoded / pairs_recoded /
    events_recoded, those of the whole cohort recoded by its generalizations."""

    row: int
    patient_id: str
    k: int
    distinguishability: int
    visit: str | None
    known_set: tuple[str, ...]
    singling_out: tuple[str, ...]
    singling_out_support: int
    changes: tuple[Change, ...]
    distinguishability_after: int
    pairs_lost: int
    record_pairs: int
    fixable: bool
    verified: bool = True
    events_lost: int = 0
    records_recoded: int = 0
    pairs_recoded: int = 0
    events_recoded: int = 0
    descriptions: dict[str, str] = field(default_factory=dict)

    @property
    def removes_record(self) -> bool:
        """Every code of the record suppressed: the record leaves the release (nothing left to know:
        `distinguishability_after` is then the whole pool)."""
        return self.fixable and self.pairs_lost == self.record_pairs

    def change_text(self) -> str:
        if not self.fixable:
            return f"cannot be fixed: the candidate pool holds fewer than k = {self.k} records"
        if not self.verified:
            return (
                f"no change proposed: the change found leaves the record at {self.distinguishability_after} "
                f"< k = {self.k} when re-counted by engine.risk"
            )
        text = "; ".join(c.text() for c in self.changes) or "no change"
        return text + (" (every code: the record leaves the release)" if self.removes_record else "")


class _Support:
    """The support of a set of tokens (("c", code) or ("g", category)): the number of candidates
    holding every token, a category held by the holders of any of its codes. Counted on
    `risk.item_postings` of the candidates (one atom per code, then one per category) by
    `risk.Postings.holding`, from the rarest token (issue 36: Python sets of 1.37 M candidates were
    the greedy fix's time)."""

    def __init__(self, candidates: Records, categories: dict[str, str]) -> None:
        under: dict[str, list[str]] = {}
        for item in candidates.items.astype(str).tolist():
            if item in categories:
                under.setdefault(categories[item], []).append(item)
        self.n = candidates.n_patients
        self.post = risk.item_postings(candidates, under)
        self.atom: dict[tuple[str, str], int] = {
            ("c", item): j for j, item in enumerate(candidates.items.astype(str).tolist())
        }
        self.atom |= {("g", cat): candidates.n_items + i for i, cat in enumerate(under)}
        self._memo: dict[frozenset[tuple[str, str]], tuple[int, bool]] = {}
        self._masks: dict[int, np.ndarray] = {}  # `risk.Postings.holding`'s masks of the atoms met

    def counting(self) -> _Support:
        """The same postings with counts of its own (the postings are shared and never modified)."""
        twin = object.__new__(_Support)
        twin.n, twin.post, twin.atom, twin._memo, twin._masks = self.n, self.post, self.atom, {}, {}
        return twin

    def forget(self) -> None:
        """Drop the counts kept (one record's trial sets are of no use to the next: memory); the
        masks, which records share, past `_MASKS_KEPT` of them."""
        self._memo.clear()
        if len(self._masks) > _MASKS_KEPT:
            self._masks.clear()

    def count(self, tokens: Iterable[tuple[str, str]], cap: int | None = None) -> int:
        """The support; with `cap`, min(support, cap) (enough for "below k or not", and faster)."""
        key = frozenset(tokens)
        hit = self._memo.get(key)  # (value, exact): a count stopped at its cap is a lower bound
        if hit is None or not (hit[1] or (cap is not None and hit[0] >= cap)):
            if not key:
                value = self.n
            elif any(t not in self.atom for t in key):
                value = 0
            else:
                atoms = np.array([self.atom[t] for t in key], dtype=np.int64).reshape(-1, 1)
                value = len(self.post.holding(list(atoms), cap, self._masks))  # one atom a group
            hit = (value if cap is None else min(value, cap), cap is None or value < cap)
            self._memo[key] = hit
        return hit[0] if cap is None else min(hit[0], cap)


def _known_sets(records: Records, p: int, knowledge: str) -> tuple[list[tuple[str, ...]], list[str | None]]:
    """The record's known sets (distinct codes, sorted) and their visit labels (None: whole record)."""
    if knowledge == "all_visits":
        return [tuple(sorted(set(records.patient_codes(p))))], [None]
    visits = records.patient_visits(p)
    labels = records.visit_ids[records.visit_ptr[p] : records.visit_ptr[p + 1]]
    return [tuple(sorted(set(v))) for v in visits], [str(x) for x in labels]


@dataclass(frozen=True)
class _State:
    """A change of the release: categories generalized in every record, codes suppressed in the record."""

    generalized: frozenset[str] = frozenset()
    suppressed: frozenset[str] = frozenset()

    def without(self, step: tuple[str, str]) -> _State:
        kind, what = step
        if kind == GENERALIZE:
            return _State(self.generalized - {what}, self.suppressed)
        return _State(self.generalized, self.suppressed - {what})

    def with_(self, step: tuple[str, str]) -> _State:
        kind, what = step
        if kind == GENERALIZE:
            return _State(self.generalized | {what}, self.suppressed)
        return _State(self.generalized, self.suppressed | {what})


def _shown(state: _State, under: dict[str, list[str]]) -> frozenset[str]:
    """The generalized categories whose item the record still shows (for a code it keeps); `under`:
    the record's codes per category."""
    return frozenset(g for g in state.generalized if any(c not in state.suppressed for c in under[g]))


def _tokens(
    codes: Sequence[str], state: _State, categories: dict[str, str], shown: frozenset[str]
) -> set[tuple[str, str]]:
    """The tokens of a known set once the release is changed by `state`. A suppressed code stays
    known through its category's item while the record shows that item for another code (`shown`):
    the attacker matches what it knows of a visit against every released item of the record that
    stands for it (`risk.attacker_known_visits`)."""
    out: set[tuple[str, str]] = set()
    if not state.generalized and not state.suppressed:
        return {("c", c) for c in codes}
    for c in codes:
        cat = categories.get(c, "") if state.generalized else ""
        generalized = cat in state.generalized  # never "": no category
        if c not in state.suppressed:
            out.add(("g", cat) if generalized else ("c", c))
        elif generalized and cat in shown:
            out.add(("g", cat))
    return out


class _Recoding:
    """Per category, what recoding it in every record of the release (the cohort) touches: its
    records, (patient, code) pairs and events."""

    def __init__(self, cohort: Records, categories: dict[str, str]) -> None:
        cat = pd.Series(cohort.items.astype(str)).map(categories)
        pairs = cohort.patient_item_sets.tocoo()
        held = pd.DataFrame({"patient": pairs.row, "category": cat.to_numpy()[pairs.col]}).dropna()
        self.pairs: dict[str, int] = held["category"].value_counts().to_dict()
        self.records: dict[str, np.ndarray] = {
            str(g): np.unique(rows.to_numpy()) for g, rows in held.groupby("category")["patient"]
        }
        per_item = pd.Series(np.bincount(cohort.event_item, minlength=cohort.n_items))
        self.events: dict[str, int] = per_item.groupby(cat.to_numpy()).sum().to_dict()

    def changed_pairs(self, state: _State, categories: dict[str, str]) -> int:
        """Pairs of the release the change alters: recoded in every record, or suppressed in the
        record (a suppressed pair of a recoded category counted once)."""
        recoded = sum(self.pairs.get(g, 0) for g in state.generalized)
        return recoded + sum(categories.get(c) not in state.generalized for c in state.suppressed)


def singling_out(codes: Sequence[str], support: _Support, k: int) -> tuple[tuple[str, ...], int]:
    """The minimal subset of `codes` whose support is below k (module docstring's rule), and its
    support; (all codes, their support) when even all of them reach k."""
    order = sorted(codes, key=lambda c: (support.count([("c", c)]), c))
    taken: list[str] = []
    for c in order:
        taken.append(c)
        if support.count((("c", x) for x in taken), k) < k:
            break
    for c in list(reversed(taken)):
        rest = [x for x in taken if x != c]
        if support.count((("c", x) for x in rest), k) < k:
            taken = rest
    return tuple(taken), support.count(("c", x) for x in taken)


def _fix(
    sets: list[tuple[str, ...]],
    support: _Support,
    categories: dict[str, str],
    recoding: _Recoding,
    k: int,
) -> tuple[_State, list[tuple[str, str]]]:
    """The greedy change (module docstring) and its steps in the order taken."""
    codes = sorted({c for s in sets for c in s})
    state = _State()
    steps: list[tuple[str, str]] = []
    if support.n < k:
        return state, steps

    views: dict[_State, frozenset[str]] = {}
    under: dict[str, list[str]] = {}
    for c in codes:
        if c in categories:
            under.setdefault(categories[c], []).append(c)

    def lacking(st: _State, j: int) -> int:
        shown = views.get(st)
        if shown is None:
            shown = views[st] = _shown(st, under)
        return max(0, k - support.count(_tokens(sets[j], st, categories, shown), k))

    moves = [(GENERALIZE, g) for g in sorted({categories[c] for c in codes if c in categories})]
    moves += [(SUPPRESS, c) for c in codes]
    in_sets: dict[str, list[int]] = {}
    for j, s in enumerate(sets):
        for c in s:
            in_sets.setdefault(c, []).append(j)
            if c in categories:
                in_sets.setdefault(categories[c], []).append(j)
    touches = [  # the known sets each move can change (a suppression: its category's item too)
        sorted(
            set(in_sets[what]) | set(in_sets.get(categories.get(what, "") if kind == SUPPRESS else "", ()))
        )
        for kind, what in moves
    ]
    current = [lacking(state, j) for j in range(len(sets))]
    while sum(current) > 0:
        best: tuple[int, int, int, int] | None = None
        for i, move in enumerate(moves):
            touched = touches[i]
            if not any(current[j] for j in touched) or move[1] in (
                state.generalized if move[0] == GENERALIZE else state.suppressed
            ):
                continue
            trial = state.with_(move)
            # every set it touches: generalizing can show a suppressed code again (its category item)
            gain = sum(lacking(trial, j) - current[j] for j in touched)
            if gain < 0:
                key = (len(trial.suppressed), recoding.changed_pairs(trial, categories), gain, i)
                if best is None or key < best:
                    best = key
        if best is None:  # no single change helps: suppress the rarest code the riskiest set shows
            shown = _shown(state, under)
            counts = [support.count(_tokens(s, state, categories, shown), k) for s in sets]
            seen = _tokens(sets[int(np.argmin(counts))], state, categories, shown)
            left = [  # its codes kept, or the record's codes that show its category items
                c
                for c in codes
                if c not in state.suppressed and (("c", c) in seen or ("g", categories.get(c, "")) in seen)
            ]
            move = (
                SUPPRESS,
                min(left, key=lambda x: (support.count(_tokens([x], state, categories, shown)), x)),
            )
        else:
            move = moves[best[3]]
        state = state.with_(move)
        steps.append(move)
        current = [lacking(state, j) for j in range(len(sets))]
    for step in reversed(list(steps)):  # undo what is not needed, last change first
        trial = state.without(step)
        if all(lacking(trial, j) == 0 for j in range(len(sets))):
            state = trial
            steps.remove(step)
    return state, steps


def _verify(
    cohort: Records,
    candidates: Records,
    knowledge: Knowledge,
    fixes: dict[int, _State],
    categories: dict[str, str],
    item_codes: dict[str, frozenset[str]],
    postings: risk.Postings | None = None,
) -> dict[int, int]:
    """Each record's distinguishability once its change is applied to the release, counted by
    `engine.risk` in one call for every record (module docstring).

    Each target record is released as its change releases it (`Release`, checked against the original
    records of the targets, its source: the check and the attacker's known visits read those only):
    its suppressed codes gone, its codes under a generalized category recoded to the category's item,
    which stands for every code of it; the attacker's known sets are the release's
    (`risk.attacker_known_visits` under single-visit knowledge). The candidates are counted as they
    are: in the release they hold that item wherever they hold any of its codes, and an item matches
    where a code it stands for did (`risk.match_matrix`: codes(c) a subset of codes(t)), so each count
    equals the count against the recoded release (the property test in tests/test_explain.py recodes
    every record and compares). A record's own suppressions leave its whole record consistent with
    itself, and nothing else depends on them. The count runs on the candidates holding the items of
    a known set only (`risk.distinguishability_among_holders`: the same counts; `postings`, the
    candidates' `risk.item_postings`, built once by `prepare`)."""
    from engine.release import Release

    if not fixes:
        return {}
    rows = sorted(fixes)
    targets = cohort.take(np.asarray(rows, dtype=np.int64))
    code = cohort.items.astype(str)[targets.event_item]
    category = pd.Series(code).map(categories).astype(object).fillna("").to_numpy(dtype=object)
    owner = targets.event_patient

    def marked(values: np.ndarray, chosen: list[tuple[int, str]]) -> np.ndarray:
        if not chosen:
            return np.zeros(len(values), dtype=bool)
        return pd.MultiIndex.from_arrays([owner, values]).isin(chosen)

    gone = marked(code, [(i, c) for i, p in enumerate(rows) for c in fixes[p].suppressed])
    recoded = marked(category, [(i, g) for i, p in enumerate(rows) for g in fixes[p].generalized])
    labels = np.where(recoded, category + "*", code)
    stands = {f"{g}*": item_codes[f"{g}*"] for p in rows for g in fixes[p].generalized}
    release = Release("explain", targets.keep_events(~gone).recode(labels[~gone]), stands, source=targets)
    known = risk.attacker_known_visits(release) if knowledge == "single_visit" else None
    known = release.records if known is None else known
    matching = risk.Matching.of_release(release)
    dis = risk.distinguishability_among_holders(known, candidates, knowledge, matching, postings)
    at = pd.Index(known.patient_ids.astype(str)).get_indexer(cohort.patient_ids[rows].astype(str))
    return {p: int(dis[a]) if a >= 0 else candidates.n_patients for p, a in zip(rows, at, strict=True)}


@dataclass(frozen=True)
class Prepared:
    """What explaining any record at any k under one adversary reads, built once (`prepare`): the
    candidate pool, each code's category and what each category item stands for, the candidates'
    postings, what recoding each category touches, and the records' distinguishability on the original
    data. Never modified: each explanation counts supports with a counter of its own
    (`_Support.counting`), so sessions may share one (issue 40, finding 7: at a new k the Risk page
    rebuilt all of it, about 0.4 s of the server's CPU on the sample, while every other session waited)."""

    candidates: Records
    categories: dict[str, str]
    stands: dict[str, frozenset[str]]
    support: _Support
    recoding: _Recoding
    distinguishability: np.ndarray
    names: dict[str, str] = field(default_factory=dict)  # a CDM's concept names (descriptions)


def prepare(
    cohort: Records,
    adversary: Adversary,
    population: Records | None = None,
    distinguishability: np.ndarray | None = None,
    concepts: ConceptParents | None = None,
) -> Prepared:
    """The k-independent part of `explain_records` for `cohort` under `adversary`.
    `distinguishability`: the records' counts when already computed (`risk.original_distinguishability`
    under the same adversary), else counted here. `concepts`: the CDM's hierarchy and concept names
    (`Dataset.concepts`) when the codes are its standard concepts (module docstring), else ICD's."""
    cands = risk.candidates_for(adversary, cohort, population)
    if distinguishability is None:
        distinguishability = risk.original_distinguishability(cohort, adversary, population)
    categories = categories_of(np.concatenate([cohort.items.astype(str), cands.items.astype(str)]), concepts)
    item_codes: dict[str, set[str]] = {}
    for code, cat in categories.items():
        item_codes.setdefault(f"{cat}*", set()).add(code)
    stands = {item: frozenset(codes) for item, codes in item_codes.items()}
    return Prepared(
        cands,
        categories,
        stands,
        _Support(cands, categories),
        _Recoding(cohort, categories),
        np.asarray(distinguishability),
        {} if concepts is None else dict(concepts.names),
    )


def explain_records(
    cohort: Records,
    adversary: Adversary,
    k: int,
    population: Records | None = None,
    rows: Sequence[int] | None = None,
    distinguishability: np.ndarray | None = None,
    prepared: Prepared | None = None,
    concepts: ConceptParents | None = None,
) -> list[Explanation]:
    """Explanations of the cohort records at `rows` (default: every record below k), on the original
    data under `adversary` (module docstring). `distinguishability`: the records' counts when already
    computed (`risk.original_distinguishability` under the same adversary), else counted here.
    `prepared`: `prepare(cohort, adversary, population, concepts=concepts)` when already built (the
    same explanations). `concepts`: a CDM's hierarchy (`prepare`); its concept names describe the codes."""
    from engine.vocab import description

    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive whole number, not {k!r}")
    k = int(k)
    if prepared is None:
        prepared = prepare(cohort, adversary, population, distinguishability, concepts)
    cands, categories, stands = prepared.candidates, prepared.categories, prepared.stands
    support, recoding = prepared.support.counting(), prepared.recoding
    dis = prepared.distinguishability
    if rows is None:
        rows = np.flatnonzero(dis < k).tolist()
    found = []
    for p in (int(r) for r in rows):
        sets, visits = _known_sets(cohort, p, adversary.knowledge)
        state, steps = _fix(sets, support, categories, recoding, k)
        support.forget()
        found.append((p, sets, visits, state, steps))
    codes_of_record = {p: sorted({c for s in sets for c in s}) for p, sets, *_ in found}
    fixable = support.n >= k
    to_verify = {
        p: st for p, _, _, st, _ in found if fixable and len(st.suppressed) < len(codes_of_record[p])
    }
    after = _verify(cohort, cands, adversary.knowledge, to_verify, categories, stands, support.post)
    out = []
    for p, sets, visits, state, steps in found:
        counts = [support.count(("c", c) for c in s) for s in sets]
        worst = int(np.argmin(counts))
        subset, sub_support = singling_out(sets[worst], support, k)
        codes = codes_of_record[p]
        changes = tuple(
            Change(
                GENERALIZE,
                tuple(c for c in codes if categories.get(c) == what and c not in state.suppressed),
                what,
                tuple(sorted(stands[f"{what}*"])),
            )
            if kind == GENERALIZE
            else Change(SUPPRESS, (what,))
            for kind, what in steps
        )
        value = after.get(p, support.n if fixable else min(counts))
        verified = fixable and value >= k
        cost = _cost(cohort, p, state, categories, recoding) if verified else (0, 0, 0, 0, 0)
        named = set(subset) | {c for ch in changes for c in ch.held} | {c.to for c in changes if c.to}
        out.append(
            Explanation(
                row=p,
                patient_id=str(cohort.patient_ids[p]),
                k=k,
                distinguishability=int(dis[p]),
                visit=visits[worst],
                known_set=sets[worst],
                singling_out=subset,
                singling_out_support=sub_support,
                changes=changes if verified else (),
                distinguishability_after=int(value),
                pairs_lost=cost[0],
                record_pairs=len(codes),
                fixable=fixable,
                verified=verified,
                events_lost=cost[1],
                records_recoded=cost[2],
                pairs_recoded=cost[3],
                events_recoded=cost[4],
                descriptions={c: prepared.names.get(c) or description(c) for c in sorted(named)},
            )
        )
    return out


def _cost(
    cohort: Records, p: int, state: _State, categories: dict[str, str], recoding: _Recoding
) -> tuple[int, int, int, int, int]:
    """(pairs lost, events lost) of record p and (records, pairs, events) of the cohort recoded by the
    change; the record's suppressed pairs and events are lost, not recoded."""
    events = Counter(cohort.patient_codes(p))
    lost = state.suppressed
    lost_recoded = [c for c in lost if categories.get(c) in state.generalized]
    records: set[int] = set()
    for g in state.generalized:
        records.update(recoding.records.get(g, np.zeros(0, np.int64)).tolist())
    if not any(categories.get(c) in state.generalized for c in events if c not in lost):
        records.discard(p)  # every code of the record under the categories is suppressed instead
    return (
        len(lost),
        sum(events[c] for c in lost),
        len(records),
        sum(recoding.pairs.get(g, 0) for g in state.generalized) - len(lost_recoded),
        sum(recoding.events.get(g, 0) for g in state.generalized) - sum(events[c] for c in lost_recoded),
    )


def _described(codes: Iterable[str], descriptions: dict[str, str]) -> str:
    return "; ".join(f"{c} {descriptions.get(c, '')}".strip() for c in codes)


def explanations_frame(explanations: Sequence[Explanation], *, with_ids: bool) -> pd.DataFrame:
    """One row per explanation, with the change's cost over every record it touches (issue 35).
    `with_ids` adds the SOURCE patient id (identifying: the steward's CSV); without it, records are
    named by their position in the cohort."""
    rows = []
    for e in explanations:
        row: dict[str, object] = {"record": e.row}
        if with_ids:
            row["patient_id"] = e.patient_id
        row |= {
            "distinguishability": e.distinguishability,
            "k": e.k,
            "known set": "; ".join(e.known_set),
            "singles out": _described(e.singling_out, e.descriptions),
            "candidates with these codes": e.singling_out_support,
            "change": e.change_text(),
            "distinguishability after": e.distinguishability_after,
            "pairs lost": e.pairs_lost,
            "events lost": e.events_lost,
            "pairs of the record": e.record_pairs,
            "records recoded": e.records_recoded,
            "pairs recoded": e.pairs_recoded,
            "events recoded": e.events_recoded,
        }
        rows.append(row)
    cols = ["record", *(["patient_id"] if with_ids else [])]
    cols += ["distinguishability", "k", "known set", "singles out", "candidates with these codes"]
    cols += ["change", "distinguishability after", "pairs lost", "events lost", "pairs of the record"]
    cols += ["records recoded", "pairs recoded", "events recoded"]
    return pd.DataFrame(rows, columns=cols)
