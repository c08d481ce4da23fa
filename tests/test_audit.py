"""The audit trail (issue 25): engine/audit/log.py, `python -m engine audit verify`, the CLI's and the
app's downloads' entries."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from engine.audit import log
from engine.audit import verify as audit_verify
from engine.commands.cli import main


def _write(path: Path, n: int) -> list[dict]:
    return [
        log.append("table CSV", f"f{i}.csv", f"bytes {i}".encode(), user="ann", k=5, path=path)
        for i in range(n)
    ]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _put(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines))


def _forge(entry: dict, prev_hash: str, **changes) -> str:
    """A line an attacker writes with a correct hash of its own."""
    e = {**entry, **changes, "prev_hash": prev_hash}
    e["hash"] = log.entry_hash(e)
    return json.dumps(e, sort_keys=True, separators=(",", ":"))


def test_a_good_chain_verifies_and_counts(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "audit.log"
    written = _write(path, 4)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    got = log.entries(path)
    assert got == written and [e["seq"] for e in got] == [1, 2, 3, 4]
    assert got[0]["prev_hash"] == log.GENESIS and got[1]["prev_hash"] == got[0]["hash"]
    assert got[0]["sha256"] == __import__("hashlib").sha256(b"bytes 0").hexdigest()
    assert got[0]["time"].endswith("Z") and got[0]["user"] == "ann" and got[0]["k"] == 5
    assert set(got[0]) == {*log.FIELDS, "prev_hash", "mac", "hash"}
    result = audit_verify.verify(path)
    assert result.ok and result.count == 4 and result.last_hash == got[-1]["hash"]


def test_a_changed_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _write(path, 5)
    lines = _lines(path)
    lines[2] = lines[2].replace('"user":"ann"', '"user":"bob"')
    _put(path, lines)
    result = audit_verify.verify(path)
    assert [n for n, _ in result.problems] == [3] and "changed" in result.problems[0][1]


def test_a_changed_line_with_a_recomputed_hash_is_named(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    entries = _write(path, 5)
    lines = _lines(path)
    lines[1] = _forge(entries[1], entries[0]["hash"], file_name="other.csv")
    _put(path, lines)
    result = audit_verify.verify(path)
    assert [n for n, _ in result.problems] == [2] and "changed" in result.problems[0][1]


@pytest.mark.parametrize("removed", [0, 2])
def test_a_removed_line_is_named(tmp_path: Path, removed: int) -> None:
    path = tmp_path / "audit.log"
    _write(path, 5)
    lines = _lines(path)
    del lines[removed]
    _put(path, lines)
    result = audit_verify.verify(path)
    assert [n for n, _ in result.problems] == [removed + 1], result.message()
    assert "removed before it" in result.problems[0][1]


def test_removed_last_lines_are_found_against_the_head(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _write(path, 5)
    _put(path, _lines(path)[:3])
    result = audit_verify.verify(path)
    assert [n for n, _ in result.problems] == [4] and "2 last entries removed" in result.problems[0][1]


def test_reordered_lines_are_named(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _write(path, 5)
    lines = _lines(path)
    lines[1], lines[2] = lines[2], lines[1]
    _put(path, lines)
    result = audit_verify.verify(path)
    assert [n for n, _ in result.problems] == [2, 3], result.message()
    assert all("reordered" in text for _, text in result.problems)


def test_an_inserted_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    entries = _write(path, 4)
    lines = _lines(path)
    lines.insert(2, _forge(entries[1], entries[1]["hash"], seq=3, file_name="forged.csv"))
    _put(path, lines)
    result = audit_verify.verify(path)
    assert [n for n, _ in result.problems] == [3] and "inserted" in result.problems[0][1], result.message()
    garbage = tmp_path / "g.log"
    _write(garbage, 3)
    _put(garbage, [*_lines(garbage)[:1], "not json", *_lines(garbage)[1:]])
    assert [n for n, _ in audit_verify.verify(garbage).problems] == [2]


def test_audit_verify_command(tmp_path: Path, capsys) -> None:
    path = tmp_path / "audit.log"
    _write(path, 3)
    assert main(["audit", "verify", str(path)]) == 0
    assert "3 entries" in capsys.readouterr().out
    lines = _lines(path)
    lines[0] = lines[0].replace("f0.csv", "x.csv")
    _put(path, lines)
    assert main(["audit", "verify", str(path)]) == 1
    assert "line 1: changed" in capsys.readouterr().err
    assert main(["audit", "verify", str(tmp_path / "none.log")]) == 1


APPENDER = """
import os, sys
from engine.audit import log
for i in range(int(sys.argv[2])):
    log.append("bundle", f"p{os.getpid()}_{i}.zip", os.urandom(8), user="x", path=sys.argv[1])
"""


def test_concurrent_writers_keep_one_chain(tmp_path: Path) -> None:
    """Four processes append at once. They are fresh interpreters (not multiprocessing's spawn, whose
    children re-import `__main__`: after an AppTest in the same worker that is Streamlit's temporary
    script, gone, and no child wrote a line)."""
    path = tmp_path / "audit.log"
    procs = [
        subprocess.Popen([sys.executable, "-c", APPENDER, str(path), "25"], cwd=Path(__file__).parent.parent)
        for _ in range(4)
    ]
    assert [p.wait(120) for p in procs] == [0, 0, 0, 0]
    result = audit_verify.verify(path)
    assert result.ok and result.count == 100, result.message()


def test_the_default_log_is_in_the_checkout_and_the_environment_moves_it(monkeypatch) -> None:
    monkeypatch.delenv(log.ENV, raising=False)
    assert log.log_path() == Path(__file__).resolve().parent.parent / ".cohortshield" / "audit.log"
    monkeypatch.setenv(log.ENV, "/srv/audit/cs.log")
    assert log.log_path() == Path("/srv/audit/cs.log")


def test_cli_writes_append_entries_with_the_os_user(tmp_path: Path, monkeypatch, capsys) -> None:
    audit = tmp_path / "audit.log"
    monkeypatch.setenv(log.ENV, str(audit))
    events, cohort = tmp_path / "events.csv", tmp_path / "cohort.csv"
    events.write_text(
        "patient_id,code\n" + "".join(f"p{i},250.00\np{i},401.9\n" for i in range(6)) + "p6,724.2\n"
    )
    cohort.write_text("patient_id\n" + "".join(f"p{i}\n" for i in range(7)))
    out, cmap, walk = tmp_path / "r.csv", tmp_path / "m.csv", tmp_path / "walk.csv"
    argv = ["anonymize", "gccens", "--events", str(events), "--cohort", str(cohort), "--k", "2"]
    assert main([*argv, "--out", str(out), "--codemap", str(cmap), "--crosswalk", str(walk)]) == 0, (
        capsys.readouterr().err
    )
    got = {Path(e["file_name"]).name: e for e in log.entries(audit)}
    assert {"r.csv", "m.csv", "walk.csv"} <= set(got)
    import hashlib

    assert got["r.csv"]["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert got["r.csv"]["user"] == log.os_user() and got["r.csv"]["k"] == 2
    assert got["r.csv"]["what"].startswith("cli anonymize gccens --out")
    assert "walk.csv" in got and got["walk.csv"]["what"].endswith("--crosswalk")
    assert audit_verify.verify(audit).ok
    run = subprocess.run(
        [sys.executable, "-m", "engine", "audit", "verify", str(audit)], capture_output=True, text=True
    )
    assert run.returncode == 0 and f"{2 * len(got)} entries" in run.stdout  # each file: begin, done
