"""Why a record is at risk, and the cheapest change that would bring it to k (issue 27).

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

The cheapest change. Each code of the record (in every visit, the code as a whole) is kept,
generalized to its ICD-9-CM 3-digit code or ICD-10-CM category (`engine.hierarchy`: the released item
stands for every code of the category, so a candidate holding any of them matches), or suppressed.
Generalizing keeps the record's (patient, code) pair represented (pairs retained: no pair lost);
suppressing loses the pair. The shortfall of the record is the sum over its known sets (each visit,
or the whole record) of max(0, k - support). The rule, greedy: at each step, among the changes of one
code (keep -> generalize, keep -> suppress, generalize -> suppress) that reduce the shortfall, take
the one losing the fewest pairs, then reducing the shortfall most, then the first code; when no single
change reduces it, suppress the rarest remaining code of the riskiest set still below k. Stop at
shortfall 0. Then, from the last change back, undo a change (suppress -> generalize -> keep) whenever
the record stays at k without it. The record's distinguishability after the change counts the
candidates as they are (the other records unchanged; the record itself matches its own changed
sets; a record with every code suppressed leaves the release and counts the whole pool). Under
cohort scope the change can lower other records' counts (they no longer match the
changed record's generalized or suppressed code): fixing records one at a time is not a release.
A record with fewer than k candidates in the pool cannot be fixed (`fixable` False).

No Streamlit; source patient ids appear only in `Explanation.patient_id` (the CLI's steward-only CSV).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from engine.adversary import Adversary
from engine.records import Records

GENERALIZE, SUPPRESS = "generalize", "suppress"
CATEGORY_LEVELS = ("3-digit", "category")  # ICD-9-CM 3-digit code, ICD-10-CM category


def categories_of(items: Iterable[str]) -> dict[str, str]:
    """Each ICD code -> its ICD-9-CM 3-digit code or ICD-10-CM category (`engine.hierarchy`), for the
    codes that have one above them; codes unknown to the hierarchy, or already at that level, absent."""
    from engine.hierarchy import icd_hierarchy_for

    labels = sorted({str(x) for x in items})
    if not labels:
        return {}
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
    """One code of the record changed: generalized to `to` (its category), or suppressed."""

    code: str
    action: str  # GENERALIZE or SUPPRESS
    to: str = ""

    def text(self) -> str:
        return (
            f"generalize {self.code} to {self.to}" if self.action == GENERALIZE else f"suppress {self.code}"
        )


@dataclass(frozen=True)
class Explanation:
    """Why one record is at risk and what would fix it (module docstring).

    row: the record's position in the cohort; patient_id: its SOURCE id (identifying).
    known_set: the codes of the riskiest known set (visit `visit`, or the whole record: visit None).
    singling_out / singling_out_support: the minimal subset and its number of candidates (< k).
    changes: the cheapest change found; distinguishability_after: the record's count after it.
    pairs_lost: the record's (patient, code) pairs the change suppresses, of `record_pairs`."""

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
    descriptions: dict[str, str] = field(default_factory=dict)

    @property
    def removes_record(self) -> bool:
        """Every code of the record suppressed: the record leaves the release (nothing left to know:
        `distinguishability_after` is then the whole pool)."""
        return self.fixable and sum(c.action == SUPPRESS for c in self.changes) == self.record_pairs

    def change_text(self) -> str:
        if not self.fixable:
            return f"cannot be fixed: the candidate pool holds fewer than k = {self.k} records"
        text = "; ".join(c.text() for c in self.changes) or "no change"
        return text + (" (every code: the record leaves the release)" if self.removes_record else "")


class _Support:
    """Postings of the candidates per code and per category; the support of a set of tokens
    (("c", code) or ("g", category)) is the number of candidates holding every token."""

    def __init__(self, candidates: Records, categories: dict[str, str]) -> None:
        m = candidates.patient_item_sets.tocsc()
        self.n = candidates.n_patients
        self.post: dict[tuple[str, str], frozenset[int]] = {}
        by_cat: dict[str, set[int]] = {}
        for j, item in enumerate(candidates.items.astype(str).tolist()):
            rows = frozenset(m.indices[m.indptr[j] : m.indptr[j + 1]].tolist())
            self.post[("c", item)] = rows
            cat = categories.get(item)
            if cat is not None:
                by_cat.setdefault(cat, set()).update(rows)
        for cat, held in by_cat.items():
            self.post[("g", cat)] = frozenset(held)
        self._memo: dict[frozenset[tuple[str, str]], int] = {}

    def count(self, tokens: Iterable[tuple[str, str]]) -> int:
        key = frozenset(tokens)
        hit = self._memo.get(key)
        if hit is None:
            if not key:
                hit = self.n
            else:
                lists = sorted((self.post.get(t, frozenset()) for t in key), key=len)
                hit = len(lists[0].intersection(*lists[1:])) if len(lists) > 1 else len(lists[0])
            self._memo[key] = hit
        return hit


def _known_sets(records: Records, p: int, knowledge: str) -> tuple[list[tuple[str, ...]], list[str | None]]:
    """The record's known sets (distinct codes, sorted) and their visit labels (None: whole record)."""
    if knowledge == "all_visits":
        return [tuple(sorted(set(records.patient_codes(p))))], [None]
    visits = records.patient_visits(p)
    labels = records.visit_ids[records.visit_ptr[p] : records.visit_ptr[p + 1]]
    return [tuple(sorted(set(v))) for v in visits], [str(x) for x in labels]


def _tokens(codes: Sequence[str], state: dict[str, tuple[str, str]]) -> set[tuple[str, str]]:
    """The tokens of a known set under a change state (code -> (action, category))."""
    out: set[tuple[str, str]] = set()
    for c in codes:
        action, cat = state.get(c, ("keep", ""))
        if action == "keep":
            out.add(("c", c))
        elif action == GENERALIZE:
            out.add(("g", cat))
    return out


def singling_out(codes: Sequence[str], support: _Support, k: int) -> tuple[tuple[str, ...], int]:
    """The minimal subset of `codes` whose support is below k (module docstring's rule), and its
    support; (all codes, their support) when even all of them reach k."""
    order = sorted(codes, key=lambda c: (support.count([("c", c)]), c))
    taken: list[str] = []
    for c in order:
        taken.append(c)
        if support.count(("c", x) for x in taken) < k:
            break
    for c in list(reversed(taken)):
        rest = [x for x in taken if x != c]
        if support.count(("c", x) for x in rest) < k:
            taken = rest
    return tuple(taken), support.count(("c", x) for x in taken)


def _fix(
    sets: list[tuple[str, ...]], support: _Support, categories: dict[str, str], k: int
) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """The greedy change (module docstring): code -> (action, category), and the order changed."""
    codes = sorted({c for s in sets for c in s})
    state: dict[str, tuple[str, str]] = {}
    changed: list[str] = []

    def supports(st: dict[str, tuple[str, str]]) -> list[int]:
        return [support.count(_tokens(s, st)) for s in sets]

    def shortfall(st: dict[str, tuple[str, str]]) -> int:
        return sum(max(0, k - s) for s in supports(st))

    if support.n < k:
        return state, changed
    holding = {c: [j for j, s in enumerate(sets) if c in s] for c in codes}
    short = shortfall(state)
    while short > 0:
        current = [max(0, k - s) for s in supports(state)]
        best: tuple[int, int, int, str, tuple[str, str]] | None = None
        for i, c in enumerate(codes):
            action = state.get(c, ("keep", ""))[0]
            moves: list[tuple[str, str]] = []
            if action == "keep" and c in categories:
                moves.append((GENERALIZE, categories[c]))
            if action != SUPPRESS:
                moves.append((SUPPRESS, ""))
            mine = holding[c]
            for move in moves:
                trial = {**state, c: move}
                new = short + sum(
                    max(0, k - support.count(_tokens(sets[j], trial))) - current[j] for j in mine
                )
                if new < short:
                    key = (int(move[0] == SUPPRESS), new - short, i, c, move)
                    if best is None or key[:3] < best[:3]:
                        best = key
        if best is None:  # no single change helps: suppress the rarest code of the riskiest set
            sup = supports(state)
            worst = sets[int(np.argmin(sup))]
            left = [c for c in worst if state.get(c, ("keep", ""))[0] != SUPPRESS]
            c = min(left, key=lambda x: (support.count(_tokens([x], state)), x))
            move = (SUPPRESS, "")
        else:
            c, move = best[3], best[4]
        state[c] = move
        if c not in changed:
            changed.append(c)
        short = shortfall(state)
    for c in reversed(list(changed)):  # undo what is not needed, cheapest state first
        options = [("keep", "")]
        if c in categories:
            options.append((GENERALIZE, categories[c]))
        for option in options:
            if option == state[c]:
                break
            trial = {**state, c: option}
            if shortfall(trial) == 0:
                state = trial
                break
    state = {c: v for c, v in state.items() if v[0] != "keep"}
    return state, [c for c in changed if c in state]


def explain_records(
    cohort: Records,
    adversary: Adversary,
    k: int,
    population: Records | None = None,
    rows: Sequence[int] | None = None,
    distinguishability: np.ndarray | None = None,
) -> list[Explanation]:
    """Explanations of the cohort records at `rows` (default: every record below k), on the original
    data under `adversary` (module docstring). `distinguishability`: the records' counts when already
    computed (`risk.original_distinguishability` under the same adversary), else counted here."""
    from engine import risk
    from engine.vocab import description

    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive whole number, not {k!r}")
    k = int(k)
    cands = risk.candidates_for(adversary, cohort, population)
    if distinguishability is None:
        distinguishability = risk.original_distinguishability(cohort, adversary, population)
    dis = np.asarray(distinguishability)
    if rows is None:
        rows = np.flatnonzero(dis < k).tolist()
    categories = categories_of(np.concatenate([cohort.items.astype(str), cands.items.astype(str)]))
    support = _Support(cands, categories)
    out = []
    for p in rows:
        p = int(p)
        sets, visits = _known_sets(cohort, p, adversary.knowledge)
        counts = [support.count(("c", c) for c in s) for s in sets]
        worst = int(np.argmin(counts))
        subset, sub_support = singling_out(sets[worst], support, k)
        state, order = _fix(sets, support, categories, k)
        fixable = support.n >= k
        after = min(support.count(_tokens(s, state)) for s in sets) if fixable else min(counts)
        codes = sorted({c for s in sets for c in s})
        changes = tuple(Change(c, state[c][0], state[c][1]) for c in order)
        named = set(subset) | {c.code for c in changes} | {c.to for c in changes if c.to}
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
                changes=changes,
                distinguishability_after=int(after),
                pairs_lost=sum(1 for c in changes if c.action == SUPPRESS),
                record_pairs=len(codes),
                fixable=fixable,
                descriptions={c: description(c) for c in sorted(named)},
            )
        )
    return out


def _described(codes: Iterable[str], descriptions: dict[str, str]) -> str:
    return "; ".join(f"{c} {descriptions.get(c, '')}".strip() for c in codes)


def explanations_frame(explanations: Sequence[Explanation], *, with_ids: bool) -> pd.DataFrame:
    """One row per explanation. `with_ids` adds the SOURCE patient id (identifying: the steward's CSV);
    without it, records are named by their position in the cohort."""
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
            "pairs of the record": e.record_pairs,
        }
        rows.append(row)
    cols = ["record", *(["patient_id"] if with_ids else [])]
    cols += ["distinguishability", "k", "known set", "singles out", "candidates with these codes"]
    cols += ["change", "distinguishability after", "pairs lost", "pairs of the record"]
    return pd.DataFrame(rows, columns=cols)


def apply_changes(
    cohort: Records, explanation: Explanation, population: Records | None = None
) -> tuple[pd.DataFrame, dict[str, frozenset[str]]]:
    """The cohort's events with `explanation`'s change applied to its record only, and the item ->
    codes map of the generalized items (`<category>*`: every code of the cohort and `population` under
    the category), for re-verifying with `engine.risk` (`Matching(item_codes=...)`)."""
    frame = cohort.to_frame()
    mine = frame["patient_id"].astype(str) == explanation.patient_id
    vocabulary = [cohort.items.astype(str)] + (
        [population.items.astype(str)] if population is not None else []
    )
    cats = categories_of(np.concatenate(vocabulary))
    item_codes: dict[str, frozenset[str]] = {}
    for ch in explanation.changes:
        at = mine & (frame["code"].astype(str) == ch.code)
        if ch.action == SUPPRESS:
            frame = frame[~at]
            mine = mine[~at]
        else:
            label = f"{ch.to}*"
            frame.loc[at, "code"] = label
            item_codes[label] = frozenset({c for c, cat in cats.items() if cat == ch.to} | {ch.code})
    return frame.reset_index(drop=True), item_codes
