"""Issue 37, done-when: a SNOMED-coded CDM runs through every method and the report, generalizing along
its own hierarchy, from its files and from DuckDB alike (PostgreSQL and SQLite give the same events and
hierarchy: tests/test_omop_snomed.py). One study on the command line, as an officer would: GCCens,
Heatherly with the CDM's groups (`--constraints cdm`), UGACLIP and ACLIP with the CDM's utility policy
(`--utility-hierarchy cdm`), the LDA along the CDM's levels (`--icd-levels cdm`); `study run` rebuilds
and verifies every release, `study report` writes the report, whose releases are all verified and whose
generalized items are concepts of the CDM."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.test_omop_snomed import small_events, write_folder

METHODS = {
    "gccens": ["gccens", "--codes", "all"],
    "heatherly": ["generalize", "--constraints", "cdm", "--complete"],
    "ugaclip": ["ugaclip", "--knowledge", "single_visit", "--utility-hierarchy", "cdm"],
    "aclip": ["aclip", "--knowledge", "single_visit", "--utility-hierarchy", "cdm"],
    "lda": ["lda", "--codes", "all", "--icd-levels", "cdm"],
}


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    from engine.synth.omop_vocabulary import snomed_cdm

    return snomed_cdm(small_events(), seed=1)


def _duckdb(tables: dict[str, pd.DataFrame], target: Path) -> Path:
    import duckdb

    con = duckdb.connect(str(target))
    for name, frame in tables.items():
        con.register("frame", frame)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM frame")
        con.unregister("frame")
    con.close()
    return target


@pytest.mark.parametrize("store", ["folder", "duckdb"])
def test_every_method_and_the_report_on_a_snomed_cdm(tables, tmp_path, capsys, store) -> None:
    """Found on the way: `study report` refused a study holding UGACLIP with the CDM's utility policy
    ("the utility hierarchy 'cdm' needs events read from an OMOP CDM ...", no report written): the
    report checked the utility constraints without the CDM's vocabulary."""
    from engine.commands.cli import main
    from engine.io.omop import read_omop

    if store == "folder":
        source = write_folder(tables, tmp_path / "cdm")
    else:
        source = _duckdb(tables, tmp_path / "cdm.duckdb")
    ids = read_omop(source, codes="standard", labs=False).dataset("cdm").events.patient_ids
    cohort = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": ids[: len(ids) // 2]}).to_csv(cohort, index=False)
    data = ["--events", str(source), "--source", "omop", "--omop-codes", "standard", "--cohort", str(cohort)]
    study = tmp_path / "study.json"
    assert main(["study", "new", str(study), *data, "--scope", "cohort", "--knowledge", "single_visit",
                 "--k", "3"]) == 0, capsys.readouterr().err  # fmt: skip
    for name, method in METHODS.items():
        assert main(["study", "add", str(study), "--name", name, *method, *data]) == 0, (
            name,
            capsys.readouterr().err,
        )
    assert main(["study", "run", str(study), *data]) == 0, capsys.readouterr()
    capsys.readouterr()
    out = tmp_path / "report"
    code = main(["study", "report", str(study), "--out", str(out), *data])
    err = capsys.readouterr().err
    # five releases to one recipient: the joint gate refuses their bundle (each verified alone), the
    # report itself is written
    assert code == 0 or (code == 2 and "fail jointly" in err and "not bundle.zip" in err), err
    report = json.loads((out / "report.json").read_text())
    releases = {r["name"]: r for r in report["releases"]}
    assert sorted(releases) == sorted(METHODS)
    assert all(r["verified"] and r["records_below_k"] == 0 for r in releases.values())
    labels = {f"SNOMED:{c}" for c in tables["concept"]["concept_code"].astype(str)}
    assert releases["ugaclip"]["utility constraints"]["total"] > 0  # the CDM's policy, checked
    for name in ("heatherly", "ugaclip", "aclip", "lda"):  # generalized along the CDM: its concepts
        groups = [e for e in releases[name]["code map"] if e["codes"] > 1]
        assert groups, f"{name} generalized nothing"
        assert all(set(e["first codes"]) <= labels for e in groups), name
        assert all(e["descriptions"] for e in groups), name  # named by the CDM's concept_name
    heads = {e["item"].split("|")[0] for e in releases["lda"]["code map"] if e["codes"] > 1}
    assert heads <= labels  # the LDA's items are concepts of the CDM's hierarchy

    if store == "folder":  # one recipient's report: the others' releases left out, as the Report page can
        solo = tmp_path / "report_gccens"
        others = [arg for name in METHODS if name != "gccens" for arg in ("--leave-out", name)]
        capsys.readouterr()
        assert main(["study", "report", str(study), "--out", str(solo), *data, *others]) == 0, (
            capsys.readouterr().err
        )
        alone = json.loads((solo / "report.json").read_text())
        assert [r["name"] for r in alone["releases"]] == ["gccens"]
        assert sorted(alone["releases not in this report"]) == sorted(set(METHODS) - {"gccens"})
        assert (solo / "bundle.zip").is_file()
        code = main(
            ["study", "report", str(study), "--out", str(tmp_path / "r2"), *data, "--leave-out", "nosuch"]
        )
        assert code == 2 and "--leave-out nosuch: no such release" in capsys.readouterr().err
