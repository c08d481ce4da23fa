"""`python -m engine risk`: k-map without the population (`--population-size`), the risk measures and
`--report`, and `--explain` (issue 27)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine import risk
from engine.adversary import Adversary
from engine.commands.cli import main
from engine.estimate import explain, kmap
from engine.records import Records

ROWS = [
    ("P1", "v1", "250.00"),
    ("P1", "v1", "401.1"),
    ("P1", "v2", "272.4"),
    ("P2", "v1", "250.01"),
    ("P2", "v2", "401.9"),
    ("P3", "v1", "250.00"),
    ("P3", "v1", "401.1"),
    ("P4", "v1", "724.2"),
    ("P5", "v1", "250.00"),
    ("P6", "v1", "401.1"),
    ("P6", "v2", "272.4"),
]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    ev = tmp_path / "events.csv"
    pd.DataFrame(ROWS, columns=["patient_id", "visit", "code"]).to_csv(ev, index=False)
    co = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": ["P1", "P2", "P3", "P4"]}).to_csv(co, index=False)
    return ev, co


def _cohort() -> Records:
    frame = pd.DataFrame(ROWS, columns=["patient_id", "visit", "code"])
    return Records.from_frame(frame[frame["patient_id"].isin(["P1", "P2", "P3", "P4"])])


def test_population_size_estimates_kmap_from_the_cohort_alone(files, tmp_path, capsys) -> None:
    ev, co = files
    out, rep = tmp_path / "est.csv", tmp_path / "est.json"
    args = ["risk", "--events", str(ev), "--cohort", str(co), "--scope", "population"]
    args += ["--knowledge", "single_visit", "--k", "2", "--population-size", "400"]
    assert main([*args, "--out", str(out), "--report", str(rep)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("WARNING: " + kmap.RANDOM_SAMPLE_WARNING)
    est = kmap.estimate_kmap(_cohort(), 400, "single_visit", 2)
    data = json.loads(rep.read_text("utf-8"))
    assert data["warning"] == kmap.RANDOM_SAMPLE_WARNING
    assert data["share unique"]["estimate"] == pytest.approx(est.share_unique.estimate)
    assert data["share below k"]["low"] == pytest.approx(est.share_below_k.low)
    assert data["share below k"]["high"] == pytest.approx(est.share_below_k.high)
    assert f"{est.share_below_k.estimate:.2%}" in printed
    assert data["population size"] == 400 and data["cohort size"] == 4
    table = pd.read_csv(out)
    assert table["p_below_k"].to_numpy() == pytest.approx(est.p_below_k)


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--scope", "cohort", "--population-size", "400"], "needs --scope population"),
        (["--scope", "population", "--population-size", "3"], "smaller than the cohort"),
        (["--scope", "cohort"], "--out is required"),
        (["--scope", "population", "--population-size", "400", "--explain", "x.csv"], "--explain"),
    ],
)
def test_estimate_options_are_checked(files, capsys, extra, words) -> None:
    ev, co = files
    assert main(["risk", "--events", str(ev), "--cohort", str(co), "--knowledge", "all_visits", *extra]) == 2
    assert words in capsys.readouterr().err


def test_report_holds_the_risk_measures(files, tmp_path, capsys) -> None:
    ev, co = files
    out, rep = tmp_path / "d.csv", tmp_path / "r.json"
    args = ["risk", "--events", str(ev), "--cohort", str(co), "--scope", "population"]
    assert (
        main([*args, "--knowledge", "all_visits", "--k", "2", "--out", str(out), "--report", str(rep)]) == 0
    )
    data = json.loads(rep.read_text("utf-8"))
    pop = Records.from_frame(pd.DataFrame(ROWS, columns=["patient_id", "visit", "code"]))
    dis = risk.original_distinguishability(_cohort(), Adversary("population", "all_visits"), pop)
    m = risk.risk_measures(dis, risk.threshold_of_k(2))
    assert {key: data[key] for key in m.as_dict()} == m.as_dict()
    assert "threshold checked: maximum risk 1/k = 0.50 (k = 2)" in capsys.readouterr().out


def test_explain_writes_every_record_below_k_and_warns_on_stderr(files, tmp_path, capsys) -> None:
    ev, co = files
    out, why = tmp_path / "d.csv", tmp_path / "why.csv"
    args = ["risk", "--events", str(ev), "--cohort", str(co), "--scope", "cohort", "--knowledge"]
    assert main([*args, "single_visit", "--k", "2", "--out", str(out), "--explain", str(why)]) == 0
    assert "SOURCE patient ids" in capsys.readouterr().err
    table = pd.read_csv(why, dtype={"patient_id": str})
    dis = pd.read_csv(out)["distinguishability"].to_numpy()
    assert table["record"].tolist() == np.flatnonzero(dis < 2).tolist()
    expected = explain.explanations_frame(
        explain.explain_records(_cohort(), Adversary("cohort", "single_visit"), 2), with_ids=True
    )
    assert table["patient_id"].tolist() == expected["patient_id"].tolist()
    assert table["change"].tolist() == expected["change"].tolist()


def test_explain_states_each_fix_re_verified_and_its_cost_over_the_release(files, tmp_path, capsys) -> None:
    """Issue 35 finding 5: each change is counted again by engine.risk on the release it makes (its
    category recoded in every record) and states its cost over every record it touches; the run says
    how many re-verify."""
    ev, co = files
    out, why = tmp_path / "d.csv", tmp_path / "why.csv"
    args = ["risk", "--events", str(ev), "--cohort", str(co), "--scope", "population", "--knowledge"]
    assert main([*args, "all_visits", "--k", "2", "--out", str(out), "--explain", str(why)]) == 0
    printed = capsys.readouterr().out
    table = pd.read_csv(why, dtype={"patient_id": str})
    pop = Records.from_frame(pd.DataFrame(ROWS, columns=["patient_id", "visit", "code"]))
    found = explain.explain_records(_cohort(), Adversary("population", "all_visits"), 2, pop)
    cost = ["pairs lost", "events lost", "records recoded", "pairs recoded", "events recoded"]
    assert table[cost].to_numpy().tolist() == [
        [e.pairs_lost, e.events_lost, e.records_recoded, e.pairs_recoded, e.events_recoded] for e in found
    ]
    assert (table["distinguishability after"] >= 2).all() and all(e.verified for e in found)
    assert any("in every record" in c for c in table["change"])
    assert f"re-verified by engine.risk: {len(found)} of {len(found)} changes bring" in printed


def test_explain_may_not_overwrite_an_input(files, capsys) -> None:
    ev, co = files
    args = [
        "risk",
        "--events",
        str(ev),
        "--cohort",
        str(co),
        "--scope",
        "cohort",
        "--knowledge",
        "all_visits",
    ]
    assert main([*args, "--out", str(ev.parent / "o.csv"), "--explain", str(co)]) == 2
    assert "--explain" in capsys.readouterr().err
