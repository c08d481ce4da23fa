"""Builds OMOP CDM v5.4 test databases: the fixture folder tests/data/omop/ loaded into DuckDB with
the types of the v5.4 DDL (OHDSI/CommonDataModel, inst/ddl/5.4/duckdb), tables we read only."""

from __future__ import annotations

from pathlib import Path

OMOP_DIR = Path(__file__).resolve().parent / "data" / "omop"

DDL = {
    "person": """person_id integer NOT NULL, gender_concept_id integer NOT NULL,
        year_of_birth integer NOT NULL, month_of_birth integer NULL, day_of_birth integer NULL,
        birth_datetime TIMESTAMP NULL, race_concept_id integer NOT NULL, ethnicity_concept_id integer NOT NULL,
        location_id integer NULL, provider_id integer NULL, care_site_id integer NULL,
        person_source_value varchar(50) NULL, gender_source_value varchar(50) NULL,
        gender_source_concept_id integer NULL, race_source_value varchar(50) NULL,
        race_source_concept_id integer NULL, ethnicity_source_value varchar(50) NULL,
        ethnicity_source_concept_id integer NULL""",
    "visit_occurrence": """visit_occurrence_id integer NOT NULL, person_id integer NOT NULL,
        visit_concept_id integer NOT NULL, visit_start_date date NOT NULL, visit_start_datetime TIMESTAMP NULL,
        visit_end_date date NOT NULL, visit_end_datetime TIMESTAMP NULL, visit_type_concept_id Integer NOT NULL,
        provider_id integer NULL, care_site_id integer NULL, visit_source_value varchar(50) NULL,
        visit_source_concept_id integer NULL, admitted_from_concept_id integer NULL,
        admitted_from_source_value varchar(50) NULL, discharged_to_concept_id integer NULL,
        discharged_to_source_value varchar(50) NULL, preceding_visit_occurrence_id integer NULL""",
    "condition_occurrence": """condition_occurrence_id integer NOT NULL, person_id integer NOT NULL,
        condition_concept_id integer NOT NULL, condition_start_date date NOT NULL,
        condition_start_datetime TIMESTAMP NULL, condition_end_date date NULL, condition_end_datetime TIMESTAMP NULL,
        condition_type_concept_id integer NOT NULL, condition_status_concept_id integer NULL,
        stop_reason varchar(20) NULL, provider_id integer NULL, visit_occurrence_id integer NULL,
        visit_detail_id integer NULL, condition_source_value varchar(50) NULL,
        condition_source_concept_id integer NULL, condition_status_source_value varchar(50) NULL""",
    "measurement": """measurement_id integer NOT NULL, person_id integer NOT NULL,
        measurement_concept_id integer NOT NULL, measurement_date date NOT NULL, measurement_datetime TIMESTAMP NULL,
        measurement_time varchar(10) NULL, measurement_type_concept_id integer NOT NULL,
        operator_concept_id integer NULL, value_as_number NUMERIC NULL, value_as_concept_id integer NULL,
        unit_concept_id integer NULL, range_low NUMERIC NULL, range_high NUMERIC NULL, provider_id integer NULL,
        visit_occurrence_id integer NULL, visit_detail_id integer NULL, measurement_source_value varchar(50) NULL,
        measurement_source_concept_id integer NULL, unit_source_value varchar(50) NULL,
        unit_source_concept_id integer NULL, value_source_value varchar(50) NULL,
        measurement_event_id integer NULL, meas_event_field_concept_id integer NULL""",
    "concept": """concept_id integer NOT NULL, concept_name varchar(255) NOT NULL, domain_id varchar(20) NOT NULL,
        vocabulary_id varchar(20) NOT NULL, concept_class_id varchar(20) NOT NULL, standard_concept varchar(1) NULL,
        concept_code varchar(50) NOT NULL, valid_start_date date NOT NULL, valid_end_date date NOT NULL,
        invalid_reason varchar(1) NULL""",
}


def build_duckdb(target: Path, source: Path = OMOP_DIR, schema: str | None = None) -> Path:
    """A DuckDB file with the v5.4 types, filled from the CSV files of `source`."""
    import duckdb

    con = duckdb.connect(str(target))
    try:
        prefix = ""
        if schema:
            catalog = con.execute("SELECT current_database()").fetchone()[0]
            con.execute(f'CREATE SCHEMA "{catalog}"."{schema}"')
            prefix = f'"{catalog}"."{schema}".'
        for table, columns in DDL.items():
            csv = source / f"{table}.csv"
            if not csv.exists():
                continue
            con.execute(f"CREATE TABLE {prefix}{table} ({columns})")
            con.execute(
                f"INSERT INTO {prefix}{table} SELECT * FROM read_csv(?, header = true, all_varchar = true)",
                [str(csv)],
            )
    finally:
        con.close()
    return target


def export_parquet(database: Path, target: Path) -> Path:
    """Every table of a DuckDB file as `<table>.parquet` in `target` (types kept: integer, date)."""
    import duckdb

    target.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(database), read_only=True)
    try:
        for (table,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall():
            con.execute(f"COPY (SELECT * FROM {table}) TO '{target / (table + '.parquet')}' (FORMAT parquet)")
    finally:
        con.close()
    return target
