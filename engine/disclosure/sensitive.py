"""Sensitive diagnoses an attacker can infer: rho-uncertainty for code sets (issue #39, first bullet).

Cao, Karras, Raissi and Tan, "rho-uncertainty: inference-proof transaction anonymization", VLDB 2010:
a release is rho-uncertain when no sensitive association rule q -> s has a confidence above rho.
Here, for a released cohort (the original cohort is a release of itself):

- a *category* s (HIV, mental health, substance use, reproductive health, or the officer's own) is a
  set of code ranges per vocabulary and of phecode ranges (`load_categories`; shipped list
  `sample_data/reference/sensitive_categories.csv`, each row with its source). A released item is
  *sensitive of s* when any code it stands for is in s (a generalized item mixing a sensitive code
  with others is counted as revealing s: an upper bound). A record *holds s* when it holds such an item.
- the attacker knows q, a set of 0..m of the target's released non-sensitive items: a subset of one
  visit's items under `single_visit` knowledge, of the whole record under `all_visits`. Repeats are
  not part of q.
- conf(q -> s) = |cohort records holding q and s| / |candidates holding q|, the candidates being the
  released cohort (scope `cohort`) or the population (scope `population`; the released population when
  the method made one, else the original population read through the release's items, as
  `engine.risk.match_matrix` matches). A record holds q in its whole record, or within one visit when
  the release shows visits and the knowledge is one visit (as `engine.risk` matches). q = {} is the
  prior: the share of candidates holding s.
- a *rule* q -> s violates rho when conf > rho, for every q some cohort record can know (reported
  whether or not that record holds s); a record's sensitive code is *inferred* when it holds s and
  one of its own known sets q has conf(q -> s) > rho. The release meets rho when no rule violates it.

The bound on the combinations: every subset of 1..m items of each unit (visit or record) is
enumerated, m the attacker's knowledge size (`DEFAULT_M` = 2, settable). Their number is counted first
(`combinations_needed`) and a run above `MAX_COMBINATIONS` is refused by name. tests/reference_sensitive.py
is the brute force (itertools over every subset) these counts equal.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.adversary import Adversary
from engine.io.errors import UserError
from engine.records import Records
from engine.release import Release, codes_of
from engine.risk import attacker_known_visits, candidates_for, match_matrix
from engine.vocab import REFERENCE_DIR, code_of_item, phecodes_of_item, vocabulary_of_item

CATEGORIES_FILE = REFERENCE_DIR / "sensitive_categories.csv"
CATEGORY_COLUMNS = ("category", "vocabulary", "first", "last", "source")
CATEGORY_VOCABULARIES = ("ICD9CM", "ICD10CM", "phecode")
DEFAULT_M = 2  # the attacker's knowledge size when the study states none (issue #39: m = 2 or 3)
MAX_M = 4
MAX_COMBINATIONS = 50_000_000  # combinations of known items enumerated in one measure, at most
_CHUNK = 1 << 22  # combinations built at once
_EMPTY = "(nothing: the prior)"


class TooManyCombinations(UserError, ValueError):
    """The measure would enumerate more combinations than `MAX_COMBINATIONS`."""


# ------------------------------------------------------------------------------- categories
@dataclass(frozen=True, eq=False)
class Categories:
    """Sensitive categories: one row per code range (`CATEGORY_COLUMNS`)."""

    ranges: pd.DataFrame

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.ranges["category"].tolist()))

    @cached_property
    def _rows(self) -> list[tuple[str, str, str, str]]:
        cols = [self.ranges[c].tolist() for c in ("category", "vocabulary", "first", "last")]
        return list(zip(*cols, strict=True))

    def of_code(self, item: str) -> frozenset[str]:
        """The categories an original code (an item label, `engine.vocab`) belongs to."""
        vocabulary = vocabulary_of_item(item)
        code = code_of_item(item)
        phecodes = [float(p) for p in phecodes_of_item(item)] if vocabulary else []
        found = set()
        for name, vocab, first, last in self._rows:
            if vocab == "phecode":
                if any(float(first) <= p <= float(last) for p in phecodes):
                    found.add(name)
            elif vocab == vocabulary and first <= code[: len(first)] and code[: len(last)] <= last:
                found.add(name)
        return frozenset(found)

    def select(self, names: Sequence[str]) -> Categories:
        """Only the named categories; a UserError names an unknown one."""
        if not names:
            raise UserError(f"name at least one sensitive category (known: {', '.join(self.names)})")
        unknown = [n for n in names if n not in self.names]
        if unknown:
            raise UserError(f"no sensitive category {unknown[0]!r} (known: {', '.join(self.names)})")
        return Categories(self.ranges[self.ranges["category"].isin(list(names))].reset_index(drop=True))


def load_categories(path: str | Path | None = None) -> Categories:
    """The categories of a CSV (`CATEGORY_COLUMNS`; the shipped list by default). Every problem is a
    UserError naming the file, row and column."""
    path = Path(CATEGORIES_FILE if path is None else path)
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"{path.name}: cannot read the sensitive categories ({exc})") from None
    raw.columns = [str(c).strip().lower() for c in raw.columns]
    for col in CATEGORY_COLUMNS:
        if col not in raw.columns:
            raise UserError(f"{path.name}: no column {col!r} (columns {', '.join(CATEGORY_COLUMNS)})")
    frame = raw[list(CATEGORY_COLUMNS)].apply(lambda c: c.str.strip())
    if frame.empty:
        raise UserError(f"{path.name}: no sensitive category in the file")
    for i, row in enumerate(frame.itertuples(index=False), start=2):
        where = f"{path.name}, row {i}"
        for col in ("category", "first", "last", "source"):
            if not getattr(row, col):
                raise UserError(f"{where}, column {col!r}: empty")
        if row.vocabulary not in CATEGORY_VOCABULARIES:
            raise UserError(
                f"{where}, column 'vocabulary': {row.vocabulary!r} is not one of {', '.join(CATEGORY_VOCABULARIES)}"
            )
        if row.vocabulary == "phecode":
            try:
                empty = float(row.first) > float(row.last)
            except ValueError:
                raise UserError(f"{where}: phecodes {row.first!r}-{row.last!r} are not numbers") from None
        else:
            empty = row.first > row.last
        if empty:
            raise UserError(f"{where}: the range {row.first!r}-{row.last!r} is empty (first after last)")
    return Categories(frame)


def category_argument(value: str) -> Categories:
    """`--sensitive`: a CSV file of categories, or comma-separated names of the shipped ones."""
    if value.lower().endswith(".csv") or Path(value).is_file():
        return load_categories(value)
    return load_categories().select([n.strip() for n in value.split(",") if n.strip()])


def item_categories(
    items: np.ndarray, item_codes: Mapping[str, frozenset[str]] | None, categories: Categories
) -> np.ndarray:
    """(n_items, n_categories) bool: the item stands for some code of the category (module docstring)."""
    names = categories.names
    out = np.zeros((len(items), len(names)), dtype=bool)
    of_code = lru_cache(maxsize=None)(categories.of_code)
    for i, item in enumerate(items.tolist()):
        for code in codes_of(str(item), item_codes):
            for name in of_code(code):
                out[i, names.index(name)] = True
    return out


# ----------------------------------------------------------------------------- enumeration
def _combinations(n: int, j: int) -> np.ndarray:
    return np.array(list(itertools.combinations(range(n), j)), dtype=np.int64).reshape(-1, j)


def combinations_needed(matrix: sp.csr_matrix, m: int) -> int:
    """Subsets of 1..m items of every row of a 0/1 matrix."""
    lengths, counts = np.unique(np.diff(matrix.indptr), return_counts=True)
    return sum(
        int(c) * sum(math.comb(int(n), j) for j in range(1, m + 1))
        for n, c in zip(lengths, counts, strict=True)
    )


def _keys(
    matrix: sp.csr_matrix, owner: np.ndarray, m: int, base: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(owner, key) of every subset of 1..m items of every row: key = the items + 1 written in base
    `base`, ascending (so subsets of different sizes never share a key; 0 is the empty set)."""
    matrix.sort_indices()
    lengths = np.diff(matrix.indptr)
    for n in np.unique(lengths[lengths > 0]).tolist():
        rows = np.flatnonzero(lengths == n)
        items = matrix.indices[matrix.indptr[rows][:, None] + np.arange(n)].astype(np.int64) + 1
        for j in range(1, min(m, n) + 1):
            combos = _combinations(n, j)
            step = max(1, _CHUNK // len(combos))
            for r0 in range(0, len(rows), step):
                sel = items[r0 : r0 + step][:, combos]
                key = sel[..., 0].copy()
                for t in range(1, j):
                    key = key * base + sel[..., t]
                yield np.repeat(owner[rows[r0 : r0 + step]], len(combos)), key.ravel()


def _distinct_pairs(
    matrix: sp.csr_matrix, owner: np.ndarray, m: int, base: int, wanted: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (owner, key) pairs of `_keys`, only keys in sorted `wanted` when given."""
    owners, keys = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for o, k in _keys(matrix, owner, m, base):
        if wanted is not None:
            at = np.minimum(np.searchsorted(wanted, k), max(len(wanted) - 1, 0))
            keep = wanted[at] == k if len(wanted) else np.zeros(len(k), dtype=bool)
            o, k = o[keep], k[keep]
        owners.append(o.astype(np.int64))
        keys.append(k)
    o, k = np.concatenate(owners), np.concatenate(keys)
    if len(owner) and len(np.unique(owner)) < len(owner):  # several units per owner: count owners once
        order = np.lexsort((o, k))
        o, k = o[order], k[order]
        first = np.r_[True, (k[1:] != k[:-1]) | (o[1:] != o[:-1])] if len(k) else np.zeros(0, bool)
        o, k = o[first], k[first]
    return o, k


def _digits(keys: np.ndarray, base: int, m: int) -> np.ndarray:
    """(n, m): the digits of `_keys`' keys in base `base`, most significant first, 0 where absent."""
    out = np.zeros((len(keys), m), dtype=np.int64)
    rest = np.asarray(keys, dtype=np.int64)
    for col in range(m - 1, -1, -1):
        rest, out[:, col] = np.divmod(rest, base)
    # a set of j < m items fills the last j columns: move them to the front
    size = (out > 0).sum(axis=1)
    shift = m - size
    cols = (np.arange(m)[None, :] + shift[:, None]) % m
    return np.take_along_axis(out, cols, axis=1)


def _rules(
    category: np.ndarray,
    keys: np.ndarray,
    support: np.ndarray,
    with_s: np.ndarray,
    conf: np.ndarray,
    base: int,
    items: np.ndarray,
) -> pd.DataFrame:
    """The rules of `keys` (`_keys`), their known codes written "a + b", q = {} as `_EMPTY`."""
    m = 1
    while base**m <= (int(keys.max()) if len(keys) else 0):
        m += 1
    digits = _digits(keys, base, m)
    labels = np.append(np.asarray(items, dtype=object).astype(str), "")
    known = pd.Series([""] * len(keys), dtype=object)
    for col in range(m):
        d = digits[:, col]
        part = pd.Series(labels[np.where(d > 0, d - 1, len(labels) - 1)], dtype=object)
        sep = np.where((d > 0) & (col > 0), " + ", "")
        known = known + sep + part
    size = (digits > 0).sum(axis=1)
    known[size == 0] = _EMPTY
    return pd.DataFrame(
        {
            "category": category,
            "known codes": known.to_numpy(),
            "size": size,
            "candidates holding them": np.asarray(support, dtype=np.int64),
            "of them holding": np.asarray(with_s, dtype=np.int64),
            "confidence": np.asarray(conf, dtype=float),
        }
    )


# --------------------------------------------------------------------------------- measure
@dataclass(frozen=True)
class SensitiveRisk:
    """The rho-uncertainty measure of one release under one adversary (module docstring).

    `holds` and `confidence` are (n_records, n_categories): whether the record holds the category, and
    the highest conf(q -> s) over the record's own known sets q. The rules above rho are kept as arrays
    (`rule_category` indexes `categories`, `rule_keys` the known sets as `_keys` writes them in base
    `base` over `items`, their candidates, those holding the category, the confidence) and written out
    only when read (`rules`): at m = 3 on the sample there are 3.7 M."""

    adversary: Adversary
    rho: float
    m: int
    categories: tuple[str, ...]
    patient_ids: np.ndarray
    holds: np.ndarray
    confidence: np.ndarray
    rule_category: np.ndarray
    rule_keys: np.ndarray
    rule_support: np.ndarray
    rule_with: np.ndarray
    rule_confidence: np.ndarray
    base: int
    items: np.ndarray
    combinations: int
    candidates: int

    @property
    def inferred(self) -> np.ndarray:
        """(n_records, n_categories): the record holds the category and a rule of its own exceeds rho."""
        return self.holds & (self.confidence > self.rho)

    @property
    def n_rules(self) -> int:
        return len(self.rule_keys)

    @property
    def ok(self) -> bool:
        return self.n_rules == 0

    @cached_property
    def rules(self) -> pd.DataFrame:
        """Every rule above rho (category, known codes, size, candidates holding the known codes, those
        of them holding the category, confidence), highest confidence first, then category and codes."""
        table = _rules(
            np.asarray(self.categories, dtype=object)[self.rule_category],
            self.rule_keys,
            self.rule_support,
            self.rule_with,
            self.rule_confidence,
            self.base,
            self.items,
        )
        return table.sort_values(
            ["confidence", "category", "known codes"], ascending=[False, True, True]
        ).reset_index(drop=True)

    def rule_items(self) -> tuple[np.ndarray, np.ndarray]:
        """(order, items): the rules' indexes, highest confidence first (ties by category, then known set),
        and each rule's known items as indexes of `items` (n_rules, m), -1 where the set is shorter."""
        order = np.lexsort((self.rule_keys, self.rule_category, -self.rule_confidence))
        return order, _digits(self.rule_keys[order], self.base, self.m) - 1

    def summary(self) -> pd.DataFrame:
        """One row per category: records holding it, inferred above rho (count, share of the cohort),
        the highest confidence of a rule and the rules above rho."""
        n = max(len(self.patient_ids), 1)
        inferred = self.inferred
        return pd.DataFrame(
            {
                "category": list(self.categories),
                "records holding": self.holds.sum(axis=0).astype(int),
                "inferred above rho": inferred.sum(axis=0).astype(int),
                "share of records inferred": inferred.sum(axis=0) / n,
                "highest confidence": self.confidence.max(axis=0, initial=0.0),
                "rules above rho": np.bincount(self.rule_category, minlength=len(self.categories)),
            }
        )

    def message(self) -> str:
        label = f"rho = {self.rho:g}, up to {self.m} known codes, {self.adversary.label}"
        if self.ok:
            return f"Meets rho: no sensitive code is inferred with confidence above {self.rho:g} ({label})."
        n = int(self.inferred.any(axis=1).sum())
        return (
            f"Does not meet rho: {self.n_rules} rules above rho; {n} of {len(self.patient_ids)} records "
            f"have a sensitive code inferred ({label})."
        )


def check_rho(rho: object) -> float:
    """rho when it is a number in [0, 1), else a UserError naming it."""
    if isinstance(rho, bool) or not isinstance(rho, int | float) or not 0 <= float(rho) < 1:
        raise UserError(f"rho must be a number from 0 to below 1, not rho = {rho!r}")
    return float(rho)


def check_m(m: object) -> int:
    """m when it is a whole number 1..MAX_M, else a UserError naming it."""
    if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= MAX_M:
        raise UserError(f"the attacker's known codes m must be a whole number from 1 to {MAX_M}, not {m!r}")
    return m


def _unit_sets(records: Records, per_visit: bool) -> tuple[sp.csr_matrix, np.ndarray]:
    if per_visit:
        return records.visit_item_sets.tocsr(), records.visit_patient
    return records.patient_item_sets.tocsr(), np.arange(records.n_patients)


def rho_uncertainty(
    records: Records,
    adversary: Adversary,
    categories: Categories,
    *,
    rho: float,
    m: int = DEFAULT_M,
    item_codes: Mapping[str, frozenset[str]] | None = None,
    within_visits: bool = False,
    candidates: Records | None = None,
    known_visits: Records | None = None,
    max_combinations: int = MAX_COMBINATIONS,
) -> SensitiveRisk:
    """The measure of the module docstring for released cohort `records` (items standing for codes
    through `item_codes`). `candidates`: the population for scope `population` (its items matched to
    the records' as `engine.risk.match_matrix` matches); ignored for scope `cohort`.
    `within_visits`: the release shows its visits (`Release.shows_visits`). `known_visits`: what a
    single-visit attacker knows of each original visit when the release does not show visits
    (`engine.risk.attacker_known_visits`, in the records' items); by default the released visits."""
    rho, m = check_rho(rho), check_m(m)
    names = categories.names
    n_items = records.n_items
    base = n_items + 1
    if base**m >= 2**62:
        raise UserError(f"{n_items} distinct codes are too many to enumerate sets of {m}: lower m")
    sens = item_categories(records.items, item_codes, categories)
    keep = sp.diags((~sens.any(axis=1)).astype(np.int8), dtype=np.int8).tocsr()  # drops the sensitive columns
    holds = (records.patient_item_sets @ sp.csr_matrix(sens.astype(np.int32))).toarray() > 0

    single = adversary.knowledge == "single_visit"
    held_m, held_owner = _unit_sets(records, within_visits and single)
    known_m, known_owner = _unit_sets(records, single)
    if single and known_visits is not None:
        known_m = known_visits.visit_item_sets.tocsr()
        known_owner = records.index_of(known_visits.patient_ids)[known_visits.visit_patient]
    held_m, known_m = (held_m @ keep).tocsr(), (known_m @ keep).tocsr()
    held_m.eliminate_zeros()
    known_m.eliminate_zeros()
    pool: Records | None = None
    if adversary.scope == "population":
        if candidates is None:
            raise UserError("the population adversary needs the population the cohort was drawn from")
        pool = candidates
        units, pool_owner = _unit_sets(pool, within_visits and single)
        match = match_matrix(pool.items, records.items, item_codes)
        pool_m = (sp.csr_matrix((units @ match) > 0).astype(np.int8) @ keep).tocsr()
        pool_m.eliminate_zeros()
    needed = combinations_needed(known_m, m) + combinations_needed(held_m, m)
    if pool is not None:
        needed += combinations_needed(pool_m, m)
    if needed > max_combinations:
        raise TooManyCombinations(
            f"the sensitive-code measure would enumerate {needed:,} combinations of up to {m} known codes "
            f"(limit {max_combinations:,}): lower m"
        )

    k_owner, k_key = _distinct_pairs(known_m, known_owner, m, base)
    keys = np.unique(k_key)
    h_owner, h_key = _distinct_pairs(held_m, held_owner, m, base, keys)
    at = np.searchsorted(keys, h_key)
    with_s = np.zeros((len(keys), len(names)))
    for c in range(len(names)):
        with_s[:, c] = np.bincount(at, weights=holds[h_owner, c], minlength=len(keys))
    if pool is None:
        support = np.bincount(at, minlength=len(keys)).astype(float)
        n_cand = records.n_patients
    else:
        _, p_key = _distinct_pairs(pool_m, pool_owner, m, base, keys)
        support = np.bincount(np.searchsorted(keys, p_key), minlength=len(keys)).astype(float)
        n_cand = pool.n_patients
    # a released cohort record missing from the population's count still counts as a candidate
    support = np.maximum(support, np.bincount(at, minlength=len(keys)))
    conf = np.divide(with_s, support[:, None], out=np.zeros_like(with_s), where=support[:, None] > 0)
    prior = holds.sum(axis=0) / max(n_cand, records.n_patients, 1)

    best = np.tile(prior, (records.n_patients, 1))
    k_at = np.searchsorted(keys, k_key)
    for c in range(len(names)):
        np.maximum.at(best[:, c], k_owner, conf[k_at, c])

    cat_parts, idx_parts = [], []
    for c in range(len(names)):
        over = np.flatnonzero(conf[:, c] > rho)
        cat_parts.append(np.full(len(over), c, dtype=np.int64))
        idx_parts.append(over)
    rule_cat, rule_idx = np.concatenate(cat_parts), np.concatenate(idx_parts)
    prior_over = np.flatnonzero(prior > rho)  # q = {}: key 0
    n_all = max(n_cand, records.n_patients)
    return SensitiveRisk(
        adversary=adversary,
        rho=rho,
        m=m,
        categories=names,
        patient_ids=records.patient_ids,
        holds=holds,
        confidence=best,
        rule_category=np.concatenate([prior_over, rule_cat]),
        rule_keys=np.concatenate([np.zeros(len(prior_over), np.int64), keys[rule_idx]]),
        rule_support=np.concatenate([np.full(len(prior_over), n_all), support[rule_idx]]).astype(np.int64),
        rule_with=np.concatenate([holds[:, prior_over].sum(axis=0), with_s[rule_idx, rule_cat]]).astype(
            np.int64
        ),
        rule_confidence=np.concatenate([prior[prior_over], conf[rule_idx, rule_cat]]),
        base=base,
        items=records.items,
        combinations=needed,
        candidates=n_cand if pool is not None else records.n_patients,
    )


def release_rho_uncertainty(
    release: Release,
    adversary: Adversary,
    categories: Categories,
    *,
    rho: float,
    m: int = DEFAULT_M,
    population: Records | None = None,
    max_combinations: int = MAX_COMBINATIONS,
) -> SensitiveRisk:
    """`rho_uncertainty` of a release: its items, its visits shown or not, its candidates
    (`engine.risk.candidates_for`) and, under single-visit knowledge, what the attacker knows of each
    original visit (`engine.risk.attacker_known_visits`: a code suppressed in one visit but kept in
    another of the record is still known), as `engine.risk.release_distinguishability` reads them."""
    pool = None
    if adversary.scope == "population":
        pool = candidates_for(adversary, release.records, population, release.population)
    return rho_uncertainty(
        release.records,
        adversary,
        categories,
        rho=rho,
        m=m,
        item_codes=release.item_codes,
        within_visits=release.shows_visits,
        candidates=pool,
        known_visits=attacker_known_visits(release) if adversary.knowledge == "single_visit" else None,
        max_combinations=max_combinations,
    )


# ------------------------------------------------------------------------------ the study's rho
@dataclass(frozen=True)
class RhoPolicy:
    """What a study states of sensitive diagnoses (issue #39): the shipped categories it protects (by
    name, `sample_data/reference/sensitive_categories.csv`), the threshold rho with the steward's
    written reason, and the attacker's known codes m. A study without one does not check rho."""

    categories: tuple[str, ...]
    rho: float
    reason: str
    m: int = DEFAULT_M

    def __post_init__(self) -> None:
        check_rho(self.rho)
        check_m(self.m)
        load_categories().select(self.categories)  # a UserError names an unknown category
        if not self.reason.strip():
            raise UserError(f"rho = {self.rho:g} needs a written reason (why this threshold)")

    @cached_property
    def selected(self) -> Categories:
        return load_categories().select(self.categories)

    def to_dict(self) -> dict[str, object]:
        return {"categories": list(self.categories), "rho": self.rho, "reason": self.reason, "m": self.m}

    @classmethod
    def from_dict(cls, d: object) -> RhoPolicy | None:
        """The study file's `sensitive` object; None (not checked) when absent."""
        if d is None:
            return None
        if not isinstance(d, Mapping):
            raise UserError(f"sensitive must be an object, not {type(d).__name__}")
        cats, reason = d.get("categories"), d.get("reason", "")
        if not isinstance(cats, list) or not all(isinstance(c, str) for c in cats):
            raise UserError("sensitive.categories must be a list of category names")
        if not isinstance(reason, str):
            raise UserError("sensitive.reason must be text")
        return cls(tuple(cats), check_rho(d.get("rho")), reason, check_m(d.get("m", DEFAULT_M)))

    def measure(self, release: Release, adversary: Adversary, population: Records | None) -> SensitiveRisk:
        """The release's rho measure under `adversary` (`release_rho_uncertainty`)."""
        return release_rho_uncertainty(
            release, adversary, self.selected, rho=self.rho, m=self.m, population=population
        )


def rho_refusal(risk: SensitiveRisk, reason: str = "") -> str:
    """Why a release fails the study's rho, naming the category of the highest confidence, that
    confidence and the records inferred above rho, as a k failure names its records; "" when it meets rho."""
    if risk.ok:
        return ""
    worst = int(np.argmax(risk.rule_confidence))
    c = int(risk.rule_category[worst])
    inferred = int(risk.inferred[:, c].sum())
    why = f" ({reason})" if reason else ""
    return (
        f"not verified for rho = {risk.rho:g}{why}: {risk.categories[c]} is inferred with confidence "
        f"{float(risk.rule_confidence[worst]):.3f} from up to {risk.m} known codes; {inferred:,} of "
        f"{len(risk.patient_ids):,} records inferred above rho, {risk.n_rules:,} rules above rho "
        f"({risk.adversary.label})"
    )
