"""`python -m engine anonymize ugaclip|aclip` on a small cohort (the PNAS example)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from engine.commands.cli import main
from tests.test_profiles import mary_dataset


def _inputs(tmp_path):
    r = mary_dataset()
    ev, ids = tmp_path / "events.csv", tmp_path / "cohort.csv"
    r.to_frame().to_csv(ev, index=False)
    pd.DataFrame({"patient_id": r.patient_ids}).to_csv(ids, index=False)
    return ev, ids


def test_ugaclip_cli_writes_verified_release(tmp_path, capsys):
    ev, ids = _inputs(tmp_path)
    out, cmap, rep = tmp_path / "out.csv", tmp_path / "map.csv", tmp_path / "rep.json"
    args = ["anonymize", "ugaclip", "--events", str(ev), "--cohort", str(ids), "--k", "5"]
    args += ["--knowledge", "single_visit", "--out", str(out), "--codemap", str(cmap), "--report", str(rep)]
    assert main(args) == 0
    released = pd.read_csv(out, dtype=str)
    assert "{157.1,157.2,157.3}" in set(released["code"])
    codemap = pd.read_csv(cmap, dtype=str)
    assert set(codemap.loc[codemap["released_item"] == "{157.1,157.2,157.3}", "original_code"]) == {
        "157.1",
        "157.2",
        "157.3",
    }
    report = json.loads(rep.read_text())
    assert report["policy_check"]["ok"] and report["verification"]["ok"]
    assert report["privacy_policy"]["constraints"] == 1
    assert "Verified" in capsys.readouterr().out


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    ev, ids = _inputs(tmp_path)
    base = ["anonymize", "aclip", "--events", str(ev), "--cohort", str(ids), "--knowledge", "all_visits"]
    base += ["--out", str(tmp_path / "o.csv"), "--codemap", str(tmp_path / "m.csv")]
    assert main([*base, "--k", "1"]) == 2
    assert "--k must be >= 2" in capsys.readouterr().err
    assert main([*base, "--k", "5", "--max-suppressed", "-1"]) == 2
    bad = tmp_path / "policy.csv"
    bad.write_text("disease,icd9_codes\nAsthma,\n")
    assert main([*base, "--k", "5", "--utility-policy", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "row 2, column 'icd9_codes'" in err and "Traceback" not in err
    # a limit of 0 suppressed codes with a policy that forbids generalizing pancreatic codes
    single = tmp_path / "single.csv"
    single.write_text("disease,icd9_codes\nA,157.1\nB,157.2\nC,157.3\n")
    ug = ["anonymize", "ugaclip", *base[2:]]
    assert main([*ug, "--k", "5", "--utility-policy", str(single), "--max-suppressed", "0"]) == 2
    assert "suppression limit of 0 codes exceeded" in capsys.readouterr().err


@pytest.mark.parametrize("with_visits", [False, True], ids=["one set per patient", "visits kept"])
def test_cli_writes_the_export_structure_it_verified(tmp_path, capsys, with_visits):
    """Finding 1: the file carries the visit grouping only with --with-visits, and the CLI says which."""
    ev, ids = _inputs(tmp_path)
    out, cmap = tmp_path / "out.csv", tmp_path / "map.csv"
    args = ["anonymize", "aclip", "--events", str(ev), "--cohort", str(ids), "--k", "5"]
    args += ["--knowledge", "single_visit", "--out", str(out), "--codemap", str(cmap)]
    assert main(args + (["--with-visits"] if with_visits else [])) == 0
    released = pd.read_csv(out, dtype=str)
    expected = ["patient_id", "visit", "code"] if with_visits else ["patient_id", "code"]
    assert list(released.columns) == expected
    assert not released.duplicated().any()
    printed = capsys.readouterr().out
    assert ("visits kept" if with_visits else "one set of codes per patient") in printed


def test_cli_refuses_visits_for_an_all_visits_attacker(tmp_path, capsys):
    ev, ids = _inputs(tmp_path)
    out = tmp_path / "o.csv"
    args = ["anonymize", "ugaclip", "--events", str(ev), "--cohort", str(ids), "--k", "5", "--with-visits"]
    args += ["--knowledge", "all_visits", "--out", str(out), "--codemap", str(tmp_path / "m.csv")]
    assert main(args) == 2
    assert "--with-visits needs --knowledge single_visit" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(("command", "knowledge"), [("ugaclip", "single_visit"), ("aclip", "all_visits")])
def test_the_cli_runs_the_settings_the_app_and_a_study_run(tmp_path, command, knowledge):
    """Issue 17: one way to run a method. The command's options become `ProfilesSettings` (the default
    utility policy follows the cohort's vocabulary, as in the app); its release file is the one
    `ProfilesSettings.run` exports for the same cohort."""
    from engine.commands.inputs import load_groups
    from engine.io.export import pseudonymous_frame, safe_csv_bytes
    from engine.study.runs import ProfilesSettings, RunInputs
    from tests.pseudonym_support import KEY, PSEUDONYMS

    ev, ids = _inputs(tmp_path)
    out = tmp_path / "out.csv"
    args = [
        "anonymize",
        command,
        "--events",
        str(ev),
        "--cohort",
        str(ids),
        "--k",
        "5",
        "--knowledge",
        knowledge,
    ]
    key = tmp_path / "key"
    key.write_text(KEY)
    assert (
        main([*args, "--out", str(out), "--codemap", str(tmp_path / "map.csv"), "--key-file", str(key)]) == 0
    )
    g = load_groups(str(ev), cohort=str(ids))
    settings = ProfilesSettings(algorithm=command.upper(), k=5, knowledge=knowledge)
    release = settings.run(RunInputs(g.cohort, g.cohort))
    assert out.read_bytes() == safe_csv_bytes(pseudonymous_frame(release, PSEUDONYMS))
