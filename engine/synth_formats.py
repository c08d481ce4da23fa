"""The sample in other shapes (issue 14): its ICD-10-CM and mixed variants (`engine.synth_icd10`),
an OMOP CDM v5.4 DuckDB database and a MEDS folder, written from a sample folder that
`engine.synth.write_sample` wrote (`python -m engine sample --formats ...`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def write_formats(out_dir: str | Path, formats: list[str]) -> dict[str, Path]:
    """Write the requested forms (`icd10cm`, `mixed`, `omop`, `meds`) next to the sample in
    `out_dir` (its events.parquet, labs.parquet); returns name -> path of every file written."""
    out = Path(out_dir)
    events = pd.read_parquet(out / "events.parquet")
    paths: dict[str, Path] = {}
    if "icd10cm" in formats or "mixed" in formats:
        from engine.synth_icd10 import write_variants

        written = write_variants(events, out)
        keep = {"crosswalk"} | {f"{f} events" for f in formats}
        paths.update({k: v for k, v in written.items() if k in keep})
        for k, v in written.items():
            if k not in keep:
                v.unlink()
    return paths
