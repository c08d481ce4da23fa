"""Issue 26, finding 6: "Import a source" was a dead end for a cohort. Every source kind now takes a
cohort (the whole source, an uploaded list of patient ids, or a group the source defines), the
sidebar's whole-population warning says where a cohort is chosen for an import, the cohort is part of
the study's load options and restored, and switching the source kind clears the previous kind's
location (no more "…/omop: no such file")."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from engine.dataset import CohortSpec
from engine.io.imports import ImportSourceError, ImportSpec, cohort_ids
from engine.io.validation import ValidationReport
from tests.apptest_support import page_app
from tests.xlsx_support import IO_DIR

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
OMOP_DIR, I2B2_DIR, MEDS_DIR = DATA / "omop", DATA / "i2b2", DATA / "meds"
BILLING = IO_DIR / "billing_export.csv"
# kind -> (location, every patient of the source)
SOURCES = {
    "long": (BILLING, ["100234", "100871", "100990"]),
    "excel": (IO_DIR / "billing_export.xlsx", ["100234", "100871", "100990"]),
    "omop": (OMOP_DIR, ["1", "2", "3", "4", "5"]),
    "i2b2": (I2B2_DIR, ["1", "2", "3", "4"]),
    "meds": (MEDS_DIR, ["1", "2", "3"]),
}


@pytest.fixture(autouse=True)
def _data_roots(monkeypatch, tmp_path) -> None:
    """The test files and this test's folder are the data roots."""
    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", os.pathsep.join((str(DATA), str(tmp_path))))


def _cohort_page(state: dict):
    at = page_app("pages/cohort.py", state={"dataset_choice": "Import a source", **state})
    at.run()
    assert not at.exception, at.exception
    return at


def _source(kind: str, location: Path | str | None = None):
    where = SOURCES[kind][0] if location is None else location
    return _cohort_page({"import_kind": kind, "import_location": str(where), "import_normalize": True})


def _run(element):
    """Run the app after an interaction (`element.run()` runs its AppTest and returns it)."""
    at = element.run()
    assert not at.exception, at.exception
    return at


def _load(at):
    return _run(at.button(key="import_load").click())


def _upload_list(at, data: bytes, name: str = "ids.csv"):
    at = _run(at.radio(key="import_cohort_kind").set_value("list"))
    at.file_uploader(key="import_cohort_upload").upload(name, data, "text/csv")
    return _run(at)


def _plain(text: str) -> str:
    """Escaped text as the user reads it (`ui.literal.md` adds backslashes and word joiners)."""
    return text.replace("\\", "").replace("\u2060", "")


def _ids(records) -> list[str]:
    return sorted(map(str, records.patient_ids))


# ------------------------------------------------------------------------------ an uploaded list
@pytest.mark.parametrize("kind", list(SOURCES))
def test_every_kind_takes_an_uploaded_cohort_list(kind: str) -> None:
    everyone = SOURCES[kind][1]
    at = _source(kind)
    chosen = everyone[:2]
    _load(_upload_list(at, ("\n".join(chosen) + "\n").encode()))
    ctx = at.session_state["context"]
    assert _ids(ctx.cohort) == sorted(chosen)
    assert _ids(ctx.population) == sorted(everyone)  # the population is the whole source
    assert ctx.cohort_group == "cohort"
    assert at.session_state["_import_applied"][0].cohort == CohortSpec("list", "ids.csv")


def test_ids_not_in_the_source_are_counted_and_named_literally() -> None:
    at = _source("omop")
    _load(_upload_list(at, b"patient_id\n1\n2\n99\n<b>x</b>\n"))
    assert "context" not in at.session_state  # refused, never silently dropped
    errors = at.session_state["load_report"].report.errors
    assert len(errors) == 1
    assert (errors[0].file, errors[0].column, errors[0].rows) == ("ids.csv", "patient_id", (4, 5))
    assert "2 patient(s) of the cohort are absent" in errors[0].message and "'99'" in errors[0].message
    shown = " ".join(e.value for e in at.sidebar.error)
    assert "ids\\.csv" in shown and "\\<b\\>x\\<\\/b\\>" in shown  # untrusted text shown literally
    assert "<b>x</b>" not in shown


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "the file is empty"),
        (b"patient_id\n", "header but no data rows"),
        (b"\n\n", "the file is empty"),
    ],
)
def test_an_empty_list_is_refused(data: bytes, message: str) -> None:
    at = _load(_upload_list(_source("meds"), data, "empty.csv"))
    assert "context" not in at.session_state
    errors = at.session_state["load_report"].report.errors
    assert errors and errors[0].file == "empty.csv" and message in errors[0].message


def test_a_person_id_column_is_read_as_the_patient() -> None:
    at = _load(_upload_list(_source("omop"), b"person_id,note\n1,first\n3,third\n", "persons.csv"))
    assert _ids(at.session_state["context"].cohort) == ["1", "3"]
    warnings = at.session_state["load_report"].report.warnings
    assert any(w.file == "persons.csv" and "read as 'patient_id'" in w.message for w in warnings)


# ------------------------------------------------------------------------------ a group of the source
def _omop_with_cohorts(tmp_path: Path) -> Path:
    cdm = tmp_path / "omop"
    shutil.copytree(OMOP_DIR, cdm)
    (cdm / "cohort.csv").write_text(
        "cohort_definition_id,subject_id,cohort_start_date,cohort_end_date\n"
        "7,1,2013-01-01,2020-01-01\n7,2,2013-01-01,2020-01-01\n8,3,2013-01-01,2020-01-01\n"
        "9,4,2013-01-01,2020-01-01\n9,77,2013-01-01,2020-01-01\n"
    )
    (cdm / "cohort_definition.csv").write_text(
        "cohort_definition_id,cohort_definition_name\n7,T2D <i>adults</i>\n"
    )
    return cdm


def _i2b2_with_sets(tmp_path: Path) -> Path:
    crc = tmp_path / "i2b2"
    shutil.copytree(I2B2_DIR, crc)
    (crc / "qt_patient_set_collection.csv").write_text(
        "patient_set_coll_id,result_instance_id,set_index,patient_num\n1,41,1,1\n2,41,2,3\n3,42,1,2\n"
    )
    return crc


@pytest.mark.parametrize(
    ("kind", "group", "column", "members"),
    [
        ("omop", "cohort 7: T2D <i>adults</i>", "", ["1", "2"]),
        ("i2b2", "patient set 41", "", ["1", "3"]),
        ("meds", "split train", "", ["1", "2"]),
        ("long", "MEDICARE", "PAYER", ["100234"]),
        ("excel", "COMMERCIAL", "PAYER", ["100871"]),
    ],
)
def test_every_kind_with_groups_takes_a_group_as_the_cohort(
    tmp_path: Path, kind: str, group: str, column: str, members: list[str]
) -> None:
    location = {"omop": _omop_with_cohorts, "i2b2": _i2b2_with_sets}.get(kind, lambda _: None)(tmp_path)
    at = _source(kind, location)
    _run(at.radio(key="import_cohort_kind").set_value("group"))
    if column:
        _run(at.selectbox(key="import_cohort_column").set_value(column))
    box = at.selectbox(key="import_cohort_group")
    assert f"{group} ({len(members):,} patients)" in box.options  # named with its size
    _load(_run(box.set_value(group)))
    ctx = at.session_state["context"]
    assert _ids(ctx.cohort) == members
    assert _ids(ctx.population) == sorted(SOURCES[kind][1])
    assert at.session_state["_import_applied"][0].cohort == CohortSpec("group", group, column)


def test_group_patients_without_events_are_counted(tmp_path: Path) -> None:
    at = _source("omop", _omop_with_cohorts(tmp_path))
    _run(at.radio(key="import_cohort_kind").set_value("group"))
    _load(_run(at.selectbox(key="import_cohort_group").set_value("cohort 9")))
    assert _ids(at.session_state["context"].cohort) == ["4"]
    warnings = at.session_state["load_report"].report.of_kind("group_outside_source")
    assert len(warnings) == 1 and "1 of the 2 patients of the group 'cohort 9'" in warnings[0].message
    assert "'77'" in warnings[0].message and "the cohort is the other 1" in warnings[0].message


def test_a_source_without_groups_says_so_and_offers_no_load() -> None:
    at = _source("omop")
    _run(at.radio(key="import_cohort_kind").set_value("group"))
    assert any("This source defines no groups" in i.value and "table cohort" in i.value for i in at.info)
    assert "import_load" not in [b.key for b in at.button]


# ------------------------------------------------------------------------------ the whole source
def test_the_whole_source_is_the_default_and_the_sidebar_says_where_to_choose_a_cohort() -> None:
    at = _load(_source("omop"))
    ctx = at.session_state["context"]
    assert ctx.cohort.n_patients == ctx.population.n_patients == 5
    warning = " ".join(w.value for w in at.sidebar.warning)
    assert "load its patient list" not in warning  # it pointed to a list the import did not take
    assert "The cohort is the whole source (5 patients)" in warning
    assert "under Cohort on the Cohort page" in warning
    assert at.radio(key="import_cohort_kind").value == "whole"
    assert any(
        "The whole source is the cohort, and the population is the same patients" in c.value
        for c in at.caption
    )


# ------------------------------------------------------------------------------ switching the kind
def test_switching_the_kind_clears_the_previous_kinds_location() -> None:
    at = _source("omop")
    assert at.dataframe  # the OMOP folder's preview
    _run(at.selectbox(key="import_kind").set_value("long"))
    assert not at.error, at.error[0].value  # it was "/…/omop: no such file"
    assert at.text_input(key="import_location").value == ""
    assert any("Upload a file or give a path" in i.value for i in at.info)


def test_switching_the_kind_clears_schema_mapping_and_group_choices(tmp_path: Path) -> None:
    at = _cohort_page({"import_kind": "omop", "import_location": str(OMOP_DIR), "import_schema": "cdm"})
    _run(at.selectbox(key="import_kind").set_value("i2b2"))
    assert at.text_input(key="import_location").value == ""
    assert at.text_input(key="import_schema").value == ""
    at = _source("long")
    _run(at.radio(key="import_cohort_kind").set_value("group"))
    _run(at.selectbox(key="import_cohort_column").set_value("PAYER"))
    assert at.selectbox(key="import_map_patient_id").value == "MRN"
    _run(at.selectbox(key="import_kind").set_value("excel"))
    assert not at.error
    for key in ("import_map_patient_id", "import_cohort_column", "import_cohort_group", "import_location"):
        assert key not in at.session_state or not at.session_state[key], key


# ------------------------------------------------------------------------------ the study's load options
def _reopen(options: dict[str, str]):
    """The Cohort page after a study with these load options was reopened (`ui.sidebar.apply_restore`)."""
    from engine.study.study import DataRef

    ref = DataRef(name="x", events_fingerprint="0", load_options=tuple(options.items()))
    return _cohort_page({"_study_restore_data": (ref, {})})


def test_a_group_cohort_is_recorded_and_restored(tmp_path: Path) -> None:
    at = _source("omop", _omop_with_cohorts(tmp_path))
    _run(at.radio(key="import_cohort_kind").set_value("group"))
    _load(_run(at.selectbox(key="import_cohort_group").set_value("cohort 8")))
    options = at.session_state["_import_applied"][0].to_options()
    assert options["cohort"] == "group: cohort 8"
    at = _reopen({k: str(v) for k, v in options.items()})
    assert any("its cohort: the group cohort 8." in _plain(i.value) for i in at.info)
    _run(at.button(key="import_confirm").click())
    assert _ids(at.session_state["context"].cohort) == ["3"]
    assert at.radio(key="import_cohort_kind").value == "group"


def test_a_list_cohort_is_recorded_and_asked_for_again() -> None:
    at = _load(_upload_list(_source("omop"), b"2\n4\n", "my ids.csv"))
    options = at.session_state["_import_applied"][0].to_options()
    assert options["cohort"] == "list: my ids.csv"
    at = _reopen(options)
    _run(at.button(key="import_confirm").click())
    assert "context" not in at.session_state  # the list is not kept: never the whole source instead
    errors = at.session_state["load_report"].report.errors
    assert errors and errors[0].file == "my ids.csv" and "upload it again" in errors[0].message
    assert any("the list my ids.csv: upload it again" in _plain(w.value) for w in at.warning)
    at.file_uploader(key="import_cohort_upload").upload("my ids.csv", b"2\n4\n", "text/csv")
    _load(_run(at))
    assert _ids(at.session_state["context"].cohort) == ["2", "4"]


# ------------------------------------------------------------------------------ the engine alone
def test_import_spec_round_trips_its_cohort() -> None:
    for cohort in (CohortSpec(), CohortSpec("list", "a: b.csv"), CohortSpec("group", "MEDICARE", "PAYER")):
        spec = ImportSpec(source="long", location="x.csv", mapping="patient_id=MRN,code=DX", cohort=cohort)
        assert ImportSpec.from_options(spec.to_options()) == spec
    assert "cohort" not in ImportSpec(source="omop", location="cdm").to_options()
    with pytest.raises(ImportSourceError, match="no cohort kind 'some'"):
        ImportSpec.from_options({"source": "omop", "cohort": "some: thing"})


def test_cohort_ids_of_a_missing_group_is_an_error() -> None:
    from engine.io.groups import SourceGroups

    report = ValidationReport()
    population = np.array(["1", "2"], dtype=object)
    ids, _ = cohort_ids(
        CohortSpec("group", "nope"),
        population,
        report,
        groups=lambda: SourceGroups({"a": np.array(["1"], dtype=object)}, ValidationReport(), "t"),
    )
    assert ids is None and "the source has no group 'nope' (its groups: 'a')" in report.errors[0].message
    report = ValidationReport()
    assert cohort_ids(CohortSpec(), population, report) == (None, {}) and report.ok


def test_omop_cohort_table_in_a_duckdb_file(tmp_path: Path) -> None:
    import duckdb

    from engine.io.groups import read_groups

    path = tmp_path / "cdm.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE cohort (cohort_definition_id BIGINT, subject_id BIGINT)")
    con.execute("INSERT INTO cohort VALUES (3, 10), (3, 11), (5, 10)")
    con.close()
    got = read_groups("omop", path)
    assert got.report.ok
    assert {g: list(v) for g, v in got.groups.items()} == {"cohort 3": ["10", "11"], "cohort 5": ["10"]}
