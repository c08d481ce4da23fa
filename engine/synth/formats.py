"""The sample in other shapes (issue 14): its ICD-10-CM and mixed variants (`engine.synth.icd10`),
an OMOP CDM v5.4 DuckDB database (`omop/cdm.duckdb`, the first `OMOP_MAX_PATIENTS` patients, with
their lab orders) and a MEDS folder (`meds/`, every patient, diagnoses only), both of the mixed
variant with dates (`visit_dates`), written from a sample folder that `engine.synth.generator.write_sample`
wrote (`python -m engine sample --formats ...`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def write_formats(out_dir: str | Path, formats: list[str]) -> dict[str, Path]:
    """Write the requested forms (`icd10cm`, `mixed`, `omop`, `meds`) next to the sample in
    `out_dir` (its events.parquet, labs.parquet); returns name -> path of every file written."""
    out = Path(out_dir)
    events = pd.read_parquet(out / "events.parquet")
    paths: dict[str, Path] = {}
    if "icd10cm" in formats or "mixed" in formats:
        from engine.synth.icd10 import write_variants

        written = write_variants(events, out)
        keep = {"crosswalk"} | {f"{f} events" for f in formats}
        paths.update({k: v for k, v in written.items() if k in keep})
        for k, v in written.items():
            if k not in keep:
                v.unlink()
    if "omop" in formats or "meds" in formats:
        from engine.synth.icd10 import icd10cm_variants

        mixed = icd10cm_variants(events)[1]
        if "omop" in formats:
            labs_file = out / "labs.parquet"
            labs = pd.read_parquet(labs_file) if labs_file.exists() else None
            keep = pd.unique(mixed["patient_id"])[:OMOP_MAX_PATIENTS]
            held = mixed  # the MEDS folder below keeps every patient
            if len(keep) < mixed["patient_id"].nunique():  # the lab orders make the file large
                held = mixed[mixed["patient_id"].isin(keep)].reset_index(drop=True)
                labs = None if labs is None else labs[labs["patient_id"].isin(keep)].reset_index(drop=True)
            paths["omop"] = write_omop(held, labs, out / "omop" / "cdm.duckdb")
        if "meds" in formats:
            paths["meds"] = write_meds(mixed, out / "meds") / "data" / "train" / "0.parquet"
    return paths


# ------------------------------------------------------------------------------- dates
SWITCH = np.datetime64("2015-10-01")
# the OMOP database holds the first 5,000 patients of the sample (in order of first appearance): with
# their lab orders (about 220 per patient) the 30,000 patients would make a 19 MB file
OMOP_MAX_PATIENTS = 5_000
LOCAL_CONCEPT_BASE = 2_000_000_001  # OMOP reserves concept ids above 2,000,000,000 for local concepts


def visit_dates(events: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(year of birth per patient, date per event) consistent with the sample's ages and the mixed
    variant's vocabularies: a patient's year of birth is 2015 minus their age at their first ICD-10-CM
    visit (visit n_visits // 2 + 1), so that visit falls in 2015; a visit at age a falls in year
    yob + a, and its visits of one age are spread evenly over that year (in 2015: ICD-9-CM visits
    from January to September, ICD-10-CM visits from 1 October), in visit order. Birthdays are
    1 January (`month_of_birth` 1, `day_of_birth` 1), so age = year - yob. Heavy users with long
    histories get dates after 2026: synthetic, and stated."""
    v = events[["patient_id", "visit", "age"]].drop_duplicates(["patient_id", "visit"]).reset_index(drop=True)
    n = v.groupby("patient_id", sort=False)["visit"].transform("max")
    first10 = n // 2 + 1
    age10 = v["age"].where(v["visit"] == first10).groupby(v["patient_id"], sort=False).transform("max")
    yob = 2015 - age10.astype(np.int64)
    year = yob + v["age"].astype(np.int64)
    icd9 = (v["visit"] < first10).to_numpy()
    start = np.array([np.datetime64(f"{y}-01-01") for y in range(1800, 2300)])
    y0 = start[(year - 1800).to_numpy()]
    y1 = start[(year - 1799).to_numpy()]
    in2015 = (year == 2015).to_numpy()
    lo = np.where(in2015 & ~icd9, SWITCH, y0)
    hi = np.where(in2015 & icd9, SWITCH, y1)
    key = [v["patient_id"], v["age"], pd.Series(icd9)]
    rank = v.groupby(key, sort=False).cumcount().to_numpy()
    count = v.groupby(key, sort=False)["visit"].transform("size").to_numpy()
    span = (hi - lo).astype(np.int64)
    day = lo + ((span * (2 * rank + 1)) // (2 * count)).astype("timedelta64[D]")
    v["date"] = day
    dates = events.merge(v[["patient_id", "visit", "date"]], on=["patient_id", "visit"], how="left")["date"]
    per_patient = pd.Series(yob.to_numpy(), index=v["patient_id"]).groupby(level=0, sort=False).first()
    return per_patient, dates


def person_and_visit_tables(
    events: pd.DataFrame, yob: pd.Series, day: np.ndarray
) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray, np.ndarray]:
    """The CDM's `person` (ids 1.. in order of first appearance, the source id kept as
    `person_source_value`) and `visit_occurrence` (one outpatient visit per patient and visit, dated by
    `day` of its first event) of long-form events, with each event's person and visit index (0-based):
    one builder for the ICD-coded CDM (`write_omop`) and the SNOMED-coded one (`omop_vocabulary`)."""
    pid_codes, pids = pd.factorize(events["patient_id"], sort=False)
    person = pd.DataFrame(
        {
            "person_id": np.arange(1, len(pids) + 1),
            "gender_concept_id": 0,
            "year_of_birth": yob.reindex(pids).to_numpy(),
            "month_of_birth": 1,
            "day_of_birth": 1,
            "race_concept_id": 0,
            "ethnicity_concept_id": 0,
            "person_source_value": pids.astype(str),
        }
    )
    vkey = pd.factorize(pd.Series(pid_codes).astype(str) + "|" + events["visit"].astype(str), sort=False)[0]
    first = ~pd.Series(vkey).duplicated().to_numpy()
    visit = pd.DataFrame(
        {
            "visit_occurrence_id": vkey[first] + 1,
            "person_id": pid_codes[first] + 1,
            "visit_concept_id": 9202,  # Outpatient Visit (OMOP standard concept)
            "visit_start_date": day[first],
            "visit_end_date": day[first],
            "visit_type_concept_id": 32817,  # EHR
        }
    )
    return person, visit, pid_codes, vkey


def write_omop(events: pd.DataFrame, labs: pd.DataFrame | None, target: Path) -> Path:
    """An OMOP CDM v5.4 DuckDB file (`engine.io.omop_ddl` types) of the mixed events: person,
    visit_occurrence (one per visit), condition_occurrence (`condition_source_value` the code as
    written, `condition_concept_id` 0 as no standard concept is mapped, `condition_source_concept_id` a
    local concept per code), concept (those local concepts, `vocabulary_id` ICD9CM / ICD10CM), and
    measurement (lab orders: `measurement_source_value` the test, dated by day number after the
    patient's first visit) when `labs` is given."""
    import duckdb

    from engine.io.omop_ddl import DDL
    from engine.vocab import code_of_item, vocabulary_of_item

    yob, dates = visit_dates(events)
    person, visit, pid_codes, vkey = person_and_visit_tables(events, yob, dates.to_numpy())
    person_id = dict(zip(person["person_source_value"], person["person_id"], strict=True))
    items = events["code"].astype(str)
    u_items, item_idx = np.unique(items.to_numpy(dtype=object), return_inverse=True)
    concept = pd.DataFrame(
        {
            "concept_id": LOCAL_CONCEPT_BASE + np.arange(len(u_items)),
            "concept_name": [code_of_item(c) for c in u_items],
            "domain_id": "Condition",
            "vocabulary_id": [vocabulary_of_item(c) or "" for c in u_items],
            "concept_class_id": "Local",
            "concept_code": [code_of_item(c) for c in u_items],
            "valid_start_date": np.datetime64("1970-01-01"),
            "valid_end_date": np.datetime64("2099-12-31"),
        }
    )
    cond = pd.DataFrame(
        {
            "condition_occurrence_id": np.arange(1, len(events) + 1),
            "person_id": pid_codes + 1,
            "condition_concept_id": 0,
            "condition_start_date": dates.to_numpy(),
            "condition_type_concept_id": 32817,
            "visit_occurrence_id": vkey + 1,
            "condition_source_value": [code_of_item(c) for c in u_items[item_idx]],
            "condition_source_concept_id": LOCAL_CONCEPT_BASE + item_idx,
        }
    )
    frames = {"person": person, "visit_occurrence": visit, "condition_occurrence": cond, "concept": concept}
    if labs is not None and len(labs):
        first_day = pd.Series(dates.to_numpy(), index=events["patient_id"]).groupby(level=0).min()
        lab_date = first_day.reindex(labs["patient_id"]).to_numpy() + (
            labs["day"].to_numpy() - labs.groupby("patient_id")["day"].transform("min").to_numpy()
        ).astype("timedelta64[D]")
        frames["measurement"] = pd.DataFrame(
            {
                "measurement_id": np.arange(1, len(labs) + 1),
                "person_id": labs["patient_id"].map(person_id).to_numpy(),
                "measurement_concept_id": 0,
                "measurement_date": lab_date,
                "measurement_type_concept_id": 32817,
                "measurement_source_value": labs["lab"].astype(str).to_numpy(),
            }
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    con = duckdb.connect(str(target))
    try:
        con.execute("SET enable_progress_bar = false")
        for table, frame in frames.items():
            con.execute(f"CREATE TABLE {table} ({DDL[table]})")
            con.register("frame", frame)
            cols = ", ".join(frame.columns)
            con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM frame")
            con.unregister("frame")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return target


def write_meds(events: pd.DataFrame, target: Path) -> Path:
    """A MEDS dataset (meds 0.4.1 DataSchema) of the mixed events: one shard `data/train/0.parquet`
    with a `MEDS_BIRTH` event per subject (1 January of the year of birth) and each diagnosis as
    `ICD9CM/250.00` or `ICD10CM/E11.9` (the OMOP MEDS ETL's form), at its visit's date; subjects
    numbered in order of first appearance; `metadata/dataset.json`."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from engine.vocab import code_of_item, vocabulary_of_item

    yob, dates = visit_dates(events)
    pid_codes, pids = pd.factorize(events["patient_id"], sort=False)
    items = events["code"].astype(str).to_numpy(dtype=object)
    u, inv = np.unique(items, return_inverse=True)
    meds_codes = np.array([f"{vocabulary_of_item(c)}/{code_of_item(c)}" for c in u], dtype=object)[inv]
    birth = pd.DataFrame(
        {
            "subject_id": np.arange(1, len(pids) + 1, dtype=np.int64),
            "time": pd.to_datetime(yob.reindex(pids).astype(str).to_numpy() + "-01-01"),
            "code": "MEDS_BIRTH",
        }
    )
    diag = pd.DataFrame(
        {
            "subject_id": (pid_codes + 1).astype(np.int64),
            "time": pd.to_datetime(dates.to_numpy()),
            "code": meds_codes,
        }
    )
    data = pd.concat([birth, diag], ignore_index=True).sort_values(["subject_id", "time"], kind="stable")
    table = pa.table(
        {
            "subject_id": pa.array(data["subject_id"].to_numpy(), pa.int64()),
            "time": pa.array(data["time"].to_numpy().astype("datetime64[us]"), pa.timestamp("us")),
            "code": pa.array(data["code"].astype(str).tolist(), pa.string()),
            "numeric_value": pa.nulls(len(data), pa.float32()),
        }
    )
    shard = target / "data" / "train" / "0.parquet"
    shard.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, shard, compression="zstd")
    meta = target / "metadata"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "dataset.json").write_text(
        json.dumps(
            {
                "dataset_name": "CohortShield synthetic sample (mixed ICD-9-CM / ICD-10-CM)",
                "dataset_version": "1",
                "etl_name": "engine.synth_formats",
                "etl_version": "1",
                "meds_version": "0.4.1",
            },
            indent=1,
        )
        + "\n"
    )
    return target
