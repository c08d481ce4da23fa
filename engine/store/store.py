"""The per-user study store (issue 25, "Work that survives"): the app saves each user's study, sidebar
choices and uploaded files on the server after every change, and offers them back on a reload or in a
new session of the same user (`ui/resume.py`).

One record per user: the study's JSON (`Study.to_json`, which holds the study's pseudonym key), the
choices (a JSON object: the sidebar's dataset, sample variant, groups, adversary, k, method settings)
and the uploaded input files by role, each a blob with its name and sha256. A blob whose bytes no
longer match its sha256 is never handed back (`Stored.damaged` names its role). The store holds
pseudonym keys and patient files: it is as sensitive as the data (docs/deployment.md, "Store").

Where (`open_store`): `COHORTSHIELD_STORE`, else `.cohortshield/store.sqlite3` in the checkout.

- a path: SQLite (`SqliteStore`). The folder is created mode 700 and must not be open to group or
  others (else `StoreError`); the file is created mode 600 (SQLite gives its journal the same mode).
- a `postgresql://` URL (or `postgresql+psycopg://`): PostgreSQL through SQLAlchemy (`SqlAlchemyStore`),
  its tables created when missing; the password never appears in `repr` or errors.

The store also keeps the sign-in's revocation list (issue 40): the ids of the ID tokens whose user
signed out (`revoke`, `revoked`; `ui.auth.token_id`), so that a copy of a signed-out cookie signs no one
in; an entry is dropped after `REVOKED_DAYS`, when Streamlit no longer accepts the cookie anyway.

Verdicts are not this module's business: the study JSON is stored as given, and a reopened study is
rebuilt and re-verified (`ui.study.reopen`), never believed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.io.errors import UserError

ENV = "COHORTSHIELD_STORE"
ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT = ROOT / ".cohortshield" / "store.sqlite3"
STUDY_TABLE, FILE_TABLE = "cohortshield_study", "cohortshield_file"
REVOKED_TABLE = "cohortshield_revoked"
# How long a revoked token is kept: Streamlit 1.67 accepts its sign-in cookie for 30 days (+1 of grace).
REVOKED_DAYS = 32


class StoreError(UserError, RuntimeError):
    """The store cannot be opened or written; the message says why (never a password)."""


@dataclass(frozen=True, eq=False)
class StoredFile:
    """An uploaded input file kept for its user: name, bytes and their sha256 (checked on load)."""

    name: str
    data: bytes
    sha256: str


@dataclass(frozen=True, eq=False)
class Stored:
    """A user's record: when it was saved, the study JSON (None before any study), the choices and
    the files by role. `damaged`: roles whose blob did not match its sha256 (left out of `files`)."""

    user: str
    saved_at: datetime
    study_json: str | None
    choices: dict[str, Any]
    files: dict[str, StoredFile] = field(default_factory=dict)
    damaged: tuple[str, ...] = ()
    file_names: dict[str, str] = field(default_factory=dict)  # role -> name, also without the bytes


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _choices_text(choices: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(choices), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"the choices cannot be stored as JSON: {exc}") from None


def _cutoff() -> str:
    return (datetime.now(UTC) - timedelta(days=REVOKED_DAYS)).isoformat(timespec="microseconds")


def _checked(user: str) -> str:
    if not isinstance(user, str) or not user.strip():
        raise StoreError("the store needs a user")
    return user


class Store(ABC):
    """save / load / summary / delete_files / delete (module docstring)."""

    @abstractmethod
    def save(
        self,
        user: str,
        study_json: str | None,
        choices: Mapping[str, Any],
        files: Mapping[str, tuple[str, bytes]],
    ) -> None:
        """Replace the user's record: study, choices and files (a blob is rewritten only when its
        sha256 changed; roles not in `files` are removed)."""

    @abstractmethod
    def load(self, user: str) -> Stored | None:
        """The user's record with its files' bytes (each checked against its sha256), or None."""

    @abstractmethod
    def summary(self, user: str) -> Stored | None:
        """The user's record without the files' bytes (`file_names` only), or None."""

    @abstractmethod
    def delete_files(self, user: str) -> int:
        """Remove the user's stored files (the study and choices stay); how many were removed."""

    @abstractmethod
    def delete(self, user: str) -> None:
        """Remove the user's whole record."""

    @abstractmethod
    def revoke(self, token: str) -> None:
        """Put a signed-out sign-in token (an opaque id: `ui.auth.token_id`) on the revocation list,
        and drop the entries older than `REVOKED_DAYS` (issue 40: a cookie replayed after sign-out)."""

    @abstractmethod
    def revoked(self, token: str) -> bool:
        """Whether `token` is on the revocation list."""

    @staticmethod
    def _stored(
        user: str, row: tuple[Any, Any, Any], files: list[tuple[Any, ...]], with_data: bool
    ) -> Stored:
        saved_at, study_json, choices = row
        when = datetime.fromisoformat(str(saved_at))
        out: dict[str, StoredFile] = {}
        damaged = []
        names = {}
        for f in files:
            role, name = str(f[0]), str(f[1])
            names[role] = name
            if not with_data:
                continue
            sha, data = str(f[2]), bytes(f[3])
            if sha256_of(data) != sha:
                damaged.append(role)
                names.pop(role)
                continue
            out[role] = StoredFile(name, data, sha)
        return Stored(
            user,
            when if when.tzinfo else when.replace(tzinfo=UTC),
            None if study_json is None else str(study_json),
            dict(json.loads(str(choices))),
            out,
            tuple(damaged),
            names,
        )


# ------------------------------------------------------------------------------------- SQLite
_SQLITE_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {STUDY_TABLE} (
    user_name TEXT PRIMARY KEY, saved_at TEXT NOT NULL, study_json TEXT, choices TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS {FILE_TABLE} (
    user_name TEXT NOT NULL, role TEXT NOT NULL, name TEXT NOT NULL, sha256 TEXT NOT NULL,
    data BLOB NOT NULL, PRIMARY KEY (user_name, role));
CREATE TABLE IF NOT EXISTS {REVOKED_TABLE} (token TEXT PRIMARY KEY, revoked_at TEXT NOT NULL);
"""


class SqliteStore(Store):
    """The store in one SQLite file in a private folder (module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._ready = False

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    def _private(self) -> None:
        folder = self.path.parent
        if not folder.exists():
            folder.mkdir(parents=True, mode=0o700)
            if folder == DEFAULT.parent:  # the default lives in the checkout: never committed
                (folder / ".gitignore").write_text("*\n")
        mode = stat.S_IMODE(folder.stat().st_mode)
        if mode & 0o077:
            raise StoreError(
                f"the store's folder {folder} is readable by others (mode {oct(mode)}): it holds patient "
                "files and pseudonym keys; make it mode 0o700 (chmod 700) or set COHORTSHIELD_STORE"
            )
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) != 0o600:
                os.fchmod(fd, 0o600)
        finally:
            os.close(fd)

    def _connect(self) -> sqlite3.Connection:
        try:
            if not self._ready:
                self._private()
            con = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            if not self._ready:
                con.executescript(_SQLITE_SCHEMA)
                self._ready = True
            return con
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the study store {self.path}: {exc}") from None

    def save(
        self,
        user: str,
        study_json: str | None,
        choices: Mapping[str, Any],
        files: Mapping[str, tuple[str, bytes]],
    ) -> None:
        _checked(user)
        text = _choices_text(choices)
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute(
                f"INSERT INTO {STUDY_TABLE} (user_name, saved_at, study_json, choices) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (user_name) DO UPDATE SET saved_at = excluded.saved_at, "
                "study_json = excluded.study_json, choices = excluded.choices",
                (user, _now(), study_json, text),
            )
            held = dict(
                con.execute(f"SELECT role, sha256 FROM {FILE_TABLE} WHERE user_name = ?", (user,)).fetchall()
            )
            for role in set(held) - set(files):
                con.execute(f"DELETE FROM {FILE_TABLE} WHERE user_name = ? AND role = ?", (user, role))
            for role, (name, data) in files.items():
                sha = sha256_of(data)
                if held.get(role) == sha:
                    con.execute(
                        f"UPDATE {FILE_TABLE} SET name = ? WHERE user_name = ? AND role = ?",
                        (name, user, role),
                    )
                    continue
                con.execute(
                    f"INSERT INTO {FILE_TABLE} (user_name, role, name, sha256, data) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (user_name, role) DO UPDATE SET name = excluded.name, "
                    "sha256 = excluded.sha256, data = excluded.data",
                    (user, role, name, sha, sqlite3.Binary(data)),
                )
            con.execute("COMMIT")
        except sqlite3.Error as exc:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise StoreError(f"cannot write the study store {self.path}: {exc}") from None
        finally:
            con.close()

    def _read(self, user: str, with_data: bool) -> Stored | None:
        con = self._connect()
        try:
            row = con.execute(
                f"SELECT saved_at, study_json, choices FROM {STUDY_TABLE} WHERE user_name = ?", (user,)
            ).fetchone()
            if row is None:
                return None
            columns = "role, name, sha256, data" if with_data else "role, name"
            files = con.execute(
                f"SELECT {columns} FROM {FILE_TABLE} WHERE user_name = ? ORDER BY role", (user,)
            ).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the study store {self.path}: {exc}") from None
        finally:
            con.close()
        return self._stored(user, row, files, with_data)

    def load(self, user: str) -> Stored | None:
        return self._read(_checked(user), True)

    def summary(self, user: str) -> Stored | None:
        return self._read(_checked(user), False)

    def delete_files(self, user: str) -> int:
        con = self._connect()
        try:
            return con.execute(f"DELETE FROM {FILE_TABLE} WHERE user_name = ?", (_checked(user),)).rowcount
        finally:
            con.close()

    def delete(self, user: str) -> None:
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute(f"DELETE FROM {FILE_TABLE} WHERE user_name = ?", (_checked(user),))
            con.execute(f"DELETE FROM {STUDY_TABLE} WHERE user_name = ?", (user,))
            con.execute("COMMIT")
        finally:
            con.close()

    def revoke(self, token: str) -> None:
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute(f"DELETE FROM {REVOKED_TABLE} WHERE revoked_at < ?", (_cutoff(),))
            con.execute(
                f"INSERT INTO {REVOKED_TABLE} (token, revoked_at) VALUES (?, ?) ON CONFLICT (token) DO NOTHING",
                (_checked(token), _now()),
            )
            con.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write the study store {self.path}: {exc}") from None
        finally:
            con.close()

    def revoked(self, token: str) -> bool:
        con = self._connect()
        try:
            row = con.execute(f"SELECT 1 FROM {REVOKED_TABLE} WHERE token = ?", (_checked(token),)).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the study store {self.path}: {exc}") from None
        finally:
            con.close()
        return row is not None


# ------------------------------------------------------------------------- PostgreSQL (SQLAlchemy)
class SqlAlchemyStore(Store):
    """The store in a PostgreSQL database through SQLAlchemy Core (module docstring)."""

    def __init__(self, url: str) -> None:
        from engine.io.extras import require

        require("db", "a PostgreSQL store")
        import sqlalchemy as sa

        from engine.io.redact import redact

        self._shown = redact(url)
        self.url = url
        self.engine = sa.create_engine(url, pool_pre_ping=True)
        meta = sa.MetaData()
        self.studies = sa.Table(
            STUDY_TABLE,
            meta,
            sa.Column("user_name", sa.Text, primary_key=True),
            sa.Column("saved_at", sa.Text, nullable=False),
            sa.Column("study_json", sa.Text, nullable=True),
            sa.Column("choices", sa.Text, nullable=False),
        )
        self.files = sa.Table(
            FILE_TABLE,
            meta,
            sa.Column("user_name", sa.Text, primary_key=True),
            sa.Column("role", sa.Text, primary_key=True),
            sa.Column("name", sa.Text, nullable=False),
            sa.Column("sha256", sa.Text, nullable=False),
            sa.Column("data", sa.LargeBinary, nullable=False),
        )
        self.revocations = sa.Table(
            REVOKED_TABLE,
            meta,
            sa.Column("token", sa.Text, primary_key=True),
            sa.Column("revoked_at", sa.Text, nullable=False),
        )
        self._meta = meta
        self._ready = False

    def __repr__(self) -> str:
        return f"SqlAlchemyStore({self._shown!r})"

    __str__ = __repr__

    def _begin(self) -> Any:
        import sqlalchemy as sa

        try:
            if not self._ready:
                self._meta.create_all(self.engine)
                self._ready = True
            return self.engine.begin()
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"cannot open the study store {self._shown}: {type(exc).__name__}") from None

    def save(
        self,
        user: str,
        study_json: str | None,
        choices: Mapping[str, Any],
        files: Mapping[str, tuple[str, bytes]],
    ) -> None:
        import sqlalchemy as sa
        from sqlalchemy.dialects.postgresql import insert

        _checked(user)
        text = _choices_text(choices)
        s, f = self.studies, self.files
        try:
            with self._begin() as con:
                row = {"user_name": user, "saved_at": _now(), "study_json": study_json, "choices": text}
                up = insert(s).values(**row)
                con.execute(up.on_conflict_do_update(index_elements=[s.c.user_name], set_=row))
                held = dict(con.execute(sa.select(f.c.role, f.c.sha256).where(f.c.user_name == user)).all())
                gone = set(held) - set(files)
                if gone:
                    con.execute(sa.delete(f).where(f.c.user_name == user, f.c.role.in_(sorted(gone))))
                for role, (name, data) in files.items():
                    sha = sha256_of(data)
                    if held.get(role) == sha:
                        con.execute(
                            sa.update(f).where(f.c.user_name == user, f.c.role == role).values(name=name)
                        )
                        continue
                    values = {"user_name": user, "role": role, "name": name, "sha256": sha, "data": data}
                    ins = insert(f).values(**values)
                    con.execute(
                        ins.on_conflict_do_update(
                            index_elements=[f.c.user_name, f.c.role],
                            set_={"name": name, "sha256": sha, "data": data},
                        )
                    )
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"cannot write the study store {self._shown}: {type(exc).__name__}") from None

    def _read(self, user: str, with_data: bool) -> Stored | None:
        import sqlalchemy as sa

        s, f = self.studies, self.files
        try:
            with self._begin() as con:
                row = con.execute(
                    sa.select(s.c.saved_at, s.c.study_json, s.c.choices).where(s.c.user_name == user)
                ).first()
                if row is None:
                    return None
                columns = [f.c.role, f.c.name, *([f.c.sha256, f.c.data] if with_data else [])]
                files = con.execute(sa.select(*columns).where(f.c.user_name == user).order_by(f.c.role)).all()
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"cannot read the study store {self._shown}: {type(exc).__name__}") from None
        return self._stored(user, tuple(row), [tuple(r) for r in files], with_data)

    def load(self, user: str) -> Stored | None:
        return self._read(_checked(user), True)

    def summary(self, user: str) -> Stored | None:
        return self._read(_checked(user), False)

    def delete_files(self, user: str) -> int:
        import sqlalchemy as sa

        with self._begin() as con:
            done = con.execute(sa.delete(self.files).where(self.files.c.user_name == _checked(user)))
            return int(done.rowcount)

    def delete(self, user: str) -> None:
        import sqlalchemy as sa

        with self._begin() as con:
            con.execute(sa.delete(self.files).where(self.files.c.user_name == _checked(user)))
            con.execute(sa.delete(self.studies).where(self.studies.c.user_name == user))

    def revoke(self, token: str) -> None:
        import sqlalchemy as sa
        from sqlalchemy.dialects.postgresql import insert

        r = self.revocations
        try:
            with self._begin() as con:
                con.execute(sa.delete(r).where(r.c.revoked_at < _cutoff()))
                con.execute(
                    insert(r).values(token=_checked(token), revoked_at=_now()).on_conflict_do_nothing()
                )
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"cannot write the study store {self._shown}: {type(exc).__name__}") from None

    def revoked(self, token: str) -> bool:
        import sqlalchemy as sa

        r = self.revocations
        try:
            with self._begin() as con:
                return (
                    con.execute(sa.select(r.c.token).where(r.c.token == _checked(token))).first() is not None
                )
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"cannot read the study store {self._shown}: {type(exc).__name__}") from None


# ------------------------------------------------------------------------------------ opening
_POSTGRES = ("postgresql://", "postgres://", "postgresql+psycopg://")


def store_location() -> str:
    """`COHORTSHIELD_STORE`, else the default SQLite file in the checkout."""
    return os.environ.get(ENV, "").strip() or str(DEFAULT)


def open_store(location: str | None = None) -> Store:
    """The store at `location` (default `store_location()`): a PostgreSQL URL or a SQLite path."""
    where = location if location is not None else store_location()
    lowered = where.lower()
    if lowered.startswith(_POSTGRES):
        rest = where.split("://", 1)[1]
        return SqlAlchemyStore(f"postgresql+psycopg://{rest}")
    if "://" in where and not lowered.startswith("sqlite:///"):
        raise StoreError(f"{ENV} must be a file path or a postgresql:// URL, not {where.split('://')[0]}://…")
    path = where[len("sqlite:///") :] if lowered.startswith("sqlite:///") else where
    return SqliteStore(Path(path).expanduser())
