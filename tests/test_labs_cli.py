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


def test_recall_with_latent_adds_raw_and_paired_test(labs_csv, tmp_path, capsys):
    """With --latent: bands and the Holm-adjusted test per n in the CSV, and the verdict over every n
    printed (issue #36, finding 2: never n = 1 alone)."""
    out = tmp_path / "lat.csv"
    argv = ["labs", "recall", "--labs", str(labs_csv), "--trials", "10", "--simulations", "3"]
    assert main([*argv, "--latent", "2", "--epochs", "1", "--out", str(out)]) == 0
    got = pd.read_csv(out)
    assert list(got.columns) == [
        *("n", "recall", "random", "recall_raw", "p", "recall_low", "recall_high"),
        *("recall_raw_low", "recall_raw_high", "p_holm", "significant"),
    ]
    assert (got.recall_low <= got.recall).iloc[:99].all() and (got.recall <= got.recall_high).iloc[:99].all()
    printed = capsys.readouterr().out
    assert "- Releasing the encoder means (2 dimensions) " in printed and "Holm-adjusted over the" in printed


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--trials", "0"], "labs recall: trials must be a whole number from 1 to 1,000,000,000, not 0"),
        (["--latent", "1"], "labs recall: latent size must be between 2 and 64"),
        (
            ["--min-orders", "0"],
            "labs recall: min_orders must be a whole number from 1 to 1,000,000,000 or none, not 0",
        ),
        (["--seed", "-1"], "labs recall: seed must be a whole number from 0 to 2,147,483,647, not -1"),
        (["--epochs", "3"], "--epochs applies to the autoencoder"),
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


# ------------------------------------------------------------ the run object the page, CLI and bench share
def _days():
    return L.patient_days(structured_labs(120, 12, 4, seed=3))


def test_lab_recall_settings_run_the_papers_steps_in_order():
    """`LabRecallSettings.run_result` is the kernels' own pipeline: restrict (section 2.4), draw (2.5),
    rank (2.6), with the same seed giving the same draws."""
    from engine.study.runs import LabRecallSettings

    days = _days()
    settings = LabRecallSettings(
        min_orders=3, trials=15, simulations=4, against="99", query="one_day", seed=7
    )
    res = settings.run_result(days)
    kept = days.restrict_labs(3)
    expected = L.recall_at_n(kept, L.draw_queries(kept, 15, 4, "99", "one_day", 7))
    assert res.days.n_labs == kept.n_labs and res.model is None and res.latent is None
    assert (res.raw.per_simulation == expected.per_simulation).all()
    assert list(res.curves().columns) == ["n", "recall", "random"] and res.paired() is None
    assert settings.min_orders_for(days) == 3
    assert LabRecallSettings().min_orders_for(days) == L.default_min_orders(days.n_days)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"trials": 0}, "trials must be a whole number from 1 to 1,000,000,000, not 0"),
        ({"simulations": 0}, "simulations must be a whole number from 1 to 1,000,000,000, not 0"),
        ({"min_orders": 0}, "min_orders must be a whole number from 1 to 1,000,000,000 or none, not 0"),
        ({"against": "everyone"}, "against must be one of 99, population"),
        ({"query": "two_days"}, "query must be one of one_day, all_days"),
        ({"seed": -2}, "seed must be a whole number from 0 to 2,147,483,647, not -2"),
    ],
)
def test_lab_recall_settings_declare_their_checks_once(fields, message):
    from engine.study.runs import LabRecallSettings, SettingsError

    with pytest.raises(SettingsError, match=message):
        LabRecallSettings(**fields).validate()


def test_lab_recall_settings_train_with_the_runs_seed():
    from engine.labs.vae_config import VAEConfig, VAEConfigError
    from engine.study.runs import LabRecallSettings, SettingsError

    with pytest.raises(SettingsError, match="seed"):
        LabRecallSettings(seed=1, vae=VAEConfig(seed=2)).validate()
    with pytest.raises(SettingsError, match="no autoencoder"):
        LabRecallSettings().train(_days())
    with pytest.raises(VAEConfigError, match="latent size must be between 2 and 64"):
        VAEConfig(latent_dim=65)
