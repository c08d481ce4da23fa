"""`python -m engine risk --sensitive ... --rho`: rho-uncertainty per category on the command line
(issue 39, first bullet)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from engine.commands.cli import main

ROWS = [
    ("P1", 1, "401.1"),
    ("P1", 1, "296.20"),
    ("P2", 1, "401.1"),
    ("P2", 2, "296.20"),
    ("P3", 1, "250.00"),
    ("P4", 1, "250.00"),
    ("P4", 1, "401.1"),
]


@pytest.fixture
def events(tmp_path: Path) -> Path:
    path = tmp_path / "events.csv"
    pd.DataFrame(ROWS, columns=["patient_id", "visit", "code"]).to_csv(path, index=False)
    return path


def _run(events: Path, tmp_path: Path, *extra: str) -> int:
    args = ["risk", "--events", str(events), "--scope", "cohort", "--knowledge", "all_visits"]
    return main([*args, "--out", str(tmp_path / "risk.csv"), *extra])


def test_rules_above_rho_and_share_inferred(events, tmp_path, capsys):
    rules, report = tmp_path / "rules.csv", tmp_path / "r.json"
    assert (
        _run(
            events,
            tmp_path,
            "--sensitive",
            "mental_health",
            "--rho",
            "0.5",
            "--sensitive-out",
            str(rules),
            "--report",
            str(report),
        )
        == 0
    )
    printed = capsys.readouterr().out
    # 401.1 is held by P1, P2, P4; P1 and P2 hold 296.20: 2 of 3 > 0.5, so P1 and P2 are inferred
    assert (
        "mental_health: 2 records hold it, 2 inferred above rho (50.00% of 4), 1 rules above rho" in printed
    )
    assert "401.1 -> mental_health: 2 of 3 (0.667)" in printed
    table = pd.read_csv(rules, dtype=str)
    assert table[
        ["category", "known codes", "of them holding", "candidates holding them"]
    ].values.tolist() == [["mental_health", "401.1", "2", "3"]]
    data = json.loads(report.read_text("utf-8"))["sensitive"]
    assert data["rho"] == 0.5 and data["meets rho"] is False
    assert data["categories"][0]["inferred above rho"] == 2


def test_rho_above_every_rule_infers_nothing(events, tmp_path, capsys):
    args = ["risk", "--events", str(events), "--scope", "cohort", "--knowledge", "single_visit"]
    assert (
        main([*args, "--out", str(tmp_path / "o.csv"), "--sensitive", "mental_health", "--rho", "0.7"]) == 0
    )
    assert "0 inferred above rho" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sensitive"], "--sensitive needs --rho"),
        (["--rho", "0.5"], "--rho goes with --sensitive"),
        (["--sensitive", "--rho", "1.5"], "rho must be a number from 0 to below 1"),
        (["--sensitive", "--rho", "0.5", "--sensitive-m", "7"], "must be a whole number from 1 to 4"),
        (["--sensitive", "hvi", "--rho", "0.5"], "no sensitive category 'hvi'"),
        (["--sensitive", " , ", "--rho", "0.5"], "name at least one sensitive category"),
    ],
)
def test_bad_options_exit_2(events, tmp_path, capsys, extra, message):
    assert _run(events, tmp_path, *extra) == 2
    assert message in capsys.readouterr().err
