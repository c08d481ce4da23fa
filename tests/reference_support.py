"""The support counts of `engine.estimate.explain` before issue 36, kept as the reference the index-based
counts (`risk.Postings.holding`) are checked against: every code's and category's holders as a
Python frozenset, a set of tokens counted by intersecting them (tests/test_risk_holders.py)."""

from __future__ import annotations

from collections.abc import Iterable

from engine.records import Records


class ReferenceSupport:
    """Postings of the candidates per code and per category; the support of a set of tokens
    (("c", code) or ("g", category)) is the number of candidates holding every token. `cap` is
    accepted and ignored: the counts are exact."""

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

    def counting(self) -> ReferenceSupport:
        """The same postings with counts of its own."""
        twin = object.__new__(ReferenceSupport)
        twin.n, twin.post, twin._memo = self.n, self.post, {}
        return twin

    def forget(self) -> None:
        self._memo.clear()

    def count(self, tokens: Iterable[tuple[str, str]], cap: int | None = None) -> int:
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
