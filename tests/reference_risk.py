"""The plain, obviously correct reference for distinguishability, over Python sets and multisets.

It restates ARCHITECTURE section 3 (Tamersoy 2010 "Risk Measure"; Loukides 2010; Heatherly 2013)
with no index, no deduplication and no numpy: for every known set, count the candidate records that
hold every known item, where a candidate item c matches a known item t when codes(c) is a subset of
codes(t), and with repeat counts the candidate needs at least as many matching occurrences as the
known set holds. Single-visit knowledge takes the minimum over the record's visits (an empty visit
is consistent with every candidate). With `within_visits` (a release that shows its visits) and
single-visit knowledge, a candidate patient is consistent when one of its visits, taken alone,
holds every known item.

Under `whole_record` knowledge (issue 39) the attacker also knows which codes the target does not hold:
a candidate is consistent when the set of the targets' items it shows equals the target's item set
(`reference_whole_record`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from engine.records import Records
from engine.release import codes_of


def known_sets(targets: Records, knowledge: str, count_repeats: bool) -> list[list[Counter]]:
    """Per target record, the list of known multisets (item -> required occurrences)."""
    out = []
    for p in range(targets.n_patients):
        if knowledge == "single_visit":
            # a visit's codes are known as a set (repeats within a visit are not counted)
            out.append([Counter(set(v)) for v in targets.patient_visits(p)])
        else:
            codes = targets.patient_codes(p)
            out.append([Counter(codes) if count_repeats else Counter(set(codes))])
    return out


def consistent(known: Counter, candidate: Counter, item_codes: Mapping[str, frozenset[str]] | None) -> bool:
    """Does a candidate record (item -> occurrences) hold every known item often enough?"""
    for t, need in known.items():
        t_codes = codes_of(t, item_codes)
        have = sum(n for c, n in candidate.items() if codes_of(c, item_codes) <= t_codes)
        if have < need:
            return False
    return True


def reference_distinguishability(
    targets: Records,
    candidates: Records,
    knowledge: str,
    *,
    item_codes: Mapping[str, frozenset[str]] | None = None,
    count_repeats: bool = False,
    within_visits: bool = False,
) -> list[int]:
    """Distinguishability of every target record, by brute force."""
    if knowledge == "whole_record":
        return reference_whole_record(targets, candidates, item_codes=item_codes)
    by_visit = within_visits and knowledge == "single_visit"
    if by_visit:  # each candidate patient as the list of its visits
        cands = [[Counter(v) for v in candidates.patient_visits(q)] for q in range(candidates.n_patients)]
    else:
        cands = [[Counter(candidates.patient_codes(q))] for q in range(candidates.n_patients)]
    out = []
    for sets in known_sets(targets, knowledge, count_repeats):
        best = len(cands)
        for known in sets:
            n = sum(any(consistent(known, part, item_codes) for part in c) for c in cands)
            best = min(best, n)
        out.append(best)
    return out


def shown_items(
    codes: list[str], vocabulary: list[str], item_codes: Mapping[str, frozenset[str]] | None
) -> set[str]:
    """The items of `vocabulary` a record with `codes` shows: a code that is itself an item stands for
    itself; another code for every item whose codes include its codes; a code no item stands for is
    not shown (the release dropped it)."""
    shown: set[str] = set()
    for c in codes:
        if c in vocabulary:
            shown.add(c)
        else:
            shown.update(t for t in vocabulary if codes_of(c, item_codes) <= codes_of(t, item_codes))
    return shown


def reference_whole_record(
    targets: Records, candidates: Records, *, item_codes: Mapping[str, frozenset[str]] | None = None
) -> list[int]:
    """Per target record, the candidates whose shown item set equals the target's item set exactly
    (repeats and visits play no part). The items shown are those some target record holds: the
    columns of the flat table (ARX's quasi-identifiers), against which a population is projected."""
    vocabulary = sorted({c for p in range(targets.n_patients) for c in targets.patient_codes(p)})
    shown = [
        shown_items(candidates.patient_codes(q), vocabulary, item_codes) for q in range(candidates.n_patients)
    ]
    return [sum(s == set(targets.patient_codes(p)) for s in shown) for p in range(targets.n_patients)]
