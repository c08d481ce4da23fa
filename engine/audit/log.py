"""An append-only, hash-chained audit log of every export and download (issue 25).

One JSON object per line: `seq` (1, 2, ...), `time` (UTC, ISO 8601), `user`, `what`, `file_name`,
`sha256` (of the bytes that left), `study` (`study_fingerprint`: a hash of the study without its
pseudonym key), `release`, `adversary`, `k`, `prev_hash` (the previous line's `hash`; 64 zeros for
the first) and `hash` = sha256(prev_hash + the canonical JSON of the entry without `hash`) (keys
sorted, no spaces, UTF-8).

Writing (`append`): the file is opened with O_APPEND (created mode 600, its folder 700), locked
exclusively (`fcntl.flock`) while the last line is read, the new line written and fsynced, so the app's
sessions and any CLI run on the same machine chain one after another. Beside it, `<log>.head` holds
the count and the last hash (written under the same lock), so that removed last lines are found too;
an administrator who keeps `verify`'s last hash elsewhere can prove that nothing before it changed.

Checking (`verify`): every changed, removed, reordered or inserted line is named by its line number.

Where: `COHORTSHIELD_AUDIT_LOG`, else `.cohortshield/audit.log` in the checkout.
"""

from __future__ import annotations

import fcntl
import getpass
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ENV = "COHORTSHIELD_AUDIT_LOG"
ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT = ROOT / ".cohortshield" / "audit.log"
GENESIS = "0" * 64
FIELDS = ("seq", "time", "user", "what", "file_name", "sha256", "study", "release", "adversary", "k")


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


def canonical(entry: Mapping[str, Any]) -> str:
    """The entry's canonical JSON (keys sorted, no spaces, UTF-8 as is), without its `hash`."""
    return json.dumps(
        {k: v for k, v in entry.items() if k != "hash"},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


def entry_hash(entry: Mapping[str, Any]) -> str:
    return hashlib.sha256((str(entry.get("prev_hash", "")) + canonical(entry)).encode("utf-8")).hexdigest()


def _last_line(fd: int) -> bytes:
    """The file's last non-empty line (b"" for an empty file), read backwards from its end."""
    end = os.lseek(fd, 0, os.SEEK_END)
    pos, tail = end, b""
    while pos > 0:
        step = min(4096, pos)
        pos -= step
        tail = os.pread(fd, step, pos) + tail
        stripped = tail.rstrip(b"\n")
        if b"\n" in stripped:
            return stripped.rsplit(b"\n", 1)[1]
    return tail.rstrip(b"\n")


def _private_folder(folder: Path) -> None:
    if not folder.exists():
        folder.mkdir(parents=True, mode=0o700)
        if folder == DEFAULT.parent:  # the default lives in the checkout: never committed
            (folder / ".gitignore").write_text("*\n")


def append(
    what: str,
    file_name: str,
    data: bytes,
    *,
    user: str,
    study: str | None = None,
    release: str | None = None,
    adversary: str | None = None,
    k: int | None = None,
    path: Path | str | None = None,
) -> dict[str, Any]:
    """Append one entry for `data` leaving as `file_name`; returns the entry written (with its hash)."""
    target = Path(path) if path is not None else log_path()
    _private_folder(target.parent)
    fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        last = _last_line(fd)
        prev: dict[str, Any] = json.loads(last) if last else {}
        entry: dict[str, Any] = {
            "seq": int(prev.get("seq", 0)) + 1,
            "time": datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z"),
            "user": user,
            "what": what,
            "file_name": file_name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "study": study,
            "release": release,
            "adversary": adversary,
            "k": None if k is None else int(k),
            "prev_hash": str(prev.get("hash", GENESIS)),
        }
        entry["hash"] = entry_hash(entry)
        line = (json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        os.write(fd, line)
        os.fsync(fd)
        _write_head(target, entry)
    finally:
        os.close(fd)  # releases the lock
    return entry


def _write_head(target: Path, entry: Mapping[str, Any]) -> None:
    head = head_path(target)
    tmp = head.with_name(head.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"count": entry["seq"], "hash": entry["hash"]}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, head)


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


@dataclass
class Verification:
    """The result of `verify`: how many lines, and each problem as (line number, what is wrong)."""

    count: int = 0
    problems: list[tuple[int, str]] = field(default_factory=list)
    last_hash: str = GENESIS

    @property
    def ok(self) -> bool:
        return not self.problems

    def message(self) -> str:
        if self.ok:
            return f"audit log intact: {self.count} entries, chain head {self.last_hash}"
        return "\n".join(f"line {n}: {text}" for n, text in self.problems)


def verify(path: Path | str | None = None) -> Verification:
    """Check the chain line by line (module docstring). A line is named when it was changed (its hash
    does not match its content, or the next line's `prev_hash` does not name it), inserted (the next
    line chains to the line before it), reordered (it chains to a later line) or when lines before it
    were removed (its `seq` jumps); removed last lines are found against `<log>.head`."""
    target = Path(path) if path is not None else log_path()
    result = Verification()
    if not target.exists():
        result.problems.append((0, f"{target}: no such audit log"))
        return result
    raw = target.read_bytes().split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    parsed: list[dict[str, Any] | None] = []
    for n, line in enumerate(raw, 1):
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        if not isinstance(value, dict) or not all(f in value for f in (*FIELDS, "prev_hash", "hash")):
            result.problems.append(
                (n, "not an audit entry (unreadable JSON or fields missing): changed or inserted")
            )
            value = None
        parsed.append(value)
    result.count = len(raw)
    line_of_hash = {e["hash"]: n for n, e in enumerate(parsed, 1) if e is not None}
    chained = {e["prev_hash"]: n for n, e in enumerate(parsed, 1) if e is not None}
    reported: set[int] = {n for n, _ in result.problems}

    def flag(n: int, text: str) -> None:
        if n not in reported:
            reported.add(n)
            result.problems.append((n, text))

    prev_hash, prev_seq = GENESIS, 0
    for n, e in enumerate(parsed, 1):
        if e is None:
            prev_hash, prev_seq = "", prev_seq + 1
            continue
        if entry_hash(e) != e["hash"]:
            flag(n, "changed: its hash does not match its content")
        elif e["prev_hash"] != prev_hash and prev_hash:
            at = line_of_hash.get(e["prev_hash"])
            seq = e["seq"] if isinstance(e["seq"], int) else None
            before = parsed[n - 2] if n >= 2 else None
            if at is not None and at == n - 2 and before is not None and before["hash"] in chained:
                flag(n - 1, f"reordered: line {chained[before['hash']]} chains to it")
            elif at is not None and at == n - 2:
                flag(n - 1, "inserted: the line after it chains to the line before it")
            elif at is not None and at > n:
                flag(n, f"reordered: it chains to line {at}, which comes after it")
            elif at is not None and at < n - 2:
                flag(n, f"reordered or lines inserted: it chains to line {at}, not to line {n - 1}")
            elif e["prev_hash"] == GENESIS:
                flag(n, "reordered: it is the first entry of the chain")
            elif seq is not None and seq > prev_seq + 1:
                gap = seq - prev_seq - 1
                flag(n, f"{gap} entr{'y' if gap == 1 else 'ies'} removed before it (seq {prev_seq} -> {seq})")
            else:
                flag(n - 1 if n > 1 else n, "changed: the next line's prev_hash does not name it")
        prev_hash = str(e["hash"])
        prev_seq = int(e["seq"]) if isinstance(e["seq"], int) else prev_seq + 1
    result.problems.sort()
    last = parsed[-1] if parsed else None
    result.last_hash = str(last["hash"]) if last is not None else GENESIS
    head = head_path(target)
    if head.exists() and result.ok:
        try:
            recorded = json.loads(head.read_text())
            count, last_hash = int(recorded["count"]), str(recorded["hash"])
        except (ValueError, KeyError, TypeError):
            result.problems.append(
                (result.count + 1, f"{head.name} is unreadable: the log's end cannot be checked")
            )
        else:
            last_seq = int(last["seq"]) if last is not None else 0
            if last_seq < count:
                result.problems.append(
                    (
                        result.count + 1,
                        f"{count - last_seq} last entr{'y' if count - last_seq == 1 else 'ies'} "
                        f"removed: {head.name} records {count} entries, the log ends at {last_seq}",
                    )
                )
            elif last_seq == count and last_hash != result.last_hash:
                result.problems.append((result.count, f"changed: {head.name} records another last hash"))
    return result
