"""A population at the paper's scale written in bounded memory (issue #36, finding 1).

Heatherly 2013's SD holds 1,366,786 patients (`PAPER_PATIENTS`). `generate` holds every diagnosis
of the population in memory at once; `write_chunked` draws the population block by block
(`BLOCK` patients, each block its own numpy streams from (seed, block number)), writes each block's
diagnoses to events.parquet as one row group, and keeps only a few numbers per patient (visits,
conditions, genotype, the biobank draw's key). The biobank, the research cohort, the genotypes and the
lab orders are then drawn from those as `generate` draws them (`generator._groups`' proportions: the
biobank `BIOBANK_SHARE` of the population, the cohort `COHORT_SIZE_AT_30K * (n / 30000) **
COHORT_SIZE_EXPONENT`). Lab orders (about 220 rows a patient, 300 million for the whole population)
are written for the research cohort only.

Deterministic: the same (n_patients, seed, parameters, block) gives byte-identical files; `generate_chunked`
returns the same frames in memory (small sizes, tests).
"""

from __future__ import annotations

import resource
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from engine.synth.generator import (
    PARAMETERS,
    CodeParameters,
    SyntheticData,
    _events,
    _genotype_frame,
    _patients,
    cohort_draw,
    events_frame,
    group_sizes,
    lab_frame,
    patient_ids,
)

__all__ = ["BLOCK", "PAPER_PATIENTS", "Progress", "generate_chunked", "write_chunked"]

PAPER_PATIENTS = 1_366_786  # Heatherly 2013, Table 1: the Synthetic Derivative (SD)
BLOCK = 100_000  # patients drawn and written at a time (part of the definition: it picks the streams)

Progress = Callable[[str], None]


@dataclass
class _Kept:
    """What the groups, genotypes and labs need of every patient (about 50 bytes a patient)."""

    n_visits: np.ndarray
    has: np.ndarray  # (n, len(CONDITIONS)) bool
    genotypes: np.ndarray  # (n, 6) int8
    key: np.ndarray  # the biobank draw's exponential key (generator._weighted_sample)


def _blocks(n: int, seed: int, block: int, q: CodeParameters) -> Iterator[tuple[int, pd.DataFrame, _Kept]]:
    """(first patient, events of the block, what is kept of its patients), block by block."""
    ids_width = max(6, len(str(n)))
    for b, start in enumerate(range(0, n, block)):
        m = min(block, n - start)
        r_pat, r_ev, r_key = (np.random.default_rng(s) for s in np.random.SeedSequence([seed, 4, b]).spawn(3))
        p = _patients(m, r_pat)
        ev_visit, ev_code = _events(p, r_ev, q)
        ids = np.array([f"P{i:0{ids_width}d}" for i in range(start + 1, start + m + 1)], dtype=object)
        weights = p.n_visits.astype(float) ** q.biobank_use_power
        kept = _Kept(p.n_visits, p.has, p.genotypes, r_key.exponential(1.0, m) / np.maximum(weights, 1e-300))
        yield start, events_frame(p, ids, ev_visit, ev_code), kept


def _finish(kept: list[_Kept], n: int, seed: int, q: CodeParameters) -> dict[str, pd.DataFrame]:
    """Biobank, cohort, genotypes and the cohort's lab orders from every block's kept numbers."""
    n_visits = np.concatenate([k.n_visits for k in kept])
    has = np.concatenate([k.has for k in kept])
    genotypes = np.concatenate([k.genotypes for k in kept])
    key = np.concatenate([k.key for k in kept])
    r_grp, r_gt, r_lab = (np.random.default_rng(s) for s in np.random.SeedSequence([seed, 5]).spawn(3))
    n_biobank, _ = group_sizes(n)
    biobank = np.sort(np.argsort(key, kind="stable")[:n_biobank])
    cohort = cohort_draw(biobank, has, n_visits, r_grp, q)
    ids = patient_ids(n)
    return {
        "biobank": pd.DataFrame({"patient_id": pd.array(ids[biobank], dtype="str")}),
        "cohort": pd.DataFrame({"patient_id": pd.array(ids[cohort], dtype="str")}),
        "genotypes": _genotype_frame(ids[biobank], genotypes[biobank], r_gt),
        "labs": lab_frame(ids[cohort], has[cohort], n_visits[cohort], r_lab),
    }


def generate_chunked(
    n_patients: int, seed: int = 0, *, block: int | None = None, parameters: CodeParameters = PARAMETERS
) -> SyntheticData:
    """The frames `write_chunked` writes, in memory (for small sizes: tests)."""
    events, kept = [], []
    for _, ev, k in _blocks(n_patients, seed, block or BLOCK, parameters):
        events.append(ev)
        kept.append(k)
    rest = _finish(kept, n_patients, seed, parameters)
    return SyntheticData(events=pd.concat(events, ignore_index=True), **rest)


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # Linux: kilobytes


def write_chunked(
    out_dir: str | Path,
    n_patients: int = PAPER_PATIENTS,
    seed: int = 0,
    *,
    block: int | None = None,
    parameters: CodeParameters = PARAMETERS,
    progress: Progress | None = None,
) -> dict[str, Path]:
    """Write the sample files of `generator.write_sample` for `n_patients`, one block of patients at a
    time (events.parquet one row group a block); `progress` gets a line per block and at the end."""
    if n_patients < 1:
        raise ValueError("n_patients must be at least 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "events": out / "events.parquet",
        "biobank": out / "biobank.csv",
        "cohort": out / "cohort.csv",
        "genotypes": out / "genotypes.parquet",
        "labs": out / "labs.parquet",
    }
    block = block or BLOCK
    n_blocks = -(-n_patients // block)
    kept: list[_Kept] = []
    writer: pq.ParquetWriter | None = None
    rows = 0
    try:
        for b, (start, ev, k) in enumerate(_blocks(n_patients, seed, block, parameters)):
            table = pa.Table.from_pandas(ev, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(paths["events"], table.schema, compression="zstd")
            writer.write_table(table)
            kept.append(k)
            rows += len(ev)
            if progress:
                progress(
                    f"block {b + 1}/{n_blocks}: patients {start + 1:,}-{start + len(k.n_visits):,}, "
                    f"{rows:,} diagnoses written, peak {_peak_gb():.2f} GB"
                )
    finally:
        if writer is not None:
            writer.close()
    rest = _finish(kept, n_patients, seed, parameters)
    kw = {"index": False, "compression": "zstd"}
    rest["genotypes"].to_parquet(paths["genotypes"], **kw)
    rest["labs"].to_parquet(paths["labs"], **kw)
    rest["biobank"].to_csv(paths["biobank"], index=False)
    rest["cohort"].to_csv(paths["cohort"], index=False)
    if progress:
        progress(
            f"biobank {len(rest['biobank']):,}, cohort {len(rest['cohort']):,}, lab orders (cohort only) "
            f"{len(rest['labs']):,}; peak {_peak_gb():.2f} GB"
        )
    return paths
