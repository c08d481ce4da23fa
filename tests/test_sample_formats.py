"""The sample as an OMOP CDM DuckDB database and a MEDS folder (engine/synth/formats.py, issue 14):
written by `python -m engine sample --formats ...`, loadable by the readers, same events as the mixed
variant."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from engine.records import Records
from engine.synth.formats import OMOP_MAX_PATIENTS, SWITCH, visit_dates, write_meds, write_omop
from engine.synth.generator import generate
from engine.synth.icd10 import icd10cm_variants

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"


def _same_events(frame: pd.DataFrame, events: pd.DataFrame) -> None:
    """Same patients (in order), codes, ages and number of visits per patient."""
    got = Records.from_frame(frame)
    want = Records.from_frame(events)
    assert sorted(map(str, got.items)) == sorted(map(str, want.items))
    assert got.n_patients == want.n_patients and got.n_events == want.n_events
    assert int(frame["age"].sum()) == int(events["age"].sum())
    assert np.array_equal(np.diff(got.visit_ptr), np.diff(want.visit_ptr))


def test_dates_follow_ages_and_the_icd10_switch() -> None:
    events = icd10cm_variants(generate(300, seed=4).events)[1]
    yob, dates = visit_dates(events)
    years = pd.DatetimeIndex(dates).year.to_numpy()
    assert np.array_equal(years - yob.reindex(events["patient_id"]).to_numpy(), events["age"].to_numpy())
    n = events.groupby("patient_id")["visit"].transform("max")
    icd9_visit = (events["visit"] <= n // 2).to_numpy()
    assert (dates.to_numpy()[icd9_visit] < SWITCH).all()
    assert (dates.to_numpy()[~icd9_visit] >= SWITCH).all()
    # visits of a patient in time order
    d = pd.DataFrame({"p": events["patient_id"], "v": events["visit"], "d": dates}).drop_duplicates(
        ["p", "v"]
    )
    assert (d.groupby("p")["d"].apply(lambda s: s.is_monotonic_increasing)).all()


def test_written_omop_and_meds_read_back(tmp_path) -> None:
    from engine.io.meds import read_meds
    from engine.io.omop import read_omop

    data = generate(200, seed=6)
    events = icd10cm_variants(data.events)[1]
    omop = read_omop(write_omop(events, data.labs, tmp_path / "cdm.duckdb"))
    assert not omop.report.errors
    _same_events(omop.events.frame, events)
    assert omop.labs is not None and len(omop.labs) == len(data.labs)
    meds = read_meds(write_meds(events, tmp_path / "meds"))
    assert not meds.report.errors
    _same_events(meds.events.frame, events)


def test_shipped_meds_and_omop_load_and_hold_the_mixed_sample() -> None:
    from engine.io.meds import read_meds
    from engine.io.omop import read_omop

    mixed = pd.read_parquet(SAMPLE / "mixed" / "events.parquet")
    assert (SAMPLE / "meds" / "data" / "train" / "0.parquet").stat().st_size < 8e6
    meds = read_meds(SAMPLE / "meds")
    assert not meds.report.errors
    _same_events(meds.events.frame, mixed)
    db = SAMPLE / "omop" / "cdm.duckdb"
    assert db.stat().st_size < 8e6
    omop = read_omop(db)
    assert not omop.report.errors
    keep = pd.unique(mixed["patient_id"])[:OMOP_MAX_PATIENTS]
    _same_events(omop.events.frame, mixed[mixed["patient_id"].isin(keep)])
    assert omop.labs is not None and len(omop.labs) > 0


def test_omop_and_meds_written_together_each_hold_their_patients(tmp_path, monkeypatch) -> None:
    """`--formats omop,meds` in one run: the OMOP database keeps its first OMOP_MAX_PATIENTS
    patients, the MEDS folder every patient (it used to get the OMOP database's subset)."""
    from engine.io.meds import read_meds
    from engine.io.omop import read_omop
    from engine.synth import formats

    data = generate(200, seed=6)
    data.events.to_parquet(tmp_path / "events.parquet", index=False)
    monkeypatch.setattr(formats, "OMOP_MAX_PATIENTS", 50)
    formats.write_formats(tmp_path, ["omop", "meds"])
    mixed = icd10cm_variants(data.events)[1]
    _same_events(read_meds(tmp_path / "meds").events.frame, mixed)
    keep = pd.unique(mixed["patient_id"])[:50]
    _same_events(
        read_omop(tmp_path / "omop" / "cdm.duckdb").events.frame, mixed[mixed["patient_id"].isin(keep)]
    )
