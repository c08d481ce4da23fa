"""Issue 37: Johnson 2018's lab orders from an imported OMOP CDM's measurement table, by LOINC concept,
on the app's Lab orders page (pages/labs.py, ui/views/labs.py; engine/io/omop.py reads them)."""

from __future__ import annotations

import pandas as pd
import pytest

from engine.io.imports import ImportSpec
from tests.apptest_support import page_app
from tests.test_omop_snomed import small_events, write_folder


@pytest.fixture(scope="module")
def tables():
    from engine.synth.omop_vocabulary import snomed_cdm

    return snomed_cdm(small_events(60), seed=1)


@pytest.fixture(scope="module")
def cdm(tmp_path_factory, tables):
    return write_folder(tables, tmp_path_factory.mktemp("labs") / "cdm")


def _by_concept(tables) -> pd.DataFrame:
    """The lab orders by hand: each measurement row's LOINC label on its date."""
    meas, concept = tables["measurement"], tables["concept"].set_index("concept_id")
    return pd.DataFrame(
        {
            "patient_id": meas["person_id"].astype(str),
            "day": pd.to_datetime(meas["measurement_date"]),
            "lab": "LOINC:" + concept.loc[meas["measurement_concept_id"], "concept_code"].to_numpy(),
        }
    )


def test_cdm_lab_orders_are_read_by_loinc_concept(cdm, tables):
    from engine.io.omop import read_omop

    data = read_omop(cdm, codes="standard", domains=("condition",))
    assert data.report.errors == []
    want = _by_concept(tables)
    got = data.labs.reset_index(drop=True)
    assert sorted(zip(got["patient_id"].astype(str), got["day"], got["lab"], strict=True)) == sorted(
        zip(want["patient_id"], want["day"], want["lab"], strict=True)
    )
    source = read_omop(cdm, domains=("condition",)).labs  # source codes: the source values, as before
    assert set(source["lab"]) == set(tables["measurement"]["measurement_source_value"])


def test_labs_page_reads_the_imported_cdm_measurements(cdm, tables, monkeypatch):
    """AppTest: the Lab orders page on a CDM imported in standard concepts analyses its measurements
    by LOINC concept (the uniqueness a brute force of those lab orders gives) and says where they
    come from."""
    from engine.labs import reident as L
    from tests.test_page_labs import metric, texts
    from ui import format as fmt
    from ui.import_view import APPLIED

    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(cdm.parent))
    spec = ImportSpec(source="omop", location=str(cdm), omop_codes="standard")
    at = page_app(
        "pages/labs.py",
        state={
            "dataset_choice": "Import a source",
            APPLIED: (spec, "", None),
            "labs_simulations": 2,
            "labs_trials": 10,
        },
        timeout=240,
    )
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    shown = texts(at)
    assert "no lab orders" not in shown
    assert "measurement table: one lab per measured standard concept (LOINC" in shown
    days = L.patient_days(_by_concept(tables))
    assert f"{days.n_patients:,} patients, {days.n_days:,} patient-days, {days.n_labs:,} labs" in shown
    assert metric(at, "Unique, all patients") == fmt.percent(L.uniqueness(days).share_unique)
    assert set(at.session_state["context"].dataset.labs["lab"]) == set(_by_concept(tables)["lab"])


def test_labs_page_on_a_cdm_read_by_source_values_says_so(cdm, tables, monkeypatch):
    """AppTest: with ICD source codes the CDM's lab orders are its measurement source values, and the
    page says how to read them by LOINC concept."""
    from tests.test_page_labs import texts
    from ui.import_view import APPLIED

    monkeypatch.setenv("COHORTSHIELD_DATA_ROOTS", str(cdm.parent))
    spec = ImportSpec(source="omop", location=str(cdm), omop_codes="icd")
    at = page_app(
        "pages/labs.py",
        state={"dataset_choice": "Import a source", APPLIED: (spec, "", None), "labs_simulations": 2},
        timeout=240,
    )
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Choose standard concepts on the Cohort page to read them by LOINC concept" in texts(at)
    labs = set(at.session_state["context"].dataset.labs["lab"])
    assert labs == set(tables["measurement"]["measurement_source_value"])
