"""An audit trail that cannot be rewritten and fails closed (issue 40, findings 5 and 6).

Finding 1: `audit verify` called intact an entry deleted or changed with the hashes recomputed and the
head rewritten, a forged entry appended, the last lines cut with the head deleted, and an emptied log
without its head. The attacker below holds the log and its head, not the keys (engine/audit/keys.py).
Finding 2: a full disk during an append left a partial line, and every later append failed.
Finding 3: the CLI wrote the release and the crosswalk, then failed to log them (traceback, rc 1).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

import pytest

from engine.audit import log
from engine.audit import verify as audit_verify
from engine.commands.cli import main
from engine.io.errors import UserError

LINE_START = b'{"adversary"'  # an entry's line (keys sorted)


def _write(path: Path, n: int) -> list[dict]:
    return [
        log.append("table CSV", f"f{i}.csv", f"bytes {i}".encode(), user="ann", path=path) for i in range(n)
    ]


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _rechain(entries: list[dict]) -> str:
    """What an attacker without the keys can do: number and chain the lines again by sha256 (the
    algorithm is public); any `mac` is left as it was, since he cannot compute one."""
    out, prev = [], log.GENESIS
    for seq, e in enumerate(entries, 1):
        e = {**e, "seq": seq, "prev_hash": prev}
        body = json.dumps({k: v for k, v in e.items() if k != "hash"}, sort_keys=True, separators=(",", ":"))
        e["hash"] = prev = hashlib.sha256((e["prev_hash"] + body).encode()).hexdigest()
        out.append(json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n")
    return "".join(out)


def _rewrite_head(path: Path) -> None:
    """The head made to match the rewritten log, its signature (if any) kept: he cannot sign."""
    head = log.head_path(path)
    entries = _read(path)
    recorded = json.loads(head.read_text())
    recorded.update(count=len(entries), hash=entries[-1]["hash"])
    if "mac" in entries[-1]:
        recorded["mac"] = entries[-1]["mac"]
    head.write_text(json.dumps(recorded))


def _problems(path: Path, **kw) -> dict[int, str]:
    result = audit_verify.verify(path, **kw)
    assert not result.ok, result.message()
    return dict(result.problems)


@pytest.mark.parametrize("how", ["deleted", "changed"])
def test_an_entry_deleted_or_changed_rechained_with_the_head_rewritten_is_found(tmp_path: Path, how) -> None:
    path = tmp_path / "logs" / "audit.log"
    _write(path, 5)
    entries = _read(path)
    if how == "deleted":
        del entries[2]
    else:
        entries[2]["file_name"] = "innocent.csv"
    path.write_text(_rechain(entries))
    _rewrite_head(path)
    found = _problems(path)
    assert "forged: its MAC does not match" in found[3]
    assert "signature does not verify" in found[len(entries) + 1]


@pytest.mark.parametrize("head", ["kept", "rewritten"])
def test_a_forged_entry_appended_is_found(tmp_path: Path, head) -> None:
    path = tmp_path / "logs" / "audit.log"
    _write(path, 5)
    entries = _read(path)
    entries.append({**entries[-1], "file_name": "never_logged.csv", "user": "mallory"})
    path.write_text(_rechain(entries))
    if head == "rewritten":
        _rewrite_head(path)
    found = _problems(path)
    assert 6 in found, found
    if head == "kept":
        assert "appended after the signed head" in found[6]
    else:
        assert "MAC does not match" in found[6] and "signature does not verify" in found[7]


def test_no_append_chains_onto_a_forged_line_or_an_emptied_log(tmp_path: Path) -> None:
    """The next append would sign a head over the forgery: it is refused, and the forgery stays found."""
    path = tmp_path / "logs" / "audit.log"
    _write(path, 3)
    entries = _read(path)
    entries.append({**entries[-1], "file_name": "never_logged.csv"})
    path.write_text(_rechain(entries))
    with pytest.raises(UserError, match="its end does not match its signed head"):
        log.append("bundle", "b.zip", b"zip", user="ann", path=path)
    assert "appended after the signed head" in _problems(path)[4] and len(_read(path)) == 4
    path.write_text("")  # emptied, its head kept
    with pytest.raises(UserError, match="empty but its signed head records entries"):
        log.append("bundle", "b.zip", b"zip", user="ann", path=path)
    assert "3 last entries removed" in _problems(path)[1]


def test_an_append_killed_before_its_head_is_covered_by_the_next(tmp_path: Path) -> None:
    """Killed between its fsynced line and its head: verify names the line; the next append's head
    (the line's MAC checked against the old head) covers it."""
    path = tmp_path / "logs" / "audit.log"
    _write(path, 3)
    head = log.head_path(path).read_bytes()
    log.append("bundle", "b.zip", b"zip", user="ann", path=path)
    log.head_path(path).write_bytes(head)  # the state the kill left
    assert "appended after the signed head" in _problems(path)[4]
    log.append("bundle", "c.zip", b"zip", user="ann", path=path)
    assert audit_verify.verify(path).ok and len(_read(path)) == 5


def test_a_legacy_log_is_said_unproven_and_continued_keyed(tmp_path: Path) -> None:
    """A log written before the keyed chain (no `mac`, an unsigned head): verify says it cannot be
    proven; an append continues it keyed and signs its head, which then vouches for what it holds."""
    path = tmp_path / "logs" / "audit.log"
    legacy = []
    for i in range(2):
        e = {f: None for f in log.FIELDS} | {"seq": i + 1, "what": "report", "file_name": f"r{i}.json"}
        e["prev_hash"] = legacy[-1]["hash"] if legacy else log.GENESIS
        e["hash"] = log.entry_hash(e)
        legacy.append(e)
    path.parent.mkdir()
    path.write_text("".join(json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n" for e in legacy))
    log.head_path(path).write_text(json.dumps({"count": 2, "hash": legacy[-1]["hash"]}))
    found = _problems(path)
    assert list(found) == [3] and "not signed" in found[3]
    assert "an unkeyed legacy log cannot be proven" in audit_verify.verify(path).message()
    log.append("bundle", "b.zip", b"zip", user="ann", path=path)
    result = audit_verify.verify(path)
    assert (
        result.ok
        and result.count == 3
        and "lines 1-2 were written before the keyed chain" in result.message()
    )


def test_the_last_lines_cut_with_the_head_deleted_are_found(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "audit.log"
    _write(path, 5)
    path.write_text("".join(line + "\n" for line in path.read_text().splitlines()[:3]))
    log.head_path(path).unlink()
    found = _problems(path)
    assert list(found) == [4] and "no signed head" in found[4]


def test_an_emptied_log_without_its_head_is_found(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "audit.log"
    _write(path, 3)
    path.write_text("")
    log.head_path(path).unlink()
    found = _problems(path)
    assert list(found) == [1] and "0 entries and no signed head" in found[1]
    # the head kept: the cut is counted
    _write(path, 2)
    path.write_text("")
    assert "2 last entries removed" in _problems(path)[1]


def test_the_public_key_alone_checks_the_signed_head(tmp_path: Path, monkeypatch, capsys) -> None:
    """An auditor without the chain key: the MACs are not checked (said so), the signed head is."""
    from engine.audit import keys

    path = tmp_path / "logs" / "audit.log"
    _write(path, 4)
    public = tmp_path / "auditor.pub"
    public.write_bytes(keys.public_key_path(path).read_bytes())
    monkeypatch.setenv(keys.KEY_ENV, str(tmp_path / "no-such-key"))
    monkeypatch.setenv(keys.SIGNING_ENV, str(tmp_path / "no-such-signing-key"))
    result = audit_verify.verify(path, public_key=public)
    assert result.ok and result.head_checked and not result.macs_checked
    assert "MACs were not checked" in result.message()
    assert main(["audit", "verify", "--public-key", str(public), str(path)]) == 0
    assert "4 entries" in capsys.readouterr().out
    entries = _read(path)
    del entries[1]
    path.write_text(_rechain(entries))
    _rewrite_head(path)
    assert "signature does not verify" in _problems(path, public_key=public)[4]
    assert main(["audit", "verify", "--public-key", str(public), str(path)]) == 1
    assert "line 4: audit.log.head's signature does not verify" in capsys.readouterr().err
    assert main(["audit", "verify", "--public-key", str(tmp_path / "missing.pub"), str(path)]) == 2
    assert "--public-key" in capsys.readouterr().err
    monkeypatch.delenv(keys.KEY_ENV)
    monkeypatch.delenv(keys.SIGNING_ENV)
    intact = tmp_path / "intact" / "audit.log"
    _write(intact, 2)
    other = tmp_path / "other" / "audit.log"
    _write(other, 1)  # another log's keys: its public key did not sign this head
    assert "signature does not verify" in _problems(intact, public_key=keys.public_key_path(other))[3]


def test_a_partial_last_line_is_reported_then_repaired_by_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "audit.log"
    _write(path, 3)
    torn = path.read_text().splitlines()[-1][:57].encode()  # the fourth entry cut by a full disk
    with open(path, "ab") as fh:
        fh.write(torn)
    result = audit_verify.verify(path)
    assert result.ok and "line 4: a partial line of 57 bytes" in result.message()
    entry = log.append("release file", "r.csv", b"rows", user="bob", path=path)
    got = _read(path)
    assert [e["seq"] for e in got] == [1, 2, 3, 4, 5] and entry == got[4]
    repair = got[3]
    assert repair["what"].startswith("repair: line 4 was a partial line of 57 bytes")
    assert repair["sha256"] == hashlib.sha256(torn).hexdigest() and repair["file_name"] == torn.decode()
    assert audit_verify.verify(path).ok, audit_verify.verify(path).message()


def _short_writes(monkeypatch, per_call: int, fail_after: int | None = None) -> list[int]:
    """os.write on the log's lines writes at most `per_call` bytes a call, and raises ENOSPC after
    `fail_after` calls (a disk filling up)."""
    real, calls = os.write, []

    def write(fd: int, data) -> int:
        if bytes(data[:12]) != LINE_START and fd not in calls:  # another file, or not the log's line
            return real(fd, data)
        if fail_after is not None and len(calls) >= fail_after:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        calls.append(fd)
        return real(fd, bytes(data[:per_call]))

    monkeypatch.setattr(os, "write", write)
    return calls


def test_a_short_write_is_completed(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "logs" / "audit.log"
    _write(path, 2)
    calls = _short_writes(monkeypatch, per_call=40)
    log.append("bundle", "b.zip", b"zip", user="ann", path=path)
    monkeypatch.undo()
    assert len(calls) > 3
    assert audit_verify.verify(path).ok and len(_read(path)) == 3


def test_a_full_disk_refuses_the_entry_then_the_log_works_once_space_is_freed(
    tmp_path: Path, monkeypatch
) -> None:
    path = tmp_path / "logs" / "audit.log"
    _write(path, 2)
    before = path.read_bytes()
    _short_writes(monkeypatch, per_call=50, fail_after=1)  # half a line written, then the disk is full
    with pytest.raises(
        UserError, match=r"audit\.log: cannot be written .*No space left on device.*nothing was exported"
    ):
        log.append("bundle", "b.zip", b"zip", user="ann", path=path)
    monkeypatch.undo()  # space freed
    assert path.read_bytes() == before and audit_verify.verify(path).ok
    log.append("bundle", "b.zip", b"zip", user="ann", path=path)
    assert audit_verify.verify(path).ok and [e["seq"] for e in _read(path)] == [1, 2, 3]


# ------------------------------------------------------------------ finding 3: the CLI fails closed
def _gccens(tmp_path: Path) -> tuple[list[str], list[Path]]:
    events, cohort = tmp_path / "events.csv", tmp_path / "cohort.csv"
    events.write_text(
        "patient_id,code\n" + "".join(f"p{i},250.00\np{i},401.9\n" for i in range(6)) + "p6,724.2\n"
    )
    cohort.write_text("patient_id\n" + "".join(f"p{i}\n" for i in range(7)))
    outs = [tmp_path / "r.csv", tmp_path / "m.csv", tmp_path / "IDENTIFYING_walk.csv"]
    argv = ["anonymize", "gccens", "--events", str(events), "--cohort", str(cohort), "--k", "2"]
    return [*argv, "--out", str(outs[0]), "--codemap", str(outs[1]), "--crosswalk", str(outs[2])], outs


def test_an_unwritable_log_refuses_the_cli_export_and_writes_nothing(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the log's folder should be")
    monkeypatch.setenv(log.ENV, str(blocker / "audit.log"))
    argv, outs = _gccens(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: audit log ") and "nothing was exported" in err
    assert [p for p in outs if p.exists()] == [] and not list(tmp_path.glob("*.sha256"))


def test_a_full_disk_refuses_the_cli_export_then_it_works_once_space_is_freed(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    path = tmp_path / "logs" / "audit.log"
    monkeypatch.setenv(log.ENV, str(path))
    _write(path, 1)
    argv, outs = _gccens(tmp_path)
    with monkeypatch.context() as full:
        _short_writes(full, per_call=30, fail_after=0)
        assert main(argv) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert [p for p in outs if p.exists()] == [] and audit_verify.verify(path).ok and len(_read(path)) == 1
    assert main(argv) == 0, capsys.readouterr().err
    got = _read(path)
    begins = [e for e in got if e["what"].startswith("begin: cli anonymize gccens")]
    done = {Path(e["file_name"]).name: e for e in got[1 + len(begins) :]}
    assert {Path(e["file_name"]).name for e in begins} >= {p.name for p in outs}
    assert all(e["sha256"] is None for e in begins)  # named before the command made its bytes
    assert {p.name for p in outs} <= set(done)
    assert all(done[p.name]["sha256"] == hashlib.sha256(p.read_bytes()).hexdigest() for p in outs)
    assert audit_verify.verify(path).ok


def test_a_completion_the_log_cannot_take_removes_the_cli_files(tmp_path: Path, monkeypatch, capsys) -> None:
    """The disk fills while the command runs: its begin entries are in, its completion cannot be."""
    from engine.audit import exports

    path = tmp_path / "logs" / "audit.log"
    monkeypatch.setenv(log.ENV, str(path))
    argv, outs = _gccens(tmp_path)
    real = exports.append

    def append(what, *a, **kw):
        if not what.startswith(("begin:", "failed:")):
            raise log.AuditLogUnavailable(path, "cannot be written (No space left on device)")
        return real(what, *a, **kw)

    monkeypatch.setattr(exports, "append", append)
    assert main(argv) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert [p for p in outs if p.exists()] == [] and not list(tmp_path.glob("*.sha256"))


def test_a_cli_run_that_fails_logs_its_begin_and_its_failure(tmp_path: Path, monkeypatch, capsys) -> None:
    path = tmp_path / "logs" / "audit.log"
    monkeypatch.setenv(log.ENV, str(path))
    argv, _ = _gccens(tmp_path)
    argv[argv.index("--k") + 1] = "1"  # k = 1 protects nobody: refused
    assert main(argv) == 2
    got = _read(path)
    begins = [e for e in got if e["what"].startswith("begin:")]
    failed = [e for e in got if e["what"].startswith("failed:")]
    assert begins and [e["file_name"] for e in failed] == [e["file_name"] for e in begins]
    assert all(e["what"].endswith("(UserError)") for e in failed) and audit_verify.verify(path).ok


# ------------------------------------------------------------------ the app's downloads, the same way
def test_a_download_is_logged_before_its_bytes_leave_and_refused_when_it_cannot_be(
    tmp_path, monkeypatch
) -> None:
    from ui.downloads import audited

    path = tmp_path / "logs" / "audit.log"
    monkeypatch.setenv(log.ENV, str(path))
    session: list = []
    context = {"user": "ann", "study": None, "release": "r1", "adversary": "a", "k": 5, "session": session}
    seen: list[list[dict]] = []

    def data() -> bytes:
        seen.append(log.entries(path))
        return b"released,rows\n"

    assert audited(data, "release file", "r1_release.csv", context)() == b"released,rows\n"
    begin, done = log.entries(path)
    assert seen == [[]]  # the bytes are built first, logged, then handed over
    assert begin["what"] == "begin: release file" and done["what"] == "release file"
    assert begin["sha256"] == done["sha256"] == hashlib.sha256(b"released,rows\n").hexdigest()
    assert session == [done]
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    monkeypatch.setenv(log.ENV, str(blocker / "audit.log"))
    with pytest.raises(UserError, match="nothing was exported"):
        audited(data, "release file", "r1_release.csv", context)()
    assert session == [done]
