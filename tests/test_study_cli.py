"""A study from the command line (issue 23): `study new / add / run / report / package / crosswalk`,
through the engine the app uses, and `study run`'s exit status.

The findings first: a study whose release fails k with its recorded verdict edited to `ok: true`,
a study made at k = 2 with its `k` edited to 5, and a study with no release (or only releases of
other data) all made `study run` exit 0. Then the commands, and a study made on the command line
reopening in the app byte-identical, and one made as the app makes it running on the command line."""

from __future__ import annotations

import hashlib
import io
import json
import stat
import zipfile
from itertools import combinations
from pathlib import Path

import pandas as pd
import pytest

from engine.commands.cli import main

CODES = ["401.1", "250.00", "272.4", "427.31", "428.0", "414.01", "496", "585.9", "244.9", "530.81"]
PAIRS = list(combinations(CODES, 2))[:39]  # 39 pairs of twins, 78 records: k = 2 holds, k = 5 fails


def _rows() -> list[tuple]:
    rows = []
    for j, (a, b) in enumerate(PAIRS):
        for twin in (1, 2):
            pid = f"P{j:02d}{twin}"
            rows += [(pid, 1, a, 40 + j % 7), (pid, 2, b, 41 + j % 7)]
    return rows


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, Path]:
    ev, co = tmp_path / "events.csv", tmp_path / "cohort.csv"
    pd.DataFrame(_rows(), columns=["patient_id", "visit", "code", "age"]).to_csv(ev, index=False)
    pd.DataFrame({"patient_id": sorted({r[0] for r in _rows()})}).to_csv(co, index=False)
    return ev, co


def _new(
    study: Path, ev: Path, co: Path, k: int, scope: str = "cohort", knowledge: str = "all_visits"
) -> None:
    args = ["study", "new", str(study), "--events", str(ev), "--cohort", str(co)]
    assert main([*args, "--scope", scope, "--knowledge", knowledge, "--k", str(k)]) == 0


def _add(study: Path, ev: Path, co: Path, name: str, method: str, *options: str) -> int:
    args = ["study", "add", str(study), "--name", name, method, "--events", str(ev), "--cohort", str(co)]
    return main([*args, *options])


def _run(study: Path, ev: Path | None = None, co: Path | None = None) -> int:
    extra = [] if ev is None else ["--events", str(ev), "--cohort", str(co)]
    return main(["study", "run", str(study), *extra])


def _edit(study: Path, change) -> None:
    d = json.loads(study.read_text())
    change(d)
    study.write_text(json.dumps(d))


# ------------------------------------------------------------------------------------ findings
def test_a_failing_release_with_a_forged_verdict_fails_the_run(data, tmp_path, capsys) -> None:
    ev, co = data
    study = tmp_path / "study.json"
    _new(study, ev, co, 2)
    assert _add(study, ev, co, "G2", "gccens", "--k", "2", "--scope", "cohort") == 0
    capsys.readouterr()

    def forge(d):  # k raised to 5, the verdict at k = 2 passed off as one at k = 5
        d["k"] = 5
        d["releases"][0]["verification"]["k"] = 5

    _edit(study, forge)
    assert _run(study, ev, co) == 1
    out = capsys.readouterr().out
    assert "G2: FAILED" in out and "the recorded verdict" in out and "fails re-verification" in out
    assert "0 of 1 releases rebuilt byte-identical and verified" in out


def test_a_release_not_verified_never_enters_the_study(data, tmp_path, capsys) -> None:
    """Issue 35, finding 6: `study add` of a release below the study's k refuses it with its verdict
    (it used to enter the study without files, exit 1, and fail every `study run` until removed)."""
    ev, co = data
    study = tmp_path / "study.json"
    _new(study, ev, co, 5)
    before = study.read_text()
    assert _add(study, ev, co, "G2", "gccens", "--k", "2", "--scope", "cohort") == 2
    err = capsys.readouterr().err
    assert "'G2' is not added to the study: not verified: 78 of 78 records below k = 5" in err
    assert study.read_text() == before


def test_k_edited_upwards_fails_the_run(data, tmp_path, capsys) -> None:
    ev, co = data
    study = tmp_path / "study.json"
    _new(study, ev, co, 2)
    assert _add(study, ev, co, "G", "gccens", "--scope", "cohort") == 0
    assert _run(study, ev, co) == 0
    assert "G: byte-identical (2 files) and re-verified" in capsys.readouterr().out
    _edit(study, lambda d: d.update(k=5))
    assert _run(study, ev, co) == 1
    out = capsys.readouterr().out
    assert "G: FAILED" in out and "78 of 78 records below k = 5" in out
    assert "release.csv: not written on rebuild" in out


def test_no_release_of_the_data_fails_the_run(data, tmp_path, capsys) -> None:
    ev, co = data
    study = tmp_path / "study.json"
    _new(study, ev, co, 2)
    assert _run(study, ev, co) == 1
    assert "no release of the study's data" in capsys.readouterr().out
    assert _add(study, ev, co, "G", "gccens", "--scope", "cohort") == 0
    _edit(study, lambda d: d["releases"][0]["data"]["groups"].update(cohort="0" * 64))  # other data
    assert _run(study, ev, co) == 1
    assert "no release of the study's data to rebuild (1 of other data)" in capsys.readouterr().out


# ------------------------------------------------------------------------------------ commands
def test_new_records_the_data_as_run_computes_it_privately(data, tmp_path) -> None:
    from engine.commands.inputs import load_groups
    from engine.commands.study import cli_data_ref
    from engine.study.study import Study

    ev, co = data
    study = tmp_path / "study.json"
    _new(study, ev, co, 3, "population", "single_visit")
    assert stat.S_IMODE(study.stat().st_mode) == 0o600
    s = Study.from_json(study.read_text())
    g = load_groups(str(ev), cohort=str(co))
    ref = cli_data_ref(s.data.name, g, population="population", cohort="cohort", biobank=None)
    assert s.data.key == ref.key and s.data.inputs == ref.inputs
    assert dict(s.data.load_options) == {"unknown_codes": "keep", "drop_duplicates": "False"}
    assert (s.adversary.scope, s.adversary.knowledge, s.k) == ("population", "single_visit", 3)
    assert main(["study", "new", str(study), "--events", str(ev), "--cohort", str(co), "--scope", "cohort",
                 "--knowledge", "all_visits", "--k", "2"]) == 2  # fmt: skip


METHODS = {
    "gccens": ["--codes", "paper", "--scope", "cohort"],
    "generalize": ["--constraints", "none", "--complete"],
    "ugaclip": ["--knowledge", "single_visit"],
    "lda": ["--codes", "all", "--icd-levels", "phecode"],
}


def test_add_uses_the_anonymize_settings_and_rebuilds(data, tmp_path, capsys) -> None:
    """Every method through `study add`; the release files are those `anonymize METHOD` writes with
    the study's key (one settings_of per method)."""
    from engine.study.study import Study

    ev, co = data
    study = tmp_path / "study.json"
    _new(study, ev, co, 2, "cohort", "single_visit")
    for method, options in METHODS.items():
        assert _add(study, ev, co, method, method, *options) == 0, capsys.readouterr()
    s = Study.from_json(study.read_text())
    assert [r.name for r in s.releases] == list(METHODS)
    assert s.get("gccens").settings.codes.mode == "paper"
    lda = s.get("lda").settings
    assert (lda.icd_hierarchy, lda.top_code_90) == ("phecode", True)
    assert _run(study, ev, co) == 0, capsys.readouterr().out
    key = tmp_path / "key"
    key.write_text(s.pseudonym_key + "\n")
    for method, options in METHODS.items():
        out = tmp_path / f"{method}.csv"
        args = ["anonymize", method, "--events", str(ev), "--cohort", str(co), "--k", "2", *options]
        args += ["--out", str(out), "--codemap", str(tmp_path / f"{method}_map.csv"), "--key-file", str(key)]
        assert main(args) == 0, capsys.readouterr().err
        recorded = dict(s.get(method).files)["release.csv"]
        assert hashlib.sha256(out.read_bytes()).hexdigest() == recorded, method
    assert _add(study, ev, co, "gccens", "gccens") == 2  # names are unique
    assert "already in" in capsys.readouterr().err


def test_report_package_crosswalk_and_run_of_the_package(data, tmp_path, capsys) -> None:
    from engine.report.bundle import check_bundle

    ev, co = data
    study = tmp_path / "study.json"
    _new(study, ev, co, 2)
    assert _add(study, ev, co, "G", "gccens", "--scope", "cohort") == 0
    capsys.readouterr()
    out1, out2 = tmp_path / "r1", tmp_path / "r2"
    for out in (out1, out2):
        assert (
            main(["study", "report", str(study), "--out", str(out), "--events", str(ev), "--cohort", str(co)])
            == 0
        )
    names = sorted(p.name for p in out1.iterdir())
    assert names == [
        "bundle.zip",
        "report.html",
        "report.html.sha256",
        "report.json",
        "report.md",
        "report.pdf",
    ]
    for n in names:  # reproducible: the same study and data give the same bytes
        assert (out1 / n).read_bytes() == (out2 / n).read_bytes(), n
    report = json.loads((out1 / "report.json").read_text())
    assert [r["name"] for r in report["releases"]] == ["G"] and report["releases"][0]["exported"]
    listed = check_bundle((out1 / "bundle.zip").read_bytes())
    assert "releases/G/release.csv" in {p.replace(p.split("/")[1], "G") if p.startswith("releases/") else p
                                        for p in listed}  # fmt: skip
    bundle = zipfile.ZipFile(io.BytesIO((out1 / "bundle.zip").read_bytes()))
    study_in_bundle = next(n for n in bundle.namelist() if n.endswith("study.json"))
    assert "pseudonym_key" not in json.loads(bundle.read(study_in_bundle))

    walk = tmp_path / "walk.csv"
    assert (
        main(
            [
                "study",
                "crosswalk",
                str(study),
                "G",
                "--out",
                str(walk),
                "--events",
                str(ev),
                "--cohort",
                str(co),
            ]
        )
        == 0
    )
    assert "IDENTIFYING" in capsys.readouterr().err
    assert stat.S_IMODE(walk.stat().st_mode) == 0o600
    release_csv = next(n for n in bundle.namelist() if n.endswith("release.csv"))
    released = pd.read_csv(io.BytesIO(bundle.read(release_csv)), dtype=str)
    walked = pd.read_csv(walk, dtype=str)
    assert set(walked["release_id"]) == set(released["patient_id"])
    assert set(walked["source_id"]) == set(pd.read_csv(co, dtype=str)["patient_id"])

    package = tmp_path / "study.zip"
    args = ["study", "package", str(study), "--out", str(package), "--with-inputs"]
    assert main([*args, "--events", str(ev)]) == 2  # the cohort list is missing: named
    assert "cohort.csv" in capsys.readouterr().err
    assert main([*args, "--events", str(ev), "--cohort", str(co)]) == 0
    assert stat.S_IMODE(package.stat().st_mode) == 0o600
    assert _run(package) == 0
    assert "1 of 1 releases rebuilt byte-identical and verified" in capsys.readouterr().out
    # edited so that it fails: the report names it and exits 1
    _edit(study, lambda d: d.update(k=5))
    bad = tmp_path / "bad"
    assert (
        main(["study", "report", str(study), "--out", str(bad), "--events", str(ev), "--cohort", str(co)])
        == 1
    )
    got = capsys.readouterr()
    assert "G: FAILED" in got.out and "not in the report: 'G'" in got.err
    assert json.loads((bad / "report.json").read_text())["releases"] == []


# ------------------------------------------------------------------------------ app <-> command line
def _app_study(ev: Path, co: Path):
    """A study as the app makes it on uploaded files: `ui.study.data_of` (load_uploaded, the sidebar's
    load options), `Study(...)` and `ui.study.add` (make_release with the preview's release)."""
    from engine.adversary import Adversary
    from engine.io.loaders import load_uploaded
    from engine.io.pseudonyms import new_key
    from engine.study.package import StudyInput, write_package
    from engine.study.runs import GCCensSettings, HeatherlySettings, RunInputs
    from engine.study.study import Study, data_ref, make_release

    files = {
        "events": StudyInput("events", ev.name, ev.read_bytes()),
        "cohort": StudyInput("cohort", co.name, co.read_bytes()),
    }
    ds = load_uploaded((ev.name, ev.read_bytes()), cohort=(co.name, co.read_bytes())).data
    inputs = RunInputs(ds.group_records("population"), ds.group_records("cohort"), None)
    options = {"unknown_codes": "keep", "drop_duplicates": False}
    data = data_ref(
        ds.name, ds.events, inputs, population="population", cohort="cohort", sources=dict(ds.sources),
        load_options=options,
    )  # fmt: skip
    study = Study(data, Adversary("cohort", "single_visit"), 2, pseudonym_key=new_key())
    for name, settings in (("G", GCCensSettings(k=2, scope="cohort")), ("H", HeatherlySettings(k=2))):
        release = settings.run(inputs)
        made = make_release(
            name, settings, inputs, study.data, study.adversary, study.k, spellings=ds.spellings,
            pseudonyms=study.pseudonyms, release=release,
        )  # fmt: skip
        study = study.add(made.entry)
    return study, write_package(study, files)


def test_a_study_made_as_the_app_makes_it_runs_on_the_command_line(data, tmp_path, capsys) -> None:
    ev, co = data
    study, package = _app_study(ev, co)
    zipped, plain = tmp_path / "app.zip", tmp_path / "app.json"
    zipped.write_bytes(package)
    plain.write_text(study.to_json())
    assert _run(zipped) == 0, capsys.readouterr().out
    assert _run(plain, ev, co) == 0, capsys.readouterr().out
    assert "2 of 2 releases rebuilt byte-identical and verified" in capsys.readouterr().out
    # and the command line adds to it: the same data, by key
    assert _add(plain, ev, co, "U", "ugaclip", "--knowledge", "single_visit") == 0
    assert _run(plain, ev, co) == 0


def test_a_study_made_on_the_command_line_rebuilds_as_the_app_reopens_it(data, tmp_path, capsys) -> None:
    """What `ui.study.reopen` does with a package (`apply_restore` loads its files as uploads with the
    study's load options, `data_of` makes the DataRef, `rebuild` with the dataset's spellings)."""
    from engine.io.loaders import load_uploaded
    from engine.study.package import read_study_file
    from engine.study.runs import RunInputs
    from engine.study.study import data_ref, rebuild

    ev, co = data
    study_path, package = tmp_path / "study.json", tmp_path / "study.zip"
    _new(study_path, ev, co, 2, "cohort", "single_visit")
    for method, options in METHODS.items():
        assert _add(study_path, ev, co, method, method, *options) == 0
    args = ["study", "package", str(study_path), "--out", str(package), "--with-inputs"]
    assert main([*args, "--events", str(ev), "--cohort", str(co)]) == 0
    study, inputs = read_study_file(package.read_bytes(), "study.zip")
    options = dict(study.data.load_options)
    ds = load_uploaded(
        (inputs["events"].name, inputs["events"].data),
        cohort=(inputs["cohort"].name, inputs["cohort"].data),
        unknown_codes=options["unknown_codes"],
        drop_duplicates=options["drop_duplicates"] == "True",
    ).data
    run = RunInputs(ds.group_records(study.data.population), ds.group_records(study.data.cohort), None)
    ref = data_ref(
        ds.name, ds.events, run, population=study.data.population, cohort=study.data.cohort,
        sources=dict(ds.sources), load_options={"unknown_codes": "keep", "drop_duplicates": False},
    )  # fmt: skip
    assert ref.key == study.data.key  # the names differ ("uploaded: events.csv"): not part of the key
    assert ref.inputs == study.data.inputs and ref.load_options == study.data.load_options
    checks = rebuild(study, run, ref, spellings=ds.spellings)
    assert [c.name for c in checks] == list(METHODS) and all(c.passed for c in checks), [
        c.differences() for c in checks
    ]


@pytest.mark.skipif(
    not (Path(__file__).resolve().parent.parent / "sample_data" / "events.parquet").exists(),
    reason="the shipped sample is not there yet",
)
def test_a_command_line_package_reopens_in_the_app(data, tmp_path) -> None:
    from apptest_support import reopen_in_new_session, shown

    ev, co = data
    study_path, package = tmp_path / "study.json", tmp_path / "study.zip"
    _new(study_path, ev, co, 2, "cohort", "single_visit")
    assert _add(study_path, ev, co, "G", "gccens", "--scope", "cohort") == 0
    assert _add(study_path, ev, co, "H", "generalize", "--complete") == 0
    args = ["study", "package", str(study_path), "--out", str(package), "--with-inputs"]
    assert main([*args, "--events", str(ev), "--cohort", str(co)]) == 0
    fresh = reopen_in_new_session("study.zip", package.read_bytes(), "application/zip")
    said = [shown(s.value) for s in fresh.success]
    for name in ("G", "H"):
        assert any(f"{name}: rebuilt byte-identical" in s for s in said), said
    recorded = {r.name: r.files for r in json_study(study_path).releases}
    assert {r.name: r.files for r in fresh.session_state["study"].releases} == recorded


def json_study(path: Path):
    from engine.study.study import Study

    return Study.from_json(path.read_text())
