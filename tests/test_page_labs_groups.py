"""The Lab orders page analyses the sidebar's population group (ui/views/labs.py `population_days`):
membership is read on the patients with lab orders (issue 24: it was read on every one of the sample's
6.9 million rows at each rerun); the patient-days are those of the group's rows, as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import page_app

from engine.labs import reident as L

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "sample_data" / "labs.parquet").exists(), reason="the shipped sample has no labs.parquet"
)


def _data_line(population_group: str) -> str:
    at = page_app(
        "pages/labs.py",
        state={
            "population_group": population_group,
            "cohort_group": "cohort",
            "labs_simulations": 2,
            "labs_trials": 10,
            "labs_train_vae": False,
        },
        timeout=240,
    )
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return next(i.value for i in at.info if "Data: " in i.value)


def _said(days: L.PatientDays, group: str) -> str:
    return (
        f"Data: population group `{group}`: {days.n_patients:,} patients, {days.n_days:,} patient-days, "
        f"{days.n_labs:,} labs."
    )


def test_a_group_smaller_than_the_lab_orders_is_analysed_alone(sample_dataset):
    labs = sample_dataset.labs
    ids = {str(i) for i in sample_dataset.group_ids("cohort")}
    rows = labs[labs["patient_id"].astype(str).isin(ids)]  # the page's former filter, every row read
    assert 0 < len(rows) < len(labs)
    assert _said(L.patient_days(rows), "cohort") in _data_line("cohort")


def test_a_group_holding_every_lab_order_analyses_them_all(sample_dataset):
    assert _said(L.patient_days(sample_dataset.labs), "population") in _data_line("population")
