"""An append-only audit log of every export and download, chained by sha256 and by a keyed MAC, with a
signed head (issue 25; issue 40, finding 5).

One JSON object per line: `seq` (1, 2, ...), `time` (UTC, ISO 8601), `user`, `what`, `file_name`,
`sha256` (of the bytes that leave; null for a CLI run's begin entry, written before its bytes exist),
`study` (`study_fingerprint`: a hash of the study without its pseudonym key), `release`, `adversary`,
`k`, `prev_hash` (the previous line's `hash`; 64 zeros for the first), `mac` = HMAC-SHA256 under the
chain key (`engine.audit.keys`) of the previous line's `mac` (64 zeros for the first keyed line) and
the canonical JSON of the entry without `hash` and `mac`, and `hash` = sha256(prev_hash + the canonical
JSON of the entry without `hash`) (keys sorted, no spaces, UTF-8).

Writing (`append`): the file is opened with O_APPEND (created mode 600, its folder 700) and locked
exclusively (`fcntl.flock`) while the last line is read, the new line written (every byte: a short
write is retried, an error rolls the file back) and fsynced, and the head rewritten, so the app's
sessions and any CLI run on the same machine chain one after another. The head, `<log>.head`, holds
the count, the last hash and the last MAC, signed with Ed25519 by the signing key. A partial last line
(a crash or a full disk during an append) is cut by the next append, which first records a `repair`
entry naming what it cut; it refuses to chain onto an end its signed head does not name (`_check_tail`).
An entry that cannot be written whole raises `AuditLogUnavailable`
(a `UserError`): the export it was for does not happen (`engine.audit.exports`).

Checking: `engine.audit.verify` (`python -m engine audit verify`).

Where: `COHORTSHIELD_AUDIT_LOG`, else `.cohortshield/audit.log` in the checkout; its keys:
`engine.audit.keys`.
"""

from __future__ import annotations

import errno
import fcntl
import getpass
import hashlib
import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.audit import keys
from engine.io.errors import UserError

ENV = "COHORTSHIELD_AUDIT_LOG"
ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT = ROOT / ".cohortshield" / "audit.log"
GENESIS = "0" * 64
FIELDS = ("seq", "time", "user", "what", "file_name", "sha256", "study", "release", "adversary", "k")
REPAIR = "repair"  # the `what` of the entry recording a cut partial line


class AuditLogUnavailable(UserError):
    """The audit log cannot take an entry (unwritable, full, its key missing): nothing is exported."""

    def __init__(
        self, path: Path, why: str, hint: str = "free space or fix its permissions, then retry"
    ) -> None:
        super().__init__(f"audit log {path}: {why}; nothing was exported (no file leaves unlogged: {hint})")


def log_path() -> Path:
    """The audit log's path: `COHORTSHIELD_AUDIT_LOG`, else `.cohortshield/audit.log` in the checkout."""
    configured = os.environ.get(ENV, "").strip()
    return Path(configured).expanduser() if configured else DEFAULT


def head_path(path: Path) -> Path:
    return path.with_name(path.name + ".head")


def os_user() -> str:
    """The operating-system user running this process (the CLI's `user`)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's numeric uid)
        return f"uid:{os.getuid()}"


def study_fingerprint(study: Any) -> str:
    """A fingerprint of a study (`engine.study.study.Study`): sha256 of its JSON without the pseudonym
    key, first 16 hex digits. The key itself never enters the log."""
    return hashlib.sha256(study.to_json(with_key=False).encode("utf-8")).hexdigest()[:16]


def canonical(entry: Mapping[str, Any], without: tuple[str, ...] = ("hash",)) -> str:
    """The entry's canonical JSON (keys sorted, no spaces, UTF-8 as is), without the keys `without`."""
    return json.dumps(
        {k: v for k, v in entry.items() if k not in without},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


def entry_hash(entry: Mapping[str, Any]) -> str:
    return hashlib.sha256((str(entry.get("prev_hash", "")) + canonical(entry)).encode("utf-8")).hexdigest()


def entry_mac(key: bytes, prev_mac: str, entry: Mapping[str, Any]) -> str:
    """The entry's keyed MAC (module docstring): chained to the previous line's `mac`."""
    return keys.mac(key, prev_mac, canonical(entry, without=("hash", "mac")))


def head_message(head: Mapping[str, Any]) -> str:
    """What the head's signature covers: its count, last hash, last MAC and time, canonically."""
    return canonical({k: head.get(k) for k in ("count", "hash", "mac", "time")}, without=())


def _private_folder(folder: Path) -> None:
    if not folder.exists():
        folder.mkdir(parents=True, mode=0o700)
        if folder == DEFAULT.parent:  # the default lives in the checkout: never committed
            (folder / ".gitignore").write_text("*\n")


def _write_all(fd: int, data: bytes) -> None:
    """`os.write` until every byte is written (a short write is retried); OSError when it cannot."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.ENOSPC, "no byte written")
        view = view[n:]


def _cut_partial_tail(fd: int) -> tuple[bytes, int]:
    """Cut a last line without its newline (an append cut short); returns (the bytes cut, its line
    number), or (b"", 0) when the file ends with a newline."""
    end = os.lseek(fd, 0, os.SEEK_END)
    if end == 0 or os.pread(fd, 1, end - 1) == b"\n":
        return b"", 0
    pos, tail = end, b""
    while pos > 0 and b"\n" not in tail:
        step = min(4096, pos)
        pos -= step
        tail = os.pread(fd, step, pos) + tail
    keep = pos + tail.rfind(b"\n") + 1 if b"\n" in tail else 0
    cut = os.pread(fd, end - keep, keep)
    line = _count_lines(fd, keep) + 1
    os.ftruncate(fd, keep)
    os.fsync(fd)
    return cut, line


def _count_lines(fd: int, end: int) -> int:
    count, pos = 0, 0
    while pos < end:
        chunk = os.pread(fd, min(1 << 20, end - pos), pos)
        count += chunk.count(b"\n")
        pos += len(chunk)
    return count


def _last_line(fd: int) -> bytes:
    """The file's last line (b"" for an empty file; the file ends with a newline), read backwards."""
    end = os.lseek(fd, 0, os.SEEK_END)
    pos, tail = end, b""
    while pos > 0:
        step = min(4096, pos)
        pos -= step
        tail = os.pread(fd, step, pos) + tail
        stripped = tail[:-1] if tail.endswith(b"\n") else tail
        if b"\n" in stripped:
            return stripped.rsplit(b"\n", 1)[1]
    return tail.rstrip(b"\n")


def append(
    what: str,
    file_name: str,
    data: bytes | None,
    *,
    user: str,
    study: str | None = None,
    release: str | None = None,
    adversary: str | None = None,
    k: int | None = None,
    path: Path | str | None = None,
) -> dict[str, Any]:
    """Append one entry for `data` leaving as `file_name` (None: bytes not known yet, a CLI run's
    begin entry); returns the entry written. `AuditLogUnavailable` when it cannot be written whole:
    then the log is as it was (a partial last line found first is cut and recorded)."""
    target = Path(path) if path is not None else log_path()
    try:
        _private_folder(target.parent)
        fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as exc:
        raise AuditLogUnavailable(target, f"cannot be opened for writing ({exc.strerror or exc})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        cut, line = _cut_partial_tail(fd)
        fields = {"user": user, "study": study, "release": release, "adversary": adversary, "k": k}
        if cut:
            _append_locked(
                fd,
                target,
                f"{REPAIR}: line {line} was a partial line of {len(cut)} bytes (an append cut short), cut",
                cut.decode("utf-8", errors="replace")[:200],
                cut,
                fields,
            )
        return _append_locked(fd, target, what, file_name, data, fields)
    except OSError as exc:
        raise AuditLogUnavailable(target, f"cannot be written ({exc.strerror or exc})") from None
    finally:
        os.close(fd)  # releases the lock


def _append_locked(
    fd: int, target: Path, what: str, file_name: str, data: bytes | None, fields: Mapping[str, Any]
) -> dict[str, Any]:
    """One entry written under the lock: the line, then the signed head; on any error the log is
    truncated back to where it was and the error raised."""
    last = _last_line(fd)
    try:
        prev: dict[str, Any] = json.loads(last) if last else {}
    except ValueError:
        prev = {}
    if last and not (isinstance(prev, dict) and "hash" in prev):
        raise AuditLogUnavailable(target, "its last line is not an audit entry (run `audit verify`)")
    chain_key, signing = keys.load_chain_key(target), keys.load_signing_key(target)
    if chain_key is None or signing is None:
        if "mac" in prev:  # fresh keys would orphan every keyed entry
            raise AuditLogUnavailable(
                target,
                f"its chain key {keys.chain_key_path(target)} or signing key {keys.signing_key_path(target)} "
                "is missing or unreadable",
            )
        keys.create_keys(target)
        chain_key, signing = keys.load_chain_key(target), keys.load_signing_key(target)
        if chain_key is None or signing is None:
            raise AuditLogUnavailable(target, f"its keys cannot be made in {keys.key_folder(target)}")
    _check_tail(target, prev, chain_key, signing)
    k = fields.get("k")
    entry: dict[str, Any] = {
        "seq": int(prev.get("seq", 0)) + 1,
        "time": datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "user": fields.get("user"),
        "what": what,
        "file_name": file_name,
        "sha256": None if data is None else hashlib.sha256(data).hexdigest(),
        "study": fields.get("study"),
        "release": fields.get("release"),
        "adversary": fields.get("adversary"),
        "k": None if k is None else int(k),
        "prev_hash": str(prev.get("hash", GENESIS)),
    }
    entry["mac"] = entry_mac(chain_key, str(prev.get("mac", GENESIS)), entry)
    entry["hash"] = entry_hash(entry)
    line = (json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
    size = os.lseek(fd, 0, os.SEEK_END)
    try:
        _write_all(fd, line)
        os.fsync(fd)
        _write_head(target, entry, signing)
    except BaseException:
        try:  # the entry never happened: no partial line, no line beyond the signed head
            os.ftruncate(fd, size)
            os.fsync(fd)
        except OSError:
            pass  # the next append cuts the partial line
        raise
    return entry


def _check_tail(target: Path, prev: Mapping[str, Any], chain_key: bytes, signing: Any) -> None:
    """Refuse to chain onto a log whose end is not the one its signed head names (a forged line
    appended, the log emptied with its head kept): signing a new head would vouch for it. One line
    beyond the head with a good MAC is an append killed before its head, which the new head covers."""
    try:
        head = json.loads(head_path(target).read_text("utf-8"))
    except FileNotFoundError:
        head = None
    except (OSError, ValueError):
        head = {}
    tampered = "its end does not match its signed head (run `audit verify`)"
    hint = "an administrator must examine the log and start a new one"
    if not prev:
        if head is not None:
            raise AuditLogUnavailable(
                target, f"it is empty but its signed head records entries; {tampered}", hint
            )
        return
    if "mac" not in prev:  # a log from before the keyed chain: its head is not signed
        return
    if not isinstance(head, dict) or not keys.signature_ok(
        signing.public_key(), str(head.get("signature", "")), head_message(head)
    ):
        raise AuditLogUnavailable(
            target, f"its signed head is missing or not signed by its key; {tampered}", hint
        )
    if head.get("count") == prev.get("seq") and head.get("hash") == prev.get("hash"):
        return
    if (
        head.get("count") == int(prev.get("seq", 0)) - 1
        and head.get("hash") == prev.get("prev_hash")
        and entry_mac(chain_key, str(head.get("mac")), prev) == prev.get("mac")
    ):
        return
    raise AuditLogUnavailable(target, tampered, hint)


def _write_head(target: Path, entry: Mapping[str, Any], signing: Any) -> None:
    head = {"count": entry["seq"], "hash": entry["hash"], "mac": entry["mac"], "time": entry["time"]}
    head["signature"] = signing.sign(head_message(head).encode("utf-8")).hex()
    path = head_path(target)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        _write_all(fd, (json.dumps(head, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)


def entries(path: Path | str | None = None) -> list[dict[str, Any]]:
    """Every entry of the log that parses (the pages' lists; `verify` is the check)."""
    target = Path(path) if path is not None else log_path()
    if not target.exists():
        return []
    out = []
    for line in target.read_text("utf-8", errors="replace").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out
