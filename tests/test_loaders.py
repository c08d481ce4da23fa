"""engine.io.loaders / engine.io.validation on good and bad files (issue #2): every error class gives a
message naming file, row(s), column and what was expected; nothing is dropped silently.

Row numbers follow the spreadsheet convention: header = row 1, first data row = row 2 (blank lines
count, as they are lines of the file).
"""

from __future__ import annotations

import hashlib
import string
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.io.errors import DataError, UserError
from engine.io.loaders import (
    Source,
    load_dataset,
    load_events,
    load_genotypes,
    load_ids,
    load_labs,
    load_uploaded,
)
from engine.io.validation import first_occurrence_duplicates
from engine.records import Records


def error_of(exc: pytest.ExceptionInfo[DataError], kind: str):
    found = [f for f in exc.value.report.errors if f.kind == kind]
    assert found, f"no {kind} error in {[str(f) for f in exc.value.report.errors]}"
    return found[0]


# ------------------------------------------------------------------------------ good files
def test_good_events_csv(data_dir: Path) -> None:
    loaded = load_events(data_dir / "events_good.csv")
    df = loaded.data
    assert loaded.report.findings == []
    assert list(df.columns) == ["patient_id", "code", "visit", "age"]
    assert len(df) == 8
    assert df["code"].tolist()[:3] == ["401.1", "250.00", "272.4"]  # text kept as written
    assert df["visit"].dtype == np.int64 and df["age"].dtype == np.int64
    records = Records.from_frame(df)
    assert records.n_patients == 4 and records.n_visits == 6
    assert loaded.sources == {
        "events_good.csv": hashlib.sha256((data_dir / "events_good.csv").read_bytes()).hexdigest()
    }


def test_parquet_matches_csv(data_dir: Path, tmp_path: Path) -> None:
    csv = load_events(data_dir / "events_good.csv").data
    path = tmp_path / "events.parquet"
    csv.to_parquet(path)
    pq = load_events(path).data
    pd.testing.assert_frame_equal(
        pq.astype({"patient_id": str, "code": str}), csv.astype({"patient_id": str, "code": str})
    )


def test_visits_sort_numerically(tmp_path: Path) -> None:
    p = tmp_path / "ev.csv"
    p.write_text("patient_id,visit,code\nP1,10,401.1\nP1,9,250.00\n")
    r = Records.from_frame(load_events(p).data)
    assert r.patient_visits(0) == [["250.00"], ["401.1"]]  # visit 9 before visit 10


def test_dataset_groups_and_hashes(data_dir: Path) -> None:
    files = {
        role: data_dir / name
        for role, name in (
            ("events", "events_good.csv"),
            ("biobank", "biobank_good.csv"),
            ("cohort", "cohort_good.csv"),
            ("genotypes", "genotypes_good.csv"),
            ("labs", "labs_good.csv"),
        )
    }
    loaded = load_dataset(**files, name="test")
    ds = loaded.data
    assert loaded.report.errors == []
    assert list(ds.groups) == ["biobank", "cohort"]
    assert ds.group_ids("cohort").tolist() == ["P1", "P2"]
    assert ds.group_records("population").n_patients == 4
    assert ds.group_records("biobank").n_patients == 3
    assert ds.genotypes["rs1333049"].isna().tolist() == [False, True, True]  # NA and empty are missing
    assert ds.genotypes["rs2200733"].tolist() == [2.0, 1.0, 0.0]
    assert ds.labs["day"].tolist() == [1, 1, 5, 2]
    for role, path in files.items():
        assert ds.sources[path.name] == hashlib.sha256(path.read_bytes()).hexdigest(), role


def test_uploaded_bytes_never_touch_disk(data_dir: Path) -> None:
    data = (data_dir / "events_good.csv").read_bytes()
    loaded = load_uploaded(("upload.csv", data), cohort=("c.csv", b"P1\nP4\n"))
    assert loaded.data.group_ids("cohort").tolist() == ["P1", "P4"]
    assert loaded.data.sources["upload.csv"] == hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------------ file-level errors
def test_missing_column_suggests_closest(data_dir: Path) -> None:
    with pytest.raises(DataError) as exc:
        load_events(data_dir / "events_misnamed.csv")
    f = error_of(exc, "missing_column")
    msg = str(exc.value)
    assert "events_misnamed.csv" in msg and "row 1" in msg and "column 'code'" in msg
    assert "did you mean 'icd9_code'" in msg
    assert f.expected.startswith("a header row with columns patient_id, code")


@pytest.mark.parametrize("name", ["events_empty.csv", "events_header_only.csv"])
def test_empty_files(data_dir: Path, name: str) -> None:
    with pytest.raises(DataError) as exc:
        load_events(data_dir / name)
    error_of(exc, "empty_file")
    assert name in str(exc.value)


def test_not_utf8_names_byte_offset_and_line(data_dir: Path) -> None:
    with pytest.raises(DataError) as exc:
        load_events(data_dir / "events_latin1.csv")
    f = error_of(exc, "not_utf8")
    assert f.rows == (3,)
    msg = str(exc.value)
    assert "events_latin1.csv" in msg and "0xe9" in msg and "byte offset 26" in msg and "line 3" in msg
    assert "UTF-8" in f.expected


def test_ragged_row(data_dir: Path) -> None:
    with pytest.raises(DataError) as exc:
        load_events(data_dir / "events_ragged.csv")
    assert error_of(exc, "parse_error").rows == (3,)


def test_corrupt_parquet() -> None:
    with pytest.raises(DataError) as exc:
        load_events(Source("events.parquet", b"PAR1 definitely not parquet"))
    error_of(exc, "bad_parquet")


def test_numeric_code_column_in_parquet(tmp_path: Path) -> None:
    p = tmp_path / "ev.parquet"
    pd.DataFrame({"patient_id": ["P1"], "code": [250.0]}).to_parquet(p)
    with pytest.raises(DataError) as exc:
        load_events(p)
    assert error_of(exc, "code_numeric").column == "code"


# ------------------------------------------------------------------------------ cell-level errors
def test_code_syntax_rows_and_hints(data_dir: Path) -> None:
    with pytest.raises(DataError) as exc:
        load_events(data_dir / "events_bad_codes.csv")
    f = error_of(exc, "code_syntax")
    # line 3 is blank; the bad codes sit on lines 4, 5, 6
    assert f.rows == (4, 5, 6) and f.n_rows == 3 and f.column == "code"
    msg = str(f)
    assert "'4011' looks undotted: '401.1'" in msg
    assert "'40.1' lost its leading zeros: '040.1'" in msg
    assert "'hypertension'" in msg
    assert "ICD-9-CM" in f.expected
    assert f.counts == {"40.1": 1, "4011": 1, "hypertension": 1}


def test_unknown_codes_reported_then_kept_or_dropped(data_dir: Path) -> None:
    path = data_dir / "events_unknown_codes.csv"
    kept = load_events(path)
    [f] = kept.report.of_kind("unknown_code")
    assert f.severity == "warning" and f.rows == (3, 4) and f.counts == {"999.99": 2}
    assert "kept" in f.message
    assert len(kept.data) == 4
    dropped = load_events(path, unknown_codes="drop")
    [g] = dropped.report.of_kind("unknown_code")
    assert "dropped" in g.message
    assert dropped.data["code"].tolist() == ["401.1", "250.00"]


def test_ages(data_dir: Path) -> None:
    with pytest.raises(DataError) as exc:
        load_events(data_dir / "events_bad_ages.csv")
    by_msg = {f.message.split(":")[0]: f for f in exc.value.report.errors}
    assert by_msg["not a whole number"].rows == (3,)
    assert by_msg["not a number"].rows == (4,)
    assert by_msg["out of range"].rows == (5,)
    assert by_msg["empty cell"].rows == (6,)
    assert all(
        f.column == "age" and f.expected == "a whole number between 0 and 130" for f in by_msg.values()
    )


def test_duplicates_reported_kept_unless_asked(data_dir: Path) -> None:
    path = data_dir / "events_duplicates.csv"
    kept = load_events(path)
    [f] = kept.report.of_kind("duplicate_rows")
    assert f.rows == (3, 5) and f.severity == "warning" and "kept" in f.message
    assert len(kept.data) == 4
    assert len(load_events(path, drop_duplicates=True).data) == 2


def test_repeats_without_visits_are_not_duplicates(tmp_path: Path) -> None:
    p = tmp_path / "ev.csv"
    p.write_text("patient_id,code\nP1,250.00\nP1,250.00\n")
    loaded = load_events(p)
    assert loaded.report.findings == [] and len(loaded.data) == 2  # Tamersoy's repeat counts


def test_spaces_stripped_with_warning(tmp_path: Path) -> None:
    p = tmp_path / "ev.csv"
    p.write_text("patient_id,code\nP1, 401.1\n")
    loaded = load_events(p)
    [f] = loaded.report.of_kind("spaces")
    assert f.rows == (2,) and f.column == "code"
    assert loaded.data["code"].tolist() == ["401.1"]


def test_cohort_outside_population(data_dir: Path) -> None:
    with pytest.raises(DataError) as exc:
        load_dataset(data_dir / "events_good.csv", cohort=data_dir / "cohort_outside.csv")
    f = error_of(exc, "absent_patient")
    assert f.file == "cohort_outside.csv" and f.column == "patient_id" and f.rows == (3, 5)
    assert "'P9'" in f.message and "'P8'" in f.message


def test_genotype_values(data_dir: Path) -> None:
    with pytest.raises(DataError) as exc:
        load_genotypes(data_dir / "genotypes_bad.csv")
    found = {f.column: f for f in exc.value.report.errors if f.kind == "genotype_value"}
    assert found["rs1333049"].rows == (3,) and "'3'" in found["rs1333049"].message
    assert found["rs2200733"].rows == (4,) and "'AA'" in found["rs2200733"].message
    assert "0, 1 or 2" in found["rs1333049"].expected


def test_genotypes_nullable_parquet(tmp_path: Path) -> None:
    p = tmp_path / "g.parquet"
    pd.DataFrame({"patient_id": ["P1", "P2"], "rs1": pd.array([2, None], dtype="Int8")}).to_parquet(p)
    g = load_genotypes(p).data
    assert g["rs1"].iloc[0] == 2.0 and np.isnan(g["rs1"].iloc[1])


def test_labs(data_dir: Path) -> None:
    with pytest.raises(DataError) as exc:
        load_labs(data_dir / "labs_bad_day.csv")
    f = error_of(exc, "day_invalid")
    assert f.rows == (3,) and f.column == "day" and "'yesterday'" in f.message


def test_lab_iso_dates(tmp_path: Path) -> None:
    p = tmp_path / "labs.csv"
    p.write_text("patient_id,day,lab\nP1,2010-03-12,Glucose\nP1,2010-03-13,Sodium\n")
    labs = load_labs(p).data
    assert labs["day"].dtype.kind == "M"


# ------------------------------------------------------------------------------ id lists
def test_id_lists(data_dir: Path) -> None:
    assert load_ids(data_dir / "cohort_good.csv").data.tolist() == ["P1", "P2"]
    unnamed = load_ids(data_dir / "cohort_unnamed.csv")
    assert unnamed.data.tolist() == ["P1", "P3"] and unnamed.report.findings == []
    twice = load_ids(Source("ids.csv", b"patient_id\nP1\nP1\n"))
    assert twice.data.tolist() == ["P1"]
    [f] = twice.report.of_kind("duplicate_patient")
    assert f.rows == (3,)
    renamed = load_ids(Source("ids.csv", b"Patient ID\nP1\n"))
    assert renamed.data.tolist() == ["P1"] and renamed.report.of_kind("renamed_column")


def test_data_error_is_a_user_error(data_dir: Path) -> None:
    with pytest.raises(UserError):
        load_events(data_dir / "events_empty.csv")


# ------------------------------------------------------------------------------ properties
CODES = ["401.1", "250.00", "272.4", "V45.81", "E849.0", "724.2", "428.0", "414.01"]


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.text(string.ascii_uppercase + string.digits, min_size=1, max_size=4),
            st.integers(0, 30),
            st.sampled_from(CODES),
            st.integers(0, 130),
        ),
        min_size=1,
        max_size=40,
    )
)
@example(rows=[("NA", 1, "401.1", 40), ("NULL", 2, "185", 50), ("NA", 1, "401.1", 40)])
def test_csv_round_trip(rows: list[tuple[str, int, str, int]]) -> None:
    """Any valid long-form frame survives CSV -> load_events unchanged (duplicates kept, reported);
    ids such as `NA` or `NULL` too, once accepted as ids (by default they are an error)."""
    df = pd.DataFrame(rows, columns=["patient_id", "visit", "code", "age"])
    loaded = load_events(Source("ev.csv", df.to_csv(index=False).encode()), na_ids="accept")
    assert [f for f in loaded.report.findings if f.kind != "na_id" and f.kind != "duplicate_rows"] == []
    out = loaded.data[["patient_id", "visit", "code", "age"]].astype(object)
    pd.testing.assert_frame_equal(out, df.astype(object), check_dtype=False)
    n_dup = int(df.duplicated().sum())
    dups = loaded.report.of_kind("duplicate_rows")
    assert (dups[0].n_rows if dups else 0) == n_dup


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-2, 2)), min_size=0, max_size=30))
def test_duplicates_match_pandas(pairs: list[tuple[int, int]]) -> None:
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    expected = pd.DataFrame({"a": a, "b": b}).duplicated().to_numpy()
    assert (first_occurrence_duplicates([a, b]) == expected).all()


def test_sample_loads_clean(sample_dataset) -> None:
    ds = sample_dataset
    pop = set(ds.events.patient_ids.tolist())
    biobank, cohort = set(ds.group_ids("biobank").tolist()), set(ds.group_ids("cohort").tolist())
    assert cohort <= biobank <= pop
    assert ds.genotypes is not None and ds.labs is not None
    assert set(ds.sources) == {
        "events.parquet",
        "biobank.csv",
        "cohort.csv",
        "genotypes.parquet",
        "labs.parquet",
    }


# ------------------------------------------------------------------------------ deferred lab orders
def _findings(report) -> list[tuple]:
    return [(f.severity, f.kind, f.file, f.rows, f.n_rows, f.column, f.message) for f in report.findings]


LAB_FILES = {
    "good": b"patient_id,day,lab\nP1,1,Glucose\nP1,1,Sodium\nP2,5,Glucose\nP1,1,Glucose\nP9,2,HbA1c\n",
    "bad": b"patient_id,day,lab\nP1,1,Glucose\nP1,yesterday,Sodium\n,2,\n",
}


@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize("which", sorted(LAB_FILES))
def test_deferred_labs_give_what_a_load_gives(data_dir: Path, which: str, drop: bool) -> None:
    """`defer_labs`: nothing is parsed at load; on first read, the same frame (or the same DataError:
    same findings, file, rows and columns) as the load that reads them at once, the findings then in
    the load's report after the other files' (issue 24)."""
    files = {
        "events": data_dir / "events_good.csv",
        "cohort": data_dir / "cohort_good.csv",
        "labs": Source("labs.csv", LAB_FILES[which]),
    }
    deferred = load_dataset(**files, drop_duplicates=drop, defer_labs=True)
    ds = deferred.data
    assert not ds.labs_read and deferred.report.findings == []
    assert ds.sources["labs.csv"] == hashlib.sha256(LAB_FILES[which]).hexdigest()
    cohort = ds.with_cohort(np.array(["P1"], dtype=object))
    assert not cohort.labs_read  # a dataset made from it defers them still, and shares them
    if which == "bad":
        with pytest.raises(DataError) as eager:
            load_dataset(**files, drop_duplicates=drop)
        for _ in range(2):  # the error again at every read, never a second parse
            with pytest.raises(DataError) as late:
                cohort.labs  # noqa: B018
            assert _findings(late.value.report) == _findings(eager.value.report)
        assert error_of(late, "day_invalid").rows == (3,)
        assert _findings(deferred.report) == _findings(eager.value.report)
        return
    eager_load = load_dataset(**files, drop_duplicates=drop)
    assert eager_load.data.labs is not None
    labs = ds.labs
    assert ds.labs_read and cohort.labs is labs and ds.labs is labs
    pd.testing.assert_frame_equal(labs, eager_load.data.labs)
    assert len(labs) == (4 if drop else 5)
    assert _findings(deferred.report) == _findings(eager_load.report)
    assert {f.kind for f in deferred.report.findings} == {"duplicate_rows", "outside_population"}


@pytest.mark.parametrize("defer", [False, True])
@pytest.mark.parametrize("drop", [False, True])
def test_lab_patients_without_events_are_named_by_their_file_rows(
    data_dir: Path, drop: bool, defer: bool
) -> None:
    """Bug report: with duplicates dropped, the warning on lab patients without events named the row of
    the deduplicated frame (P9, the file's row 6, was reported as row 5, one duplicate above it
    having been dropped). It names the file's row, whether duplicates are kept or dropped."""
    files = {
        "events": data_dir / "events_good.csv",
        "cohort": data_dir / "cohort_good.csv",
        "labs": Source("labs.csv", LAB_FILES["good"]),
    }
    loaded = load_dataset(**files, drop_duplicates=drop, defer_labs=defer)
    assert loaded.data.labs is not None
    (outside,) = [f for f in loaded.report.findings if f.kind == "outside_population"]
    assert (outside.file, outside.column, outside.rows, outside.n_rows) == ("labs.csv", "patient_id", (6,), 1)
    assert "P9" in outside.message


def test_genotype_patients_without_events_are_warned_by_their_rows(data_dir: Path) -> None:
    """A genotyped patient without events: a warning naming the file, its patient column and row."""
    good = (data_dir / "genotypes_good.csv").read_bytes()
    extra = good.rstrip(b"\n") + b"\n" + b"P99" + b",0" * (good.split(b"\n")[0].count(b","))
    loaded = load_dataset(data_dir / "events_good.csv", genotypes=Source("geno.csv", extra + b"\n"))
    (outside,) = [f for f in loaded.report.findings if f.kind == "outside_population"]
    n_rows = len(extra.rstrip(b"\n").split(b"\n"))
    assert (outside.file, outside.column, outside.rows) == ("geno.csv", "patient_id", (n_rows,))
    assert "genotypes of patient(s) without events" in outside.message and "P99" in outside.message


def test_the_sample_defers_its_lab_orders(sample_dataset) -> None:
    """The shipped sample's lab orders: read when first asked for, equal to reading them at once; the
    same files, fingerprints and report."""
    import subprocess
    import sys

    from engine.io.loaders import sample_paths

    fresh = subprocess.run(  # a fresh process: the memoized sample, its lab orders not yet read
        [sys.executable, "-c", "from engine.io.loaders import load_sample; print(load_sample().labs_read)"],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    assert fresh.stdout.split() == ["False"]
    paths = sample_paths()
    eager = load_dataset(**paths, name="sample")
    deferred = load_dataset(**paths, name="sample", defer_labs=True)
    assert eager.data.labs_read and not deferred.data.labs_read
    assert eager.data.labs is not None and deferred.data.labs is not None
    for ds in (deferred.data, sample_dataset):
        assert ds.labs is not None
        pd.testing.assert_frame_equal(ds.labs, eager.data.labs)
        assert ds.sources == eager.data.sources
        assert ds.events.fingerprint == eager.data.events.fingerprint
    assert _findings(deferred.report) == _findings(eager.report)


CELL = st.text(alphabet=st.sampled_from(list('PV E0123456789.,-"; \t\nabcé')), max_size=8)


@settings(max_examples=60, deadline=None)
@given(
    header=st.lists(
        st.sampled_from(["patient_id", "code", "visit", "age", "day", "lab", "rs1", "x", ""]), max_size=5
    ),
    cells=st.lists(CELL, max_size=25),
    raw=st.binary(max_size=40),
    kind=st.sampled_from(["events", "labs", "genotypes", "ids"]),
)
def test_any_input_gives_data_or_a_data_error(
    header: list[str], cells: list[str], raw: bytes, kind: str
) -> None:
    """No input makes a loader fail with anything but DataError (the app never shows a traceback)."""
    loader = {"events": load_events, "labs": load_labs, "genotypes": load_genotypes, "ids": load_ids}[kind]
    text = ",".join(header) + "\n" + ",".join(cells)
    for data in (text.encode(), raw, text.encode() + raw):
        try:
            loaded = loader(Source("fuzz.csv", data))
        except DataError as exc:
            assert exc.report.errors and all(f.file == "fuzz.csv" for f in exc.report.errors)
        else:
            assert loaded.report.errors == []


def test_a_cohort_outside_the_biobank_is_named_when_the_biobank_lists_a_patient_twice(tmp_path):
    """The cohort-within-biobank check (Heatherly's Figure 14) looks the cohort's ids up in the biobank's
    (a hash lookup since issue 36: pandas' isin took 2.8 s of the paper-scale load); a biobank that lists a
    patient twice (a warning, counted once) is still a set to look up in."""
    from engine.io.loaders import load_dataset

    events = tmp_path / "events.csv"
    events.write_text("patient_id,code\nP1,250.00\nP2,401.9\nP3,427.31\nP4,733.00\n")
    (tmp_path / "biobank.csv").write_text("patient_id\nP1\nP2\nP2\nP3\n")
    (tmp_path / "cohort.csv").write_text("patient_id\nP2\nP4\nP1\n")
    loaded = load_dataset(events, biobank=tmp_path / "biobank.csv", cohort=tmp_path / "cohort.csv")
    outside = [w.message for w in loaded.report.warnings if "not in the biobank" in w.message]
    assert outside == ["1 cohort patient(s) are not in the biobank: P4"]
