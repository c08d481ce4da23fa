"""`python -m engine labs uniqueness|recall` (issue #9's CLI)."""

from __future__ import annotations

import pandas as pd
import pytest

from engine.commands.cli import main
from engine.labs import reident as L
from tests.test_labs import structured_labs


@pytest.fixture(scope="module")
def labs_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("labs") / "labs.csv"
    structured_labs(250, 20, 5, seed=9).to_csv(path, index=False)
    return path


def test_uniqueness_writes_figure_3_rows(labs_csv, tmp_path, capsys):
    out = tmp_path / "u.csv"
    assert main(["labs", "uniqueness", "--labs", str(labs_csv), "--out", str(out)]) == 0
    got = pd.read_csv(out)
    assert list(got.columns) == ["days", "patients", "share_unique"]
    expected = L.uniqueness(L.patient_days(pd.read_csv(labs_csv, dtype={"patient_id": str}))).by_days()
    assert got.patients.tolist() == expected.patients.tolist()
    assert got.share_unique.to_numpy() == pytest.approx(expected.share_unique.to_numpy())
    assert "unique" in capsys.readouterr().out


@pytest.mark.parametrize("against", ["99", "population"])
def test_recall_writes_n_recall_random_and_is_reproducible(labs_csv, tmp_path, against):
    outs = []
    for name in ("a.csv", "b.csv"):
        out = tmp_path / name
        argv = ["labs", "recall", "--labs", str(labs_csv), "--trials", "20", "--simulations", "3"]
        assert main([*argv, "--against", against, "--seed", "4", "--out", str(out)]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    got = pd.read_csv(tmp_path / "a.csv")
    assert list(got.columns) == ["n", "recall", "random"] and got.n.tolist() == list(range(1, 101))
    assert got.recall.iloc[0] > got.random.iloc[0]  # the structured cohort is re-identifiable


def test_recall_with_latent_adds_raw_and_paired_test(labs_csv, tmp_path):
    out = tmp_path / "lat.csv"
    argv = ["labs", "recall", "--labs", str(labs_csv), "--trials", "10", "--simulations", "3"]
    assert main([*argv, "--latent", "2", "--epochs", "1", "--out", str(out)]) == 0
    got = pd.read_csv(out)
    assert list(got.columns) == ["n", "recall", "random", "recall_raw", "p"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--trials", "0"], "--trials must be at least 1"),
        (["--latent", "1"], "--latent must be between 2 and 64"),
        (["--min-orders", "0"], "--min-orders must be at least 1"),
        (["--min-orders", "100000"], "two patients"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(labs_csv, tmp_path, capsys, extra, message):
    argv = ["labs", "recall", "--labs", str(labs_csv), "--out", str(tmp_path / "x.csv"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_missing_file_and_missing_column_are_user_errors(tmp_path, capsys):
    assert main(["labs", "uniqueness", "--labs", str(tmp_path / "none.csv"), "--out", "x.csv"]) == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("patient_id,lab\na,K\n")
    assert main(["labs", "uniqueness", "--labs", str(bad), "--out", str(tmp_path / "u.csv")]) == 2
    err = capsys.readouterr().err
    assert "none.csv" in err and "bad.csv" in err and "day" in err


def test_blank_day_names_file_row_and_column(tmp_path, capsys):
    bad = tmp_path / "blank.csv"
    bad.write_text("patient_id,day,lab\na,1,K\nb,,K\n")
    assert main(["labs", "uniqueness", "--labs", str(bad), "--out", str(tmp_path / "u.csv")]) == 2
    err = capsys.readouterr().err
    assert "blank.csv" in err and "row 3" in err and "'day'" in err
