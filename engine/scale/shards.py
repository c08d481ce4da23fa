"""Sharded, out-of-core risk runs (issue 15; ARCHITECTURE section 7).

A population is split by patients into Parquet shards (`write_shards` from `Records`,
`write_shards_from_events` from a CSV or Parquet events file, streamed in batches). The targets' known
sets are built once (`engine.risk.known_sets`); each shard is read on its own, builds its own index
and counts the support of every known set among its patients (`engine.risk.count_known_sets`, the one
arbiter); the supports add up, because every patient lives in exactly one shard (so under
within-visits matching the distinct patients of different shards are distinct too). The
distinguishability of a target record is then the minimum over its known sets, as in process. Peak
memory is bounded by one shard plus the targets' known sets.

A shard is a Parquet file of long-form events (`patient_id`, `visit`, `code`); its file metadata
records how many patients it holds (`cohortshield.n_patients`), so patients without any event still
count as candidates.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import scipy.sparse as sp

from engine.adversary import Knowledge
from engine.io.progress import Progress
from engine.records import Records
from engine.risk import DEFAULT_MATCHING, KnownSets, Matching, count_known_sets, known_sets

if TYPE_CHECKING:
    from engine.labs.reident import Uniqueness
    from engine.utility.phewas import PhewasSettings

N_PATIENTS_KEY = b"cohortshield.n_patients"


def shard_done(done: int, total: int, path: str | Path) -> str:
    """The progress message after a shard (`engine.io.progress.Progress`): "shard 3/8: <path>"."""
    return f"shard {done}/{total}: {path}"


_HASH_KEY = "cohortshield0001"  # 16 characters: fixed, so a patient's shard never changes


def shard_of(patient_ids: np.ndarray | Sequence[str], n_shards: int) -> np.ndarray:
    """The shard of each patient id: a fixed hash of the id's text modulo `n_shards` (deterministic
    across runs and machines)."""
    if n_shards < 1:
        raise ValueError(f"the number of shards must be a positive whole number, not {n_shards}")
    ids = np.asarray(patient_ids, dtype=object).astype(str)
    return (pd.util.hash_array(ids, hash_key=_HASH_KEY) % np.uint64(n_shards)).astype(np.int64)


def shard_path(out_dir: str | Path, i: int) -> Path:
    return Path(out_dir) / f"shard-{i:05d}.parquet"


def _visit_column(values: pd.Series) -> pd.Series:
    """Visit labels as given when numeric, else as text (one Parquet type per column)."""
    if pd.api.types.is_numeric_dtype(values):
        return values
    as_num = pd.to_numeric(values, errors="coerce")
    if as_num.notna().all() and (as_num == as_num.round()).all():
        return as_num.astype(np.int64)
    return values.astype(str)


def _write(frame: pd.DataFrame, path: Path, n_patients: int) -> None:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[N_PATIENTS_KEY] = str(n_patients).encode()
    pq.write_table(table.replace_schema_metadata(meta), path)


def write_shards(records: Records, out_dir: str | Path, n_shards: int) -> list[Path]:
    """Split `records` by patients into `n_shards` Parquet shards under `out_dir` (created); returns
    their paths. Patients go to `shard_of(patient_id)`; within a shard they keep their order."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    which = shard_of(records.patient_ids, n_shards)
    ev_shard = which[records.event_patient]
    frame = pd.DataFrame(
        {
            "patient_id": records.patient_ids[records.event_patient].astype(str),
            "visit": _visit_column(pd.Series(records.visit_ids[records.event_visit]))
            if records.has_visits
            else np.zeros(records.n_events, dtype=np.int64),
            "code": records.items[records.event_item].astype(str),
        }
    )
    paths = []
    for i in range(n_shards):
        path = shard_path(out, i)
        _write(frame[ev_shard == i].reset_index(drop=True), path, int((which == i).sum()))
        paths.append(path)
    return paths


def write_shards_from_events(
    events: str | Path, out_dir: str | Path, n_shards: int, *, batch_rows: int = 1 << 20
) -> list[Path]:
    """Split a long-form events file (CSV or Parquet: `patient_id`, `code`, optional `visit`) into
    `n_shards` Parquet shards, streaming it in batches of `batch_rows` rows (memory: one batch).
    Refuses a file without the columns, or a row with an empty patient id or code (naming the file,
    the row, counted from 1 after the header, and the column)."""
    src = Path(events)
    fmt = "parquet" if src.suffix.lower() in (".parquet", ".pq") or src.is_dir() else "csv"
    data = ds.dataset(str(src), format=fmt)
    names = data.schema.names
    missing = [c for c in ("patient_id", "code") if c not in names]
    if missing:
        raise ValueError(f"{src.name}: no column {', '.join(repr(c) for c in missing)} (columns: {names})")
    cols = ["patient_id", "code"] + (["visit"] if "visit" in names else [])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    patients: list[set[str]] = [set() for _ in range(n_shards)]
    writers: list[pq.ParquetWriter | None] = [None] * n_shards
    tmp = [shard_path(out, i).with_suffix(".part") for i in range(n_shards)]
    row0 = 0
    try:
        for batch in data.to_batches(columns=cols, batch_size=batch_rows):
            f = batch.to_pandas()
            for c in ("patient_id", "code"):
                text = f[c].astype("string").str.strip()
                bad = np.flatnonzero((text.isna() | (text == "")).to_numpy())
                if len(bad):
                    raise ValueError(f"{src.name}, row {row0 + int(bad[0]) + 1}, column {c!r}: empty value")
                f[c] = text.astype(str).to_numpy(dtype=object)
            f["visit"] = _visit_column(f["visit"]) if "visit" in f else np.zeros(len(f), dtype=np.int64)
            which = shard_of(f["patient_id"].to_numpy(), n_shards)
            for i in np.unique(which).tolist():
                part = f.loc[which == i, ["patient_id", "visit", "code"]].reset_index(drop=True)
                patients[i].update(part["patient_id"].unique().tolist())
                table = pa.Table.from_pandas(part, preserve_index=False)
                if writers[i] is None:
                    writers[i] = pq.ParquetWriter(tmp[i], table.schema)
                writers[i].write_table(table.cast(writers[i].schema))
            row0 += len(f)
    finally:
        for w in writers:
            if w is not None:
                w.close()
    paths = []
    for i in range(n_shards):
        frame = (
            pq.read_table(tmp[i]).to_pandas()
            if writers[i] is not None
            else pd.DataFrame({"patient_id": [], "visit": np.zeros(0, np.int64), "code": []})
        )
        _write(frame, shard_path(out, i), len(patients[i]))
        if writers[i] is not None:
            os.remove(tmp[i])
        paths.append(shard_path(out, i))
    return paths


def records_from_table(table: pa.Table, items: np.ndarray | None = None) -> Records:
    """`Records.from_frame(table.to_pandas(), items)`, built from Arrow's dictionary encoding when
    the ids and codes are text and the visits whole numbers (no age): the same records, without one
    Python string per event (a 1.37-million-patient population: 8 GB through pandas). Other columns
    go through `Records.from_frame`."""
    names = table.schema.names
    fast = (
        "age" not in names
        and all(
            pa.types.is_string(table.schema.field(c).type)
            or pa.types.is_large_string(table.schema.field(c).type)
            for c in ("patient_id", "code")
        )
        and ("visit" not in names or pa.types.is_integer(table.schema.field("visit").type))
    )
    if not fast:
        return Records.from_frame(table.to_pandas(), items=items)
    n = table.num_rows
    pid = table.column("patient_id").combine_chunks().dictionary_encode()  # first appearance order
    p_codes = pid.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    patient_ids = np.array(pid.dictionary.to_pylist(), dtype=object)
    code = table.column("code").combine_chunks().dictionary_encode()
    seen = code.dictionary.to_pylist()
    vocab = np.array(sorted(set(seen)) if items is None else list(items), dtype=object)
    at = pd.Index(vocab).get_indexer(seen)
    if (at < 0).any():
        raise ValueError(
            f"codes not in the given vocabulary: {sorted(np.array(seen, dtype=object)[at < 0])[:5]}"
        )
    ev_item = at[code.indices.to_numpy(zero_copy_only=False)]
    has_visits = "visit" in names
    visit = table.column("visit").to_numpy().astype(np.int64) if has_visits else np.zeros(n, dtype=np.int64)
    order = np.lexsort((np.arange(n), visit, p_codes))  # as from_frame: patient, visit, input order
    p_sorted, v_sorted = p_codes[order], visit[order]
    new_visit = np.ones(n, dtype=bool)
    if n:
        new_visit[1:] = (p_sorted[1:] != p_sorted[:-1]) | (v_sorted[1:] != v_sorted[:-1])
    visit_starts = np.flatnonzero(new_visit)
    visit_patient = p_sorted[visit_starts]
    return Records(
        patient_ids=patient_ids,
        items=vocab,
        visit_ptr=np.searchsorted(visit_patient, np.arange(len(patient_ids) + 1)).astype(np.int64),
        visit_ids=v_sorted[visit_starts].astype(object),
        event_ptr=np.append(visit_starts, n).astype(np.int64),
        event_item=ev_item[order].astype(np.int32),
        event_age=None,
        has_visits=has_visits,
    )


def read_table(path: str | Path) -> pa.Table:
    """A Parquet file as an Arrow table: a local path, or any URL pandas reads through fsspec."""
    if "://" in str(path):
        return pa.Table.from_pandas(pd.read_parquet(path), preserve_index=False)
    return pq.read_table(path)


def read_shard(path: str | Path, items: np.ndarray | None = None) -> tuple[Records | None, int]:
    """A shard's records (None when it holds no event) and its number of patients. `path` is a
    local path or any URL pandas reads through fsspec (s3://, gs://, ...). `items`: the vocabulary
    to build the records over (`Records.from_frame`), by default the shard's own codes."""
    table = read_table(path)
    n = len(pc.unique(table.column("patient_id")))
    meta = pq.read_schema(path).metadata if not str(path).count("://") else None
    if meta and N_PATIENTS_KEY in meta:
        n = int(meta[N_PATIENTS_KEY])
    if table.num_rows == 0:
        return None, n
    records = records_from_table(table, items)
    del table
    release_arrow_memory()
    return records, n


def release_arrow_memory() -> None:
    """Give back to the system what Arrow's allocator keeps of freed tables: after a table of a
    1.37-million-patient population is turned into records, 1.1 GB of the process's memory."""
    pa.default_memory_pool().release_unused()


def shards_vocabulary(shards: Sequence[str | Path]) -> np.ndarray:
    """The sorted codes of all shards (read column by column: memory of one shard's codes)."""
    codes: set[str] = set()
    for path in shards:
        codes.update(
            str(c) for c in pc.unique(pq.read_table(path, columns=["code"]).column("code")).to_pylist()
        )
    return np.array(sorted(codes), dtype=object)


def shard_support(
    path: str | Path,
    target_items: np.ndarray,
    known: sp.csr_matrix,
    knowledge: Knowledge,
    matching: Matching = DEFAULT_MATCHING,
) -> tuple[np.ndarray, int]:
    """Per known set, the patients of one shard consistent with it (at most `matching.cap`), and the
    shard's patients."""
    recs, n = read_shard(path)
    return _support_in(recs, n, target_items, known, knowledge, matching), n


def _support_in(
    recs: Records | None,
    n: int,
    target_items: np.ndarray,
    known: sp.csr_matrix,
    knowledge: Knowledge,
    matching: Matching,
) -> np.ndarray:
    """Per known set, the patients of one shard (`recs`, `n` patients) consistent with it."""
    lens = np.diff(known.indptr)
    full = n if matching.cap is None else min(n, matching.cap)
    if recs is None:  # no events: its patients match only empty known sets
        return np.where(lens == 0, full, 0).astype(np.int64)
    values = count_known_sets(target_items, known, recs, knowledge, matching)
    if knowledge == "whole_record":  # an empty record matches those showing nothing, without events too
        values[lens == 0] = np.minimum(values[lens == 0] + (n - recs.n_patients), full)
    else:
        values[lens == 0] = full  # patients without events are candidates too
    return values


def sharded_known_set_distinguishability(
    targets: Records,
    shards: Sequence[str | Path],
    knowledge: Knowledge,
    matching: Matching = DEFAULT_MATCHING,
    *,
    progress: Progress | None = None,
) -> KnownSets:
    """`engine.risk.known_set_distinguishability` with the candidates read shard by shard: the
    supports of the targets' known sets are counted per shard and added (capped supports add too:
    min(a + b, cap) = min(min(a, cap) + min(b, cap), cap))."""
    cap = matching.cap
    known, owner = known_sets(targets, knowledge, matching.count_repeats)
    total = np.zeros(known.shape[0], dtype=np.int64)
    n_cand = 0
    for done, path in enumerate(shards, start=1):
        values, n = shard_support(path, targets.items, known, knowledge, matching)
        total += values
        if cap is not None:
            np.minimum(total, cap, out=total)
        n_cand += n
        if progress is not None:
            progress(done / len(shards), shard_done(done, len(shards), path))
    return KnownSets(known, owner, total, targets.n_patients, n_cand, cap)


def sharded_distinguishability(
    targets: Records,
    shards: Sequence[str | Path],
    knowledge: Knowledge,
    matching: Matching = DEFAULT_MATCHING,
    *,
    progress: Progress | None = None,
) -> np.ndarray:
    """`engine.risk.distinguishability` against the population held in `shards` (same results)."""
    return sharded_known_set_distinguishability(
        targets, shards, knowledge, matching, progress=progress
    ).per_record()


def sharded_population_distinguishability(
    shards: Sequence[str | Path],
    knowledge: Knowledge,
    matching: Matching = DEFAULT_MATCHING,
    *,
    progress: Progress | None = None,
) -> np.ndarray:
    """`engine.risk.distinguishability(population, population, ...)` for a population held in
    `shards`, which is never in memory at once: per record, in shard order (patients within a shard
    in their first-appearance order, then the shard's patients without events).

    The known sets of every shard are built once over the shards' common vocabulary and kept (one
    shard's records at a time); each shard is then read once as candidates and counts the sets not
    yet decided. With `cap`, a set whose summed support reached `cap` is decided and no later shard
    counts it (capped supports add: min(a + b, cap) = min(min(a, cap) + min(b, cap), cap)), so most
    sets are counted in the first shard only. Memory: the known sets of the population plus one
    shard. `progress` is called once per shard counted."""
    vocab, cap = shards_vocabulary(shards), matching.cap
    blocks = []  # per shard: known sets over vocab, their owners, the shard's patients
    for path in shards:
        recs, n = read_shard(path, items=vocab)
        if recs is None:
            known, owner = sp.csr_matrix((0, len(vocab)), dtype=np.int64), np.zeros(0, dtype=np.int64)
        else:
            known, owner = known_sets(recs, knowledge, matching.count_repeats)
        blocks.append((known, owner, n, np.zeros(known.shape[0], dtype=np.int64)))
        del recs
    undecided = [np.arange(b[0].shape[0]) for b in blocks]
    n_cand = 0
    for done, path in enumerate(shards, start=1):
        recs, n = read_shard(path, items=vocab)
        n_cand += n
        for (known, _, _, total), rows in zip(blocks, undecided, strict=True):
            if len(rows):
                total[rows] += _support_in(recs, n, vocab, known[rows], knowledge, matching)
        if cap is not None:
            for i, (_, _, _, total) in enumerate(blocks):
                np.minimum(total, cap, out=total)
                undecided[i] = undecided[i][total[undecided[i]] < cap]
        del recs
        if progress is not None:
            progress(done / len(shards), shard_done(done, len(shards), path))
    return np.concatenate(
        [KnownSets(known, owner, total, n, n_cand, cap).per_record() for known, owner, n, total in blocks]
        or [np.zeros(0, dtype=np.int64)]
    )


# ------------------------------------------------------------- lab orders and PheWAS from the same shards
def lab_shard_path(out_dir: str | Path, i: int) -> Path:
    return Path(out_dir) / f"labs-{i:05d}.parquet"


def write_lab_shards(labs: pd.DataFrame, out_dir: str | Path, n_shards: int) -> list[Path]:
    """Split lab orders (`patient_id`, `day`, `lab`: a validated frame, `engine.io.loaders.load_labs`)
    by patients into `labs-NNNNN.parquet` beside the event shards: the same `shard_of`, so shard i of
    the labs and shard i of the events hold the same patients."""
    from engine.labs.reident import LAB_COLUMNS

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frame = labs[list(LAB_COLUMNS)].reset_index(drop=True)
    which = shard_of(frame["patient_id"].astype(str).to_numpy(), n_shards)
    paths = []
    for i in range(n_shards):
        part = frame[which == i].reset_index(drop=True)
        _write(part, lab_shard_path(out, i), part["patient_id"].nunique())
        paths.append(lab_shard_path(out, i))
    return paths


def sharded_uniqueness(lab_shards: Sequence[str | Path], progress: Progress | None = None) -> Uniqueness:
    """`engine.labs.reident.uniqueness` (Johnson 2018 section 2.2) of the lab orders held in
    `lab_shards`, one shard in memory at a time: each shard's patients get their lab-set bitsets over
    the labs of every shard, and the classes of equal sets are counted over all patients (memory:
    one bitset per patient). Patients in shard order; equal to the in-process measure per patient."""
    from engine.labs import reident as L

    labs: set[str] = set()
    for path in lab_shards:
        labs.update(str(x) for x in pc.unique(read_table(path).column("lab").cast(pa.string())).to_pylist())
    vocab = np.array(sorted(labs), dtype=object)
    index = pd.Index(vocab)
    ids, days, keys = [], [], []
    for done, path in enumerate(lab_shards, start=1):
        frame = pd.read_parquet(path)
        if len(frame):
            d = L.patient_days(frame)
            m = d.matrix
            cols = index.get_indexer(d.labs.astype(str))[m.indices]
            wide = sp.csr_matrix((m.data, cols, m.indptr), shape=(m.shape[0], len(vocab)))
            wide.sort_indices()
            d = L.PatientDays(d.patient_ids, vocab, d.patient_ptr, d.day_labels, wide)
            ids.append(d.patient_ids)
            days.append(d.days_per_patient)
            keys.append(L.lab_set_keys(d))
        if progress is not None:
            progress(done / len(lab_shards), shard_done(done, len(lab_shards), path))
    words = max(1, -(-len(vocab) // 64))
    return L.uniqueness_of_keys(
        np.concatenate(ids) if ids else np.zeros(0, dtype=object),
        np.concatenate(days) if days else np.zeros(0, dtype=np.int64),
        np.concatenate(keys) if keys else np.zeros((0, words), dtype=np.uint64),
    )


def sharded_phewas(
    shards: Sequence[str | Path],
    genotypes: pd.DataFrame,
    settings: PhewasSettings | None = None,
    *,
    cohort: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """`engine.utility.phewas.phewas_of_records` of the patients held in `shards` (those of `cohort`
    when given), one shard in memory at a time: each shard's case and control genotype counts
    (`phewas_counts`) add up, and the tests run on the sums. Patients without any event are not in a
    shard's rows and are left out (in process, such a patient counts as a control). No patient to
    test is a DataError naming the empty group (`engine.io.loaders.require_patients`)."""
    from engine.utility import phewas as P

    settings = settings or P.PhewasSettings()
    total = None
    keep = None if cohort is None else pd.Index(pd.unique(np.asarray(cohort, dtype=object).astype(str)))
    for done, path in enumerate(shards, start=1):
        recs, _ = read_shard(path)
        if recs is not None and keep is not None:
            recs = recs.take(np.flatnonzero(keep.get_indexer(recs.patient_ids.astype(str)) >= 0))
        if recs is not None and recs.n_patients:
            part = P.phewas_counts(P.phenotype_matrix(recs), genotypes, settings.min_code_count)
            total = part if total is None else total + part
        if progress is not None:
            progress(done / len(shards), shard_done(done, len(shards), path))
    if total is None:  # nobody to test: a table of 0 tests would read as "no association" (issue 37)
        from engine.io.loaders import require_patients

        group, why = (
            ("cohort", "none of its patients is in the shards")
            if keep is not None
            else (
                "population",
                "the shards hold no patient",
            )
        )
        require_patients(str(Path(shards[0]).parent) if shards else "the shards", {group: 0}, why)
    assert total is not None
    return P.phewas_of_counts(total, settings)
