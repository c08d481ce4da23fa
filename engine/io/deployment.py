"""What an administrator sets for a shared server: data roots, named database connections, input limits.

The app runs as one server account for every user, so it reads server files only inside the folders
the administrator lists (data roots) and databases only through the connections the administrator
names; the CLI runs as its user and keeps free paths and URLs. Settings, first found wins per key:

1. environment variables:
   - `COHORTSHIELD_DATA_ROOTS`: folders, separated by `os.pathsep` (`:` on Linux);
   - `COHORTSHIELD_CONNECTIONS`: a JSON object, connection name -> SQLAlchemy URL (the password may be
     left out of the URL and given in `COHORTSHIELD_CONNECTION_<NAME>_PASSWORD`, NAME upper-cased,
     non-alphanumerics as `_`);
   - limits: `COHORTSHIELD_MAX_MEMBER_BYTES`, `COHORTSHIELD_MAX_JSON_BYTES`, `COHORTSHIELD_MAX_JSON_DEPTH`,
     `COHORTSHIELD_MAX_COLUMNS`, `COHORTSHIELD_MAX_LINE_BYTES`, `COHORTSHIELD_MAX_ROWS`,
     `COHORTSHIELD_MAX_XLSX_BYTES`, `COHORTSHIELD_MAX_CELLS`, `COHORTSHIELD_MAX_DECODED_BYTES`,
     `COHORTSHIELD_MAX_EXPANSION`, `COHORTSHIELD_MAX_ZIP_MEMBERS` (whole numbers; defaults and what
     each bounds in `Limits`, how compressed inputs are measured in `engine.io.limits`);
2. a TOML file: `COHORTSHIELD_CONFIG` (a path), else `cohortshield.toml` in the checkout, else the
   `[cohortshield]` table of `.streamlit/secrets.toml` in the checkout. Keys: `data_roots` (a list
   of folders, relative ones from the checkout), `[connections]` (name = URL) and `[limits]`
   (`max_member_bytes = 536870912`, ...).

Default data roots: `sample_data/` and `data/` of the checkout. Every path is resolved (symlinks
followed, `..` removed) before it is compared with the roots, so a link inside a root that points
outside is refused: the path typed (`server_path`) and every file a source then opens (an OMOP or
i2b2 folder's tables, MEDS shards and splits: `engine.io.roots`). A DuckDB file never reads other
files, in the app and the CLI (`engine.io.sql.DUCKDB_CONFIG`).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import stat
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from engine.io.errors import UserError

CHECKOUT = Path(__file__).resolve().parents[2]
DATA_ROOTS_ENV = "COHORTSHIELD_DATA_ROOTS"
CONNECTIONS_ENV = "COHORTSHIELD_CONNECTIONS"
CONFIG_ENV = "COHORTSHIELD_CONFIG"
DEFAULT_ROOTS = ("sample_data", "data")
CONNECTION_PREFIX = "connection:"  # how a study's load options name a connection (never its URL)


class PathRefused(UserError, ValueError):
    """A server path outside the data roots; the message names the roots."""


class ConnectionRefused(UserError, ValueError):
    """A database named in the app that is not one of the administrator's connections."""


class LimitExceeded(UserError, ValueError):
    """An input larger than a limit (size, depth, rows, columns, line length); the message names the
    limit, its setting and the file (row, column) where it was hit."""


@dataclass(frozen=True)
class Limits:
    """Input limits (module docstring); each is a setting `COHORTSHIELD_<FIELD upper-cased>`."""

    # a study package's input file, uncompressed; a Parquet file's columns read, uncompressed pages
    # (issue 40: 2 GiB let a 1.9 GiB member be read whole; the shipped sample's files are < 10 MiB)
    max_member_bytes: int = 512 << 20
    max_json_bytes: int = 16 << 20  # study.json, manifest.json, a study file
    max_json_depth: int = 64  # nesting of objects and lists in a study file
    max_columns: int = 10_000  # columns of a CSV / xlsx sheet / Parquet file
    max_line_bytes: int = 1 << 20  # one line of a CSV file
    max_rows: int = 100_000_000  # rows of a CSV file, xlsx sheet, Parquet file, MEDS dataset
    max_xlsx_bytes: int = 512 << 20  # an xlsx workbook's parts (sheets, shared strings), uncompressed
    # what a compressed input decodes to (`engine.io.limits`); the shipped labs: 20.8 M cells, 176 MB
    max_cells: int = 200_000_000  # rows x columns read of a Parquet file / MEDS dataset / xlsx sheet
    max_decoded_bytes: int = 2 << 30  # a Parquet file's / MEDS dataset's columns read, decoded
    max_expansion: int = 250  # decoded over stored bytes (past 64 MiB); the shipped labs: 38
    max_zip_members: int = 1_000  # members of a study package or an xlsx workbook

    @staticmethod
    def setting(name: str) -> str:
        return "COHORTSHIELD_" + name.upper()


def _config() -> dict[str, Any]:
    """The TOML settings (module docstring); {} when there is no file."""
    explicit = os.environ.get(CONFIG_ENV)
    candidates = [Path(explicit)] if explicit else [CHECKOUT / "cohortshield.toml"]
    for path in candidates:
        if path.is_file():
            with path.open("rb") as fh:
                return tomllib.load(fh)
    secrets = CHECKOUT / ".streamlit" / "secrets.toml"
    if not explicit and secrets.is_file():
        with secrets.open("rb") as fh:
            table = tomllib.load(fh).get("cohortshield", {})
        return table if isinstance(table, dict) else {}
    return {}


def limits() -> Limits:
    """The limits in force (environment, then the TOML `[limits]` table, then the defaults)."""
    table = _config().get("limits", {})
    values: dict[str, int] = {}
    for f in fields(Limits):
        raw = os.environ.get(Limits.setting(f.name), table.get(f.name) if isinstance(table, dict) else None)
        if raw is None:
            continue
        try:
            value = int(str(raw).replace("_", ""))
        except ValueError:
            raise UserError(f"{Limits.setting(f.name)}: a whole number is needed, not {raw!r}") from None
        if value < 1:
            raise UserError(f"{Limits.setting(f.name)}: must be at least 1, not {value}")
        values[f.name] = value
    return Limits(**values)


def data_roots() -> tuple[Path, ...]:
    """The folders the app may read server files from, resolved (module docstring)."""
    env = os.environ.get(DATA_ROOTS_ENV)
    if env is not None:
        listed = [p for p in env.split(os.pathsep) if p.strip()]
    else:
        configured = _config().get("data_roots")
        listed = [str(p) for p in configured] if isinstance(configured, list) else list(DEFAULT_ROOTS)
    roots = []
    for p in listed:
        path = Path(p).expanduser()
        roots.append((path if path.is_absolute() else CHECKOUT / path).resolve())
    return tuple(roots)


def roots_text(roots: tuple[Path, ...] | None = None) -> str:
    roots = data_roots() if roots is None else roots
    return ", ".join(str(r) for r in roots) or "(none)"


def server_path(text: str | Path) -> Path:
    """A server path the app may read: resolved (links followed) and inside a data root; else a
    `PathRefused` naming the roots and where the administrator sets them."""
    raw = str(text).strip()
    if not raw:
        raise PathRefused("no path given")
    path = Path(raw).expanduser()
    resolved = (path if path.is_absolute() else CHECKOUT / path).resolve()
    return refuse_outside(resolved, raw, data_roots())


def refuse_hard_link(resolved: Path, shown: str) -> None:
    """A `PathRefused` for a regular file with more than one hard link: resolving a path follows symbolic
    links, not hard ones, and a second name of a file may lie outside every root (issue #40, finding 1).
    Which other names a file has cannot be asked of the file system, so every such file is refused."""
    try:
        info = resolved.stat()
    except OSError:
        return  # a missing file is named by the reader that opens it
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise PathRefused(
            f"{shown}: a file with {info.st_nlink} hard links, one of which may lie outside the data folders "
            "this server reads from; copy the file into the data folder instead of linking it"
        )


def refuse_outside(resolved: Path, shown: str, roots: tuple[Path, ...]) -> Path:
    """`resolved` when it lies inside one of `roots`; else a `PathRefused` naming it as `shown` and the
    roots (where a link leads is not shown). One check for the typed path (`server_path`) and every
    file a source opens (`engine.io.roots.opened`)."""
    if any(resolved == r or resolved.is_relative_to(r) for r in roots):
        refuse_hard_link(resolved, shown)
        return resolved
    raise PathRefused(
        f"{shown}: outside the data folders this server reads from ({roots_text(roots)}); an administrator "
        f"lists them in {DATA_ROOTS_ENV} or data_roots of cohortshield.toml"
    )


def _password_env(name: str) -> str:
    return "COHORTSHIELD_CONNECTION_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper() + "_PASSWORD"


def connections() -> dict[str, str]:
    """Connection name -> URL as configured (passwords not yet filled in from the environment)."""
    env = os.environ.get(CONNECTIONS_ENV)
    if env is not None:
        try:
            got = json.loads(env)
        except json.JSONDecodeError as exc:
            raise UserError(f"{CONNECTIONS_ENV}: not a JSON object of name -> URL ({exc})") from None
    else:
        got = _config().get("connections", {})
    if not isinstance(got, dict) or not all(isinstance(v, str) for v in got.values()):
        raise UserError(f"{CONNECTIONS_ENV}: a JSON object (or TOML table) of name -> URL is needed")
    return {str(k): v for k, v in got.items()}


def connection_url(name: str) -> str:
    """The URL of a named connection, with its password from the environment when the URL has none."""
    known = connections()
    if name not in known:
        listed = ", ".join(sorted(known)) or "none are defined"
        raise ConnectionRefused(
            f"no database connection named {name!r} ({listed}); an administrator defines them in "
            f"{CONNECTIONS_ENV} or [connections] of cohortshield.toml"
        )
    url = known[name]
    password = os.environ.get(_password_env(name))
    if password:
        from engine.io.extras import require

        require("db", "a database connection")
        from sqlalchemy.engine import make_url

        url = make_url(url).set(password=password).render_as_string(hide_password=False)
    return url


def is_url(location: str | Path) -> bool:
    """True for an SQLAlchemy URL (`dialect[+driver]://...`), False for a path (`engine.io.sql` reads
    it from here: the roots and the readers below both)."""
    return isinstance(location, str) and "://" in location and not Path(location).exists()


def is_connection(location: str) -> bool:
    return str(location).startswith(CONNECTION_PREFIX)


def app_location(location: str) -> str:
    """What the app may open for a location typed or recorded in the app: a named connection's URL
    (`connection:NAME`), or a path inside the data roots. A free URL is refused (`ConnectionRefused`)."""
    if is_connection(location):
        return connection_url(location[len(CONNECTION_PREFIX) :])
    if is_url(location):
        raise ConnectionRefused(
            "the app opens databases only through the connections an administrator names "
            f"({CONNECTIONS_ENV}); a URL typed in the app is not opened"
        )
    return str(server_path(location))


__all__ = [
    "CONNECTION_PREFIX",
    "ConnectionRefused",
    "LimitExceeded",
    "Limits",
    "PathRefused",
    "app_location",
    "connection_url",
    "connections",
    "data_roots",
    "is_connection",
    "limits",
    "refuse_outside",
    "server_path",
]


# ------------------------------------------------------------------ the trusted proxies (header sign-in)
PROXIES_ENV = "COHORTSHIELD_TRUSTED_PROXIES"
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_proxies(text: str) -> list[Network]:
    """The networks of a comma-separated list of addresses or CIDR networks; UserError naming an entry
    that is neither."""
    out = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        try:
            out.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise UserError(
                f"{PROXIES_ENV}: {entry!r} is not an IP address or network (e.g. 10.0.0.5, 10.0.0.0/24)"
            ) from None
    return out


def trusted_proxies() -> list[Network]:
    """COHORTSHIELD_TRUSTED_PROXIES, parsed (`parse_proxies`)."""
    return parse_proxies(os.environ.get(PROXIES_ENV, ""))


def peer_is_proxy(peer: str | None, proxies: list[Network]) -> bool:
    """Whether the connection's peer as `st.context.ip_address` reports it is one of `proxies`. Streamlit
    1.67 reports the loopback peers 127.0.0.1 and ::1 as None: None matches a network holding either."""
    if peer is None:
        candidates = [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    else:
        try:
            ip = ipaddress.ip_address(peer)
        except ValueError:
            return False
        mapped = getattr(ip, "ipv4_mapped", None)  # an IPv4 client on a dual-stack socket
        candidates = [ip] if mapped is None else [ip, mapped]
    return any(ip in net for ip in candidates for net in proxies if ip.version == net.version)


def loopback_address(address: str) -> bool:
    """Whether Streamlit's `server.address` binds loopback only (`""` binds every address)."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
