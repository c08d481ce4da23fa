"""The per-user study store (engine/store, issue 25 "Work that survives"): SQLite in a private folder and
PostgreSQL through SQLAlchemy (a real throwaway server: the `postgres_url` fixture)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from engine.store import SqlAlchemyStore, SqliteStore, Store, StoreError, open_store

STUDY = '{"format": "cohortshield-study/2", "k": 7, "pseudonym_key": "abc"}\n'
CHOICES = {"k": 7, "adversary_scope": "population", "dataset_choice": "Upload files"}
FILES = {"events": ("events.csv", b"patient_id,code\np1,250.00\n"), "cohort": ("c.csv", b"p1\n")}


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "sqlite":
        return open_store(str(tmp_path / "private" / "store.sqlite3"))
    url = request.getfixturevalue("postgres_url")
    s = open_store(url)
    assert isinstance(s, SqlAlchemyStore)
    for user in ("alice", "bob"):  # one server per test session: start each test clean
        s.delete(user)
    return s


def test_nothing_stored(store: Store) -> None:
    assert store.load("alice") is None
    store.delete("alice")  # nothing to delete: no error
    assert store.delete_files("alice") == 0


def test_round_trip_per_user(store: Store) -> None:
    store.save("alice", STUDY, CHOICES, FILES)
    got = store.load("alice")
    assert got is not None
    assert got.study_json == STUDY and got.choices == CHOICES
    assert {r: (f.name, f.data) for r, f in got.files.items()} == FILES
    assert got.files["events"].sha256 == hashlib.sha256(FILES["events"][1]).hexdigest()
    assert got.saved_at.tzinfo is not None
    assert store.load("bob") is None  # another user sees nothing of alice's


def test_save_replaces_study_and_files(store: Store) -> None:
    store.save("alice", STUDY, CHOICES, FILES)
    first = store.load("alice")
    store.save("alice", None, {"k": 9}, {"events": ("other.csv", b"patient_id,code\np2,401.9\n")})
    got = store.load("alice")
    assert got is not None and first is not None
    assert got.study_json is None and got.choices == {"k": 9}
    assert set(got.files) == {"events"} and got.files["events"].name == "other.csv"
    assert got.saved_at >= first.saved_at


def test_delete_files_keeps_the_study(store: Store) -> None:
    store.save("alice", STUDY, CHOICES, FILES)
    store.save("bob", STUDY, CHOICES, FILES)
    assert store.delete_files("alice") == 2
    got = store.load("alice")
    assert got is not None and got.files == {} and got.study_json == STUDY
    assert set(store.load("bob").files) == {"events", "cohort"}  # type: ignore[union-attr]


def test_delete(store: Store) -> None:
    store.save("alice", STUDY, CHOICES, FILES)
    store.save("bob", STUDY, CHOICES, FILES)
    store.delete("alice")
    assert store.load("alice") is None
    assert store.load("bob") is not None


def test_changed_blob_is_refused(store: Store) -> None:
    """A blob whose bytes no longer match its recorded sha256 is not handed back as the user's file."""
    store.save("alice", STUDY, CHOICES, FILES)
    _corrupt(store, "alice", "events")
    got = store.load("alice")
    assert got is not None
    assert "events" not in got.files and got.damaged == ("events",)
    assert "cohort" in got.files


def _corrupt(store: Store, user: str, role: str) -> None:
    """Change a stored blob's bytes behind the store's back (its recorded sha256 stays)."""
    if isinstance(store, SqliteStore):
        with sqlite3.connect(store.path) as con:
            con.execute(
                "UPDATE cohortshield_file SET data = ? WHERE user_name = ? AND role = ?", (b"x", user, role)
            )
        return
    assert isinstance(store, SqlAlchemyStore)
    import sqlalchemy as sa

    with store.engine.begin() as con:
        con.execute(
            sa.text("UPDATE cohortshield_file SET data = :d WHERE user_name = :u AND role = :r"),
            {"d": b"x", "u": user, "r": role},
        )


def test_sqlite_private_folder_and_file(tmp_path: Path) -> None:
    path = tmp_path / "new" / "store.sqlite3"
    s = open_store(str(path))
    s.save("alice", STUDY, CHOICES, FILES)
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert isinstance(s, SqliteStore)


def test_sqlite_refuses_a_shared_folder(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o755)
    with pytest.raises(StoreError, match="readable by others"):
        open_store(str(folder / "store.sqlite3")).save("alice", STUDY, CHOICES, FILES)


def test_location_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COHORTSHIELD_STORE", str(tmp_path / "s" / "x.sqlite3"))
    s = open_store()
    assert isinstance(s, SqliteStore) and s.path == tmp_path / "s" / "x.sqlite3"
    monkeypatch.delenv("COHORTSHIELD_STORE")
    default = open_store()
    assert isinstance(default, SqliteStore) and default.path.parts[-2:] == (".cohortshield", "store.sqlite3")


def test_postgresql_url_spellings() -> None:
    s = open_store("postgresql://u:secret@127.0.0.1:1/db")
    assert isinstance(s, SqlAlchemyStore)
    assert "secret" not in repr(s) and "secret" not in str(s)


def test_the_revocation_list(store: Store) -> None:
    """Sign-out's revoked tokens (issue 40, ui.auth.token_id); entries older than REVOKED_DAYS go."""
    from datetime import UTC, datetime, timedelta
    from unittest import mock

    from engine.store import store as module

    token = hashlib.sha256(os.urandom(8)).hexdigest()
    assert not store.revoked(token)
    store.revoke(token)
    store.revoke(token)  # twice: no error
    assert store.revoked(token) and not store.revoked(token[::-1])
    later = datetime.now(UTC) + timedelta(days=module.REVOKED_DAYS + 1)
    with mock.patch.object(module, "datetime", wraps=datetime) as clock:
        clock.now.return_value = later
        store.revoke(token[::-1])
    assert not store.revoked(token) and store.revoked(token[::-1])
