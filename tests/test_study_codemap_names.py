"""A study's own release files (`study.make_release` -> `export_files`, what `study run`, the app's study
and the report's bundle hold) carry the code map's `description` column on an OMOP CDM read with its
concept names (issue 37), as `anonymize ... --codemap` writes code_map.csv (`export.release_files` with
`names`). Found: the study's code map was written without it. ICD data: no description column, the
bytes as before."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from engine.adversary import Adversary
from engine.io.export import CODE_MAP_FILE, release_files
from engine.study.runs import HeatherlySettings, RunInputs
from engine.study.study import data_ref, make_release
from tests.pseudonym_support import PSEUDONYMS
from tests.test_omop_snomed import small_events, write_folder


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from engine.io.omop import read_omop
    from engine.synth.omop_vocabulary import snomed_cdm

    folder = write_folder(snomed_cdm(small_events(), seed=1), tmp_path_factory.mktemp("scm") / "cdm")
    ds = read_omop(folder, codes="standard", labs=False).dataset("cdm")
    assert ds.concepts is not None and ds.concepts.names
    return ds


def _made(events, concepts):
    inputs = RunInputs(events, events, concepts=concepts)
    settings = HeatherlySettings(k=3, complete=True, constraints="cdm" if concepts else "none")
    adv = Adversary("cohort", "single_visit")
    data = data_ref("cdm", events, inputs)
    return make_release("h", settings, inputs, data, adv, 3, pseudonyms=PSEUDONYMS)


def test_study_code_map_describes_cdm_concepts(dataset):
    from engine.vocab import describe

    made = _made(dataset.events, dataset.concepts)
    assert made.verification.ok and made.files
    cmap = pd.read_csv(io.BytesIO(made.files[CODE_MAP_FILE]), dtype=str, keep_default_na=False)
    assert "description" in cmap.columns
    names = dataset.concepts.names
    assert cmap["description"].tolist() == [describe(c, names=names) for c in cmap["original_code"]]
    assert any(cmap["description"] == cmap["original_code"].map(names))
    # the same bytes as the export gate's code_map.csv of `anonymize ... --codemap` (one function)
    same = release_files(made.release, made.verification, made.verification.adversary, 3,
                         pseudonyms=PSEUDONYMS, names=names)  # fmt: skip
    assert made.files == same
    assert dict(made.entry.files)  # the sha256 recorded are those of the files with descriptions


def test_icd_study_code_map_unchanged(dataset):
    """Without a CDM's concepts (ICD data, or a CDM's labels read from a file): no description column,
    the gate's bytes without names."""
    from engine.records import Records

    events = Records.from_frame(small_events(80)[["patient_id", "visit", "code"]])
    made = _made(events, None)
    assert made.files
    cmap = pd.read_csv(io.BytesIO(made.files[CODE_MAP_FILE]), dtype=str)
    assert "description" not in cmap.columns
    plain = release_files(made.release, made.verification, made.verification.adversary, 3,
                          pseudonyms=PSEUDONYMS)  # fmt: skip
    assert made.files == plain


def test_study_report_bundle_code_map_describes_cdm_concepts(tmp_path, dataset, capsys):
    """`study report` on a CDM study: the bundle's releases/<folder>/code_map.csv has the description
    column (the files `study run` recorded, their sha256 checked by the report)."""
    import zipfile

    from engine.commands.cli import main

    folder = tmp_path / "cdm"
    from engine.synth.omop_vocabulary import snomed_cdm

    write_folder(snomed_cdm(small_events(), seed=1), folder)
    cohort = tmp_path / "cohort.csv"
    pd.DataFrame({"patient_id": dataset.events.patient_ids}).to_csv(cohort, index=False)
    study = tmp_path / "study.json"
    data = ["--events", str(folder), "--source", "omop", "--omop-codes", "standard", "--cohort", str(cohort)]
    assert main(["study", "new", str(study), *data, "--scope", "cohort", "--knowledge", "single_visit",
                 "--k", "3"]) == 0, capsys.readouterr().err  # fmt: skip
    assert main(["study", "add", str(study), "--name", "h", "generalize", *data, "--constraints", "cdm",
                 "--complete"]) == 0, capsys.readouterr().err  # fmt: skip
    out = tmp_path / "report"
    assert main(["study", "report", str(study), "--out", str(out), *data]) == 0, capsys.readouterr()
    with zipfile.ZipFile(out / "bundle.zip") as z:
        (name,) = [n for n in z.namelist() if n.endswith("/code_map.csv")]
        cmap = pd.read_csv(io.BytesIO(z.read(name)), dtype=str, keep_default_na=False)
    assert "description" in cmap.columns
    names = dataset.concepts.names
    assert any(cmap["description"] == cmap["original_code"].map(names))
