"""The Code Count the CLI prints never reads as more codes than the original held (issue #36: "Heatherly
B and S at 1.37 M report CC 12106 of 12081"). A frequency bin built over the population may hold codes
only patients outside the cohort have; the release's sets then stand for codes the cohort never held."""

from __future__ import annotations

import json
import re

import pandas as pd

from engine.commands.cli import main


def _population_with_a_code_outside_the_cohort(tmp_path):
    rows = [(f"p{p}", c) for p in range(6) for c in ("401.1", "250.00")]
    rows += [("p0", "V70.0"), ("p1", "V70.1")]  # the cohort's two rare codes
    rows += [(f"p{p}", c) for p in range(6, 10) for c in ("401.1", "V70.2")]
    rows += [("p6", "V70.3")]  # as rare as V70.0 and V70.1, held only outside the cohort
    pd.DataFrame(rows, columns=["patient_id", "code"]).to_csv(tmp_path / "ev.csv", index=False)
    pd.DataFrame({"patient_id": [f"p{p}" for p in range(6)]}).to_csv(tmp_path / "co.csv", index=False)
    return tmp_path / "ev.csv", tmp_path / "co.csv"


def test_population_bin_with_a_code_the_cohort_never_held_prints_cc_within_the_original(tmp_path, capsys):
    ev, co = _population_with_a_code_outside_the_cohort(tmp_path)
    out, rep = tmp_path / "o.csv", tmp_path / "r.json"
    args = ["anonymize", "generalize", "--events", str(ev), "--cohort", str(co), "--k", "2"]
    args += ["--scope", "population", "--constraints", "none", "--complete", "--out", str(out)]
    assert main([*args, "--report", str(rep)]) == 0
    released = set(pd.read_csv(out, dtype=str)["code"])
    assert "{V70.0,V70.1,V70.3}" in released  # the case: a released bin holding V70.3
    printed = capsys.readouterr().out
    kept, held = map(int, re.search(r"CC (\d+) of (\d+)", printed).groups())
    assert (kept, held) == (4, 4)  # 401.1, 250.00, V70.0, V70.1: all the cohort's codes still represented
    assert "stand for 1 code the cohort never held" in printed
    retention = json.loads(rep.read_text())["retention"]
    assert retention["with generalization"]["code_count"] == 5  # the paper's count, V70.3 included
    assert retention["with generalization"]["codes_of_original"] == 4
