"""Issue 23: the command line never overwrites its inputs (engine/commands/paths.py). `--out` equal to
`--events` replaced the events file and exited 0 (anonymize and risk alike), `--out` equal to
`--codemap` lost the release, `--report` equal to `--cohort` turned the cohort list into JSON. Every
command now refuses, before any work, an output that is an input or another output (links resolved),
naming both options and the path. A release set killed between its writes leaves no temporary file
after the next run, and `check_manifest` calls an interrupted set incomplete."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from engine.commands.cli import _leaf_parsers, build_parser, main
from engine.io import export

ROWS = [
    (f"{g}{twin}", visit, code)
    for g, visits in {"A": [["401.1", "250.00"], ["272.4"]], "B": [["401.9"], ["250.00", "272.4"]]}.items()
    for twin in (1, 2, 3)
    for visit, codes in enumerate(visits, start=1)
    for code in codes
]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    ev, co = tmp_path / "events.csv", tmp_path / "cohort.csv"
    pd.DataFrame(ROWS, columns=["patient_id", "visit", "code"]).to_csv(ev, index=False)
    pd.DataFrame({"patient_id": sorted({r[0] for r in ROWS})}).to_csv(co, index=False)
    return ev, co


def gccens(ev: Path, co: Path, *extra: str) -> list[str]:
    return [
        "anonymize",
        "gccens",
        "--events",
        str(ev),
        "--cohort",
        str(co),
        "--k",
        "2",
        "--scope",
        "cohort",
        *extra,
    ]


def refused(capsys, code: int, *needles: str) -> str:
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)
    return err


def test_out_equal_to_events_is_refused_and_the_events_kept(files, capsys) -> None:
    ev, co = files
    before = ev.read_bytes()
    code = main(gccens(ev, co, "--out", str(ev)))
    refused(capsys, code, "--out", "--events", str(ev), "overwrite an input")
    assert ev.read_bytes() == before


def test_risk_out_equal_to_events_is_refused(files, capsys) -> None:
    ev, _co = files
    before = ev.read_bytes()
    args = ["risk", "--events", str(ev), "--scope", "cohort", "--knowledge", "all_visits", "--out", str(ev)]
    refused(capsys, main(args), "--out", "--events", str(ev))
    assert ev.read_bytes() == before


def test_out_equal_to_codemap_is_refused(files, capsys) -> None:
    ev, co = files
    out = ev.parent / "release.csv"
    refused(capsys, main(gccens(ev, co, "--out", str(out), "--codemap", str(out))), "--codemap", "--out")
    assert not out.exists()


def test_report_equal_to_cohort_is_refused(files, capsys) -> None:
    ev, co = files
    before = co.read_bytes()
    args = gccens(ev, co, "--out", str(ev.parent / "r.csv"), "--report", str(co))
    refused(capsys, main(args), "--report", "--cohort", str(co))
    assert co.read_bytes() == before


def test_links_are_resolved(files, capsys) -> None:
    """A symbolic link to the events, a hard link to the cohort, and a path spelled another way."""
    ev, co = files
    sym, hard = ev.parent / "sym.csv", ev.parent / "hard.csv"
    sym.symlink_to(ev)
    os.link(co, hard)
    refused(capsys, main(gccens(ev, co, "--out", str(sym))), "--out", "--events")
    refused(
        capsys, main(gccens(ev, co, "--out", str(ev.parent / "x.csv"), "--report", str(hard))), "--cohort"
    )
    odd = ev.parent / "sub" / ".." / "events.csv"
    (ev.parent / "sub").mkdir()
    refused(capsys, main(gccens(ev, co, "--out", str(odd))), "--events")


def test_the_manifest_and_crosswalk_are_outputs_too(files, capsys) -> None:
    ev, co = files
    out = ev.parent / "r.csv"
    refused(
        capsys, main(gccens(ev, co, "--out", str(out), "--crosswalk", str(ev))), "--crosswalk", "--events"
    )
    refused(capsys, main(gccens(ev, co, "--out", str(out), "--key-file", str(co))), "--key-file", "--cohort")
    manifest = ev.parent / "r.csv.sha256"
    refused(
        capsys, main(gccens(ev, co, "--out", str(out), "--codemap", str(manifest))), "the manifest of --out"
    )


def test_phewas_labs_shards_and_study_outputs(files, capsys, tmp_path) -> None:
    ev, co = files
    args = ["phewas", "--events", str(ev), "--genotypes", str(co), "--out", str(co)]
    refused(capsys, main(args), "--out", "--genotypes")
    refused(capsys, main(["labs", "uniqueness", "--labs", str(ev), "--out", str(ev)]), "--out", "--labs")
    shard = tmp_path / "shard-00000.parquet"
    pd.read_csv(ev).to_parquet(shard)
    refused(capsys, main(["shards", str(shard), str(tmp_path), "2"]), "EVENTS", "DIR")
    refused(capsys, main(["shards", str(ev), str(ev), "2"]), "DIR", "EVENTS")
    study = tmp_path / "s.json"
    args = ["study", "new", str(ev), "--events", str(ev), "--cohort", str(co)]
    refused(
        capsys,
        main([*args, "--scope", "cohort", "--knowledge", "all_visits", "--k", "2"]),
        "STUDY",
        "--events",
    )
    args = ["study", "add", str(co), "--name", "x", "gccens", "--events", str(ev), "--cohort", str(co)]
    refused(capsys, main(args), "STUDY", "--cohort")
    args = ["study", "crosswalk", str(study), "x", "--events", str(ev), "--out", str(ev)]
    refused(capsys, main(args), "--out", "--events")


def test_every_command_declares_its_paths() -> None:
    """Every leaf parser names what it reads and writes (`set_defaults(**path_roles(...))`), and every
    option that takes a file name is one of them: cli.main checks them all before the command runs."""
    parser = build_parser()
    not_paths = {
        "scope", "knowledge", "k", "method", "variant", "constraints", "caps", "codes", "map", "mapping",
        "sheet", "schema", "source", "name", "recipient", "age_domain", "roll_up", "icd_levels",
        "against", "query", "test", "formats", "labs_mode", "parameters", "scheduler", "min_cell",
        "selected_by", "sensitive", "rho_reason", "domains", "leave_out",
    }  # fmt: skip
    for leaf in _leaf_parsers(parser):
        roles = leaf._defaults.get("path_roles")
        assert roles is not None, leaf.prog
        declared = {e.split(":", 1)[-1].lstrip("-").replace("-", "_") for e in roles.inputs + roles.outputs}
        declared |= {e.split(":", 1)[-1].lstrip("-").replace("-", "_") for e, _ in roles.folders}
        for action in leaf._actions:
            takes_text = action.nargs is None and action.type in (None, str) and action.choices is None
            if not takes_text or isinstance(action, argparse._HelpAction) or action.const is not None:
                continue
            if action.dest in not_paths or action.dest == "help":
                continue
            if leaf.prog.endswith("sample") and action.dest == "out":
                continue  # a fresh folder of the generator's files; it reads nothing
            assert action.dest in declared, (leaf.prog, action.dest)


def test_an_interrupted_set_is_incomplete(files, monkeypatch) -> None:
    """os.replace failing after the release file: the set has no manifest and says so; no temporary
    file is left."""
    ev, co = files
    out, cmap = ev.parent / "r.csv", ev.parent / "m.csv"
    real, calls = os.replace, []

    def flaky(a, b):
        if str(b).endswith(".head"):  # the audit log's signed head (its own failures: test_audit_forgery)
            return real(a, b)
        calls.append(b)
        if len(calls) > 1:
            raise OSError("disk full")
        return real(a, b)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OSError, match="disk full"):
        main(gccens(ev, co, "--out", str(out), "--codemap", str(cmap)))
    monkeypatch.setattr(os, "replace", real)
    problems = export.check_manifest({export.RELEASE_FILE: out, export.CODE_MAP_FILE: cmap})
    assert problems and "incomplete" in problems[0]
    assert not [p for p in ev.parent.iterdir() if p.name.endswith(".tmp")]


KILLER = """
import os, signal, sys
from engine.commands.cli import main
real = os.replace
def replace(a, b):
    real(a, b)
    if str(b).endswith(".head"):  # the audit log's signed head, written before the set
        return
    os.kill(os.getpid(), signal.SIGKILL)  # killed between the first file and the rest of the set
os.replace = replace
main(sys.argv[1:])
"""


def test_a_killed_run_leaves_no_temporary_after_the_next_run(files) -> None:
    ev, co = files
    out, cmap = ev.parent / "r.csv", ev.parent / "m.csv"
    args = gccens(ev, co, "--out", str(out), "--codemap", str(cmap))
    child = subprocess.run([sys.executable, "-c", KILLER, *args], capture_output=True, timeout=300)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    left = [p.name for p in ev.parent.iterdir() if p.name.endswith(".tmp")]
    assert left and all(n.startswith((".m.csv.", ".r.csv.sha256.")) for n in left), left
    paths = {export.RELEASE_FILE: out, export.CODE_MAP_FILE: cmap}
    assert "incomplete" in export.check_manifest(paths)[0]
    assert main(args) == 0
    assert not [p.name for p in ev.parent.iterdir() if p.name.endswith(".tmp")]
    assert export.check_manifest(paths) == []
