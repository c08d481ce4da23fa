"""Issue 37: no verdict on an empty cohort.

`risk --source omop` on an OMOP CDM whose conditions are SNOMED only warned that every condition was
left out, then printed "cohort: 0 patients", "maximum risk 0.0000", "records at risk 0", wrote 0 rows
and exited 0: a pipeline reads that as "no risk". Every command that measures or releases refuses an
empty cohort or population with a named error (exit 2), on every source: long form (CSV, Parquet),
OMOP files, OMOP DuckDB, MEDS, and a cohort list that matches nobody.
"""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from engine.commands.cli import main
from tests.meds_support import build_meds, write_shard
from tests.omop_support import OMOP_DIR, build_duckdb

DATA = Path(__file__).resolve().parent / "data"
GENOTYPES = DATA / "genotypes_good.csv"
SNOMED_ASTHMA = "4145219"  # tests/data/omop/concept.csv: the fixture's one SNOMED source concept


def _snomed_only_omop(folder: Path) -> Path:
    """The OMOP fixture with every condition's source concept SNOMED (no ICD-9-CM/ICD-10-CM)."""
    folder.mkdir()
    for csv in OMOP_DIR.glob("*.csv"):
        shutil.copy(csv, folder / csv.name)
    cond = pd.read_csv(folder / "condition_occurrence.csv", dtype=str, keep_default_na=False)
    cond["condition_source_concept_id"] = SNOMED_ASTHMA
    cond["condition_source_value"] = "195967001"
    cond.to_csv(folder / "condition_occurrence.csv", index=False)
    return folder


def _loinc_only_i2b2(folder: Path) -> Path:
    """The i2b2 fixture with every fact a lab (LOINC): no diagnosis code."""
    shutil.copytree(DATA / "i2b2", folder)
    facts = pd.read_csv(folder / "observation_fact.csv", dtype=str, keep_default_na=False)
    facts["concept_cd"] = "LOINC:4548-4"
    facts.to_csv(folder / "observation_fact.csv", index=False)
    return folder


def _labs_only_meds(root: Path) -> Path:
    """The MEDS fixture with lab results and births only: no diagnosis code."""
    build_meds(root)
    for split, subject in (("train", 1), ("held_out", 3)):
        write_shard(
            [
                (subject, datetime(1950, 3, 14), "MEDS_BIRTH", None),
                (subject, datetime(2013, 4, 2, 11, 0), "LAB//50912//mg/dL", 1.1),
            ],
            root / "data" / split / "0.parquet",
        )
    return root


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, tuple[list[str], Path]]:
    """source name -> (the events options, the cohort list of that source's patient ids)."""
    tmp = tmp_path_factory.mktemp("empty")
    unknown = pd.DataFrame({"patient_id": ["P1", "P2"], "visit": [1, 1], "code": ["999.99", "999.99"]})
    unknown.to_csv(tmp / "unknown.csv", index=False)
    unknown.to_parquet(tmp / "unknown.parquet")
    (tmp / "p_ids.csv").write_text("patient_id\nP1\n", encoding="utf-8")
    (tmp / "person_ids.csv").write_text("patient_id\n1\n3\n", encoding="utf-8")
    (tmp / "nobody.csv").write_text("patient_id\nNOBODY1\nNOBODY2\n", encoding="utf-8")
    omop = _snomed_only_omop(tmp / "omop")
    duck = build_duckdb(tmp / "cdm.duckdb", source=omop)
    meds = _labs_only_meds(tmp / "meds")
    i2b2 = _loinc_only_i2b2(tmp / "i2b2")
    return {
        # every code unknown to ICD-9-CM, dropped by --drop-unknown
        "csv": (["--events", str(tmp / "unknown.csv"), "--drop-unknown"], tmp / "p_ids.csv"),
        "parquet": (["--events", str(tmp / "unknown.parquet"), "--drop-unknown"], tmp / "p_ids.csv"),
        "omop-files": (["--events", str(omop), "--source", "omop"], tmp / "person_ids.csv"),
        "omop-duckdb": (["--events", str(duck), "--source", "omop"], tmp / "person_ids.csv"),
        "meds": (["--events", str(meds), "--source", "meds"], tmp / "person_ids.csv"),
        "i2b2": (["--events", str(i2b2), "--source", "i2b2"], tmp / "person_ids.csv"),
        # good events; the cohort list names nobody of them
        "cohort-list": (["--events", str(DATA / "events_good.csv")], tmp / "nobody.csv"),
    }


ANONYMIZE = {
    "gccens": ["--scope", "cohort"],
    "generalize": ["--complete"],
    "ugaclip": ["--knowledge", "single_visit", "--codemap", "{tmp}/map.csv"],
    "aclip": ["--knowledge", "all_visits", "--codemap", "{tmp}/map.csv"],
    "lda": ["--age-domain", "48-79"],
}
ADVERSARY = ["--scope", "cohort", "--knowledge", "all_visits"]


def _argv(command: str, events: list[str], cohort: Path, tmp: Path, study: Path) -> list[str]:
    """The command line of `command` on `events`; the cohort list is given where the command needs
    one (and always for the source whose cohort list matches nobody)."""
    listed = ["--cohort", str(cohort)]
    optional = listed if cohort.name == "nobody.csv" else []
    out = ["--out", str(tmp / "out.csv")]
    if command == "risk":
        return ["risk", *events, *optional, *ADVERSARY, "--k", "5", *out]
    if command == "phewas":
        return ["phewas", *events, *optional, "--genotypes", str(GENOTYPES), *out]
    if command.startswith("anonymize "):
        method = command.split()[1]
        extra = [a.format(tmp=tmp) for a in ANONYMIZE[method]]
        return ["anonymize", method, *events, *listed, "--k", "2", *extra, *out]
    if command == "study new":
        return ["study", "new", str(tmp / "new.json"), *events, *listed, *ADVERSARY, "--k", "2"]
    if command == "study add":
        return [
            "study",
            "add",
            str(study),
            "--name",
            "again",
            "gccens",
            *events,
            *listed,
            "--scope",
            "cohort",
        ]
    if command == "study run":
        return ["study", "run", str(study), *events, *listed]
    assert command == "study report"
    return ["study", "report", str(study), *events, *listed, "--out", str(tmp / "report")]


COMMANDS = [
    "risk",
    "phewas",
    *(f"anonymize {m}" for m in ANONYMIZE),
    "study new",
    "study add",
    "study run",
    "study report",
]


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """A study of good data with one release, for the commands that read a study's data again."""
    tmp = tmp_path_factory.mktemp("study")
    path = tmp / "s.json"
    data = ["--events", str(DATA / "events_good.csv"), "--cohort", str(DATA / "cohort_good.csv")]
    assert main(["study", "new", str(path), *data, *ADVERSARY, "--k", "2"]) == 0
    assert main(["study", "add", str(path), "--name", "first", "gccens", *data, "--scope", "cohort"]) == 0
    return path


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    "source", ["csv", "parquet", "omop-files", "omop-duckdb", "meds", "i2b2", "cohort-list"]
)
def test_an_empty_cohort_is_refused_by_name(sources, study, source, command, tmp_path, capsys) -> None:
    """Exit 2 with one line naming the empty group; no output file written (no verdict at all)."""
    events, cohort = sources[source]
    capsys.readouterr()
    code = main(_argv(command, events, cohort, tmp_path, study))
    err = capsys.readouterr().err
    assert code == 2, err
    line = [x for x in err.splitlines() if x.startswith("error: ")]
    assert len(line) == 1 and "Traceback" not in err, err
    if source == "cohort-list":  # the list names the file and the patients of nobody
        assert "cohort" in line[0] and "NOBODY1" in line[0] and "nobody.csv" in line[0], line[0]
    else:
        assert "the population and the cohort hold no patient" in line[0], line[0]
        assert "no patient with an ICD-9-CM or ICD-10-CM code was read" in line[0], line[0]
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "new.json").exists()
    assert not (tmp_path / "report").exists()


def test_sharded_phewas_of_a_cohort_list_matching_nobody_is_refused(tmp_path, capsys) -> None:
    """`phewas --shards DIR --cohort LIST` whose list names nobody of the shards wrote "0 tests" and
    exited 0; now exit 2 naming the empty cohort."""
    shards = tmp_path / "shards"
    assert main(["shards", str(DATA / "events_good.csv"), str(shards), "2"]) == 0
    nobody = tmp_path / "nobody.csv"
    nobody.write_text("patient_id\nNOBODY1\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    capsys.readouterr()
    argv = ["phewas", "--shards", str(shards), "--genotypes", str(GENOTYPES), "--cohort", str(nobody)]
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "the cohort holds no patient: none of its patients is in the shards" in err, err
    assert not out.exists()


@pytest.mark.parametrize("command", ["uniqueness", "recall"])
def test_labs_without_a_row_are_refused_by_name(tmp_path, command, capsys) -> None:
    """The lab-order commands read no group; lab orders of nobody (a header, a Parquet file of no
    row) are refused by the loader, naming the file (a guard: this held before issue 37)."""
    header = tmp_path / "labs.csv"
    header.write_text("patient_id,day,lab\n", encoding="utf-8")
    empty = tmp_path / "labs.parquet"
    pd.DataFrame(
        {
            "patient_id": pd.Series([], dtype=str),
            "day": pd.Series([], dtype="int64"),
            "lab": pd.Series([], dtype=str),
        }
    ).to_parquet(empty)
    for labs in (header, empty):
        capsys.readouterr()
        assert main(["labs", command, "--labs", str(labs), "--out", str(tmp_path / "out.csv")]) == 2
        err = capsys.readouterr().err
        assert labs.name in err and "no data rows" in err, err


def test_the_apps_import_refuses_a_source_of_no_patient(tmp_path, monkeypatch) -> None:
    """The import view said "loaded" for the SNOMED-only OMOP folder and offered a cohort of 0
    patients; it now refuses it with the command line's message and keeps no dataset."""
    from tests.apptest_support import page_app

    omop = _snomed_only_omop(tmp_path / "omop")
    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(tmp_path))
    state = {"dataset_choice": "Import a source", "import_kind": "omop", "import_location": str(omop)}
    at = page_app("pages/cohort.py", state=state)
    at.run()
    at = at.button(key="import_load").click().run()
    assert not at.exception, at.exception
    assert "context" not in at.session_state
    errors = at.session_state["load_report"].report.errors
    assert [e.kind for e in errors] == ["empty_group"], errors
    assert "the population and the cohort hold no patient" in errors[0].message
    shown = " ".join(e.value for e in at.sidebar.error).replace("\\", "")
    assert "hold no patient" in shown, shown


def test_an_upload_of_no_patient_is_refused(tmp_path) -> None:
    """The app's "Upload files" (and a study package's files, `study run STUDY.zip`) read through
    `load_dataset`: events whose every row was dropped gave a dataset of 0 patients."""
    from engine.io.errors import DataError
    from engine.io.loaders import load_uploaded

    events = b"patient_id,visit,code\nP1,1,999.99\nP2,1,999.99\n"
    with pytest.raises(DataError) as refused:
        load_uploaded(("events.csv", events), unknown_codes="drop")
    errors = refused.value.report.errors
    assert [(e.kind, e.file) for e in errors] == [("empty_group", "events.csv")], errors
    assert "the population holds no patient" in errors[0].message
