"""engine/commands/cli.py: a user's mistake is one line and exit status 2; a bug keeps its traceback (issue 17)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.commands.cli import main


def test_a_missing_input_file_is_one_line_and_status_2(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "nope.csv"
    args = ["risk", "--events", str(missing), "--scope", "cohort", "--knowledge", "all_visits"]
    code = main([*args, "--out", str(tmp_path / "out.csv")])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"error: {missing}: no such file\n"


def test_a_bad_argument_is_one_line_and_status_2(tmp_path: Path, capsys) -> None:
    assert main(["sample", "--out", str(tmp_path), "--patients", "0"]) == 2
    assert capsys.readouterr().err == "error: --patients must be a positive number of patients, not 0\n"


@pytest.mark.parametrize("bug", [ValueError("internal"), KeyError("internal")])
def test_an_internal_error_keeps_its_traceback(tmp_path: Path, monkeypatch, bug: Exception) -> None:
    """A ValueError or KeyError from the engine's own code is a bug: it propagates (the traceback
    shows where), it is not printed as a user's one-line mistake."""
    import engine.synth.generator

    def broken(*args, **kwargs):
        raise bug

    monkeypatch.setattr(engine.synth.generator, "write_sample", broken)
    with pytest.raises(type(bug), match="internal"):
        main(["sample", "--out", str(tmp_path), "--patients", "5"])
