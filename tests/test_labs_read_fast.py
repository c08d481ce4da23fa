"""Issue 24's faster lab-order read against the read it replaced (tests/reference_labs_read.py): the
Parquet text columns read as dictionaries (`_read_parquet(text_codes=True)`), the lab codes numbered
by value for the duplicate check (`loaders._by_value`) and the duplicate mask without a sort when the
keys are in order (`validation.first_occurrence_duplicates`) give the same frame (dtypes, values,
order) and the same report (messages, rows, columns, counts), on the shipped sample and on small
random files with missing cells, blanks, surrounding spaces and repeats; every other reader's Parquet
frame is unchanged."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.io import loaders
from engine.io.loaders import SAMPLE_DIR, Source, as_source
from engine.io.validation import FileCheck, Text, ValidationReport, first_occurrence_duplicates
from tests import reference_labs_read as ref

SETTINGS = settings(derandomize=True, database=None, max_examples=150, deadline=None)


def _same_labs(
    src: Source, drop_duplicates: bool = False, na_ids: loaders.NaIds = "error"
) -> pd.DataFrame | None:
    old_report, new_report = ValidationReport(), ValidationReport()
    old = ref._labs(src, old_report, drop_duplicates, na_ids)
    new = loaders._labs(src, new_report, drop_duplicates, na_ids)
    assert new_report.findings == old_report.findings
    if old is None:
        assert new is None
    else:
        assert new is not None
        pd.testing.assert_frame_equal(new, old, check_exact=True)
        _writable(new)
    return new


def _writable(frame: pd.DataFrame) -> None:
    """Every column takes a value, as the old read's frame (never a read-only view of Arrow memory)."""
    for j in range(frame.shape[1]):
        frame.iloc[0, j] = frame.iloc[-1, j]


# ------------------------------------------------------------------------------------ duplicates
def _key_rows(draw, n_keys: int, n: int, wide: bool) -> list[np.ndarray]:
    bound = 2**40 if wide else 4  # wide: the keys cannot pack into 62 bits (the lexsort path)
    values = st.integers(-bound, bound)
    return [np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.int64) for _ in range(n_keys)]


@st.composite
def key_arrays(draw) -> list[np.ndarray]:
    """1-3 int64 key arrays of one length (0-30), small or wide ranges, in file order or sorted."""
    n_keys, n = draw(st.integers(1, 3)), draw(st.integers(0, 30))
    keys = _key_rows(draw, n_keys, n, draw(st.booleans()))
    if n and draw(st.booleans()):  # rows sorted on their keys: the no-sort path
        order = np.lexsort(tuple(reversed(keys)))
        keys = [k[order] for k in keys]
    return keys


@SETTINGS
@given(key_arrays())
def test_first_occurrence_duplicates_equals_reference(keys):
    np.testing.assert_array_equal(first_occurrence_duplicates(keys), ref.first_occurrence_duplicates(keys))


def test_first_occurrence_duplicates_keeps_the_first_of_sorted_and_unsorted_rows():
    sorted_keys = [np.array([1, 1, 1, 2, 2]), np.array([5, 5, 6, 6, 6])]
    np.testing.assert_array_equal(first_occurrence_duplicates(sorted_keys), [False, True, False, False, True])
    unsorted = [np.array([2, 1, 2, 1]), np.array([6, 5, 6, 5])]
    np.testing.assert_array_equal(first_occurrence_duplicates(unsorted), [False, False, True, True])
    wide = [np.array([-(2**62), 2**62, -(2**62)]), np.array([3, 3, 3])]
    np.testing.assert_array_equal(first_occurrence_duplicates(wide), [False, False, True])


# ------------------------------------------------------------------------------------ text columns
CELLS = st.one_of(
    st.none(),
    st.sampled_from(
        ["", " ", "P1", " P1", "P1 ", "P2", "p2", "NA", "null", "ALT", "AST", " AST", "Albumin", "é"]
    ),
    st.text(alphabet="ab 1", max_size=3),
)


@st.composite
def text_columns(draw) -> list[str | None]:
    return draw(st.lists(CELLS, min_size=1, max_size=25))


def _parquet(table: pa.Table, row_group_size: int) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=row_group_size)  # several row groups: several dictionaries
    return buf.getvalue()


@SETTINGS
@given(text_columns(), st.integers(1, 8), st.booleans())
def test_text_of_categorical_equals_text_of_strings(cells, row_group_size, large):
    """`Text.of` gives the same codes, values and warnings for a text column read as a dictionary."""
    kind = pa.large_string() if large else pa.string()
    data = _parquet(pa.table({"x": pa.array(cells, type=kind)}), row_group_size)
    src = Source("t.parquet", data)
    got = []
    for codes in (False, True):
        report = ValidationReport()
        read = loaders._read_parquet(src, FileCheck(src.name, np.zeros(0, np.int64), report), codes)
        assert read is not None
        df, fc = read
        text = Text.of(df["x"], fc, "x")
        got.append((text, report, df))
    (plain, r_plain, df_plain), (coded, r_coded, df_coded) = got
    assert isinstance(df_coded["x"].dtype, pd.CategoricalDtype)
    assert not isinstance(df_plain["x"].dtype, pd.CategoricalDtype)
    np.testing.assert_array_equal(coded.codes, plain.codes)
    assert coded.uniques.tolist() == plain.uniques.tolist()
    assert r_coded.findings == r_plain.findings
    pd.testing.assert_extension_array_equal(coded.array(), plain.array())


INT_DAYS = st.one_of(st.none(), st.integers(-3, 40))
TEXT_DAYS = st.sampled_from(["3", "17", " 4", "2010-03-12", "2010-3-1", "x", "", None])


@st.composite
def lab_files(draw) -> bytes:
    """A small lab-order Parquet file: text ids and labs with missing cells, blanks, spaces and
    repeats; day numbers (nullable integers) or text; sometimes a renamed, a missing or an extra
    column; often sorted by patient, day and lab, as an export (the duplicate check's no-sort path)."""
    n = draw(st.integers(1, 25))
    pid = draw(st.lists(CELLS, min_size=n, max_size=n))
    lab = draw(st.lists(CELLS, min_size=n, max_size=n))
    int_days = draw(st.booleans())
    day = draw(st.lists(INT_DAYS if int_days else TEXT_DAYS, min_size=n, max_size=n))
    if draw(st.booleans()):  # few values, none missing: files that load, with repeats
        pid = draw(st.lists(st.sampled_from(["P1", "P2", " P2"]), min_size=n, max_size=n))
        lab = draw(
            st.lists(st.sampled_from(["ALT", "AST", " AST", "Albumin", "BUN"]), min_size=n, max_size=n)
        )
        day = draw(st.lists(st.sampled_from([1, 2] if int_days else ["1", "2"]), min_size=n, max_size=n))
    rows = list(zip(pid, day, lab, strict=True))
    rows += rows[: draw(st.integers(0, n))]  # repeated rows
    if draw(st.booleans()):
        rows.sort(key=lambda r: tuple((v is None, str(v)) for v in r))
    names = draw(
        st.sampled_from(
            [("patient_id", "day", "lab"), ("patient_id", "day", " Lab "), ("patient_id", "day", "test")]
        )
    )
    columns = {name: [r[i] for r in rows] for i, name in enumerate(names)}
    if draw(st.booleans()):
        columns["note"] = [str(i % 3) for i in range(len(rows))]
    return _parquet(pa.table(columns), draw(st.integers(1, 8)))


@SETTINGS
@given(lab_files(), st.booleans(), st.sampled_from(["error", "accept"]))
def test_labs_equal_reference_on_random_files(data, drop_duplicates, na_ids):
    _same_labs(Source("labs.parquet", data), drop_duplicates, na_ids)


def test_labs_random_files_reach_every_outcome():
    """The random files above are not all rejected: some load, some with repeats; some fail."""
    outcomes = set()

    @SETTINGS
    @given(lab_files())
    def run(data):
        report = ValidationReport()
        frame = loaders._labs(Source("labs.parquet", data), report, False, "error")
        outcomes.add("error" if frame is None else "loaded")
        if report.of_kind("duplicate_rows"):
            outcomes.add("repeats")

    run()
    assert outcomes == {"error", "loaded", "repeats"}


def _files_read_as_before() -> dict[str, bytes]:
    good = _parquet(pa.table({"patient_id": ["P1"] * 50, "day": list(range(50)), "lab": ["ALT"] * 50}), 20)
    repeated = pa.Table.from_arrays(
        [pa.array(["P1", "P2"]), pa.array([1, 2]), pa.array(["ALT", "AST"]), pa.array(["x", "y"])],
        names=["patient_id", "day", "lab", "lab"],
    )
    return {
        "not parquet": b"PAR1 not really",
        "truncated": good[:-30],
        "short": good[:200] + good[-500:],
        "corrupt": good[:100] + b"\0" * 50 + good[150:],
        "repeated name": _parquet(repeated, 10),
        "binary ids": _parquet(
            pa.table({"patient_id": [b"P1", b"P2"], "day": [1, 2], "lab": ["A", "B"]}), 10
        ),
        "dictionary ids": _parquet(
            pa.table(
                {
                    "patient_id": pa.array(["P1", "P2", "P1"]).dictionary_encode(),
                    "day": [1, 2, 1],
                    "lab": ["A"] * 3,
                }
            ),
            2,
        ),
        "integer ids": _parquet(
            pa.table({"patient_id": [7, 2**62, 7], "day": [1, 2, 1], "lab": ["A"] * 3}), 2
        ),
        "unsigned ids": _parquet(
            pa.table({"patient_id": pa.array([2**64 - 1, 3], pa.uint64()), "day": [1, 2], "lab": ["A"] * 2}),
            2,
        ),
        "integer ids, a null": _parquet(
            pa.table({"patient_id": [2**62 + 1, None, 7], "day": [1, 2, 1], "lab": ["A"] * 3}), 2
        ),
        "small days, a null elsewhere": _parquet(
            pa.table(
                {
                    "patient_id": ["P1"] * 3,
                    "day": pa.array([1, 2, 1], pa.int8()),
                    "lab": ["A"] * 3,
                    "n": [1, None, 2],
                }
            ),
            2,
        ),
        "text days": _parquet(
            pa.table({"patient_id": ["P1"] * 3, "day": ["2010-01-01", "x", ""], "lab": ["A"] * 3}), 2
        ),
    }


@pytest.mark.parametrize("name", list(_files_read_as_before()))
def test_labs_equal_reference_on_odd_files(name):
    """Unreadable files keep their message word for word; odd text columns read as before."""
    _same_labs(Source("labs.parquet", _files_read_as_before()[name]))


def test_other_readers_get_text_columns_unchanged():
    """Only the lab reader asks for dictionaries: `read_table`'s default frame is the old one."""
    data = _parquet(pa.table({"patient_id": ["P1", None, " P2"], "code": ["401.1", "250.00", None]}), 2)
    src = Source("events.parquet", data)
    new, old = loaders.read_table(src, ValidationReport()), ref.read_table(src, ValidationReport())
    assert new is not None and old is not None
    pd.testing.assert_frame_equal(new[0], old[0], check_exact=True)


# ------------------------------------------------------------------------------------ the sample
@pytest.mark.parametrize("drop_duplicates", [False, True])
def test_sample_labs_equal_reference(drop_duplicates):
    frame = _same_labs(as_source(SAMPLE_DIR / "labs.parquet"), drop_duplicates)
    assert frame is not None and len(frame) > 6_000_000


def test_sample_lab_codes_by_value_put_the_sample_in_key_order():
    """The shipped sample is sorted by patient, day and lab: numbered by value, its packed keys need
    no sort (the reason for `_by_value`); numbered by first appearance they would. The renumbered
    codes stand for the same values row by row."""
    from engine.io.validation import _packed

    df = pq.read_table(SAMPLE_DIR / "labs.parquet").to_pandas()
    pid, lab = Text.of(df["patient_id"]), Text.of(df["lab"])
    day = df["day"].to_numpy(np.int64)
    by_appearance = _packed([pid.codes, day, lab.codes])
    values = lab.values()
    by_value = loaders._by_value(lab)
    np.testing.assert_array_equal(by_value.values(), values)
    assert sorted(by_value.uniques) == by_value.uniques.tolist()
    packed = _packed([pid.codes, day, by_value.codes])
    assert by_appearance is not None and packed is not None
    assert (by_appearance[1:] < by_appearance[:-1]).any()
    assert not (packed[1:] < packed[:-1]).any()


def test_by_value_keeps_missing_cells_and_values():
    text = Text.of(pd.Series(["b", None, "a", "c", "a", None], dtype="str"))
    renumbered = loaders._by_value(text)
    assert renumbered.uniques.tolist() == ["a", "b", "c"]
    np.testing.assert_array_equal(renumbered.codes, [1, -1, 0, 2, 0, -1])
