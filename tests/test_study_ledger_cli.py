"""`study ledger STUDY [OTHER ...]` on the command line (issue 28): exit 0 when every pair of releases
sharing patients is verified as one, 1 when a pair fails. Small synthetic data, the smallest example
of `engine.study.ledger.combine`: P1 {a,b}, P2 {a,c}, P3 {d,b}, P4 {d,c}, P5 {a,b}; release A keeps
{a, d}, release B keeps {b, c} (GCCens with chosen codes, cohort scope): each has every record shared
by at least 2 patients, together P2, P3 and P4 are unique."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from engine.commands.cli import main

A, B, C, D = "401.1", "250.00", "272.4", "427.31"
COHORT = {"P1": (A, B), "P2": (A, C), "P3": (D, B), "P4": (D, C), "P5": (A, B)}


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, Path]:
    ev, co = tmp_path / "events.csv", tmp_path / "cohort.csv"
    rows = [(p, 1, code) for p, codes in COHORT.items() for code in codes]
    pd.DataFrame(rows, columns=["patient_id", "visit", "code"]).to_csv(ev, index=False)
    pd.DataFrame({"patient_id": list(COHORT)}).to_csv(co, index=False)
    return ev, co


def _study(tmp_path: Path, ev: Path, co: Path, name: str, releases: dict[str, str]) -> Path:
    study = tmp_path / f"{name}.json"
    common = ["--events", str(ev), "--cohort", str(co)]
    new = ["study", "new", str(study), *common, "--scope", "cohort", "--knowledge", "all_visits", "--k", "2"]
    assert main(new) == 0
    for rel, codes in releases.items():
        add = ["study", "add", str(study), "--name", rel, "gccens", *common, "--k", "2", "--scope", "cohort"]
        assert main([*add, "--codes", codes]) == 0
    return study


def _ledger(*studies: Path, ev: Path, co: Path) -> int:
    return main(["study", "ledger", *map(str, studies), "--events", str(ev), "--cohort", str(co)])


def test_a_pair_that_adds_up_fails(data, tmp_path, capsys):
    ev, co = data
    study = _study(tmp_path, ev, co, "s", {"A": f"{A},{D}", "B": f"{B},{C}"})
    capsys.readouterr()
    assert _ledger(study, ev=ev, co=co) == 1
    out = capsys.readouterr().out
    assert "2 release(s) on the ledger, 1 pair(s) sharing patients" in out
    assert "together NOT verified: 3 of 5 patients below k = 2 (3 unique)" in out


def test_a_safe_pair_passes(data, tmp_path, capsys):
    """The same release twice (same settings, two names): linked, nothing new is learnt."""
    ev, co = data
    study = _study(tmp_path, ev, co, "s", {"A": f"{A},{D}", "A again": f"{A},{D}"})
    capsys.readouterr()
    assert _ledger(study, ev=ev, co=co) == 0
    out = capsys.readouterr().out
    assert "1 pair(s) sharing patients" in out and "together verified" in out


def test_releases_of_two_studies_are_on_one_ledger(data, tmp_path, capsys):
    """A in one study, B in another (two recipients): still linked, still failing."""
    ev, co = data
    first = _study(tmp_path, ev, co, "first", {"A": f"{A},{D}"})
    second = _study(tmp_path, ev, co, "second", {"B": f"{B},{C}"})
    assert _ledger(first, ev=ev, co=co) == 0  # one release alone: no pair
    capsys.readouterr()
    assert _ledger(first, second, ev=ev, co=co) == 1
    assert "first.json / A + second.json / B" in capsys.readouterr().out
