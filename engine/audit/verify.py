"""`audit verify`: check the audit log (engine/audit/log.py) line by line and against its signed head
(issue 25; issue 40, finding 5).

Three checks, each naming lines:
- the sha256 chain (no key): a line changed, removed, reordered or inserted without its hashes rebuilt;
- the MAC chain (the chain key, `engine.audit.keys`): a line changed, a line removed and the chain
  rebuilt, a forged line appended; without the key (an auditor holding the public key only) this
  check is skipped and the output says so;
- the signed head (the public key only), which is required: a missing head (the log cut, emptied or
  replaced, the head deleted), a head whose Ed25519 signature does not verify (rewritten without the
  signing key), or a head whose count, last hash or last MAC disagree with the log (lines cut, or
  lines appended after it).
A partial last line (an append cut short) is reported by its line number; the next append cuts it.
Lines written before the keyed chain (no `mac`) are vouched for only by the sha256 chain up to the
signed head: the output says so.
"""

from __future__ import annotations

import fcntl
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.audit import keys
from engine.audit.log import FIELDS, GENESIS, entry_hash, entry_mac, head_message, head_path, log_path
from engine.io.errors import UserError


@dataclass
class Verification:
    """The result of `verify`: how many lines, each problem and each note as (line number, text)."""

    count: int = 0
    problems: list[tuple[int, str]] = field(default_factory=list)
    notes: list[tuple[int, str]] = field(default_factory=list)
    last_hash: str = GENESIS
    macs_checked: bool = False
    head_checked: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    def message(self) -> str:
        notes = [f"line {n}: {text}" if n else text for n, text in self.notes]
        if self.ok:
            checked = "MACs and signed head checked" if self.macs_checked else "signed head checked"
            return "\n".join(
                [f"audit log intact: {self.count} entries, chain head {self.last_hash} ({checked})", *notes]
            )
        return "\n".join([*(f"line {n}: {text}" for n, text in self.problems), *notes])


def _read(target: Path) -> tuple[bytes, str | None]:
    """The log's bytes and its head's text, read under a shared lock (no append half way)."""
    head = head_path(target)
    with open(target, "rb") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
        data = fh.read()
        try:
            head_text: str | None = head.read_text("utf-8")
        except FileNotFoundError:
            head_text = None
    return data, head_text


def _public_key(target: Path, given: Path | str | None) -> Any:
    if given is not None:
        try:
            return keys.load_public_key(Path(given))
        except ValueError as exc:
            raise UserError(f"--public-key {exc}") from None
    default = keys.public_key_path(target)
    if default.exists():
        try:
            return keys.load_public_key(default)
        except ValueError:
            return None
    signing = keys.load_signing_key(target)
    return signing.public_key() if signing is not None else None


def verify(path: Path | str | None = None, *, public_key: Path | str | None = None) -> Verification:
    """Check the log (module docstring). `public_key`: the Ed25519 public key (PEM) that checks the
    head; default `<signing key>.pub` beside the signing key (`engine.audit.keys`)."""
    target = Path(path) if path is not None else log_path()
    result = Verification()
    if not target.exists():
        why = " (its signed head exists: the log was deleted)" if head_path(target).exists() else ""
        result.problems.append((0, f"{target}: no such audit log{why}"))
        return result
    data, head_text = _read(target)
    raw = data.split(b"\n")
    partial = raw.pop()  # b"" when the file ends with its newline
    if partial:
        result.notes.append(
            (
                len(raw) + 1,
                f"a partial line of {len(partial)} bytes (an append cut short by a crash or a full disk): "
                "the next append cuts it and records a repair entry",
            )
        )
    parsed = _parse(raw, result)
    reported: set[int] = {n for n, _ in result.problems}

    def flag(n: int, text: str) -> None:
        if n not in reported:
            reported.add(n)
            result.problems.append((n, text))

    _check_hashes(parsed, flag)
    last = parsed[-1] if parsed else None
    result.last_hash = str(last["hash"]) if last is not None else GENESIS
    _check_head(target, head_text, public_key, parsed, flag, result)
    _check_macs(target, parsed, flag, result)  # last: a line the checks above named keeps their reason
    result.problems.sort()
    return result


def _parse(raw: list[bytes], result: Verification) -> list[dict[str, Any] | None]:
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
    return parsed


def _check_hashes(parsed: list[dict[str, Any] | None], flag: Any) -> None:
    """The sha256 chain: a line is named when it was changed (its hash does not match its content, or
    the next line's `prev_hash` does not name it), inserted (the next line chains to the line before
    it), reordered (it chains to a later line) or when lines before it were removed (its `seq` jumps)."""
    line_of_hash = {e["hash"]: n for n, e in enumerate(parsed, 1) if e is not None}
    chained = {e["prev_hash"]: n for n, e in enumerate(parsed, 1) if e is not None}
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


def _check_macs(target: Path, parsed: list[dict[str, Any] | None], flag: Any, result: Verification) -> None:
    """The MAC chain under the chain key: each keyed line's `mac` from the `mac` of the line its
    `prev_hash` names (else the line before's), so that lines only moved are not called forged."""
    key = keys.load_chain_key(target)
    result.macs_checked = key is not None
    if key is None:
        result.notes.append(
            (0, f"the entries' MACs were not checked: no chain key ({keys.chain_key_path(target)})")
        )
    prev_mac, keyed, legacy = GENESIS, False, 0
    mac_of = {e["hash"]: e["mac"] for e in parsed if e is not None and "mac" in e}
    for n, e in enumerate(parsed, 1):
        if e is None:
            continue
        if "mac" not in e:
            if keyed:
                flag(n, "no MAC after the keyed chain began: inserted, or its MAC stripped")
            else:
                legacy = n
            continue
        keyed = True
        chained_to = str(mac_of.get(e["prev_hash"], prev_mac))
        if key is not None and entry_mac(key, chained_to, e) != e["mac"]:
            flag(
                n,
                "forged: its MAC does not match (changed, lines removed before it and the chain rebuilt, "
                "or written without the chain key)",
            )
        prev_mac = str(e["mac"])
    if legacy:
        result.notes.append(
            (
                0,
                f"lines 1-{legacy} were written before the keyed chain (no MAC): an unkeyed legacy log "
                "cannot be proven; only the sha256 chain up to the signed head vouches for them",
            )
        )


def _check_head(
    target: Path,
    head_text: str | None,
    public_key: Path | str | None,
    parsed: list[dict[str, Any] | None],
    flag: Any,
    result: Verification,
) -> None:
    """The required signed head: present, signed by the signing key, and naming the log's last entry."""
    name = head_path(target).name
    end = result.count + 1
    if head_text is None:
        if not any(e is not None for e in parsed):
            flag(end, f"0 entries and no signed head ({name}): the log was emptied, or never written")
        else:
            flag(end, f"no signed head ({name} missing): last lines may have been cut and the head deleted")
        return
    try:
        head = json.loads(head_text)
        count, last_hash = int(head["count"]), str(head["hash"])
    except (ValueError, KeyError, TypeError):
        flag(end, f"{name} is unreadable: the log's end cannot be checked")
        return
    public = _public_key(target, public_key)
    if "signature" not in head:
        flag(end, f"{name} is not signed (a legacy head, or one rewritten without the signing key)")
    elif public is None:
        flag(end, f"{name}'s signature cannot be checked: no public key (give --public-key)")
    elif not keys.signature_ok(public, str(head["signature"]), head_message(head)):
        flag(end, f"{name}'s signature does not verify: the head was rewritten without the signing key")
    else:
        result.head_checked = True
    entries = [(n, e) for n, e in enumerate(parsed, 1) if e is not None]
    last_seq = int(entries[-1][1]["seq"]) if entries else 0
    if last_seq < count:
        gone = count - last_seq
        flag(
            end,
            f"{gone} last entr{'y' if gone == 1 else 'ies'} removed: {name} records {count} entries, "
            f"the log ends at {last_seq}",
        )
    elif last_seq > count:
        for n, e in entries:
            if int(e["seq"]) > count:
                flag(n, f"appended after the signed head ({name} records {count} entries)")
    elif last_hash != result.last_hash or head.get("mac") != entries[-1][1].get("mac"):
        flag(entries[-1][0], f"changed: {name} records another last entry")
