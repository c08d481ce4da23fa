"""`python -m engine anonymize lda`: writes a verified release and a report; bad input exits 2."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from engine.commands.cli import main

KEY = "3c" * 32  # a fixed pseudonym key (--key-file): release ids are reproducible


def _above_89(age_label: str) -> bool:
    """An age label (`93`, `[65-96]`) naming an age above 89 other than as the top code `90+`."""
    return any(int(n) > 89 for n in re.findall(r"\d+(?!\d|\+)", age_label))


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
    out, rep, walk = tmp / "rel.csv", tmp / "rep.json", tmp / "crosswalk.csv"
    args = ["anonymize", "lda", "--events", str(ev), "--cohort", str(co), "--k", "2", "--age-domain", "33-40"]
    code = main([*args, "--out", str(out), "--report", str(rep), "--crosswalk", str(walk)])
    assert code == 0
    rel = pd.read_csv(out, dtype=str)
    assert list(rel.columns) == ["patient_id", "code", "age"]
    # patients are named by release ids (issue 23); the steward's crosswalk names the source ids
    assert sorted(set(rel["patient_id"])) == [f"R{i:03d}" for i in range(1, 7)]
    assert not set(rel["patient_id"]) & {f"P{i}" for i in range(1, 7)}
    crosswalk = pd.read_csv(walk, dtype=str)
    assert sorted(crosswalk["source_id"]) == [f"P{i}" for i in range(1, 7)]
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
        (["--w-icd", "1.5"], "--w-icd must be a number from 0 to 1, not 1.5"),
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


def test_the_cli_runs_the_settings_the_app_and_a_study_run(files) -> None:
    """Issue 17: one way to run a method. The command's options become `LDASettings`; its release file
    is the one `LDASettings.run` exports for the same cohort, and `--codemap` writes its code map."""
    from engine.commands.inputs import load_groups
    from engine.io.export import pseudonymous_frame
    from engine.io.pseudonyms import Pseudonyms
    from engine.study.runs import CodeSelection, LDASettings, RunInputs

    tmp, ev, co = files
    out, cmap, key = tmp / "rel.csv", tmp / "map.csv", tmp / "key"
    key.write_text(KEY + "\n")
    args = ["anonymize", "lda", "--events", str(ev), "--cohort", str(co), "--k", "2", "--age-domain", "33-40"]
    args += ["--key-file", str(key)]
    assert main([*args, "--roll-up", "3-digit", "--out", str(out), "--codemap", str(cmap)]) == 0
    g = load_groups(str(ev), cohort=str(co))
    settings = LDASettings(k=2, codes=CodeSelection("all"), age_low=33, age_high=40, roll_up="3-digit")
    release = settings.run(RunInputs(g.population, g.cohort))
    expected = pseudonymous_frame(release, Pseudonyms(KEY))  # the release's rows under release ids
    assert pd.read_csv(out, dtype=str).equals(expected.astype(str))
    code_map = pd.read_csv(cmap, dtype=str)
    assert list(code_map.columns) == ["released_item", "original_code", "note"]  # the gate's code map
    assert code_map[["released_item", "original_code"]].equals(release.exported_code_map().astype(str))
    # each released code|age item with the cohort's pairs it stands for, codes rolled up before the LDA
    assert set(code_map["original_code"].str.partition("|")[0]) == {"401"}


def test_lda_settings_roll_up_is_validated_and_round_trips() -> None:
    from engine.study.runs import LDASettings, SettingsError, settings_from_dict, settings_to_dict

    s = LDASettings(roll_up="section")
    assert settings_from_dict(json.loads(json.dumps(settings_to_dict(s)))) == s
    assert s.describe()["codes rolled up to"] == "section"
    with pytest.raises(SettingsError, match="LDA: roll_up must be one of"):
        settings_from_dict({"method": "LDA", "roll_up": "5-digit"})
    # a study file saved before the field existed still reads, without a roll-up
    assert settings_from_dict({"method": "LDA", "k": 3}).roll_up == ""


def test_cli_release_holds_no_age_above_89(tmp_path) -> None:
    """HIPAA safe harbor (issue 23): ages above 89 leave as the one category `90+`, in the release and
    in its code map, under the default age domain (which the data's 97 would have widened to 1-128)."""
    rows = [
        (f"MRN{1000041 + p}", c, a) for p in range(8) for c, a in (("401.1", 60 + 5 * p), ("250.00", 90 + p))
    ]
    ev = tmp_path / "events.csv"
    pd.DataFrame(rows, columns=["patient_id", "code", "age"]).to_csv(ev, index=False)
    co = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": sorted({r[0] for r in rows})}).to_csv(co, index=False)
    out, cmap, rep = tmp_path / "rel.csv", tmp_path / "map.csv", tmp_path / "rep.json"
    args = [
        "anonymize",
        "lda",
        "--events",
        str(ev),
        "--cohort",
        str(co),
        "--k",
        "2",
        "--codes",
        "401.1,250.00",
    ]
    assert main([*args, "--out", str(out), "--codemap", str(cmap), "--report", str(rep)]) == 0
    released, code_map = pd.read_csv(out, dtype=str), pd.read_csv(cmap, dtype=str)
    ages = [
        *released["age"],
        *(x.partition("|")[2] for x in code_map[["released_item", "original_code"]].stack()),
    ]
    assert "90+" in ages and not [a for a in ages if _above_89(a)]
    assert "MRN" not in out.read_text() + cmap.read_text()
    report = json.loads(rep.read_text())
    assert report["parameters"]["ages_top_coded_at"] == 90
