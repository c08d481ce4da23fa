"""A throwaway PostgreSQL server for the database tests (tests/test_omop.py, tests/test_i2b2.py), from
Debian's `postgresql` package (`make test` installs it when missing, as it does Chromium).

`postgres_server(folder)` runs initdb into a fresh folder and starts the server on a unix socket in that
folder and a free port on 127.0.0.1, with a random password (scram-sha-256: other users of a shared
machine cannot connect), and yields its SQLAlchemy URL; it stops the server and removes the folder
after. PostgreSQL refuses to run as root: as root the server runs as the `postgres` OS user
(`runuser`), in a folder that user owns. Each pytest-xdist worker starts its own (a session fixture).

`COHORTSHIELD_TEST_POSTGRES_URL` names an existing server instead. Without either, the tests are
skipped and say why (on CI, with env CI set, they fail).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ENV = "COHORTSHIELD_TEST_POSTGRES_URL"
PG_ROOT = Path("/usr/lib/postgresql")
SERVER_USER = "postgres"  # the OS user the server runs as when the tests run as root


def pg_bin() -> Path | None:
    """The newest installed PostgreSQL's bin folder (Debian: /usr/lib/postgresql/<version>/bin)."""
    found = sorted(
        (p.parent for p in PG_ROOT.glob("*/bin/initdb")),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    return found[-1] if found else None


def missing_reason() -> str | None:
    """Why no server can be started here, or None."""
    if pg_bin() is None:
        return (
            f"no PostgreSQL binaries under {PG_ROOT} (apt-get install postgresql; `make test` installs "
            f"them when it runs as root) and {ENV} not set"
        )
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: PostgreSQL refuses to run as root"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", SERVER_USER, "--", *cmd] if os.geteuid() == 0 else cmd


def _run(cmd: list[str], log: Path) -> None:
    done = subprocess.run(_as_server_user(cmd), capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        tail = (log.read_text()[-1500:] if log.exists() else "") + done.stdout[-1500:] + done.stderr[-1500:]
        pytest.fail(f"{' '.join(cmd[:2])} failed ({done.returncode}): {tail}")


@contextmanager
def postgres_server() -> Iterator[str]:
    """A fresh server (module docstring); yields its URL (`postgresql+psycopg://...@127.0.0.1:PORT/postgres`)."""
    reason = missing_reason()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and {reason}")
        pytest.skip(reason)
    bin_dir = pg_bin()
    assert bin_dir is not None
    folder = Path(tempfile.mkdtemp(prefix="cs_pg_"))
    data, log, pwfile = folder / "data", folder / "server.log", folder / "pw"
    password = secrets.token_hex(16)
    pwfile.write_text(password + "\n")
    if os.geteuid() == 0:
        shutil.chown(folder, SERVER_USER)
        shutil.chown(pwfile, SERVER_USER)
    os.chmod(folder, 0o700)
    os.chmod(pwfile, 0o600)
    port = _free_port()
    try:
        _run(
            [str(bin_dir / "initdb"), "-D", str(data), "-U", "cs", "--auth=scram-sha-256", f"--pwfile={pwfile}",
             "-E", "UTF8", "--locale=C", "--no-sync"],
            log,
        )  # fmt: skip
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        _run(
            [
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(log),
                "-o",
                options,
                "-w",
                "-t",
                "120",
                "start",
            ],
            log,
        )
        try:
            yield f"postgresql+psycopg://cs:{password}@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run(
                _as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
                capture_output=True,
                timeout=120,
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
