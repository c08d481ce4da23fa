"""MEDS (Medical Event Data Standard) as a source: Parquet shards under `data/`, checked against the
schema of the `meds` package (0.4.1, `meds.DataSchema`: `subject_id` int64 not null, `time`
timestamp[us], `code` string not null; optional `numeric_value`, `text_value`; extra columns allowed).

What is read (only the columns `subject_id`, `time`, `code`):
- diagnoses: codes with an ICD prefix, as the MIMIC-IV MEDS ETL writes them (`DIAGNOSIS//ICD//9//25000`,
  `ICD//10//E119`) or the OMOP MEDS ETL (`ICD9CM/250.00`, `ICD10CM/E11.9`). The prefix names the
  vocabulary; the rest is the code (undotted codes need normalization, `engine.io.normalize`);
- ages: whole years from the subject's `MEDS_BIRTH` event to each diagnosis (left out, with a warning,
  when a subject with diagnoses has no birth event);
- lab orders: codes starting `LAB//` (MIMIC-IV) or `LOINC/` (OMOP), the code as written being the lab,
  the day of `time` the day;
- every other code is counted in a warning (not used).

`patient_id` is the `subject_id`, `visit` the day of `time` (ISO, `2014-03-01`): visits are service
days. Rows are numbered per shard as Parquet rows elsewhere (first data row = row 2). MEDS requires a
subject's events to sit in one shard; a subject found in two shards is an error.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from engine.io.events import Action, SourceData, check_events
from engine.io.normalize import split_prefix
from engine.io.roots import opened
from engine.io.validation import MAX_ROWS, FileCheck, Finding, NaIds, Severity, ValidationReport

BIRTH_CODE = "MEDS_BIRTH"  # meds.birth_code
_LAB = re.compile(r"^(?:LAB//|LOINC/)")
COLUMNS = ("subject_id", "time", "code")


def shards(location: Path) -> list[Path]:
    """The Parquet files of a MEDS dataset: `data/**/*.parquet` under the root, the folder's own
    Parquet files when it is the data folder, or the file itself; sorted by path."""
    if location.is_file():
        return [location]
    data = location / "data" if (location / "data").is_dir() else location
    return sorted(p for p in data.rglob("*.parquet") if p.is_file())


def _check_schema(path: Path, where: str, report: ValidationReport) -> bool:
    """Errors (row 1, the schema) for what `meds.DataSchema` refuses in the file's schema."""
    import meds
    import pyarrow.parquet as pq

    fc = FileCheck(where, np.zeros(0, dtype=np.int64), report)
    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # pyarrow raises several types for a corrupt or non-Parquet file
        fc.note(
            "error",
            None,
            f"not a readable Parquet file ({type(exc).__name__})",
            "a MEDS shard",
            "bad_parquet",
        )
        return False
    try:
        meds.DataSchema.validate(schema)
    except Exception as exc:  # flexible_schema's SchemaValidationError
        bad = [c for c in COLUMNS if c in str(exc)]
        fc.note(
            "error",
            ", ".join(bad) or None,
            f"not MEDS data: {exc}",
            "the MEDS DataSchema (meds 0.4.1): subject_id int64, time timestamp[us], code string",
            "meds_schema",
            (1,),
        )
        return False
    return True


def read_meds(
    location: str | Path,
    *,
    normalize: bool = False,
    labs: bool = True,
    unknown_codes: Action = "keep",
    drop_duplicates: bool = False,
    na_ids: NaIds = "error",
) -> SourceData:
    """Events (and lab orders) from a MEDS dataset (module docstring); findings in the report."""
    import pyarrow.parquet as pq

    loc = Path(location)
    report = ValidationReport()
    files = shards(loc) if loc.exists() else []
    if not files:
        FileCheck(loc.name, np.zeros(0, dtype=np.int64), report).note(
            "error",
            None,
            "no Parquet shards found" if loc.exists() else "no such file or folder",
            "a MEDS dataset: data/*.parquet under its root",
            "missing_source",
        )
        return SourceData(None, report)
    base = loc if loc.is_dir() else loc.parent
    frames, checks = [], []
    seen: dict[object, str] = {}  # subject_id -> the shard that holds it
    from engine.io.limits import Footprint, check_footprint, check_parquet
    from engine.io.sql import sha256_file as _sha256

    sources = {}
    named = {path: f"{loc.name}/{path.relative_to(base)}" if loc.is_dir() else path.name for path in files}
    real = {path: opened(path) for path in files}  # every shard inside the data roots (engine.io.roots)
    valid = [path for path in files if _check_schema(real[path], named[path], report)]
    total = Footprint()
    for path in valid:  # every shard's limits from its metadata, before any row group is read
        total = total.add(check_parquet(real[path], named[path], COLUMNS))
    check_footprint(loc.name, total, of=" in its shards")  # rows, cells, decoded bytes of them all
    for path in files:
        where = named[path]
        sources[where] = _sha256(real[path])
        if path not in valid:
            continue
        df = pq.read_table(real[path], columns=list(COLUMNS)).to_pandas()
        fc = FileCheck(where, np.arange(len(df), dtype=np.int64) + 2, report)
        for col in ("subject_id", "code"):
            null = df[col].isna().to_numpy()
            if null.any():
                fc.flag(
                    "error", col, null, "empty cell", f"a {col} in every row (MEDS: not null)", "blank_value"
                )
        subjects = pd.unique(df["subject_id"].dropna())
        again = [s for s in subjects if s in seen]
        if again:
            rows = df["subject_id"].isin(again).to_numpy()
            fc.flag(
                "error",
                "subject_id",
                rows,
                f"{len(again)} subject(s) also in {seen[again[0]]}: "
                + ", ".join(map(str, sorted(again)[:MAX_ROWS])),
                "each subject's events in one shard (MEDS)",
                "subject_in_two_shards",
            )
        seen.update(dict.fromkeys(subjects, where))
        frames.append(df)
        checks.append(fc)
    if report.errors:
        return SourceData(None, report, sources=sources)
    df = pd.concat(frames, ignore_index=True)
    rownum = np.concatenate([fc.rownum for fc in checks])
    shard_of = np.repeat(np.arange(len(checks)), [len(f) for f in frames])
    code = df["code"].astype(str)
    # births -> ages
    births = df.loc[code == BIRTH_CODE].groupby("subject_id")["time"].min()
    # diagnoses: the prefix names the vocabulary
    u_codes, u_index = np.unique(code.to_numpy(dtype=object), return_inverse=True)
    split = [split_prefix(c) for c in u_codes]
    is_dx_u = np.array([v is not None for v, _ in split], dtype=bool)
    is_lab_u = np.array([bool(_LAB.match(c)) for c in u_codes], dtype=bool)
    is_dx, is_lab = is_dx_u[u_index], is_lab_u[u_index]
    other = ~is_dx & ~is_lab & (code != BIRTH_CODE).to_numpy()
    if not labs:
        other |= is_lab
    if other.any():
        heads = code[other].str.split("/", n=1).str[0].value_counts()
        listed = ", ".join(f"{k}... ({v} rows)" for k, v in list(heads.items())[:MAX_ROWS])
        _MultiShardCheck.of(checks, shard_of, rownum, report).flag(
            "warning",
            "code",
            other,
            f"{int(other.sum())} event(s) with codes other than diagnoses, labs and births not used: {listed}",
            "ICD diagnoses (ICD//9//..., ICD10CM/...), LAB// or LOINC/ labs, MEDS_BIRTH",
            "other_codes",
        )
    dx = df.loc[is_dx].reset_index(drop=True)
    fc = _MultiShardCheck.of(checks, shard_of[is_dx], rownum[is_dx], report)
    vocab = np.array([split[i][0] for i in u_index[is_dx]], dtype=object)
    code_part = np.array([split[i][1] for i in u_index[is_dx]], dtype=object)
    day = dx["time"].dt.strftime("%Y-%m-%d")
    raw = pd.DataFrame(
        {
            "subject_id": dx["subject_id"].to_numpy(),
            "code": code_part,
            "vocabulary (from the code prefix)": vocab,
            "time (day)": day.fillna("").to_numpy(dtype=object),
        }
    )
    columns = {"patient_id": "subject_id", "code": "code", "visit": "time (day)"}
    no_birth = ~dx["subject_id"].isin(births.index).to_numpy()
    if len(dx) and not no_birth.any():
        birth = births.reindex(dx["subject_id"]).to_numpy()
        raw["age (from MEDS_BIRTH)"] = _whole_years(birth, dx["time"].to_numpy())
        columns["age"] = "age (from MEDS_BIRTH)"
    elif len(dx):
        missing = pd.unique(dx["subject_id"][no_birth])
        fc.flag(
            "warning",
            "code",
            no_birth,
            f"{len(missing)} subject(s) without a {BIRTH_CODE} event (e.g. {', '.join(map(str, missing[:MAX_ROWS]))}): "
            "no ages",
            f"a {BIRTH_CODE} event per subject for the longitudinal methods",
            "no_birth",
        )
    events = check_events(
        raw,
        fc,
        columns,
        vocabulary="vocabulary (from the code prefix)",
        date="time (day)",
        normalize=normalize,
        unknown_codes=unknown_codes,
        drop_duplicates=drop_duplicates,
        na_ids=na_ids,
    )
    lab_frame = None
    if labs and is_lab.any():
        lab_rows = df.loc[is_lab]
        lab_frame = pd.DataFrame(
            {
                "patient_id": lab_rows["subject_id"].astype(str).to_numpy(),
                "day": lab_rows["time"].dt.floor("D").to_numpy(),
                "lab": lab_rows["code"].astype(str).to_numpy(),
            }
        )
    return SourceData(events, report, lab_frame, sources)


def _whole_years(birth: np.ndarray, when: np.ndarray) -> np.ndarray:
    b, w = pd.DatetimeIndex(birth), pd.DatetimeIndex(when)
    before = (w.month < b.month) | ((w.month == b.month) & (w.day < b.day))
    return (w.year - b.year - before.astype(int)).to_numpy(dtype=np.int64)


class _MultiShardCheck(FileCheck):
    """A FileCheck over rows of several shards: findings name the shard(s) of the flagged rows."""

    checks: list[FileCheck]
    shard: np.ndarray

    @classmethod
    def of(
        cls, checks: list[FileCheck], shard: np.ndarray, rownum: np.ndarray, report: ValidationReport
    ) -> _MultiShardCheck:
        names = sorted({checks[i].file for i in np.unique(shard)}) if len(shard) else [c.file for c in checks]
        fc = cls(", ".join(names[:3]) + (" ..." if len(names) > 3 else ""), rownum, report)
        fc.checks, fc.shard = checks, shard
        return fc

    def flag(
        self,
        severity: Severity,
        column: str | None,
        mask: np.ndarray,
        message: str,
        expected: str = "",
        kind: str = "",
        counts: dict[str, int] | None = None,
    ) -> Finding:
        """Name the shard of the first flagged row (each shard's rows are numbered on their own)."""
        pos = np.flatnonzero(np.asarray(mask, dtype=bool))
        if len(pos) and len(self.checks) > 1:
            first = self.checks[int(self.shard[pos[0]])].file
            same = self.shard[pos] == self.shard[pos[0]]
            if not same.all():
                message = f"{message} (rows of {first} shown; {int((~same).sum())} more in other shards)"
            sub = np.zeros(len(mask), dtype=bool)
            sub[pos[same]] = True
            f = FileCheck(first, self.rownum, self.report).flag(
                severity, column, sub, message, expected, kind, counts
            )
            return f
        return super().flag(severity, column, mask, message, expected, kind, counts)
