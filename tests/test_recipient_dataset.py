"""The recipient's dataset (issue #35): released codes and the genotypes of exactly the released
patients under one release-id space, laid out as a controlled-access deposit, and `phewas` on it.

Finding 1: no genotypes ever left, under release ids no genotype file shared.
Finding 2: `phewas --released REL.csv --codemap MAP.csv` on an `anonymize` output ended with
"2700 released patient(s) are not in the cohort" (release ids against source ids)."""

from __future__ import annotations

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
    assert main(argv) == 0
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
    assert "release ids" in err and "--crosswalk" in err
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


def test_finding2_a_crosswalk_missing_released_patients_is_named(generalized, tmp_path, capsys):
    walk = pd.read_csv(generalized["crosswalk"], dtype=str).iloc[1:]
    short = tmp_path / "short.csv"
    walk.to_csv(short, index=False)
    argv = _phewas_released(generalized["release"], generalized["code_map"], tmp_path / "o.csv")
    assert main([*argv, "--crosswalk", str(short)]) == 2
    err = capsys.readouterr().err
    assert str(short) in err and "1 released patient(s)" in err
