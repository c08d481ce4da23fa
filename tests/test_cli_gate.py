"""The four `anonymize` commands write their release through the export gate (issue 12, findings 5
and 8): output paths are checked before any work, `--k 1` is refused, files are written atomically,
a refused run removes the release an earlier run left, and the report names what was written."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

from engine import risk
from engine.adversary import Adversary
from engine.commands.cli import main
from engine.io import export

# six patients in three identical pairs: every method reaches k = 2 and no method reaches k = 7
VISITS = {
    "A": [[("401.1", 50), ("250.00", 50)], [("272.4", 51)]],
    "B": [[("401.9", 60)], [("250.00", 61), ("272.4", 61)]],
    "C": [[("427.31", 70), ("401.1", 70)]],
}


@pytest.fixture
def inputs(tmp_path):
    rows = [
        (f"{g}{twin}", v + 1, code, age)
        for g, visits in VISITS.items()
        for twin in (1, 2)
        for v, pairs in enumerate(visits)
        for code, age in pairs
    ]
    ev, co = tmp_path / "events.csv", tmp_path / "cohort.csv"
    pd.DataFrame(rows, columns=["patient_id", "visit", "code", "age"]).to_csv(ev, index=False)
    pd.DataFrame({"patient_id": sorted({r[0] for r in rows})}).to_csv(co, index=False)
    return tmp_path, ev, co


COMMANDS = {
    "generalize": (["--complete"], True, Adversary("cohort", "single_visit")),
    "gccens": (["--scope", "cohort"], False, Adversary("cohort", "all_visits")),
    "ugaclip": (["--knowledge", "single_visit"], True, Adversary("cohort", "single_visit")),
    "aclip": (["--knowledge", "all_visits"], True, Adversary("cohort", "all_visits")),
    "lda": (["--age-domain", "48-79"], False, Adversary("cohort", "all_visits")),
}


def report_paths(out, cmap, walk):
    """The set of files a run wrote, as `engine.io.export.publish` names them."""
    paths = {export.RELEASE_FILE: out}
    if cmap is not None:
        paths[export.CODE_MAP_FILE] = cmap
    return {**paths, export.CROSSWALK_FILE: walk}


def argv(name, ev, co, out, k, codemap=None, report=None):
    extra, has_codemap, _ = COMMANDS[name]
    args = [
        "anonymize",
        name,
        "--events",
        str(ev),
        "--cohort",
        str(co),
        "--k",
        str(k),
        *extra,
        "--out",
        str(out),
    ]
    if has_codemap:  # ugaclip / aclip require it
        args += ["--codemap", str(codemap if codemap is not None else co.parent / "map.csv")]
    if report is not None:
        args += ["--report", str(report)]
    return args


@pytest.mark.parametrize("name", list(COMMANDS))
def test_writes_the_verified_file_and_reports_its_fingerprint(inputs, name, capsys):
    tmp, ev, co = inputs
    out, cmap, rep, walk = tmp / "out.csv", tmp / "map.csv", tmp / "rep.json", tmp / "crosswalk.csv"
    assert main([*argv(name, ev, co, out, 2, cmap, rep), "--crosswalk", str(walk)]) == 0, (
        capsys.readouterr().err
    )
    assert "Release written without visit grouping" in capsys.readouterr().out  # the CLI says which
    report = json.loads(rep.read_text())["export"]
    assert report["written"] and report["refused"] is None and report["shows_visits"] is False
    assert report["files"][str(out)] == hashlib.sha256(out.read_bytes()).hexdigest()
    has_codemap = COMMANDS[name][1]
    if has_codemap:
        assert report["files"][str(cmap)] == hashlib.sha256(cmap.read_bytes()).hexdigest()
    # the file as a reader sees it is the release that was verified
    back = export.read_release_bytes(out.read_bytes(), cmap.read_bytes() if has_codemap else None)
    # patients are named by release ids (issue 23); the crosswalk, written with the set, maps them back
    ids = set(back.records.patient_ids.astype(str))
    assert all(i.startswith("R") for i in ids)
    walked = pd.read_csv(walk, dtype=str)
    assert set(walked["release_id"]) == ids
    assert set(walked["source_id"]) <= set(pd.read_csv(co, dtype=str)["patient_id"])
    assert report["files"][str(walk)] == hashlib.sha256(walk.read_bytes()).hexdigest()
    assert not back.shows_visits and "visit" not in pd.read_csv(out).columns
    assert risk.verify(back, COMMANDS[name][2], 2).ok
    assert sorted(p.name for p in tmp.iterdir() if p.name.startswith(".")) == []  # no temporary left
    assert export.check_manifest(report_paths(out, cmap if has_codemap else None, walk)) == []


@pytest.mark.parametrize("name", list(COMMANDS))
def test_output_paths_are_checked_before_any_work(inputs, name, capsys):
    """Issue 12, finding 8: `--out` in a missing folder or pointing at a folder ended in a traceback
    after the whole computation. The events path does not exist here: the --out error comes first."""
    tmp, _, co = inputs
    missing_events = tmp / "no_such_events.csv"
    for out, says in ((tmp / "nowhere" / "r.csv", "does not exist"), (tmp, "is a folder")):
        assert main(argv(name, missing_events, co, out, 2)) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --out ") and says in err and str(out) in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    if COMMANDS[name][1]:
        assert main(argv(name, missing_events, co, tmp / "r.csv", 2, codemap=tmp / "x" / "m.csv")) == 2
        assert "--codemap" in capsys.readouterr().err
    assert main(argv(name, missing_events, co, tmp / "r.csv", 2, report=tmp / "x" / "r.json")) == 2
    assert "--report" in capsys.readouterr().err


@pytest.mark.parametrize("name", list(COMMANDS))
def test_k_1_is_refused(inputs, name, capsys):
    """Issue 12, finding 8: `--k 1` wrote the original data as a "Verified" release."""
    tmp, ev, co = inputs
    out = tmp / "out.csv"
    assert main(argv(name, ev, co, out, 1)) == 2
    err = capsys.readouterr().err
    assert "k = 1 protects nobody" in err and not out.exists()


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_refused_run_removes_the_stale_release(inputs, name, capsys):
    """Issue 12, finding 5: a run that fails verification left the previous run's release at --out
    beside a report saying `verified: false`."""
    tmp, ev, co = inputs
    out, cmap, rep = tmp / "out.csv", tmp / "map.csv", tmp / "rep.json"
    assert main(argv(name, ev, co, out, 2, cmap, rep)) == 0
    has_codemap = COMMANDS[name][1]
    assert out.exists() and cmap.exists() == has_codemap
    capsys.readouterr()
    assert main(argv(name, ev, co, out, 7, cmap, rep)) == 2
    err = capsys.readouterr().err
    assert "No release written" in err and "Removed the release an earlier run left" in err
    assert str(out) in err and not out.exists() and not cmap.exists()
    if name not in ("ugaclip", "aclip", "lda"):  # refused after the computation: the report says so
        report = json.loads(rep.read_text())
        assert report["export"]["written"] is False
        assert report["export"]["removed_stale"][0] == str(out)


def test_finding1_minimal_case_generalize(tmp_path, capsys):
    """Issue 12, finding 1's events at k = 2: the file written has no visit grouping (the papers'
    form) and is verified as a reader of that file matches: P2's record holds both codes."""
    ev, co, out = tmp_path / "ev.csv", tmp_path / "co.csv", tmp_path / "out.csv"
    ev.write_text("patient_id,visit,code\nP1,1,401.1\nP1,1,250.00\nP2,1,401.1\nP2,2,250.00\n")
    co.write_text("patient_id\nP1\nP2\n")
    args = ["anonymize", "generalize", "--events", str(ev), "--cohort", str(co), "--k", "2"]
    assert main([*args, "--constraints", "none", "--out", str(out)]) == 0
    written = pd.read_csv(out, dtype=str)
    assert list(written.columns) == ["patient_id", "code"]
    back = export.read_release_bytes(out.read_bytes())
    assert risk.verify(back, Adversary("cohort", "single_visit"), 2).ok
    # the same rows with the visits shown are refused by the arbiter: P1's visit is unique
    shown = export.read_release_bytes(ev.read_bytes())
    assert shown.shows_visits
    assert risk.verify(shown, Adversary("cohort", "single_visit"), 2).failing["patient_id"].tolist() == ["P1"]
