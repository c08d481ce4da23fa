"""The recipient's dataset (issue #35): released codes and the genotypes of exactly the released
patients under one release-id space, laid out as a controlled-access deposit, and `phewas` on it.

Finding 1: no genotypes ever left, under release ids no genotype file shared.
Finding 2: `phewas --released REL.csv --codemap MAP.csv` on an `anonymize` output ended with
"2700 released patient(s) are not in the cohort" (release ids against source ids)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest

from engine.commands.cli import main
from engine.io.loaders import SAMPLE_DIR
from tests.conftest import sample_missing_reason

pytestmark = pytest.mark.skipif(sample_missing_reason() is not None, reason=str(sample_missing_reason()))

EVENTS = SAMPLE_DIR / "events.parquet"
COHORT = SAMPLE_DIR / "cohort.csv"
GENOTYPES = SAMPLE_DIR / "genotypes.parquet"


@pytest.fixture(scope="module")
def generalized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`anonymize generalize --complete` of the sample (k = 5), with its crosswalk and key."""
    tmp = tmp_path_factory.mktemp("generalized")
    paths = {n: tmp / f"{n}.csv" for n in ("release", "code_map", "crosswalk")}
    paths["key"] = tmp / "key.txt"
    argv = ["anonymize", "generalize", "--events", str(EVENTS), "--cohort", str(COHORT), "--k", "5"]
    argv += ["--complete", "--out", str(paths["release"]), "--codemap", str(paths["code_map"])]
    argv += ["--crosswalk", str(paths["crosswalk"]), "--key-file", str(paths["key"])]
    paths["dataset"] = tmp / "dataset"
    assert main([*argv, "--genotypes", str(GENOTYPES), "--dataset", str(paths["dataset"])]) == 0
    return paths


def _phewas_released(release: Path, code_map: Path, out: Path, *extra: str) -> list[str]:
    return [
        "phewas", "--events", str(EVENTS), "--cohort", str(COHORT), "--genotypes", str(GENOTYPES),
        "--released", str(release), "--codemap", str(code_map), "--out", str(out), *extra,
    ]  # fmt: skip


def test_finding2_released_file_in_release_ids_is_a_clear_error(generalized, tmp_path, capsys):
    """The steward's check of their own release: release ids are not the cohort's ids; the error says
    so and names the way out (the crosswalk, or the recipient's dataset), never "not in the cohort"."""
    out = tmp_path / "phewas.csv"
    assert main(_phewas_released(generalized["release"], generalized["code_map"], out)) == 2
    err = capsys.readouterr().err
    assert "not in the cohort" not in err
    assert "release ids" in err and "--crosswalk" in err and "--dataset" in err
    assert str(generalized["release"]) in err
    assert not out.exists()


def test_finding2_with_the_crosswalk_the_steward_compares_the_release(generalized, tmp_path, capsys):
    """With `--crosswalk` the release is joined back to the cohort and compared: the released PheWAS
    equals the one of the same file written with source ids."""
    from engine.io.export import read_release_bytes
    from engine.io.loaders import load_genotypes
    from engine.utility.phewas import phewas_of_release

    out = tmp_path / "phewas.csv"
    argv = _phewas_released(generalized["release"], generalized["code_map"], out)
    assert main([*argv, "--crosswalk", str(generalized["crosswalk"])]) == 0
    got = pd.read_csv(out, dtype={"phecode": str})
    walk = pd.read_csv(generalized["crosswalk"], dtype=str)
    frame = pd.read_csv(generalized["release"], dtype=str)
    frame["patient_id"] = frame["patient_id"].map(dict(zip(walk.release_id, walk.source_id, strict=True)))
    release = read_release_bytes(frame.to_csv(index=False).encode(), generalized["code_map"].read_bytes())
    expected = phewas_of_release(release, load_genotypes(str(GENOTYPES)).data)
    tested = got.dropna(subset=["p_released"])
    assert len(tested) == len(expected) > 100
    merged = tested.merge(expected, on=["snp", "phecode"], suffixes=("", "_expected"))
    assert len(merged) == len(expected)
    assert (merged["n_cases_released"] == merged["n_cases_expected"]).all()
    assert merged["p_released"].to_numpy() == pytest.approx(merged["p_expected"].to_numpy(), rel=1e-9)


def test_anonymize_writes_the_dataset_beside_the_release(generalized, tmp_path, capsys, audit_log):
    """`anonymize generalize --genotypes G --dataset DIR`: the dataset's phenotypes are the release
    file, its manifest holds, and the recipient's PheWAS of DIR equals the steward's check of the
    release through the crosswalk (the same 2,700 patients)."""
    from engine.io.dataset_export import dataset_paths
    from engine.io.export import check_manifest

    folder = generalized["dataset"]
    assert (folder / "phenotypes.csv").read_bytes() == generalized["release"].read_bytes()
    assert (folder / "code_map.csv").read_bytes() == generalized["code_map"].read_bytes()
    assert check_manifest(dataset_paths(folder)) == []
    from engine.audit import log  # every file that left is in the audit log, with its sha256

    audited = {e["file_name"]: e["sha256"] for e in log.entries(audit_log)}
    for path in [*dataset_paths(folder).values(), folder / "subjects.csv.sha256"]:
        assert audited[str(path.resolve())] == hashlib.sha256(path.read_bytes()).hexdigest()
    recipient, steward = tmp_path / "recipient.csv", tmp_path / "steward.csv"
    assert main(["phewas", "--dataset", str(folder), "--out", str(recipient)]) == 0
    argv = _phewas_released(generalized["release"], generalized["code_map"], steward)
    assert main([*argv, "--crosswalk", str(generalized["crosswalk"])]) == 0
    mine = pd.read_csv(recipient, dtype={"phecode": str})
    theirs = pd.read_csv(steward, dtype={"phecode": str}).dropna(subset=["p_released"])
    both = mine.merge(theirs, on=["snp", "phecode"], suffixes=("", "_steward"))
    assert len(mine) == len(theirs) == len(both) > 1000
    for col in ("n_cases", "n_controls", "p"):
        assert (both[col].to_numpy() == both[f"{col}_released"].to_numpy()).all(), col


def test_dataset_options_are_checked_and_a_refused_run_removes_the_dataset(generalized, tmp_path, capsys):
    import shutil

    folder = tmp_path / "dataset"
    shutil.copytree(generalized["dataset"], folder)
    base = ["anonymize", "generalize", "--events", str(EVENTS), "--cohort", str(COHORT)]
    base += ["--out", str(tmp_path / "r.csv"), "--dataset", str(folder)]
    assert main([*base, "--k", "5"]) == 2
    assert "--dataset needs --genotypes" in capsys.readouterr().err
    assert main([*base, "--k", "5", "--genotypes", str(GENOTYPES)]) == 2  # no --complete: refused
    err = capsys.readouterr().err
    assert "No release written" in err and str(folder / "genotypes.csv") in err
    assert sorted(p.name for p in folder.iterdir()) == []


def test_finding2_a_crosswalk_missing_released_patients_is_named(generalized, tmp_path, capsys):
    walk = pd.read_csv(generalized["crosswalk"], dtype=str).iloc[1:]
    short = tmp_path / "short.csv"
    walk.to_csv(short, index=False)
    argv = _phewas_released(generalized["release"], generalized["code_map"], tmp_path / "o.csv")
    assert main([*argv, "--crosswalk", str(short)]) == 2
    err = capsys.readouterr().err
    assert str(short) in err and "1 released patient(s)" in err


# ------------------------------------------------------------------------ the recipient's dataset
KEY = "0f" * 32


@pytest.fixture(scope="module")
def made(sample_dataset):
    """Two verified releases of the sample: Heatherly (DEMO_D, k = 5, completed) and GCCens (k = 5,
    Tamersoy's four codes: 252 cohort records keep no released row)."""
    from engine import risk
    from engine.study.runs import GCCensSettings, HeatherlySettings, RunInputs

    population, cohort = sample_dataset.events, sample_dataset.group_records("cohort")
    out = {}
    for name, settings in (("heatherly", HeatherlySettings(k=5)), ("gccens", GCCensSettings(k=5))):
        release = settings.run(RunInputs(population, cohort)).checked(cohort)
        verification = risk.verify(release, settings.adversary, 5, population)
        assert verification.ok
        out[name] = (release, verification, settings.adversary)
    return out


def _files(made, name, genotypes):
    from engine.io.dataset_export import dataset_files
    from engine.io.pseudonyms import Pseudonyms

    release, verification, adversary = made[name]
    return dataset_files(release, verification, adversary, 5, genotypes, pseudonyms=Pseudonyms(KEY))


def _write(files, folder: Path) -> Path:
    from engine.io.dataset_export import write_dataset

    folder.mkdir()
    write_dataset(files, folder)
    return folder


@pytest.mark.parametrize("name", ["heatherly", "gccens"])
def test_finding1_dataset_holds_the_released_patients_genotypes_under_the_release_ids(
    made, name, sample_dataset
):
    """Finding 1: the genotypes of exactly the released patients leave, under the release file's ids;
    patients outside the cohort and genotyped patients without a released record never appear."""
    from engine.io import export
    from engine.io.dataset_export import DATASET_FILES, subject_ids
    from engine.io.pseudonyms import Pseudonyms

    release, verification, adversary = made[name]
    genotypes = sample_dataset.genotypes
    files = _files(made, name, genotypes)
    assert tuple(files) == DATASET_FILES
    gate = export.release_files(release, verification, adversary, 5, pseudonyms=Pseudonyms(KEY))
    assert files["phenotypes.csv"] == gate["release.csv"] and files["code_map.csv"] == gate["code_map.csv"]
    subjects = export.read_text_csv(files["subjects.csv"])
    geno = export.read_text_csv(files["genotypes.csv"])
    shown = export.read_text_csv(gate["release.csv"])["patient_id"]
    ids = subject_ids(release, Pseudonyms(KEY))
    # every released record is a subject, the file's patients by the file's ids
    assert sorted(ids) == sorted(map(str, release.records.patient_ids))
    assert set(subjects["patient_id"]) == set(ids.values()) and len(subjects) == release.records.n_patients
    assert set(shown) == set(subjects.loc[subjects["has_codes"] == "1", "patient_id"])
    assert export.release_ids(release, Pseudonyms(KEY)).items() <= ids.items()
    # genotypes: the released patients who have them, nobody else, values as the source's
    genotyped = genotypes[genotypes["patient_id"].astype(str).isin(ids)]
    assert len(geno) == len(genotyped) and set(geno["patient_id"]) <= set(subjects["patient_id"])
    outside = set(genotypes["patient_id"].astype(str)) - set(ids)
    assert len(outside) > 5000  # the biobank beyond the cohort: genotyped, never released
    back = {r: s for s, r in ids.items()}
    source = genotyped.set_index(genotyped["patient_id"].astype(str)).drop(columns="patient_id")
    written = geno.set_index(geno["patient_id"].map(back)).drop(columns="patient_id")
    written = written.apply(pd.to_numeric).reindex(source.index)
    pd.testing.assert_frame_equal(written, source.astype(float), check_names=False)
    assert set(subjects["has_genotypes"]) <= {"0", "1"}
    assert (subjects["consent"] == "1").all() and (subjects["affection_status"] == "0").all()
    if name == "gccens":
        assert (subjects["has_codes"] == "0").sum() == release.records.n_patients - shown.nunique() > 0


@pytest.mark.parametrize("name", ["heatherly", "gccens"])
def test_data_dictionary_describes_every_variable_of_every_file(made, name, sample_dataset):
    from engine.io import export

    files = _files(made, name, sample_dataset.genotypes)
    dictionary = export.read_text_csv(files["data_dictionary.csv"])
    assert list(dictionary.columns) == ["file", "variable", "description", "type", "units", "values"]
    described = set(zip(dictionary["file"], dictionary["variable"], strict=True))
    for file, data in files.items():
        if file != "data_dictionary.csv":
            assert {(file, c) for c in export.read_text_csv(data).columns} <= described, file
    assert len(described) == len(dictionary) and (dictionary["description"] != "").all()
    assert ("genotypes.csv", "rs1333049") in described


@pytest.mark.parametrize("name", ["heatherly", "gccens"])
def test_recipient_phewas_on_the_dataset_equals_the_stewards_phewas_of_the_release(
    made, name, sample_dataset, tmp_path, capsys
):
    """The recipient's PheWAS, from the dataset's files alone through `phewas --dataset DIR`, equals
    `engine.utility.phewas` on the Release object: same associations, counts and p-values."""
    from engine.io.dataset_export import read_dataset
    from engine.utility.phewas import RESULT_COLUMNS, phewas_of_release

    release = made[name][0]
    folder = _write(_files(made, name, sample_dataset.genotypes), tmp_path / "dataset")
    steward = phewas_of_release(release, sample_dataset.genotypes)
    assert len(steward) >= {"heatherly": 1000, "gccens": 18}[name]  # GCCens: Tamersoy's four codes
    recipient = read_dataset(folder)
    assert recipient.release.records.n_patients == release.records.n_patients
    inside = phewas_of_release(recipient.release, recipient.genotypes)
    pd.testing.assert_frame_equal(inside[RESULT_COLUMNS], steward[RESULT_COLUMNS])
    out = tmp_path / "recipient.csv"
    assert main(["phewas", "--dataset", str(folder), "--out", str(out)]) == 0
    got = pd.read_csv(out, dtype={"phecode": str})
    assert list(got[["snp", "phecode"]].itertuples(index=False)) == list(
        steward[["snp", "phecode"]].itertuples(index=False)
    )
    for col in ("n_cases", "n_controls"):
        assert (got[col].to_numpy() == steward[col].to_numpy()).all()
    for col in ("odds_ratio", "p"):
        assert got[col].to_numpy() == pytest.approx(steward[col].to_numpy(), rel=1e-12)
    assert f"{len(steward):,} tests" in capsys.readouterr().out


def test_the_dataset_passes_the_export_gate(made, sample_dataset):
    """No dataset of a release the gate would not write: another k, or no verification."""
    from engine.io.dataset_export import dataset_files
    from engine.io.export import ExportRefused
    from engine.io.pseudonyms import Pseudonyms

    release, verification, adversary = made["heatherly"]
    for v, k in ((verification, 6), (None, 5)):
        with pytest.raises(ExportRefused):
            dataset_files(release, v, adversary, k, sample_dataset.genotypes, pseudonyms=Pseudonyms(KEY))


def test_a_changed_or_incomplete_dataset_is_a_one_line_error(made, sample_dataset, tmp_path, capsys):
    folder = _write(_files(made, "heatherly", sample_dataset.genotypes), tmp_path / "dataset")
    out = str(tmp_path / "o.csv")
    genotypes = folder / "genotypes.csv"
    assert main(["phewas", "--dataset", str(folder), "--genotypes", str(GENOTYPES), "--out", out]) == 2
    assert "--genotypes" in capsys.readouterr().err
    genotypes.write_bytes(genotypes.read_bytes().replace(b"\n", b"\nR9999,0,0,0,0,0,0\n", 1))
    assert main(["phewas", "--dataset", str(folder), "--out", out]) == 2
    assert f"{genotypes}: not the file the manifest names" in capsys.readouterr().err
    genotypes.unlink()
    assert main(["phewas", "--dataset", str(folder), "--out", out]) == 2
    assert f"no file {genotypes}" in capsys.readouterr().err


def test_study_report_bundle_holds_each_verified_releases_dataset(tmp_path, capsys):
    """`study report --genotypes`: the bundle holds releases/<folder>/dataset/ beside the gate's files,
    listed in MANIFEST.sha256, with the dataset's own manifest; extracted, `phewas --dataset` reads it."""
    import io
    import zipfile

    from engine.report.bundle import BUNDLE_ROOT, check_bundle

    study = str(tmp_path / "study.json")
    data = ["--events", str(EVENTS), "--cohort", str(COHORT)]
    new = ["study", "new", study, *data, "--scope", "cohort", "--knowledge", "single_visit", "--k", "5"]
    assert main(new) == 0
    assert main(["study", "add", study, "--name", "heatherly", "generalize", "--complete", *data]) == 0
    report = ["study", "report", study, "--out", str(tmp_path / "out"), *data, "--genotypes", str(GENOTYPES)]
    assert main(report) == 0
    bundle = (tmp_path / "out" / "bundle.zip").read_bytes()
    listed = check_bundle(bundle)
    names = ("subjects.csv", "phenotypes.csv", "code_map.csv", "genotypes.csv", "data_dictionary.csv")
    for name in (*names, "subjects.csv.sha256"):
        assert f"releases/heatherly/dataset/{name}" in listed
    with zipfile.ZipFile(io.BytesIO(bundle)) as zf:
        zf.extractall(tmp_path / "x")
    root = tmp_path / "x" / BUNDLE_ROOT / "releases" / "heatherly"
    assert (root / "dataset" / "phenotypes.csv").read_bytes() == (root / "release.csv").read_bytes()
    capsys.readouterr()
    assert main(["phewas", "--dataset", str(root / "dataset"), "--out", str(tmp_path / "p.csv")]) == 0
    assert "in the dataset's 2,700 subjects" in capsys.readouterr().out


@pytest.mark.parametrize("structure", ["visits", "age pairs"])
def test_the_dictionary_describes_releases_with_visits_and_ages(structure):
    """Every structure the gate writes has its dictionary: `visit` (Heatherly --with-visits) and
    `age` (the LDA's code|age items); a released record without a row is a subject without codes."""
    from engine import risk
    from engine.adversary import Adversary
    from engine.io import export
    from engine.io.dataset_export import dataset_files
    from engine.io.pseudonyms import Pseudonyms
    from engine.records import Records
    from engine.release import Release

    ids = [f"P{i}" for i in range(6)]
    item = "401.1|45" if structure == "age pairs" else "401.1"
    frame = pd.DataFrame({"patient_id": ids, "visit": 1, "code": [item] * 4 + ["724.2"] * 2})
    records = Records.from_frame(frame)
    kept = records.keep_events(frame["code"].ne("724.2").to_numpy())  # P4, P5: every code suppressed
    release = Release("toy", kept, shows_visits=structure == "visits", age_pairs=structure == "age pairs")
    adversary = Adversary("cohort", "all_visits")
    verification = risk.verify(release, adversary, 2)
    assert verification.ok
    genotypes = pd.DataFrame({"patient_id": [*ids, "P9"], "rsX": [0, 1, 2, None, 1, 0, 2]})
    files = dataset_files(release, verification, adversary, 2, genotypes, pseudonyms=Pseudonyms(KEY))
    dictionary = export.read_text_csv(files["data_dictionary.csv"])
    column = "visit" if structure == "visits" else "age"
    assert ("phenotypes.csv", column) in set(zip(dictionary["file"], dictionary["variable"], strict=True))
    subjects = export.read_text_csv(files["subjects.csv"])
    assert subjects["patient_id"].tolist() == ["R001", "R002", "R003", "R004", "R005", "R006"]
    assert subjects["has_codes"].tolist() == ["1"] * 4 + ["0"] * 2
    geno = export.read_text_csv(files["genotypes.csv"])
    assert len(geno) == 6 and sorted(geno["rsX"]) == ["", "0", "0", "1", "1", "2"]  # not P9; P3 missing


def test_gccens_crosswalk_names_every_subject_and_the_stewards_check_equals_the_recipients(tmp_path, capsys):
    """GCCens (all codes, k-map) leaves 135 released records without a row. The crosswalk the
    command writes maps every subject of the dataset back (the steward can answer about any id that
    left), and the steward's `phewas --released --crosswalk` counts those records as the recipient's
    `phewas --dataset` does (and `phewas_of_release`): the same tests, counts and p-values."""
    from engine.io.export import read_text_csv

    release, walk, folder = tmp_path / "release.csv", tmp_path / "crosswalk.csv", tmp_path / "dataset"
    argv = ["anonymize", "gccens", "--events", str(EVENTS), "--cohort", str(COHORT), "--k", "5"]
    argv += ["--codemap", str(tmp_path / "code_map.csv"), "--out", str(release), "--crosswalk", str(walk)]
    assert main([*argv, "--genotypes", str(GENOTYPES), "--dataset", str(folder)]) == 0
    subjects = read_text_csv((folder / "subjects.csv").read_bytes())
    assert (subjects["has_codes"] == "0").sum() == 135
    assert sorted(read_text_csv(walk.read_bytes())["release_id"]) == sorted(subjects["patient_id"])
    recipient, steward = tmp_path / "recipient.csv", tmp_path / "steward.csv"
    assert main(["phewas", "--dataset", str(folder), "--out", str(recipient)]) == 0
    argv = _phewas_released(release, tmp_path / "code_map.csv", steward)
    assert main([*argv, "--crosswalk", str(walk)]) == 0
    mine = pd.read_csv(recipient, dtype={"phecode": str})
    theirs = pd.read_csv(steward, dtype={"phecode": str}).dropna(subset=["p_released"])
    both = mine.merge(theirs, on=["snp", "phecode"], suffixes=("", "_steward"))
    assert len(mine) == len(theirs) == len(both) >= 18
    for col in ("n_cases", "n_controls", "p"):
        assert (both[col].to_numpy() == both[f"{col}_released"].to_numpy()).all(), col


def test_genotypes_in_release_ids_against_the_cohort_are_a_clear_error(generalized, tmp_path, capsys):
    """The dataset's genotypes (release ids) given with the original events (source ids) genotype no
    cohort patient: a one-line error naming the file and `--dataset`, not an empty PheWAS."""
    out = tmp_path / "o.csv"
    genotypes = generalized["dataset"] / "genotypes.csv"
    argv = _phewas_released(generalized["release"], generalized["code_map"], out)
    argv[argv.index(str(GENOTYPES))] = str(genotypes)
    assert main([*argv, "--crosswalk", str(generalized["crosswalk"])]) == 2
    err = capsys.readouterr().err
    assert str(genotypes) in err and "release ids" in err and "--dataset" in err
    assert not out.exists()


def test_the_dataset_is_signed_and_a_recipient_verifies_it(generalized, tmp_path, capsys) -> None:
    """Issue 39: "Every bundle or dataset is signed": `anonymize ... --dataset DIR` signs the dataset's
    manifest with the office key; `verify DIR --key OFFICE.pub` checks it and names a changed, added or
    missing file."""
    import shutil

    from engine.report.signing import office_public_key_path

    key = office_public_key_path()
    folder = tmp_path / "received"
    shutil.copytree(generalized["dataset"], folder)
    capsys.readouterr()
    assert main(["verify", str(folder), "--key", str(key)]) == 0
    assert "verified" in capsys.readouterr().out
    (folder / "genotypes.csv").write_text((folder / "genotypes.csv").read_text() + "x,0\n")
    (folder / "extra.csv").write_text("a\n")
    (folder / "code_map.csv").unlink()
    assert main(["verify", str(folder), "--key", str(key)]) == 1
    err = capsys.readouterr().err
    assert "genotypes.csv: changed" in err and "extra.csv: added" in err and "code_map.csv: missing" in err
    (folder / "MANIFEST.sig").unlink()
    assert main(["verify", str(folder), "--key", str(key)]) == 1
    assert "not signed" in capsys.readouterr().err
