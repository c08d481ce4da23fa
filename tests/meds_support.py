"""Builds the MEDS test dataset (tests/data/meds/): two shards of the MEDS DataSchema (meds 0.4.1)
with metadata, in the shapes the MIMIC-IV and OMOP MEDS ETLs write."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

MEDS_DIR = Path(__file__).resolve().parent / "data" / "meds"

# (subject_id, time or None, code, numeric_value or None)
TRAIN = [
    (1, datetime(1950, 3, 14), "MEDS_BIRTH", None),
    (1, datetime(2013, 4, 2, 9, 30), "HOSPITAL_ADMISSION//EW EMER.//UNK", None),
    (1, datetime(2013, 4, 2, 10, 0), "DIAGNOSIS//ICD//9//25000", None),
    (1, datetime(2013, 4, 2, 10, 0), "DIAGNOSIS//ICD//9//4019", None),
    (1, datetime(2013, 4, 2, 11, 0), "LAB//50912//mg/dL", 1.1),
    (1, datetime(2016, 6, 20, 8, 0), "DIAGNOSIS//ICD//10//E119", None),
    (1, datetime(2016, 6, 20, 8, 0), "DIAGNOSIS//ICD//10//I4891", None),
    (2, datetime(1962, 7, 1), "MEDS_BIRTH", None),
    (2, datetime(2014, 9, 30, 14, 0), "DIAGNOSIS//ICD//9//V4581", None),
    (2, datetime(2015, 10, 1, 7, 45), "ICD10CM/I10", None),
    (2, datetime(2015, 10, 1, 8, 0), "LOINC/4548-4", 7.2),
]
HELD_OUT = [
    (3, datetime(1975, 11, 2), "MEDS_BIRTH", None),
    (3, datetime(2017, 2, 11, 12, 0), "DIAGNOSIS//ICD//10//E1165", None),
    (3, datetime(2017, 2, 11, 12, 0), "ICD9CM/272.4", None),
]


def write_shard(rows, path: Path, *, subject_type: str = "int64") -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {
            "subject_id": pa.array([r[0] for r in rows], getattr(pa, subject_type)()),
            "time": pa.array([r[1] for r in rows], pa.timestamp("us")),
            "code": pa.array([r[2] for r in rows], pa.string()),
            "numeric_value": pa.array([r[3] for r in rows], pa.float32()),
        }
    )
    pq.write_table(table, path)


def build_meds(root: Path = MEDS_DIR) -> Path:
    """The MEDS dataset: data/train/0.parquet, data/held_out/0.parquet and metadata/."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    write_shard(TRAIN, root / "data" / "train" / "0.parquet")
    write_shard(HELD_OUT, root / "data" / "held_out" / "0.parquet")
    meta = root / "metadata"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "dataset.json").write_text(
        json.dumps(
            {
                "dataset_name": "CohortShield MEDS fixture",
                "dataset_version": "1",
                "etl_name": "tests/meds_support.py",
                "etl_version": "1",
                "meds_version": "0.4.1",
            },
            indent=2,
        )
        + "\n"
    )
    codes = sorted({r[2] for r in TRAIN + HELD_OUT})
    pq.write_table(
        pa.table(
            {
                "code": pa.array(codes, pa.string()),
                "description": pa.array([None] * len(codes), pa.string()),
                "parent_codes": pa.array([None] * len(codes), pa.list_(pa.string())),
            }
        ),
        meta / "codes.parquet",
    )
    pq.write_table(
        pa.table({"subject_id": pa.array([1, 2, 3], pa.int64()), "split": ["train", "train", "held_out"]}),
        meta / "subject_splits.parquet",
    )
    return root


if __name__ == "__main__":
    build_meds()
