"""`python -m engine sample --scale paper` (issue #36, finding 1): the paper-scale population written
block by block in bounded memory, deterministic from the seed; checked at small sizes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from engine.commands.cli import main
from engine.synth import chunked, generator
from tests.test_synth import FILES, check_invariants


def _digests(folder: Path) -> dict[str, str]:
    return {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in FILES}


def _read(folder: Path) -> generator.SyntheticData:
    return generator.SyntheticData(
        events=pd.read_parquet(folder / "events.parquet"),
        biobank=pd.read_csv(folder / "biobank.csv", dtype=str),
        cohort=pd.read_csv(folder / "cohort.csv", dtype=str),
        genotypes=pd.read_parquet(folder / "genotypes.parquet"),
        labs=pd.read_parquet(folder / "labs.parquet"),
    )


def test_paper_scale_command_writes_blocks_with_progress_and_same_seed_same_bytes(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(chunked, "BLOCK", 900)
    args = ["sample", "--scale", "paper", "--patients", "2500", "--seed", "3"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "block 1/3: patients 1-900" in out and "block 3/3: patients 1,801-2,500" in out
    assert "peak" in out and "lab orders (cohort only)" in out
    assert pq.ParquetFile(tmp_path / "a" / "events.parquet").num_row_groups == 3
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    assert _digests(tmp_path / "a") == _digests(tmp_path / "b")
    assert main([*args[:-1], "4", "--out", str(tmp_path / "c")]) == 0
    assert _digests(tmp_path / "c")["events.parquet"] != _digests(tmp_path / "a")["events.parquet"]


def test_written_blocks_equal_the_frames_in_memory_and_keep_the_sample_invariants(tmp_path):
    written = chunked.write_chunked(tmp_path, 2500, 7, block=600)
    assert set(written) == {"events", "biobank", "cohort", "genotypes", "labs"}
    got, want = _read(tmp_path), chunked.generate_chunked(2500, 7, block=600)
    pd.testing.assert_frame_equal(got.events, want.events, check_dtype=False)
    pd.testing.assert_frame_equal(got.genotypes, want.genotypes, check_dtype=False)
    pd.testing.assert_frame_equal(got.labs, want.labs, check_dtype=False)
    assert got.biobank["patient_id"].tolist() == want.biobank["patient_id"].tolist()
    assert got.cohort["patient_id"].tolist() == want.cohort["patient_id"].tolist()
    check_invariants(got, 2500)
    # the shipped sample's proportions: the biobank 35% of the population, the cohort by group_sizes
    n_biobank, n_cohort = generator.group_sizes(2500)
    assert len(got.biobank) == n_biobank == 875
    assert 0 < len(got.cohort) <= n_cohort  # fewer when fewer biobank members are eligible
    # heavy users over-represented as in generate (Heatherly Table 1)
    per = got.events.groupby("patient_id").size()
    assert per[got.biobank["patient_id"]].mean() > 1.3 * per.mean()
    assert per[got.cohort["patient_id"]].mean() > per[got.biobank["patient_id"]].mean()
    # lab orders for the research cohort only, every cohort patient with some
    assert set(got.labs["patient_id"]) == set(got.cohort["patient_id"])


def test_paper_scale_is_heatherlys_population_and_refuses_what_it_cannot_bound(tmp_path, capsys):
    assert chunked.PAPER_PATIENTS == 1_366_786
    n_biobank, n_cohort = generator.group_sizes(chunked.PAPER_PATIENTS)
    assert (n_biobank, n_cohort) == (478_375, 5_795)
    out = str(tmp_path)
    assert main(["sample", "--scale", "paper", "--patients", "50", "--formats", "omop", "--out", out]) == 2
    assert "--scale paper" in capsys.readouterr().err
    assert main(["sample", "--scale", "paper", "--patients", "50", "--labs", "yes", "--out", out]) == 2
    assert main(["sample", "--scale", "paper", "--patients", "0", "--out", out]) == 2


@pytest.mark.parametrize("n", [1, 7])
def test_tiny_populations(tmp_path, n):
    chunked.write_chunked(tmp_path, n, 0, block=3)
    check_invariants(_read(tmp_path), n)


def test_the_app_loads_the_paper_scale_sample_as_a_variant_with_its_own_groups(tmp_path):
    from engine.io.imports import SAMPLE_VARIANTS, load_sample_variant

    assert "paper" in SAMPLE_VARIANTS
    with pytest.raises(FileNotFoundError, match="sample --scale paper"):
        load_sample_variant("paper", directory=tmp_path)
    chunked.write_chunked(tmp_path / "paper", 1500, 2, block=500)
    data = load_sample_variant("paper", directory=tmp_path).data
    assert data.events.n_patients == 1500
    want = pd.read_csv(tmp_path / "paper" / "cohort.csv", dtype=str)["patient_id"]
    assert sorted(data.groups["cohort"].astype(str)) == sorted(want)
    assert len(data.groups["biobank"]) == generator.group_sizes(1500)[0]


def test_the_paper_scale_variant_reports_the_stages_of_its_first_load(tmp_path):
    """Issue 36: the first load of the paper-scale population (a minute) showed a bare spinner; it
    reports each stage, in order, from 0 to 1, and a memoized load reports nothing."""
    from engine.io.imports import load_sample_variant

    chunked.write_chunked(tmp_path / "paper", 600, 5, block=300)
    seen: list[tuple[float, str]] = []
    first = load_sample_variant("paper", directory=tmp_path, progress=lambda f, m: seen.append((f, m)))
    fractions = [f for f, _ in seen]
    assert fractions[0] == 0.0 and fractions[-1] == 1.0 and fractions == sorted(fractions)
    said = " | ".join(m for _, m in seen)
    for part in ("events.parquet", "records", "biobank.csv", "cohort.csv", "genotypes.parquet"):
        assert part in said
    seen.clear()
    again = load_sample_variant("paper", directory=tmp_path, progress=lambda f, m: seen.append((f, m)))
    assert again is first and seen == []
