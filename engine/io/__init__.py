"""Sources of patient data beyond the long-form file (ARCHITECTURE section 2).

- `normalize`: vocabulary of each event (ICD-9-CM or ICD-10-CM) and the opt-in, reported
  normalization of code spellings (undotted codes, prefixes, case, spaces).
- `mapping`: a column mapping (`patient_id=MRN,code=DX_CODE,visit=ENC_DATE`) for any long-form file.
- `excel`: `.xlsx` workbooks (openpyxl).
- `omop`: OMOP CDM v5.4 tables from CSV/Parquet files or a DuckDB database.
- `meds`: MEDS Parquet (`subject_id`, `time`, `code`), checked against the MEDS schema.

Every reader returns the long form of ARCHITECTURE section 2 (`patient_id`, `code`, optional `visit`,
`age`) plus the vocabulary per row, and names source, table, row and column in every error.
"""
