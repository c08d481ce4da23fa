"""Issue 36: the phecode table's first read, vectorized (`engine.utility.phewas.table_of_maps`), equals
the row-by-row reading it replaced (tests/reference_phecode_table.py) field by field: on the shipped
maps and on small random maps (codes repeated, rollup or not, phecodes reached only by rollup, ranges
overlapping or empty, ICD-10-CM items with several phecodes, V codes of both vocabularies)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.utility.phewas import PhecodeTable, table_of_maps
from engine.vocab import phecode_map, phecode_map_icd10cm
from tests.reference_phecode_table import reference_table

PHECODES = ["008", "008.5", "008.51", "250", "250.1", "250.11", "250.2", "401", "401.1", "411.4"]
RANGES = ["", "008-009.99", "250-250.99", "401-405.99, 411-411.99", "250.1", "7-8", "300-200"]
ICD9 = ["001", "001.1", "250.00", "250.01", "401.1", "411.41", "V45.81", "E849.0", "not.a.code"]
ICD10 = ["A00", "A00.1", "E11.9", "I48.91", "ICD10CM:V45.5", "V45.5XXA", "A00-A09", "ICD10CM:V10-V19"]


def assert_same(new: PhecodeTable, old: PhecodeTable) -> None:
    np.testing.assert_array_equal(new.phecodes, old.phecodes, strict=True)
    np.testing.assert_array_equal(new.values, old.values, strict=True)
    assert new.code_phecodes == old.code_phecodes
    assert list(new.code_phecodes) == list(old.code_phecodes)  # the same order of items
    assert new.code_leaves == old.code_leaves
    assert new.category_leaves == old.category_leaves
    for part in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(new.exclusion, part), getattr(old.exclusion, part), strict=True)
    assert new.exclusion.shape == old.exclusion.shape


def test_the_shipped_maps_read_as_before():
    m, m10 = phecode_map(), phecode_map_icd10cm()
    assert_same(table_of_maps(m, m10), reference_table(m, m10))


@st.composite
def maps(draw) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = draw(
        st.lists(
            st.tuples(
                st.sampled_from(ICD9), st.sampled_from(PHECODES), st.booleans(), st.sampled_from(RANGES)
            ),
            min_size=1,
            max_size=25,
        )
    )
    m = pd.DataFrame(rows, columns=["icd9", "phecode", "rollup", "exclude_range"])
    known = sorted(set(m["phecode"]))
    rows10 = draw(
        st.lists(
            st.tuples(st.sampled_from(ICD10), st.sampled_from(known), st.sampled_from(known)), max_size=25
        )
    )
    m10 = pd.DataFrame(rows10, columns=["item", "phecode", "phecode_unrolled"])
    return m, m10


@given(maps())
def test_random_maps_read_as_before(both):
    m, m10 = both
    assert_same(table_of_maps(m, m10), reference_table(m, m10))


def test_a_phecode_of_the_icd10cm_map_absent_from_the_icd9_map_is_refused():
    m = pd.DataFrame({"icd9": ["250.00"], "phecode": ["250"], "rollup": [True], "exclude_range": [""]})
    m10 = pd.DataFrame({"item": ["E11.9"], "phecode": ["250"], "phecode_unrolled": ["250.2"]})
    with pytest.raises(ValueError, match="absent from the ICD-9 map"):
        table_of_maps(m, m10)
