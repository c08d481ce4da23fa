"""Issue 39, second bullet, on the command line: `risk --knowledge whole_record` counts the classes of
identical code sets; the options that model the papers' attacker only are refused (exit 2) by name."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from engine.commands.cli import main

ROWS = [  # P1 and P3 hold the same codes; P5's codes are a part of theirs
    ("P1", "v1", "250.00"),
    ("P1", "v2", "401.1"),
    ("P3", "v1", "250.00"),
    ("P3", "v1", "401.1"),
    ("P5", "v1", "250.00"),
    ("P6", "v1", "401.1"),
]


@pytest.fixture
def events(tmp_path: Path) -> Path:
    ev = tmp_path / "events.csv"
    pd.DataFrame(ROWS, columns=["patient_id", "visit", "code"]).to_csv(ev, index=False)
    return ev


def test_risk_whole_record_counts_identical_code_sets(events, tmp_path, capsys) -> None:
    out = tmp_path / "d.csv"
    args = ["risk", "--events", str(events), "--scope", "cohort", "--knowledge", "whole_record"]
    assert main([*args, "--k", "2", "--out", str(out)]) == 0
    got = pd.read_csv(out).set_index("patient_id")["distinguishability"].to_dict()
    assert got == {"P1": 2, "P3": 2, "P5": 1, "P6": 1}  # the papers' all-visits model: P5 3, P6 3
    printed = capsys.readouterr().out
    assert "cohort / whole record" in printed and "share below k = 2: 50.00%" in printed


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--scope", "population", "--population-size", "400"], "--population-size"),
        (["--scope", "cohort", "--out", "d.csv", "--explain", "x.csv"], "--explain"),
        (["--scope", "cohort", "--out", "d.csv", "--count-repeats"], "--count-repeats"),
    ],
)
def test_risk_whole_record_refuses_the_papers_only_options(events, tmp_path, capsys, extra, words) -> None:
    extra = [str(tmp_path / a) if a.endswith(".csv") else a for a in extra]
    assert main(["risk", "--events", str(events), "--knowledge", "whole_record", *extra]) == 2
    err = capsys.readouterr().err
    assert words in err and "whole-record" in err


def test_study_under_the_whole_record_attacker_from_the_command_line(tmp_path, capsys) -> None:
    """`study new --knowledge whole_record`: the study file keeps the attacker; `study add` verifies the
    release under it (a refusal is tests/test_whole_record_study.py's)."""
    import json

    from tests.test_study_cli import _add, _new, _rows

    ev, co = tmp_path / "events.csv", tmp_path / "cohort.csv"
    pd.DataFrame(_rows(), columns=["patient_id", "visit", "code", "age"]).to_csv(ev, index=False)
    pd.DataFrame({"patient_id": sorted({r[0] for r in _rows()})}).to_csv(co, index=False)
    study = tmp_path / "study.json"
    _new(study, ev, co, 2, knowledge="whole_record")  # twins: every record's codes are held twice
    assert json.loads(study.read_text())["adversary"]["knowledge"] == "whole_record"
    assert _add(study, ev, co, "G2", "gccens", "--k", "2", "--scope", "cohort") == 0
    assert "cohort / whole record" in capsys.readouterr().out
