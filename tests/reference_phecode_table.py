"""`engine.utility.phewas.phecode_table` as it was before issue 36 made its first read fast: the maps read
row by row in Python (2.4 s of the Compare page's first opening at paper scale). Kept as the reference the
vectorized `phewas.table_of_maps` must equal, field by field (tests/test_phecode_table.py). Not used by
the app."""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.utility.phewas import PhecodeTable, _ancestors, _category, _parse_ranges


def reference_table(m: pd.DataFrame, m10: pd.DataFrame) -> PhecodeTable:
    known = set(m["phecode"])
    phecodes = np.array(sorted(known, key=float), dtype=object)
    idx = {p: i for i, p in enumerate(phecodes)}
    code_phecodes: dict[str, frozenset[int]] = {}
    code_leaves: dict[str, frozenset[int]] = {}
    ranges: dict[int, set[tuple[float, float]]] = {}
    for code, pc, rollup, excl in zip(m["icd9"], m["phecode"], m["rollup"], m["exclude_range"], strict=True):
        targets = _ancestors(pc, known) if rollup else [pc]
        code_phecodes[code] = frozenset(idx[t] for t in targets)
        code_leaves[code] = frozenset((idx[pc],))
        ranges.setdefault(idx[pc], set()).update(_parse_ranges(excl))
    outside = sorted(set(m10["phecode_unrolled"]) - known)
    if outside:
        raise ValueError(f"phecodes of the ICD-10-CM map absent from the ICD-9 map: {outside[:5]}")
    toward: dict[str, set[int]] = {}
    own: dict[str, set[int]] = {}
    for item, pc, unrolled in zip(m10["item"], m10["phecode"], m10["phecode_unrolled"], strict=True):
        toward.setdefault(item, set()).add(idx[unrolled])
        own.setdefault(item, set()).add(idx[pc])
    code_phecodes.update((k, frozenset(v)) for k, v in toward.items())
    code_leaves.update((k, frozenset(v)) for k, v in own.items())
    values = phecodes.astype(float)
    for i, p in enumerate(phecodes):
        if i not in ranges:
            ranges[i] = {
                r for j, q in enumerate(phecodes) if q.startswith(p + ".") for r in ranges.get(j, ())
            }
    rows, cols = [], []
    for i in range(len(phecodes)):
        mask = np.zeros(len(phecodes), dtype=bool)
        mask[i] = True
        for lo, hi in ranges[i]:
            mask |= (values >= lo) & (values <= hi)
        q = np.flatnonzero(mask)
        rows.extend(q.tolist())
        cols.extend([i] * len(q))
    excl = sp.csr_matrix(
        (np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(len(phecodes), len(phecodes))
    )
    by_category: dict[str, set[int]] = {}
    for code, leaves in code_leaves.items():
        by_category.setdefault(_category(code), set()).update(leaves)
    category_leaves = {c: frozenset(v) for c, v in by_category.items()}
    return PhecodeTable(phecodes, values, code_phecodes, code_leaves, excl, category_leaves)
