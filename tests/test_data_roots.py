"""The app reads server files only inside the data roots an administrator lists, and databases only
through named connections (issue 25, engine/io/deployment.py); the CLI keeps free paths and URLs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.io.deployment import PathRefused, app_location, data_roots, server_path
from tests.apptest_support import page_app

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def test_default_roots_are_the_sample_and_data_folders(monkeypatch) -> None:
    monkeypatch.delenv("COHORTSHIELD_DATA_ROOTS", raising=False)
    monkeypatch.setenv("COHORTSHIELD_CONFIG", str(ROOT / "no-such-config.toml"))
    assert data_roots() == ((ROOT / "sample_data").resolve(), (ROOT / "data").resolve())


def test_paths_outside_the_roots_and_links_out_of_them_are_refused(monkeypatch, tmp_path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "ok.csv").write_text("patient_id,code\n")
    (root / "out").symlink_to("/etc")
    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(root))
    assert server_path(root / "ok.csv") == (root / "ok.csv").resolve()
    for bad in ("/etc/passwd", str(root / "out" / "passwd"), str(root / ".." / "x.csv")):
        with pytest.raises(PathRefused, match=f"outside the data folders.*{root}"):
            server_path(bad)


def test_the_app_opens_databases_only_as_named_connections(monkeypatch, tmp_path) -> None:
    from engine.io.deployment import ConnectionRefused

    monkeypatch.setenv("COHORTSHIELD_CONNECTIONS", '{"cdm": "postgresql://alice@db/cdm"}')
    monkeypatch.setenv("COHORTSHIELD_CONNECTION_CDM_PASSWORD", "pw")
    assert app_location("connection:cdm") == "postgresql://alice:pw@db/cdm"
    with pytest.raises(ConnectionRefused, match="connections an administrator names"):
        app_location(f"sqlite:///{tmp_path / 'NEWPATH'}")
    with pytest.raises(ConnectionRefused, match="no database connection named 'x'"):
        app_location("connection:x")
    assert not (tmp_path / "NEWPATH").exists()


def test_the_import_view_refuses_a_server_file_outside_the_roots(monkeypatch, tmp_path) -> None:
    secret = tmp_path / "other_account.csv"
    secret.write_text("patient_id,code\nSECRETPATIENT,250.00\n")
    os.chmod(secret, 0o600)
    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(DATA))
    for location in ("/etc/passwd", str(secret)):
        at = page_app(
            "pages/cohort.py",
            state={"dataset_choice": "Import a source", "import_kind": "long", "import_location": location},
        )
        at.run()
        assert not at.exception and not at.dataframe
        assert any("outside the data folders" in e.value for e in at.error)
        assert "root:" not in str(at) and "SECRETPATIENT" not in str(at)


def test_a_reopened_import_is_read_only_after_the_user_confirms(monkeypatch) -> None:
    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(DATA))
    from engine.io.imports import ImportSpec

    spec = ImportSpec(source="omop", location="/etc/passwd")
    at = page_app(
        "pages/cohort.py",
        state={"dataset_choice": "Import a source", "import_kind": "omop", "_import_confirm": spec},
    )
    at.run()
    assert "_import_applied" not in at.session_state  # nothing read by itself
    at.button(key="import_confirm").click().run()
    assert not at.exception
    assert at.session_state["_import_applied"][0] == spec
    errors = at.session_state["load_report"].report.errors
    assert errors and "outside the data folders" in errors[0].message
