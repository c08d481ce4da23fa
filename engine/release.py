"""What an anonymization method produces: a `Release` (ARCHITECTURE section 2).

Released items are original codes or generalized items: a hierarchy node such as `401` or
`240-279`, or a set of codes written `{401.0,401.1}` (Heatherly's Figure 13, Loukides' anonymized
items). `item_codes` maps every released item that is not itself an original code to the original
codes it stands for; an item absent from the map stands for itself. The risk engine reads exactly
this mapping, so what is exported and what is verified are the same thing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from engine.records import Records

SET_LABEL_MAX_CODES = 8


def set_item_label(codes: Iterable[str]) -> str:
    """The label of a set-valued generalized item: sorted codes in braces, `{401.0,401.1}`.

    A single code is written as itself (a set of one code is no generalization). A set of more than
    `SET_LABEL_MAX_CODES` codes is written by its first three codes, the count of the others and a
    content hash, `{250.00,250.01,250.02,…+41}#1f2e3d4c`, so that a label stays short and unique; the
    release's code map (`Release.code_map`) lists every member.
    """
    cs = sorted(set(codes))
    if len(cs) == 1:
        return cs[0]
    if len(cs) <= SET_LABEL_MAX_CODES:
        return "{" + ",".join(cs) + "}"
    digest = hashlib.sha256("\x1f".join(cs).encode()).hexdigest()[:8]
    return "{" + ",".join(cs[:3]) + f",…+{len(cs) - 3}" + "}#" + digest


def codes_of(item: str, item_codes: Mapping[str, frozenset[str]] | None) -> frozenset[str]:
    """The original codes a released item stands for."""
    if item_codes is not None and item in item_codes:
        return item_codes[item]
    return frozenset((item,))


@dataclass(frozen=True, eq=False)
class Release:
    """A method's output for the cohort (and, for population-scope methods, the population).

    - `records`: the released cohort records (items may be generalized; censored or suppressed
      events are gone).
    - `item_codes`: released item -> original codes, for every item that is not an original code.
    - `suppressed`: long-form rows (`patient_id`, `code`, and `visit` when present) of the events the
      method removed (suppressed or censored), so nothing is lost silently.
    - `population`: the released candidate pool when the method anonymized a larger group and then
      extracted the cohort (Heatherly's DEMO_B / DEMO_S); None when the population is unchanged.
    - `counts_repeats`: True when repeat counts are part of what is released and of what the attacker
      knows (GCCens, or the user asked for repeats to count).
    - `params`: the parameters the method ran with; `loss`: the method's own loss figures.
    """

    method: str
    records: Records
    item_codes: dict[str, frozenset[str]] = field(default_factory=dict)
    suppressed: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["patient_id", "code"]))
    population: Records | None = None
    counts_repeats: bool = False
    params: dict = field(default_factory=dict)
    loss: dict = field(default_factory=dict)

    def codes_of(self, item: str) -> frozenset[str]:
        return codes_of(item, self.item_codes)

    def to_frame(self) -> pd.DataFrame:
        """Long-form released events (`patient_id`, (`visit`), `code`, (`age`))."""
        return self.records.to_frame()

    def code_map(self) -> pd.DataFrame:
        """One row per (released item, original code) for every released item, sorted."""
        rows = [(str(item), code) for item in self.records.items for code in sorted(self.codes_of(str(item)))]
        return pd.DataFrame(rows, columns=["released_item", "original_code"])

    def __repr__(self) -> str:
        return f"Release({self.method!r}, {self.records!r}, {len(self.item_codes)} generalized items)"


def release_from_frames(
    released: pd.DataFrame, code_map: pd.DataFrame | None, method: str = "imported"
) -> Release:
    """A Release read back from its exports: long-form released events (`patient_id`, `code` holding
    the released item, optional `visit`, `age`) and the code map (`released_item`, `original_code`).

    Items absent from the map stand for themselves. Raises ValueError naming the missing column.
    """
    for col in ("patient_id", "code"):
        if col not in released.columns:
            raise ValueError(f"released events: missing column {col!r} (columns: {list(released.columns)})")
    item_codes: dict[str, frozenset[str]] = {}
    if code_map is not None:
        for col in ("released_item", "original_code"):
            if col not in code_map.columns:
                raise ValueError(f"code map: missing column {col!r} (columns: {list(code_map.columns)})")
        groups = code_map.astype(str).groupby("released_item")["original_code"]
        for item, codes in groups:
            cs = frozenset(codes)
            if cs != {item}:
                item_codes[str(item)] = cs
    return Release(method, Records.from_frame(released), item_codes=item_codes)
