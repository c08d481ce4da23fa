"""Issue 37: a synthetic OMOP CDM coded in standard concepts (SNOMED conditions, SNOMED/CPT4
procedures, RxNorm drugs) with its own vocabulary tables (engine/synth/omop_vocabulary.py), read in
standard concepts of several domains (engine/io/omop.py), generalized along its own hierarchy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.synth.omop_vocabulary import CONCEPT_BASE, snomed_cdm

SAMPLE_ICD10 = Path(__file__).resolve().parent.parent / "sample_data" / "icd10cm" / "events.parquet"


def small_events(n_patients: int = 150) -> pd.DataFrame:
    """The first patients of the shipped sample's ICD-10-CM variant."""
    events = pd.read_parquet(SAMPLE_ICD10)
    keep = pd.unique(events["patient_id"])[:n_patients]
    return events[events["patient_id"].isin(keep)].reset_index(drop=True)


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    return snomed_cdm(small_events(), seed=1)


def write_folder(tables: dict[str, pd.DataFrame], target: Path) -> Path:
    """The tables as Parquet files of a CDM folder (as `write_snomed_cdm` writes them)."""
    target.mkdir(parents=True, exist_ok=True)
    for name, frame in tables.items():
        frame.to_parquet(target / f"{name}.parquet", index=False)
    return target


@pytest.fixture(scope="module")
def cdm(tmp_path_factory, tables) -> Path:
    return write_folder(tables, tmp_path_factory.mktemp("snomed") / "cdm")


# ------------------------------------------------------------------------------------ the sample
def test_sample_is_deterministic_from_the_seed(tables):
    again = snomed_cdm(small_events(), seed=1)
    for name, frame in tables.items():
        pd.testing.assert_frame_equal(frame, again[name], obj=name)
    other = snomed_cdm(small_events(), seed=2)
    assert not other["procedure_occurrence"].equals(tables["procedure_occurrence"])


def test_sample_vocabulary_is_invented_deep_and_poly_hierarchical(tables):
    concept, ancestor = tables["concept"], tables["concept_ancestor"]
    assert (concept["concept_id"] >= CONCEPT_BASE).all()  # local ids only: nothing of SNOMED CT
    assert concept["concept_name"].str.endswith("(synthetic)").all()
    assert set(concept["vocabulary_id"]) == {"SNOMED", "CPT4", "RxNorm", "ATC", "ICD10CM"}
    snomed = set(concept.loc[concept["vocabulary_id"] == "SNOMED", "concept_id"])
    cond = tables["condition_occurrence"]
    assert set(cond["condition_concept_id"]) <= snomed
    assert (cond["condition_source_concept_id"] == 0).all()
    # deep enough to generalize along: a condition concept 5 levels below its top
    used = ancestor[ancestor["descendant_concept_id"].isin(cond["condition_concept_id"])]
    assert used["max_levels_of_separation"].max() >= 5
    # poly-hierarchy: condition and procedure concepts with two parents
    parents = ancestor[ancestor["min_levels_of_separation"] == 1]
    n_parents = parents.groupby("descendant_concept_id").size()
    multi = set(n_parents[n_parents > 1].index)
    assert multi & set(cond["condition_concept_id"])
    assert multi & set(tables["procedure_occurrence"]["procedure_concept_id"])
    # the self pairs, and every parent pair is an ancestor pair of separation 1
    self_pairs = ancestor[ancestor["ancestor_concept_id"] == ancestor["descendant_concept_id"]]
    assert set(self_pairs["ancestor_concept_id"]) == set(concept["concept_id"])
    assert (self_pairs["max_levels_of_separation"] == 0).all()


def test_sample_maps_a_share_of_conditions_to_icd10cm(tables):
    concept, rel = tables["concept"], tables["concept_relationship"]
    vocab = dict(zip(concept["concept_id"], concept["vocabulary_id"], strict=True))
    maps_to = rel[rel["relationship_id"] == "Maps to"]
    assert {vocab[c] for c in maps_to["concept_id_1"]} == {"ICD10CM"}
    assert {vocab[c] for c in maps_to["concept_id_2"]} == {"SNOMED"}
    used = set(tables["condition_occurrence"]["condition_concept_id"])
    share = len(used & set(maps_to["concept_id_2"])) / len(used)
    assert 0.6 < share < 1.0  # some map, some do not
    icd = concept[concept["vocabulary_id"] == "ICD10CM"]
    from engine.vocab import is_known_icd10cm

    assert all(is_known_icd10cm(c) for c in icd["concept_code"])


def test_drugs_have_ingredients_as_ancestors(tables):
    concept, ancestor = tables["concept"], tables["concept_ancestor"]
    klass = dict(zip(concept["concept_id"], concept["concept_class_id"], strict=True))
    drugs = set(tables["drug_exposure"]["drug_concept_id"])
    assert {klass[d] for d in drugs} == {"Clinical Drug"}
    up = ancestor[ancestor["descendant_concept_id"].isin(drugs)]
    ingredients = up[up["ancestor_concept_id"].map(klass) == "Ingredient"]
    assert ingredients.groupby("descendant_concept_id").size().eq(1).all()
    assert set(ingredients["descendant_concept_id"]) == drugs


def test_sample_command_writes_the_snomed_cdm(tmp_path):
    from engine.commands.cli import main

    assert main(["sample", "--out", str(tmp_path), "--patients", "200", "--labs", "no",
                 "--formats", "omop-snomed"]) == 0  # fmt: skip
    folder = tmp_path / "omop_snomed"
    for table in ("person", "condition_occurrence", "procedure_occurrence", "drug_exposure", "concept",
                  "concept_ancestor", "concept_relationship"):  # fmt: skip
        assert (folder / f"{table}.parquet").exists(), table
    import pyarrow.parquet as pq

    assert str(
        pq.read_schema(folder / "condition_occurrence.parquet").field("condition_start_date").type
    ) == ("date32[day]")
    person = pd.read_parquet(folder / "person.parquet")
    assert len(person) == 200 and np.array_equal(person["person_id"], np.arange(1, 201))
