"""Issue #40, finding 1: the data roots could be escaped by what a source opens, not by the path typed.

1. Only the typed path was checked: an OMOP (or i2b2) folder inside a root whose tables are links to
   files outside it was read, a MEDS shard link was previewed, a MEDS split link grouped. Now every
   file a source opens is resolved and checked against the roots when it is opened
   (`engine.io.roots.opened`), the refusal naming the file and the roots.
2. A DuckDB file inside a root whose tables are views over `read_text(...)`, `read_csv(...)`, ...
   showed any file the server account may read (`.streamlit/secrets.toml`'s `cookie_secret`,
   `/proc/self/environ`). DuckDB is now opened with external access off, in the app and the CLI.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.io.errors import DataError, UserError
from engine.io.imports import ImportSpec, load_import, preview, source_groups

DATA = Path(__file__).resolve().parent / "data"
OMOP_DIR, I2B2_DIR, MEDS_DIR = DATA / "omop", DATA / "i2b2", DATA / "meds"
SECRET = "cookie_secret = 'FORGES-A-SIGN-IN-FOR-ANY-USER'"


@pytest.fixture
def root(monkeypatch, tmp_path) -> Path:
    """The only data root; `outside/` beside it holds the server's secrets and a copy of each source."""
    inside = tmp_path / "root"
    inside.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secrets.toml").write_text(f"[server]\n{SECRET}\n")
    for src in (OMOP_DIR, I2B2_DIR, MEDS_DIR):
        shutil.copytree(src, outside / src.name)
    (outside / "omop" / "cohort.csv").write_text("cohort_definition_id,subject_id\n7,1\n7,2\n")
    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(inside))
    return inside


def _linked(folder: Path, target: Path) -> Path:
    """`folder` holding a link to each file of `target` (the same names)."""
    folder.mkdir(parents=True)
    for f in target.iterdir():
        if f.is_file():
            (folder / f.name).symlink_to(f)
    return folder


def _errors(spec: ImportSpec) -> list[str]:
    """The error messages of loading `spec` in the app (none when it was read)."""
    try:
        got = load_import(spec)
    except DataError as exc:
        return [f.message for f in exc.report.errors]
    return [f.message for f in got.report.errors]


# ------------------------------------------------------------------ finding 1: links out of a root
@pytest.mark.parametrize("kind", ["omop", "i2b2"])
def test_a_folder_of_links_out_of_the_root_is_refused(root, kind) -> None:
    folder = _linked(root / "cdm", root.parent / "outside" / kind)
    errors = _errors(ImportSpec(source=kind, location=str(folder)))
    assert errors, "a table outside the data root was read"
    assert "outside the data folders" in errors[0] and str(root) in errors[0]
    table = "condition_occurrence.csv" if kind == "omop" else "observation_fact.csv"
    with pytest.raises(UserError, match=f"{table}.*outside the data folders.*{root}"):
        preview(kind, location=str(folder))


def test_one_linked_table_is_enough_to_refuse_the_folder(root) -> None:
    folder = root / "cdm"
    shutil.copytree(OMOP_DIR, folder)
    (folder / "person.csv").unlink()
    (folder / "person.csv").symlink_to(root.parent / "outside" / "secrets.toml")
    errors = _errors(ImportSpec(source="omop", location=str(folder)))
    assert any("person.csv" in e and "outside the data folders" in e for e in errors), errors
    assert not any("FORGES" in e for e in errors)  # the header of the secret file is not listed


def test_links_that_stay_inside_the_root_are_read(root) -> None:
    shutil.copytree(OMOP_DIR, root / "real")
    folder = _linked(root / "cdm", root / "real")
    got = load_import(ImportSpec(source="omop", location=str(folder)))
    assert got.report.ok and got.events is not None
    assert sorted(set(got.events.frame["patient_id"])) == ["1", "2", "3", "4", "5"]


def test_an_omop_cohort_table_linked_out_of_the_root_is_refused(root) -> None:
    folder = root / "cdm"
    shutil.copytree(OMOP_DIR, folder)
    (folder / "cohort.csv").symlink_to(root.parent / "outside" / "omop" / "cohort.csv")
    got = source_groups(ImportSpec(source="omop", location=str(folder)))
    assert not got.groups
    assert any(
        "cohort.csv" in f.message and "outside the data folders" in f.message for f in got.report.errors
    )


def test_a_meds_shard_linked_out_of_the_root_is_refused(root) -> None:
    shard = root / "meds" / "data" / "train" / "0.parquet"
    shard.parent.mkdir(parents=True)
    shard.symlink_to(root.parent / "outside" / "meds" / "data" / "train" / "0.parquet")
    with pytest.raises(UserError, match=f"0.parquet.*outside the data folders.*{root}"):
        preview("meds", location=str(root / "meds"))
    errors = _errors(ImportSpec(source="meds", location=str(root / "meds")))
    assert errors and "0.parquet" in errors[0] and "outside the data folders" in errors[0]


def test_meds_splits_linked_out_of_the_root_are_refused(root) -> None:
    shutil.copytree(MEDS_DIR / "data", root / "meds" / "data")
    splits = root / "meds" / "metadata" / "subject_splits.parquet"
    splits.parent.mkdir()
    splits.symlink_to(root.parent / "outside" / "meds" / "metadata" / "subject_splits.parquet")
    got = source_groups(ImportSpec(source="meds", location=str(root / "meds")))
    assert not got.groups
    assert any("subject_splits.parquet" in f.message and "outside" in f.message for f in got.report.errors)


def test_every_reader_checks_its_files_not_only_the_app_s_typed_path(root) -> None:
    """The rule is in the readers (`engine.io.roots.opened`), so a caller that reads within
    `confined()` without checking the typed path first is refused too: a DuckDB link here."""
    from engine.io import read_source
    from engine.io.deployment import PathRefused
    from engine.io.roots import confined
    from tests.omop_support import build_duckdb

    (root / "cdm.duckdb").symlink_to(build_duckdb(root.parent / "outside" / "cdm.duckdb"))
    with confined(), pytest.raises(PathRefused, match=f"cdm.duckdb: outside the data folders.*{root}"):
        read_source(root / "cdm.duckdb", source="omop")
    assert read_source(root / "cdm.duckdb", source="omop").report.ok  # the CLI keeps free paths
