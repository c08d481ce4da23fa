"""`anonymize METHOD ... --sensitive CATS --rho R` (issue 39, the method option): the codes implying a
sensitive category above rho are suppressed after the method and before the export gate; the file
written meets rho and is verified at k."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from engine.commands.cli import main
from tests.test_study import small  # noqa: F401  (the 600-patient sample, written as files)


def _generalize(paths, tmp_path, *extra: str) -> list[str]:
    args = ["anonymize", "generalize", "--events", str(paths["events"]), "--cohort", str(paths["cohort"])]
    args += [
        "--k",
        "3",
        "--complete",
        "--out",
        str(tmp_path / "release.csv"),
        "--report",
        str(tmp_path / "r.json"),
    ]
    return [*args, *extra]


def test_the_option_suppresses_until_rho_is_met_before_the_gate(small, tmp_path, capsys):  # noqa: F811
    paths, _, _ = small
    assert main(_generalize(paths, tmp_path, "--sensitive", "mental_health", "--rho", "0.5")) == 0
    out = capsys.readouterr().out
    assert "rho verified under cohort / single visit; k verified." in out
    record = json.loads((tmp_path / "r.json").read_text())["export"]["sensitive"]
    assert record["rho verified"] and record["events suppressed"] > 0 and record["suppressed codes"]
    written = pd.read_csv(tmp_path / "release.csv", dtype=str)
    assert not set(record["suppressed codes"]) & set(written["code"])
    assert len(written) > 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rho", "0.5"], "--rho goes with --sensitive"),
        (["--sensitive", "hiv"], "--sensitive needs --rho"),
        (["--sensitive", "hiv", "--rho", "1.2"], "rho must be a number"),
        (["--sensitive", "nosuch", "--rho", "0.5"], "no sensitive category 'nosuch'"),
    ],
)
def test_bad_options_exit_2(small, tmp_path, capsys, extra, message):  # noqa: F811
    paths, _, _ = small
    assert main(_generalize(paths, tmp_path, *extra)) == 2
    assert message in capsys.readouterr().err


def test_the_report_describes_the_suppressed_release_written(small, tmp_path, capsys):  # noqa: F811
    """REPORT.json's figures were those of the method's release before the suppression while the
    file written was the suppressed one (issue 38: the suppression now comes before `make_release`)."""
    paths, _, _ = small
    assert main(_generalize(paths, tmp_path, "--sensitive", "mental_health", "--rho", "0.5")) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["export"]["sensitive"]["events suppressed"] > 0
    written = pd.read_csv(tmp_path / "release.csv", dtype=str)
    assert report["retention"]["with generalization"]["diagnosis_count"] == len(written)
    assert report["parameters"]["rho"] == 0.5
    assert f"DC {len(written)} of" in capsys.readouterr().out
