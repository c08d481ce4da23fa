"""A reader's attack on count tables published together under a small-cell policy (issue #35,
finding 4): every published number is a linear equation over the unknown true cells (integers >= 0),
and every group of patients a reader can name is bounded by integer programs (`scipy.optimize.milp`).
A group whose feasible range lies inside 1..N-1 (pinned there, or only known to be there) is a derived
small cell.

PheWAS tables (`engine.utility.phewas.RESULT_COLUMNS`, withheld cells read "suppressed"): a row is the
set of a phecode's cases for one SNP. The reader knows the phecode map: a descendant phecode's cases
are a subset of its ancestor's (`411.2` -> `411`), and a release's cases of a phecode are a subset of
the original cohort's cases of that phecode (released items count toward a phecode only when every code
they stand for does; suppressed codes toward nothing). Per SNP and phecode family (the rows sharing the
part before the dot, of every table given) the unknown cells are, per membership pattern of the
family's sets (closed upwards: a patient in a subset is in its supersets) and genotype g = 0, 1, 2,
the number of patients. Each published row gives three equations: its cases (sum over the patterns in
its set), its minor alleles (case_maf x 2 n_cases: sum of g) and its major alleles (sum of 2 - g).

The groups: every row's set, every set minus a subset of it (a parent minus a child; the original
minus the release), every set minus the union of its immediate subsets (a parent minus its children),
and every pattern; for each, its patients, minor and major alleles, and patients of each genotype.

Besides the integer programs, two eliminations a reader makes without them:
- controls: the controls of nested rows (same table, ancestor and descendant; or the same phecode in
  the original and a release) differ by a group of patients: a difference in 1..N-1 of their counts or
  alleles is flagged;
- the partition reading (finding 2): a reader who takes a phecode's children as disjoint reads a parent
  minus the sum of its published children as the patients of its withheld children and its own codes:
  a remainder in 1..N-1 is flagged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import Bounds, LinearConstraint, milp

from engine.disclosure.cells import phewas_allele_counts

CASE_KINDS = ("n_cases", "case minor alleles", "case major alleles")
CONTROL_KINDS = ("n_controls", "control minor alleles", "control major alleles")
QUANTITIES = {  # what a group's count means -> weight of genotype g (0, 1, 2 minor alleles)
    "patients": (1, 1, 1),
    "minor alleles": (0, 1, 2),
    "major alleles": (2, 1, 0),
}
UNSEEN = 10**7  # upper bound of every unknown cell
ARITHMETIC = dict(zip(QUANTITIES, CASE_KINDS, strict=True))  # the published column of each quantity


@dataclass(frozen=True)
class Derived:
    """A derived small cell: `quantity` of the group `region` (of SNP `snp`) lies in `low..high`."""

    snp: str
    region: str
    quantity: str
    low: int
    high: int

    @property
    def pinned(self) -> bool:
        return self.low == self.high


@dataclass(frozen=True)
class _Node:
    table: str
    phecode: str
    counts: dict[str, float] | None  # None: withheld


def is_ancestor(a: str, d: str) -> bool:
    """`a` is a strict ancestor of `d` by truncation of decimals (`250` of `250.1`, `250.1` of `250.11`)."""
    if a == d:
        return False
    return d.startswith(a + ".") if "." not in a else d.startswith(a)


def _published(table: pd.DataFrame) -> list[dict[str, float] | None]:
    counts = phewas_allele_counts(table)
    out: list[dict[str, float] | None] = []
    for i in range(len(table)):
        row = counts.iloc[i]
        out.append(None if row.isna().any() else {k: float(v) for k, v in row.items()})
    return out


def _nodes(tables: Mapping[str, pd.DataFrame]) -> dict[tuple[str, str], list[_Node]]:
    """Per (snp, family root): the rows of every table."""
    out: dict[tuple[str, str], list[_Node]] = {}
    for name, t in tables.items():
        t = t.reset_index(drop=True)
        for (snp, pc), counts in zip(zip(t["snp"], t["phecode"], strict=True), _published(t), strict=True):
            out.setdefault((str(snp), str(pc).split(".")[0]), []).append(_Node(name, str(pc), counts))
    return out


def _subset(d: _Node, a: _Node, order: Sequence[str]) -> bool:
    """Set `d` lies inside set `a`: same table and a descendant phecode, or a release's row of the same
    phecode or a descendant of the original's (`order[0]`)."""
    if d == a:
        return False
    same = d.phecode == a.phecode or is_ancestor(a.phecode, d.phecode)
    if d.table == a.table:
        return is_ancestor(a.phecode, d.phecode)
    return same and a.table == order[0]


def _patterns(n: int, above: list[set[int]]) -> list[frozenset[int]]:
    """Non-empty member sets closed upwards (a member's supersets are members)."""
    order = sorted(range(n), key=lambda i: len(above[i]))  # every superset before its subsets
    out: list[frozenset[int]] = []

    def grow(k: int, chosen: frozenset[int]) -> None:
        if k == n:
            if chosen:
                out.append(chosen)
            return
        grow(k + 1, chosen)
        if above[order[k]] <= chosen:
            grow(k + 1, chosen | {order[k]})

    grow(0, frozenset())
    return out


def _label(node: _Node, several: bool) -> str:
    return f"{node.table} {node.phecode}" if several else node.phecode


def _family_attack(snp: str, nodes: list[_Node], order: Sequence[str], n_cell: int) -> list[Derived]:
    several = len(order) > 1
    n = len(nodes)
    above = [{j for j in range(n) if _subset(nodes[i], nodes[j], order)} for i in range(n)]
    below = [{j for j in range(n) if i in above[j]} for i in range(n)]
    out = _eliminations(snp, nodes, above, below, several, n_cell)
    if n < 2 or all(x.counts is None for x in nodes):
        return out  # one row: its cells are published or withheld as they are
    pats = _patterns(n, above)
    nv = 3 * len(pats)  # variable (p, g) at 3 p + g

    def row(inside: int, outside: set[int], weights) -> np.ndarray:
        v = np.zeros(nv)
        for p, pat in enumerate(pats):
            if inside in pat and not (pat & outside):
                v[3 * p : 3 * p + 3] = weights
        return v

    eq, rhs = [], []
    for i, x in enumerate(nodes):
        if x.counts is None:
            continue
        for kind, w in zip(CASE_KINDS, ((1, 1, 1), (0, 1, 2), (2, 1, 0)), strict=True):
            eq.append(row(i, set(), w))
            rhs.append(x.counts[kind])
    a = np.array(eq)
    cons = LinearConstraint(a, rhs, rhs)
    bounds = Bounds(0, UNSEEN)  # a group no published row bounds: as large as a cohort
    integral = np.ones(nv)

    def extreme(c: np.ndarray, sign: int) -> float:
        res = milp(sign * c, constraints=cons, bounds=bounds, integrality=integral)
        if res.status != 0:
            raise AssertionError(f"{snp}: the published cells are inconsistent ({res.message})")
        return sign * res.fun

    regions: list[tuple[str, int, set[int]]] = []
    for i, x in enumerate(nodes):
        regions.append((_label(x, several), i, set()))
        for j in sorted(below[i]):
            regions.append((f"{_label(x, several)} minus {_label(nodes[j], several)}", i, {j}))
        direct = {j for j in below[i] if not (above[j] & below[i])}
        if len(direct) > 1:
            regions.append((f"{_label(x, several)} minus its subsets", i, direct))
    for label, i, outside in regions:
        known = [nodes[i].counts, *(nodes[j].counts for j in outside)]
        for quantity, w in QUANTITIES.items():
            if len(outside) <= 1 and all(k is not None for k in known) and quantity in ARITHMETIC:
                kind = ARITHMETIC[quantity]  # published: the group's count is a difference
                v = int(known[0][kind] - sum(k[kind] for k in known[1:]))  # type: ignore[index]
                if 1 <= v < n_cell:
                    out.append(Derived(snp, label, quantity, v, v))
                continue
            c = row(i, outside, w)
            high = extreme(c, -1)
            if high >= n_cell or high < 1:
                continue
            low = extreme(c, 1)
            if low >= 1:
                out.append(Derived(snp, label, quantity, round(low), round(high)))
    return out


def _eliminations(
    snp: str, nodes: list[_Node], above: list[set[int]], below: list[set[int]], several: bool, n_cell: int
) -> list[Derived]:
    """Controls of nested rows, and the partition reading of a parent minus its published children."""
    out = []
    small = range(1, n_cell)
    for i, x in enumerate(nodes):
        if x.counts is None:
            continue
        for j in sorted(below[i]):
            y = nodes[j]
            if y.counts is None:
                continue
            for kind in CONTROL_KINDS:
                d = abs(int(x.counts[kind] - y.counts[kind]))
                if d in small:
                    name = f"controls of {_label(x, several)} and {_label(y, several)} differ"
                    out.append(Derived(snp, name, kind, d, d))
        # the nearest published subsets within the same table
        near = [
            j
            for j in below[i]
            if nodes[j].counts is not None
            and nodes[j].table == x.table
            and not any(
                nodes[k].counts is not None and nodes[k].table == x.table for k in above[j] & below[i]
            )
        ]
        if len(near) > 1:  # one: the difference of a nested pair, above
            for kind in CASE_KINDS:
                r = int(x.counts[kind] - sum(nodes[j].counts[kind] for j in near))  # type: ignore[index]
                if r in small:
                    kids = ", ".join(nodes[j].phecode for j in sorted(near, key=lambda j: nodes[j].phecode))
                    out.append(Derived(snp, f"{_label(x, several)} minus the sum of {kids}", kind, r, r))
    return out


def phewas_attack(tables: Mapping[str, pd.DataFrame], n_cell: int = 11) -> list[Derived]:
    """Every derived small cell (1..n_cell-1) of PheWAS tables published together, by name; the
    tables are given original first, then releases of it (their sets lie inside the original's)."""
    order = list(tables)
    found: list[Derived] = []
    for (snp, _), nodes in sorted(_nodes(tables).items()):
        found += _family_attack(snp, nodes, order, n_cell)
    return found
