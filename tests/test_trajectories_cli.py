"""`python -m engine anonymize lda`: writes a verified release and a report; bad input exits 2."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from engine.commands.cli import main

FIG3A = [
    [("401.1", 33), ("401.1", 34), ("401.1", 35)],
    [("401.1", 38), ("401.1", 40)],
    [("401.9", 38), ("401.1", 40)],
    [("401.9", 33), ("401.1", 33), ("401.1", 34), ("401.1", 35)],
    [("401.1", 39), ("401.9", 40)],
    [("401.1", 40), ("401.9", 40)],
]


@pytest.fixture
def files(tmp_path):
    rows = [(f"P{p + 1}", v + 1, c, a) for p, t in enumerate(FIG3A) for v, (c, a) in enumerate(t)]
    ev = tmp_path / "events.csv"
    pd.DataFrame(rows, columns=["patient_id", "visit", "code", "age"]).to_csv(ev, index=False)
    co = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": [f"P{i}" for i in range(1, 7)]}).to_csv(co, index=False)
    return tmp_path, ev, co


def test_cli_writes_verified_release_and_report(files, capsys) -> None:
    tmp, ev, co = files
    out, rep = tmp / "rel.csv", tmp / "rep.json"
    args = ["anonymize", "lda", "--events", str(ev), "--cohort", str(co), "--k", "2", "--age-domain", "33-40"]
    code = main([*args, "--out", str(out), "--report", str(rep)])
    assert code == 0
    rel = pd.read_csv(out, dtype=str)
    assert list(rel.columns) == ["patient_id", "code", "age"]
    assert set(rel["patient_id"]) == {f"P{i}" for i in range(1, 7)}
    report = json.loads(rep.read_text())
    assert report["verification"]["ok"] is True
    assert all(c["size"] >= 2 for c in report["clusters"])
    assert "Verified" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--age-domain", "40-33"], "HI must be greater"),
        (["--age-domain", "30-35"], "outside the age hierarchy"),
        (["--k", "9"], "at least k = 9"),
        (["--w-icd", "1.5"], "--w-icd must lie in"),
    ],
)
def test_cli_bad_input_exits_2(files, capsys, extra, message) -> None:
    tmp, ev, co = files
    args = [
        "anonymize",
        "lda",
        "--events",
        str(ev),
        "--cohort",
        str(co),
        "--k",
        "2",
        "--out",
        str(tmp / "r.csv"),
    ]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp / "r.csv").exists()


def test_cli_roll_up_to_three_digit(files) -> None:
    tmp, ev, co = files
    out = tmp / "rel.csv"
    args = ["anonymize", "lda", "--events", str(ev), "--cohort", str(co), "--k", "3", "--age-domain", "33-40"]
    assert main([*args, "--roll-up", "3-digit", "--codes", "401", "--out", str(out)]) == 0
    rel = pd.read_csv(out, dtype=str)
    assert set(rel["code"]) <= {"401", "390-459", "401-405", "Any"}
