"""Small-cell suppression of count tables that leave the tool (issue 28).

A *small cell* is a count of patients in the policy's range `low..high`. Presets:

- `cms`: 1-10 (CMS cell-size suppression policy: no cell of 10 or fewer beneficiaries; a 0 may be shown);
- `aou`: 1-20 (All of Us Data and Statistics Dissemination Policy: no count of 1-20);
- `ohdsi`: 1-4 (OHDSI network studies: counts below 5 are masked);
- `none`: nothing suppressed;
- `custom`: `min_cell(N)`, every count 1..N-1.

Zeros are not small cells: a 0 says that nobody has the feature, which names no one, and CMS's
policy allows it (its rule concerns "10 or less" beneficiaries of a cell that holds some). Our reading,
stated wherever the policy is: 0 is published under every preset.

Complementary suppression (`suppress_counts`). A table is published with its row and column totals
(and the grand total): the table with margins is one grid of (R+1) x (C+1) cells, each row and
column of which is an equation (the cells sum to the margin). Primary cells are the small ones
(margins included: a small total is suppressed too). Then, to a fixed point:

1. every row and every column of the grid (margin cells counted as cells of their line) holding
   exactly one suppressed cell gets a second one: its smallest non-zero unsuppressed cell (a zero
   only when none is left; a zero complement beside a small cell would bound it from both sides);
   ties by position, first the margin-free cells;
2. when every line holds 0 or >= 2 suppressed cells but a suppressed cell is still a linear function
   of the published cells (`determined`: the unit vector of that cell lies in the row space of the
   line equations restricted to the suppressed cells, i.e. it sits on no cycle of suppressed cells),
   the smallest published cell whose suppression makes it undetermined is suppressed.

So no suppressed cell can be solved for from the published cells and totals: every line holding a
suppressed cell holds at least two (the issue's rule), and the stronger linear test passes.
Nonnegativity bounds remain (a suppressed cell lies between 0 and its line's published remainder):
they say a cell is small, which its suppression says anyway.

Tables without published totals (`suppress_frame(..., margins=False)`) need no complement: no
equation ties their cells.

Tables whose rows nest (issue #35): a PheWAS row is a set of patients, a descendant phecode's inside its
ancestor's and a release's inside the original's, so the difference of two shown rows is a group of
patients too. `withheld_phewas` withholds, per SNP and phecode family, rows until no shown row, no
difference of two nested shown rows and no parent-minus-its-children remainder is small (the
ancestor of a near-equal pair goes, the specific phenotype stays); a share beside a count is withheld
with it or when the part it gives is small (`suppress_cumulative_share`). tests/cell_attack.py checks
it: every group a reader can form is bounded by integer programs over the unknown cells. A table of a release whose figures can be recomputed from the release
file itself (e.g. released patients per disease) gains nothing from suppression; the caller says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from engine.io.errors import UserError
from engine.utility.phewas import RESULT_COLUMNS

PRESETS: dict[str, tuple[int, int, str]] = {
    "none": (1, 0, "no small-cell suppression"),
    "cms": (1, 10, "CMS cell-size suppression: counts 1-10 suppressed"),
    "aou": (1, 20, "All of Us dissemination policy: counts 1-20 suppressed"),
    "ohdsi": (1, 4, "OHDSI: counts below 5 (1-4) suppressed"),
}
SUPPRESSED = "suppressed"  # what a suppressed cell reads in a written table


class SmallCellError(UserError, ValueError):
    """A small-cell policy that cannot be honoured; the message says why."""


@dataclass(frozen=True)
class SmallCellPolicy:
    """Counts in `low..high` are small (suppressed); `high < low` suppresses nothing. `name` is a
    preset (`PRESETS`) or "custom"."""

    name: str = "none"
    low: int = 1
    high: int = 0

    def __post_init__(self) -> None:
        if self.name != "custom" and self.name not in PRESETS:
            raise SmallCellError(f"small-cell policy must be one of {', '.join(PRESETS)} or custom")
        if self.name != "custom" and (self.low, self.high) != PRESETS[self.name][:2]:
            raise SmallCellError(f"the {self.name} preset is {PRESETS[self.name][2]}")
        if self.low < 1:
            raise SmallCellError("zeros are never small cells: low must be at least 1")

    @classmethod
    def preset(cls, name: str) -> SmallCellPolicy:
        name = name.strip().lower()
        if name not in PRESETS:
            raise SmallCellError(f"unknown small-cell preset {name!r}: one of {', '.join(PRESETS)}")
        low, high, _ = PRESETS[name]
        return cls(name, low, high)

    @classmethod
    def min_cell(cls, n: int) -> SmallCellPolicy:
        """Counts 1..n-1 suppressed (`--min-cell N`); presets when they coincide (5 = ohdsi, 11 = cms,
        21 = aou, 1 = none)."""
        if n < 1:
            raise SmallCellError(f"the smallest publishable count must be at least 1, not {n}")
        for name, (low, high, _) in PRESETS.items():
            if (low, high) == (1, n - 1) or (name == "none" and n == 1):
                return cls(name, low, high)
        return cls("custom", 1, n - 1)

    @classmethod
    def parse(cls, text: str | int) -> SmallCellPolicy:
        """A preset name or N (the smallest publishable count, `min_cell`)."""
        s = str(text).strip().lower()
        if s.isdigit():
            return cls.min_cell(int(s))
        return cls.preset(s)

    @property
    def active(self) -> bool:
        return self.high >= self.low

    def is_small(self, x: Any) -> bool:
        try:
            v = float(x)
        except (TypeError, ValueError):
            return False
        return bool(np.isfinite(v)) and self.low <= v <= self.high

    def describe(self) -> str:
        if not self.active:
            return "no small-cell suppression"
        base = (
            PRESETS[self.name][2]
            if self.name in PRESETS
            else f"custom: counts {self.low}-{self.high} suppressed"
        )
        return base + "; zeros are published"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "low": self.low, "high": self.high}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> SmallCellPolicy:
        if d is None:
            return cls()
        if not isinstance(d, Mapping):
            raise SmallCellError(f"small_cells must be an object, not {type(d).__name__}")
        try:
            return cls(str(d.get("name", "none")), int(d.get("low", 1)), int(d.get("high", 0)))
        except (TypeError, ValueError) as exc:
            raise SmallCellError(f"small_cells: {exc}") from None


NO_POLICY = SmallCellPolicy()


# ----------------------------------------------------------------------- tables with margins
def with_margins(table: np.ndarray) -> np.ndarray:
    """The (R+1) x (C+1) grid: the table, its row totals (last column), column totals (last row)
    and the grand total."""
    t = np.asarray(table, dtype=np.int64)
    out = np.zeros((t.shape[0] + 1, t.shape[1] + 1), dtype=np.int64)
    out[:-1, :-1] = t
    out[:-1, -1] = t.sum(axis=1)
    out[-1, :-1] = t.sum(axis=0)
    out[-1, -1] = t.sum()
    return out


def _equations(shape: tuple[int, int]) -> np.ndarray:
    """Line equations of a grid with margins, over its flattened cells: each row's cells minus its
    total, each column's cells minus its total (the last row and column are the totals)."""
    r1, c1 = shape
    eqs = []
    for i in range(r1):
        e = np.zeros(shape)
        e[i, :-1] = 1
        e[i, -1] = -1
        eqs.append(e.ravel())
    for j in range(c1):
        e = np.zeros(shape)
        e[:-1, j] = 1
        e[-1, j] = -1
        eqs.append(e.ravel())
    return np.array(eqs)


def determined(mask: np.ndarray) -> np.ndarray:
    """Which suppressed cells of a grid with margins (`mask` True = suppressed) are a linear function
    of the published cells: cell i is when the unit vector e_i lies in the row space of the line
    equations restricted to the suppressed cells."""
    mask = np.asarray(mask, dtype=bool)
    idx = np.flatnonzero(mask.ravel())
    out = np.zeros(mask.shape, dtype=bool)
    if not len(idx):
        return out
    a = _equations(mask.shape)[:, idx]
    a = a[np.abs(a).sum(axis=1) > 0]
    rank = np.linalg.matrix_rank(a) if len(a) else 0
    for n, cell in enumerate(idx):
        e = np.zeros(len(idx))
        e[n] = 1
        if len(a) and np.linalg.matrix_rank(np.vstack([a, e])) == rank:
            out.flat[cell] = True
    return out


def lone_lines(mask: np.ndarray) -> list[tuple[str, int]]:
    """Lines (("row", i) or ("column", j)) of a grid with margins holding exactly one suppressed cell."""
    mask = np.asarray(mask, dtype=bool)
    out = [("row", int(i)) for i in np.flatnonzero(mask.sum(axis=1) == 1)]
    return out + [("column", int(j)) for j in np.flatnonzero(mask.sum(axis=0) == 1)]


@dataclass(frozen=True, eq=False)
class Suppression:
    """What a policy suppressed in one grid with margins: `grid` (the values), `primary` (small
    cells) and `complementary` (suppressed so that no primary can be solved for)."""

    grid: np.ndarray
    primary: np.ndarray
    complementary: np.ndarray

    @property
    def mask(self) -> np.ndarray:
        return self.primary | self.complementary

    @property
    def n_primary(self) -> int:
        return int(self.primary.sum())

    @property
    def n_complementary(self) -> int:
        return int(self.complementary.sum())


def _order(grid: np.ndarray, cells: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Candidates for a complement: non-zero first, then by value, inner cells before margins, position."""
    r_last, c_last = grid.shape[0] - 1, grid.shape[1] - 1

    def key(rc: tuple[int, int]) -> tuple[int, int, int, int, int]:
        v = int(grid[rc])
        return (v == 0, v, rc[0] == r_last or rc[1] == c_last, rc[0], rc[1])

    return sorted(cells, key=key)


def suppress_grid(grid: np.ndarray, policy: SmallCellPolicy) -> Suppression:
    """Primary and complementary suppression of a grid with margins (`with_margins`), by the rule of
    the module docstring."""
    grid = np.asarray(grid, dtype=np.int64)
    primary = np.vectorize(policy.is_small, otypes=[bool])(grid) if grid.size else np.zeros(grid.shape, bool)
    mask = primary.copy()
    if not mask.any():
        return Suppression(grid, primary, np.zeros_like(primary))
    while True:
        lines = lone_lines(mask)
        if lines:
            kind, i = lines[0]
            cells = (
                [(i, j) for j in range(grid.shape[1]) if not mask[i, j]]
                if kind == "row"
                else [(r, i) for r in range(grid.shape[0]) if not mask[r, i]]
            )
            if not cells:  # cannot happen: a line with one suppressed cell has another cell
                raise AssertionError("a line of one cell")
            mask[_order(grid, cells)[0]] = True
            continue
        det = determined(mask)
        if not det.any():
            break
        target = tuple(np.argwhere(det)[0])
        free = [(int(rc[0]), int(rc[1])) for rc in np.argwhere(~mask)]
        for rc in _order(grid, free):
            trial = mask.copy()
            trial[rc] = True
            if not determined(trial)[target]:
                mask = trial
                break
        else:  # nothing left to suppress: everything is suppressed
            mask[:] = True
    return Suppression(grid, primary, mask & ~primary)


def suppress_counts(table: np.ndarray, policy: SmallCellPolicy) -> Suppression:
    """A count table published with its row, column and grand totals: `suppress_grid(with_margins(table))`."""
    return suppress_grid(with_margins(np.asarray(table)), policy)


# --------------------------------------------------------------------------- frames
COUNT_NAME = re.compile(
    r"(^n_|_n$|patients|records|cases|controls|count|below k|unique|people|persons|members)", re.IGNORECASE
)
NOT_COUNT_NAME = re.compile(r"(share|rate|ratio|maf|_p$|^p$|p_|pairs|codes|items|rows|events|snp|test)", re.I)


def count_columns(frame: pd.DataFrame) -> list[str]:
    """Columns of `frame` read as counts of patients: whole numbers (or empty) named like a count of
    people (`n_cases`, `records`, `patients`, `below k`, `original records`, ...), not shares, rates,
    codes or rows."""
    out = []
    for col in frame.columns:
        name = str(col)
        if not COUNT_NAME.search(name) or NOT_COUNT_NAME.search(name):
            continue
        s = frame[col]
        if s.dtype == bool or not (pd.api.types.is_numeric_dtype(s) or s.dtype == object):
            continue
        v = pd.to_numeric(s, errors="coerce")
        if s.notna().any() and v[s.notna()].notna().all() and (v.dropna() % 1 == 0).all():
            out.append(col)
    return out


@dataclass(frozen=True)
class SuppressionNote:
    """What a policy suppressed in one written table, for the caption under its download and the report."""

    policy: SmallCellPolicy
    table: str = ""
    columns: tuple[str, ...] = ()
    primary: int = 0
    complementary: int = 0
    rows_withheld: int = 0
    cells: tuple[tuple[int, str, str], ...] = field(default=(), compare=False)  # (row, column, why)

    @property
    def suppressed(self) -> int:
        return self.primary + self.complementary

    def caption(self) -> str:
        if not self.suppressed and not self.rows_withheld:
            return ""
        what = f"{self.primary:,} small cell(s) ({self.policy.describe()})"
        if self.complementary:
            what += f" and {self.complementary:,} complementary cell(s), so that none can be solved for from the totals"
        if self.rows_withheld:
            what += (
                f"; {self.rows_withheld:,} row(s) withheld whole (their statistics reveal the small counts)"
            )
        cols = ", ".join(self.columns)
        return f"Suppressed in this table{f' ({cols})' if cols else ''}: {what}. Suppressed cells read '{SUPPRESSED}'."

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "columns": list(self.columns),
            "primary": self.primary,
            "complementary": self.complementary,
            "rows withheld": self.rows_withheld,
        }


def suppress_frame(
    frame: pd.DataFrame,
    policy: SmallCellPolicy,
    columns: Sequence[str] | None = None,
    *,
    margins: bool = False,
    table: str = "",
) -> tuple[pd.DataFrame, SuppressionNote]:
    """`frame` with its count cells (`columns`, default `count_columns(frame)`) under the policy
    replaced by `SUPPRESSED`. `margins=True`: the frame's count columns are published with their row
    and column totals (as in a cross-table), so complementary suppression runs (`suppress_counts`) and
    the totals are added as a last column "total" and a last row "total" (suppressed where needed)."""
    cols = list(count_columns(frame) if columns is None else columns)
    if not policy.active or not cols or frame.empty:
        out = frame.copy()
        if margins and cols and not frame.empty:
            out = _with_total_frame(frame, cols, with_margins(_int_table(frame, cols)), None)
        return out, SuppressionNote(policy, table, tuple(map(str, cols)))
    values = _int_table(frame, cols)
    if margins:
        sup = suppress_counts(values, policy)
        out = _with_total_frame(frame, cols, sup.grid, sup.mask)
        cells = tuple(
            (int(r), [*cols, "total"][int(c)], "small" if sup.primary[r, c] else "complementary")
            for r, c in np.argwhere(sup.mask)
        )
        return out, SuppressionNote(
            policy, table, tuple(map(str, cols)), sup.n_primary, sup.n_complementary, 0, cells
        )
    small = np.vectorize(policy.is_small, otypes=[bool])(values)
    out = frame.copy()
    for j, col in enumerate(cols):
        if small[:, j].any():
            out[col] = out[col].astype(object)
            out.loc[out.index[small[:, j]], col] = SUPPRESSED
    cells = tuple((int(r), str(cols[int(c)]), "small") for r, c in np.argwhere(small))
    return out, SuppressionNote(policy, table, tuple(map(str, cols)), int(small.sum()), 0, 0, cells)


def _int_table(frame: pd.DataFrame, cols: Sequence[str]) -> np.ndarray:
    return np.column_stack(
        [pd.to_numeric(frame[c], errors="coerce").fillna(0).to_numpy() for c in cols]
    ).astype(np.int64)


def _with_total_frame(
    frame: pd.DataFrame, cols: Sequence[str], grid: np.ndarray, mask: np.ndarray | None
) -> pd.DataFrame:
    body = frame.reset_index(drop=True).copy()
    for c in cols:
        body[c] = body[c].astype(object)
    body["total"] = pd.Series(grid[:-1, -1], dtype=object)
    total: dict[str, Any] = {c: "" for c in body.columns}
    first = next((c for c in body.columns if c not in cols and c != "total"), None)
    if first is not None:
        total[first] = "total"
    for j, c in enumerate([*cols, "total"]):
        total[c] = int(grid[-1, j])
    out = pd.concat([body, pd.DataFrame([total])], ignore_index=True)
    for c in [*cols, "total"]:
        out[c] = out[c].astype(object)
    if mask is not None:
        for j, c in enumerate([*cols, "total"]):
            for r in np.flatnonzero(mask[:, j]):
                out.at[int(r), c] = SUPPRESSED
    return out


# ------------------------------------------------------------------------ PheWAS tables
PHEWAS_COUNTS = ("n_cases", "n_controls")
# every statistic of a PheWAS result row after its counts (`engine.utility.phewas.RESULT_COLUMNS`)
PHEWAS_DERIVED = tuple(RESULT_COLUMNS[RESULT_COLUMNS.index(PHEWAS_COUNTS[-1]) + 1 :])
# `phewas_allele_counts`' columns: the cases' three first (sets that nest with the phecodes)
PHEWAS_CELL_KINDS = (
    *("n_cases", "case minor alleles", "case major alleles"),
    *("n_controls", "control minor alleles", "control major alleles"),
)


def phewas_allele_counts(table: pd.DataFrame) -> pd.DataFrame:
    """The counts a PheWAS row reveals: cases, controls, and the minor / major alleles in cases and
    controls (case_maf x 2 n_cases, ...; `engine.utility.phewas.phewas_of_counts`)."""
    n_case = pd.to_numeric(table["n_cases"], errors="coerce").to_numpy(dtype=float)
    n_ctrl = pd.to_numeric(table["n_controls"], errors="coerce").to_numpy(dtype=float)
    out = {"n_cases": n_case, "n_controls": n_ctrl}
    if "case_maf" in table and "control_maf" in table:
        a = np.rint(pd.to_numeric(table["case_maf"], errors="coerce").to_numpy(dtype=float) * 2 * n_case)
        c = np.rint(pd.to_numeric(table["control_maf"], errors="coerce").to_numpy(dtype=float) * 2 * n_ctrl)
        out |= {"case minor alleles": a, "case major alleles": 2 * n_case - a}
        out |= {"control minor alleles": c, "control major alleles": 2 * n_ctrl - c}
    return pd.DataFrame(out, index=table.index)


def _is_descendant(d: str, a: str) -> bool:
    """Phecode `d` is a strict descendant of `a` by truncation of decimals (`250.11` of `250.1` and `250`)."""
    return d != a and (d.startswith(a + ".") if "." not in a else d.startswith(a))


@dataclass
class _Row:
    table: int
    index: int
    phecode: str
    counts: np.ndarray  # PHEWAS_CELL_KINDS
    withheld: bool


def _inside(d: _Row, a: _Row) -> bool:
    """The cases of row `d` are a subset of row `a`'s: a descendant phecode of the same table, or a
    release's row (table > 0) of the original's phecode (table 0) or of a descendant of it."""
    if d.table == a.table:
        return _is_descendant(d.phecode, a.phecode)
    return a.table == 0 and (d.phecode == a.phecode or _is_descendant(d.phecode, a.phecode))


def _first_leak(rows: list[_Row], policy: SmallCellPolicy) -> _Row | None:
    """The row to withhold next in one SNP's phecode family (`withheld_phewas`), or None."""
    shown = [r for r in rows if not r.withheld]
    for a in shown:
        inner = [d for d in shown if _inside(d, a)]
        for d in inner:  # a set minus a subset of it is a group of patients
            if any(policy.is_small(abs(x)) for x in a.counts - d.counts):
                return a if a.table == d.table else d
        near = [d for d in inner if d.table == a.table and not any(_inside(d, b) for b in inner)]
        if near:  # read as disjoint, the children leave a remainder of patients
            rest = a.counts[:3] - sum(d.counts[:3] for d in near)
            if any(policy.is_small(x) for x in rest):
                return min(near, key=lambda d: (d.counts[0], -float(d.phecode)))  # ties: most specific
    return None


def withheld_phewas(tables: Sequence[pd.DataFrame], policy: SmallCellPolicy) -> list[np.ndarray]:
    """Rows to withhold whole in PheWAS tables published together (issue 28; issue #35 finding 4): the
    first the original cohort's, the others releases of it. Rule, per SNP and phecode family (the
    phecodes sharing the part before the dot):

    1. a row any of whose counts (`phewas_allele_counts`: cases, controls, their minor and major
       alleles) is small;
    2. then, to a fixed point, one row at a time: of two shown rows whose cases nest (an ancestor
       phecode and its descendant, `411` and `411.2`; the original's phecode and a release's same or
       descendant phecode) and any of whose counts differ by a small amount (the difference is a group
       of patients: `411` minus `411.2`, the patients a release lost), the ancestor (the specific
       phenotype stays, as when leaves are published first) or the release's row;
    3. and of a shown row's nearest shown descendants in its table, the one with the fewest cases when
       the row's cases, minor or major alleles minus theirs is small (a reader taking siblings as
       disjoint reads it as the patients of the withheld children and of the row's own codes).

    So no shown row, difference of nested shown rows or parent-minus-children remainder is a count
    1..N-1 (tests/cell_attack.py bounds every other group of a family by integer programs)."""
    rows_of: dict[tuple[str, str], list[_Row]] = {}
    masks = []
    for t, table in enumerate(tables):
        counts = (
            phewas_allele_counts(table).reindex(columns=PHEWAS_CELL_KINDS, fill_value=0.0).to_numpy(float)
        )
        small = np.vectorize(policy.is_small, otypes=[bool])(counts) if len(table) else counts > 0
        masks.append(small.any(axis=1))
        if not policy.active:
            continue
        for i, (snp, pc) in enumerate(zip(table["snp"], table["phecode"], strict=True)):
            key = (str(snp), str(pc).split(".")[0])
            rows_of.setdefault(key, []).append(_Row(t, i, str(pc), counts[i], bool(masks[t][i])))
    for rows in rows_of.values():
        while (leak := _first_leak(rows, policy)) is not None:
            leak.withheld = True
            masks[leak.table][leak.index] = True
    return masks


def _withhold(table: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    out = table.copy()
    for col in (*PHEWAS_COUNTS, *PHEWAS_DERIVED):
        if col in out:
            out[col] = out[col].astype(object)
            out.loc[rows, col] = SUPPRESSED
    return out


def suppress_phewas_tables(
    tables: Sequence[pd.DataFrame], policy: SmallCellPolicy
) -> list[tuple[pd.DataFrame, SuppressionNote]]:
    """PheWAS tables published together (the original's first, then releases of it) under the policy:
    the rows of `withheld_phewas` written with their counts and every statistic computed from them
    (which would give them back) as `SUPPRESSED`."""
    if not policy.active:
        return [(t.copy(), SuppressionNote(policy, "PheWAS", PHEWAS_COUNTS)) for t in tables]
    masks = withheld_phewas(tables, policy)
    out = []
    for table, rows in zip(tables, masks, strict=True):
        counts = phewas_allele_counts(table)
        small = counts.apply(lambda s: s.map(policy.is_small)).to_numpy(dtype=bool)
        note = SuppressionNote(policy, "PheWAS", tuple(counts.columns), int(small.sum()), 0, int(rows.sum()))
        out.append((_withhold(table, rows), note))
    return out


def suppress_phewas(table: pd.DataFrame, policy: SmallCellPolicy) -> tuple[pd.DataFrame, SuppressionNote]:
    """One PheWAS table (`engine.utility.phewas.RESULT_COLUMNS`) under the policy: `suppress_phewas_tables`
    of it alone."""
    return suppress_phewas_tables([table], policy)[0]


PAIRED_SIDES = ("_original", "_released")  # `engine.utility.phewas.paired`'s column suffixes


def suppress_paired_phewas(
    paired: pd.DataFrame, policy: SmallCellPolicy
) -> tuple[pd.DataFrame, SuppressionNote]:
    """Original and released PheWAS results side by side (`engine.utility.phewas.paired`, one release or
    several by a `release` column) under the policy: per release, the two tables' cases judged together
    (`withheld_phewas`: a release's row whose cases differ by 1..N-1 from the original's, and rows of
    the phecode hierarchy), a withheld side's columns (`n_cases_released`, `p_released`, ...) and
    `change` read `SUPPRESSED`. The note counts the withheld sides as rows."""
    out = paired.copy()
    for col in out.columns:
        if str(col).endswith(PAIRED_SIDES) or col == "change":
            out[col] = out[col].astype(object)
    groups = (
        paired.groupby("release", sort=False).indices if "release" in paired else {"": np.arange(len(paired))}
    )
    small = withheld = 0
    for rows in groups.values():
        part = paired.iloc[rows]
        sides = [
            pd.DataFrame(
                {
                    "snp": part["snp"].to_numpy(),
                    "phecode": part["phecode"].astype(str).to_numpy(),
                    "n_cases": pd.to_numeric(part[f"n_cases{side}"], errors="coerce").to_numpy(),
                    "n_controls": np.nan,
                }
            )
            for side in PAIRED_SIDES
        ]
        for side, table, mask in zip(PAIRED_SIDES, sides, withheld_phewas(sides, policy), strict=True):
            small += int(table["n_cases"].map(policy.is_small).sum())
            withheld += int(mask.sum())
            hit = out.index[rows[mask]]
            cols = [c for c in out.columns if str(c).endswith(side)] + (["change"] if "change" in out else [])
            out.loc[hit, cols] = SUPPRESSED
    return out, SuppressionNote(
        policy, "PheWAS pairs", ("n_cases_original", "n_cases_released"), small, 0, withheld
    )


def suppress_cumulative(
    values: Sequence[int], policy: SmallCellPolicy, total: int | None = None
) -> np.ndarray:
    """Mask of the cells to suppress in a column of counts "at least d" (nonincreasing: each the sum of
    the exact counts from its row on, e.g. patients with at least d days). The cells of people are the
    exact counts, which the difference of two published cells gives; so a cell is published only when
    it and its difference to the next published cell further down (0 below the last row) are zero or
    not small, and, when `total` (the count before the first row) is published elsewhere, the first
    published cell's difference to it is too. Every published cell and every difference of two is then
    zero or not small."""
    v = np.asarray(values, dtype=np.int64)
    hide = np.zeros(len(v), dtype=bool)
    if not policy.active:
        return hide
    below = 0
    for i in range(len(v) - 1, -1, -1):
        if policy.is_small(int(v[i]) - below) or policy.is_small(int(v[i])):
            hide[i] = True
        else:
            below = int(v[i])
    if total is not None:
        for i in range(len(v)):
            if hide[i]:
                continue
            if not policy.is_small(int(total) - int(v[i])):
                break
            hide[i] = True
    return hide


def suppress_cumulative_share(
    values: Sequence[int], parts: Sequence[int], policy: SmallCellPolicy, total: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Masks (counts, shares) of a column of counts "at least d" (`suppress_cumulative`) written beside
    the share of them that has a property (`parts / values`, e.g. the unique patients with at least d
    days: nonincreasing too). A share times its count gives the part and the rest (count - part), two
    more columns of counts "at least d" (issue #35: `labs uniqueness` gave non-unique counts 1-10 so):
    a share is withheld where its count is, or where `suppress_cumulative` withholds the part or the
    rest. Withholding more cells of such a column keeps every difference of two shown cells a sum of
    differences that are zero or not small."""
    v = np.asarray(values, dtype=np.int64)
    p = np.asarray(parts, dtype=np.int64)
    counts = suppress_cumulative(v.tolist(), policy, total)
    shares = counts | suppress_cumulative(p.tolist(), policy) | suppress_cumulative((v - p).tolist(), policy)
    return counts, shares


# ------------------------------------------------------------------------ the commands' option
MIN_CELL_HELP = "N (counts 1..N-1 suppressed) or cms, aou, ohdsi, none (default: none)"


def add_min_cell_option(parser: Any, what: str = "the counts of patients written") -> None:
    """`--min-cell N|cms|aou|ohdsi|none` on a command that writes counts of patients in cells (`phewas`,
    `labs uniqueness`, `anonymize ugaclip|aclip --report`); read with `min_cell_of`. Not a file: no path
    role."""
    parser.add_argument("--min-cell", default="none", help=f"small-cell policy of {what}: {MIN_CELL_HELP}")


def min_cell_of(args: Any) -> SmallCellPolicy:
    """The policy `--min-cell` names; a bad value is the user's mistake (`UserError`, one line, exit 2)."""
    from engine.io.errors import UserError

    try:
        return SmallCellPolicy.parse(getattr(args, "min_cell", "none"))
    except SmallCellError as exc:
        raise UserError(f"--min-cell: {exc}") from None
