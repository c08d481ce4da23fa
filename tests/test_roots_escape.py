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


def test_a_hard_link_to_a_file_outside_the_root_is_refused(root) -> None:
    """Left open by the last session: a hard link is no symlink, `resolve()` keeps it inside the root,
    yet it is the outside file (the server's secrets here)."""
    folder = root / "cdm"
    shutil.copytree(OMOP_DIR, folder)
    (folder / "person.csv").unlink()
    (folder / "person.csv").hardlink_to(root.parent / "outside" / "secrets.toml")
    errors = _errors(ImportSpec(source="omop", location=str(folder)))
    assert any("person.csv" in e and "hard link" in e for e in errors), errors
    assert not any("FORGES" in e for e in errors)


def test_a_file_with_one_link_inside_the_root_is_read(root) -> None:
    folder = root / "cdm"
    shutil.copytree(OMOP_DIR, folder)
    got = load_import(ImportSpec(source="omop", location=str(folder)))
    assert got.report.ok and got.events is not None


def test_an_omop_cohort_table_linked_out_of_the_root_is_refused(root) -> None:
    folder = root / "cdm"
    shutil.copytree(OMOP_DIR, folder)
    (folder / "cohort.csv").symlink_to(root.parent / "outside" / "omop" / "cohort.csv")
    got = source_groups(ImportSpec(source="omop", location=str(folder)))
    assert not got.groups
    assert any(
        "cohort.csv" in f.message and "outside the data folders" in f.message for f in got.report.errors
    )


@pytest.mark.parametrize("linked", ["shard", "data folder"])
def test_a_meds_shard_linked_out_of_the_root_is_refused(root, linked) -> None:
    outside = root.parent / "outside" / "meds" / "data"
    if linked == "shard":
        shard = root / "meds" / "data" / "train" / "0.parquet"
        shard.parent.mkdir(parents=True)
        shard.symlink_to(outside / "train" / "0.parquet")
    else:
        (root / "meds").mkdir()
        (root / "meds" / "data").symlink_to(outside)
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


# ------------------------------------------------------------------ finding 2: DuckDB reading other files
def _views(db: Path, views: dict[str, str]) -> Path:
    """A DuckDB file whose tables are the given views (name -> SELECT)."""
    import duckdb

    con = duckdb.connect(str(db))
    try:
        for name, select in views.items():
            con.execute(f"CREATE VIEW {name} AS {select}")
    finally:
        con.close()
    return db


def _secret_views(root: Path) -> dict[str, str]:
    out = root.parent / "outside"
    return {
        "read_text": f"SELECT * FROM read_text('{out / 'secrets.toml'}')",
        "read_blob": f"SELECT * FROM read_blob('{out / 'secrets.toml'}')",
        "environ": "SELECT * FROM read_text('/proc/self/environ')",
        "read_csv": f"SELECT * FROM read_csv('{out / 'secrets.toml'}', header = false, sep = '|')",
        "read_parquet": f"SELECT * FROM read_parquet('{out / 'meds' / 'data' / 'train' / '0.parquet'}')",
    }


@pytest.mark.parametrize("how", list(_secret_views(Path("/r/root"))))
def test_a_duckdb_view_over_another_file_is_not_shown_in_the_preview(root, how) -> None:
    db = _views(root / "cdm.duckdb", {"condition_occurrence": _secret_views(root)[how]})
    with pytest.raises(UserError, match=r"cdm\.duckdb: the database cannot be read.*disabled") as got:
        preview("omop", location=str(db))
    assert "FORGES" not in str(got.value) and "PATH=" not in str(got.value)


def test_a_duckdb_of_views_over_outside_csv_files_is_not_loaded(root) -> None:
    out = root.parent / "outside" / "omop"
    views = {  # a view has no rowid, so it makes one
        t: f"SELECT *, row_number() OVER () AS rowid FROM read_csv('{out / (t + '.csv')}', all_varchar = true)"
        for t in ("person", "condition_occurrence")
    }
    db = _views(root / "cdm.duckdb", views)
    errors = _errors(ImportSpec(source="omop", location=str(db)))
    assert errors and "cdm.duckdb: the database cannot be read" in errors[0] and "disabled" in errors[0]


def test_the_cli_opens_duckdb_without_external_access(root, tmp_path, capsys) -> None:
    """The CLI keeps free paths (it runs as its user), but a database file never reads other files:
    here the secret's line came back as a code in the CLI's error about codes of no vocabulary."""
    from engine.commands.cli import main

    secret = root.parent / "outside" / "secrets.toml"
    db = _views(
        tmp_path / "cdm.duckdb",
        {
            "person": "SELECT 1 AS person_id, 1980 AS year_of_birth, 1 AS rowid",
            "condition_occurrence": "SELECT 1 AS person_id, DATE '2014-03-01' AS condition_start_date, "
            f"content AS condition_source_value, 1 AS rowid FROM read_text('{secret}')",
        },
    )
    args = ["--events", str(db), "--source", "omop", "--scope", "cohort", "--knowledge", "single_visit"]
    status = main(["risk", *args, "--out", str(tmp_path / "risk.csv")])
    out, err = capsys.readouterr()
    assert status == 2
    assert "cdm.duckdb: the database cannot be read" in err and "disabled" in err and "Traceback" not in err
    assert "FORGES" not in out + err


def test_the_duckdb_connection_refuses_attach_load_and_settings(root, tmp_path) -> None:
    from engine.io.sql import Database

    db = _views(root / "cdm.duckdb", {"person": "SELECT 1 AS person_id"})
    other = _views(tmp_path / "other.duckdb", {"x": "SELECT 1 AS x"})
    con = Database(db)
    try:
        assert con.head("person").iloc[0, 0] == "1"  # the file itself is read
        for sql in (
            f"ATTACH '{other}'",
            "LOAD sqlite",
            "SET enable_external_access = true",
        ):
            with pytest.raises(Exception, match=r"disabled|locked"):
                con._duck.execute(sql)
    finally:
        con.close()


def test_the_import_view_shows_neither_a_linked_table_nor_a_view_over_another_file(root) -> None:
    """The page a user sees: an error naming the file, no preview, nothing of the secret."""
    from tests.apptest_support import page_app

    folder = root / "cdm"
    shutil.copytree(OMOP_DIR, folder)
    (folder / "condition_occurrence.csv").unlink()
    (folder / "condition_occurrence.csv").symlink_to(root.parent / "outside" / "secrets.toml")
    db = _views(root / "cdm.duckdb", {"condition_occurrence": _secret_views(root)["read_text"]})
    for location, named in (
        (folder, "outside the data folders"),
        (db, "the database cannot be read"),
    ):
        at = page_app(
            "pages/cohort.py",
            state={
                "dataset_choice": "Import a source",
                "import_kind": "omop",
                "import_location": str(location),
            },
        )
        at.run()
        assert not at.exception and not at.dataframe
        assert any(named in e.value.replace("\\", "") for e in at.error), [e.value for e in at.error]
        assert "FORGES" not in str(at)


def test_an_sqlite_file_typed_as_a_database_is_named_and_loads_no_extension(root) -> None:
    """A SQLite file given as a path was opened by DuckDB, which went to fetch its sqlite_scanner
    extension from extensions.duckdb.org: the server downloading and loading code for a user's file.
    Now no extension is loaded and the message says how a SQLite database is read."""
    import sqlite3

    db = root / "cdm.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE condition_occurrence (person_id INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(UserError, match=r"cdm\.sqlite: .*SQLite database.*sqlite:///"):
        preview("omop", location=str(db))


def test_a_connection_that_cannot_be_opened_is_named_by_its_name_not_its_url(monkeypatch, tmp_path) -> None:
    """The preview's error now names the source; for a connection that is its name (the app never
    shows an administrator's URL)."""
    from engine.io.imports import ImportSourceError

    monkeypatch.setenv("COHORTSHIELD_CONNECTIONS", f'{{"cdm": "sqlite:///{tmp_path}/hidden-host/cdm.db"}}')
    with pytest.raises(ImportSourceError, match=r"^connection:cdm: cannot open the database") as got:
        preview("omop", location="connection:cdm")
    assert "hidden-host" not in str(got.value)


def test_a_parquet_table_linked_out_of_the_root_is_refused_and_one_inside_previewed(root) -> None:
    from tests.omop_support import build_duckdb, export_parquet

    outside = export_parquet(
        build_duckdb(root.parent / "outside" / "cdm.duckdb"), root.parent / "outside" / "pq"
    )
    inside = shutil.copytree(outside, root / "inside")
    shown, head = preview("omop", location=str(inside))
    assert shown == "condition_occurrence.parquet" and len(head) > 0
    folder = _linked(root / "cdm", outside)
    with pytest.raises(UserError, match=f"condition_occurrence.parquet: outside the data folders.*{root}"):
        preview("omop", location=str(folder))
    errors = _errors(ImportSpec(source="omop", location=str(folder)))
    assert errors and "outside the data folders" in errors[0]
