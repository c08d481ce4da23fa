"""The synthetic generator behind sample_data/ and the benchmarks (no real patient anywhere).

- `generator`: the population, its research cohort, visits, ages, genotypes (`generate`, `write_sample`)
- `vocabulary`: the conditions, risk factors and SNPs it draws from (ICD-9-CM)
- `labs`: lab orders (Johnson's setting); `repeats`: repeated codes (Tamersoy 2010's setting)
- `icd10`: the ICD-10-CM and mixed variants; `formats`: the OMOP DuckDB and MEDS forms
- `calibration`: the generated figures beside the papers' (bench/calibrate.py assembles them)
"""
