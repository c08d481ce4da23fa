"""The records' item sets after a merge of items, from the sets before it (issue 36: Heatherly's
completion pass at the paper's scale).

Each generalization round of the completion pass (`engine.anonymize.population._complete`) merges items
and recodes the records that are not targets (472,580 of the biobank, 1,360,991 of the population at the
paper's scale). Their (record x item) sets were rebuilt from every event after each round (0.65 s a round
for the population, 12 rounds); here they are derived from the previous sets: the entries of merged
items take their new representative, each row is sorted again and the entries that became equal are
dropped, which is what the sets built from the recoded events hold.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from engine.records import Records


def merged_item_sets(sets: sp.csr_matrix, item_of_code: np.ndarray, merged: np.ndarray) -> sp.csr_matrix:
    """`sets` (rows x representatives, 0/1, sorted indices, no duplicates: `Records.patient_item_sets`)
    after a merge: `merged` marks, per code index, the representatives merged with others and
    `item_of_code` gives each its new representative. Equal to the sets of the recoded records; `sets`
    is not modified (it is returned itself when nothing it holds merged)."""
    hit = merged[sets.indices]
    if not hit.any():
        return sets
    indices = sets.indices.copy()
    indices[hit] = item_of_code[indices[hit]]
    out = sp.csr_matrix((sets.data.copy(), indices, sets.indptr.copy()), shape=sets.shape)
    out.has_sorted_indices = False
    out.sort_indices()
    # a record holding two codes of one merged item: equal neighbours within its row
    dup = np.zeros(len(indices), dtype=bool)
    dup[1:] = out.indices[1:] == out.indices[:-1]
    dup[out.indptr[:-1][np.diff(out.indptr) > 0]] = False  # a row's first entry repeats no entry of it
    if not dup.any():
        return out
    lost = np.bincount(
        np.searchsorted(out.indptr, np.flatnonzero(dup), side="right") - 1, minlength=sets.shape[0]
    )
    indptr = out.indptr - np.concatenate([[0], np.cumsum(lost)]).astype(out.indptr.dtype)
    return sp.csr_matrix((out.data[~dup], out.indices[~dup], indptr), shape=sets.shape)


def with_patient_item_sets(records: Records, sets: sp.csr_matrix) -> Records:
    """`records` with its `patient_item_sets` given (derived by `merged_item_sets`, equal to what the
    property would build from the events), kept as the property keeps it."""
    records.__dict__["patient_item_sets"] = sets  # frozen dataclass: stored beside the fields
    return records
