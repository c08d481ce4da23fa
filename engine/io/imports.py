"""What the app's import view needs from the engine (no Streamlit): the import settings as a value
kept in a study (`ImportSpec`), a preview of a source's raw rows, loading a source into a `Dataset`,
and the shipped sample's variants (ICD-9-CM, ICD-10-CM, mixed, OMOP DuckDB, MEDS).

An `ImportSpec` is written into a study's load options as text (`to_options`) and read back from them
(`from_options`), so a study file reopens with the source kind, the column mapping (the CLI's
`--map` text, `engine.io.mapping.ColumnMapping`), the sheet, the schema, normalization, the cohort
(`engine.dataset.CohortSpec`: the whole source, an uploaded id list, or a group of the source) and
the sample variant it was made with.

The cohort of an import (`import_dataset`, `cohort_ids`): the population is every patient of the
source; the cohort is the whole source, the patients of an uploaded list (read by
`engine.io.loaders.load_ids`, the same reader as the "Upload files" cohort list: ids outside the
source are an error naming the file, rows and column, an empty list is refused), or a group the
source defines (`engine.io.groups`: patients of the group with no events are left out, counted in a
warning).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from engine.dataset import CohortSpec, Dataset
from engine.io.errors import DataError, UserError
from engine.io.groups import SourceGroups, read_groups
from engine.io.loaders import SAMPLE_DIR, Loaded, check_patients, load_dataset, load_ids
from engine.io.progress import Progress
from engine.io.redact import redact
from engine.io.roots import confined, opened
from engine.io.validation import MAX_ROWS, FileCheck, ValidationReport

# source kinds of the import view: (key, label)
IMPORT_KINDS: tuple[tuple[str, str], ...] = (
    ("long", "Long-form CSV / Parquet"),
    ("excel", "Excel .xlsx"),
    ("omop", "OMOP CDM (CSV/Parquet folder, DuckDB file or database URL)"),
    ("meds", "MEDS Parquet"),
    ("i2b2", "i2b2 star schema (folder, DuckDB file or database URL)"),
)
# sample variants: key -> (label, what is read). "paper": Heatherly 2013's 1,366,786 patients
# (`python -m engine sample --scale paper --out sample_data/paper`, issue 36), its own groups and labs
PAPER_SCALE_LABEL = "paper scale, 1.37 M patients (first load 20 s to a minute)"
SAMPLE_VARIANTS: dict[str, str] = {
    "icd9cm": "ICD-9-CM",
    "icd10cm": "ICD-10-CM",
    "mixed": "mixed ICD-9/ICD-10",
    "omop": "OMOP DuckDB",
    "meds": "MEDS",
    "paper": PAPER_SCALE_LABEL,
}


class ImportSourceError(UserError, ValueError):
    """A source that cannot be previewed or a sample variant that does not exist, in one line."""


_OPTION_KEYS = (
    "source",
    "mapping",
    "sheet",
    "schema",
    "normalize_codes",
    "location",
    "sample_variant",
    "omop_codes",
    "domains",
    "drug_level",
)


@dataclass(frozen=True)
class ImportSpec:
    """How the events were read: source kind, where from (a path, a URL with its password hidden, or
    an uploaded file's name), column mapping, sheet, schema, normalization; or a sample variant."""

    source: str = "long"
    location: str = ""
    mapping: str = ""
    sheet: str = ""
    schema: str = ""
    normalize: bool = False
    sample_variant: str = ""
    cohort: CohortSpec = field(default_factory=CohortSpec)
    # an OMOP CDM's codes and tables (issue 37; `engine.io.omop.read_omop`'s `codes`, `domains`)
    omop_codes: str = "source"
    domains: tuple[str, ...] = ("condition",)
    drug_level: str = "ingredient"

    def to_options(self) -> dict[str, str]:
        """The study's load options (text); empty values left out."""
        from engine.io.sql import is_url, redacted

        loc = redacted(self.location) if is_url(self.location) else self.location
        values = {
            "source": self.source,
            "mapping": self.mapping,
            "sheet": self.sheet,
            "schema": self.schema,
            "normalize_codes": "true" if self.normalize else "",
            "location": loc,
            "sample_variant": self.sample_variant,
            "omop_codes": "" if self.omop_codes == "source" else self.omop_codes,
            "domains": "" if self.domains == ("condition",) else ",".join(self.domains),
            "drug_level": "" if self.drug_level == "ingredient" else self.drug_level,
            **self.cohort.to_options(),
        }
        return {k: v for k, v in values.items() if v}

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> ImportSpec | None:
        """The spec recorded in a study's load options; None when the study has none (the shipped
        sample or plain uploads). A recorded mapping is checked (ValueError when malformed)."""
        if not any(k in options for k in _OPTION_KEYS):
            return None
        mapping = str(options.get("mapping", "") or "")
        if mapping:
            from engine.io.mapping import ColumnMapping

            ColumnMapping.parse(mapping)
        try:
            cohort = CohortSpec.from_options(options)
        except ValueError as exc:
            raise ImportSourceError(f"the recorded cohort: {exc}") from None
        return cls(
            source=str(options.get("source", "long") or "long"),
            location=str(options.get("location", "") or ""),
            mapping=mapping,
            sheet=str(options.get("sheet", "") or ""),
            schema=str(options.get("schema", "") or ""),
            normalize=str(options.get("normalize_codes", "")).lower() in ("true", "1", "yes"),
            sample_variant=str(options.get("sample_variant", "") or ""),
            cohort=cohort,
            omop_codes=str(options.get("omop_codes", "") or "source"),
            domains=tuple(str(options.get("domains", "") or "condition").split(",")),
            drug_level=str(options.get("drug_level", "") or "ingredient"),
        )


# ---------------------------------------------------------------------------------- preview
PREVIEW_TABLES = {"omop": "condition_occurrence", "i2b2": "observation_fact"}


def _frame_head(name: str, data: bytes, n: int, sheet: str | None) -> pd.DataFrame:
    from engine.io.excel import check_xlsx, is_xlsx

    if is_xlsx(name, data):
        from openpyxl import load_workbook

        check_xlsx(name, data)  # the parts' sizes before parsing (LimitExceeded)

        wb = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        try:
            ws = wb[sheet] if sheet and sheet in wb.sheetnames else wb.worksheets[0]
            rows = [r for _, r in zip(range(n + 1), ws.iter_rows(values_only=True), strict=False)]
        finally:
            wb.close()
        if not rows:
            return pd.DataFrame()
        header = [str(h) if h is not None else "" for h in rows[0]]
        body = [
            [None if v is None else str(v) for v in r] + [None] * (len(header) - len(r)) for r in rows[1:]
        ]
        return pd.DataFrame([b[: len(header)] for b in body], columns=header)
    if data[:4] == b"PAR1":
        import pyarrow.parquet as pq

        from engine.io.limits import check_parquet

        check_parquet(data, name)  # from the footer before a row group is read (LimitExceeded)
        pf = pq.ParquetFile(io.BytesIO(data))
        return (
            next(pf.iter_batches(batch_size=n)).to_pandas().astype("string")
            if pf.metadata.num_rows
            else pd.DataFrame(columns=pf.schema.names)
        )
    from engine.io.loaders import check_text

    check_text(name, data)  # line length, rows, columns before parsing (LimitExceeded)
    sep = "\t" if name.lower().endswith((".tsv", ".txt")) else ","
    return pd.read_csv(io.BytesIO(data), nrows=n, dtype=str, keep_default_na=False, sep=sep)


def _csv_head(path: Path, n: int) -> pd.DataFrame:
    """The first `n` rows of a CSV table on disk, read only as far as needed and through the
    line-length and column limits (`LimitExceeded` naming the file and the limit)."""
    import csv

    from engine.io.loaders import TextLimits, check_columns

    check = TextLimits(path.name)
    parts = []
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            check.feed(block)
            parts.append(block)
            if check.newlines > n:
                break
        else:
            check.done()
    head = b"".join(parts)
    first = head.split(b"\n", 1)[0].decode("utf-8-sig", errors="replace")
    check_columns(path.name, next(csv.reader([first]), []))
    return pd.read_csv(io.BytesIO(head), nrows=n, dtype=str, keep_default_na=False)


def sheet_names(name: str, data: bytes) -> list[str]:
    """The sheets of an .xlsx workbook (empty for other files or an unreadable workbook)."""
    from engine.io.excel import check_xlsx, is_xlsx

    if not is_xlsx(name, data):
        return []
    from openpyxl import load_workbook

    try:
        check_xlsx(name, data)
        wb = load_workbook(io.BytesIO(data), read_only=True)
    except Exception:  # unreadable: the loader reports it with its reason
        return []
    try:
        return list(wb.sheetnames)
    finally:
        wb.close()


@confined()  # a fresh context per call: the roots are read when the preview runs
def preview(
    source: str,
    *,
    location: str = "",
    name: str = "",
    data: bytes | None = None,
    sheet: str | None = None,
    schema: str | None = None,
    n: int = 20,
) -> tuple[str, pd.DataFrame]:
    """(what is shown, the first `n` raw rows as text): of the uploaded or named file for long-form
    and Excel sources, of `condition_occurrence` (OMOP), `observation_fact` (i2b2) or the first MEDS
    shard. Raises ValueError with a plain message when nothing can be read.

    The app's function: a path must lie inside the data roots and a database is a named connection
    (`engine.io.deployment.app_location`; `PathRefused`, `ConnectionRefused`, both ValueErrors), and
    so must every file it opens (`engine.io.roots`)."""
    from engine.io.deployment import LimitExceeded, app_location, is_connection

    shown_location = location
    if data is None:
        location = app_location(location)
    if source in ("long", "excel"):
        if data is None:
            from engine.io.loaders import Source

            p = Path(location)
            if not p.is_file():
                raise ImportSourceError(f"{shown_location or '(no file)'}: no such file")
            src = Source.from_path(p)  # text checked against the limits while read
            name, data = src.name, src.data
        try:
            return name, _frame_head(name, data, n, sheet)
        except LimitExceeded:
            raise
        except Exception as exc:  # any parser's error, shown in one line
            raise ImportSourceError(f"{name}: cannot be read ({type(exc).__name__}: {exc})") from None
    if source == "meds":
        from engine.io.meds import shards

        files = shards(Path(location)) if Path(location).exists() else []
        if not files:
            raise ImportSourceError(f"{location or '(no folder)'}: no MEDS Parquet shards found")
        import pyarrow.parquet as pq

        from engine.io.omop import check_parquet_file

        shard = opened(files[0])
        check_parquet_file(shard, files[0].name)  # limits from the metadata (LimitExceeded)
        pf = pq.ParquetFile(shard)
        return files[0].name, next(pf.iter_batches(batch_size=n)).to_pandas().astype("string")
    table = PREVIEW_TABLES[source]
    from engine.io.sql import connect, is_url

    if is_url(location) or Path(location).is_file():
        report = ValidationReport()
        db = connect(location, schema, report, "a database")
        if db is None:
            first = report.errors[0]  # named as the user gave it: a connection's URL is never shown
            raise ImportSourceError(
                f"{shown_location if is_connection(shown_location) else first.file}: {first.message}"
            )
        if is_connection(shown_location):
            db.label = shown_location
        try:
            return db.where(table), db.head(table, n)
        finally:
            db.close()
    folder = Path(location)
    for suffix in (".csv", ".parquet", ".pq"):
        listed = folder / f"{table}{suffix}"
        if listed.is_file():
            p = opened(listed)
            if suffix == ".csv":
                return listed.name, _csv_head(p, n)
            import pyarrow.parquet as pq

            from engine.io.omop import check_parquet_file

            check_parquet_file(p, listed.name)  # limits from the metadata (LimitExceeded)
            head = next(pq.ParquetFile(p).iter_batches(batch_size=n)).to_pandas()
            return listed.name, head.astype("string")
    raise ImportSourceError(f"{location or '(no folder)'}: no {table}.csv or {table}.parquet")


# ---------------------------------------------------------------------------------- loading
def load_import(
    spec: ImportSpec,
    *,
    name: str = "",
    data: bytes | None = None,
    unknown_codes: str = "keep",
    drop_duplicates: bool = False,
):
    """The events of an import (`engine.io.events.SourceData`): an uploaded file's bytes (`name`,
    `data`) or `spec.location` (a path or URL), read as `spec.source` with its mapping and options."""
    from engine.io import read_source
    from engine.io.deployment import app_location
    from engine.io.mapping import ColumnMapping, read_long

    if spec.source in ("long", "excel") and data is not None:
        return read_long(
            name,
            data,
            ColumnMapping.parse(spec.mapping) if spec.mapping else None,
            sheet=spec.sheet or None,
            normalize=spec.normalize,
            unknown_codes=unknown_codes,  # type: ignore[arg-type]
            drop_duplicates=drop_duplicates,
        )
    from engine.io.errors import DataError

    try:  # the app reads inside the data roots and named connections only; limits while reading
        location = app_location(spec.location)
        with confined():
            return read_source(
                location,
                source="long" if spec.source == "excel" else spec.source,  # type: ignore[arg-type]
                mapping=spec.mapping or None,
                normalize=spec.normalize,
                unknown_codes=unknown_codes,  # type: ignore[arg-type]
                drop_duplicates=drop_duplicates,
                sheet=spec.sheet or None,
                schema=spec.schema or None,
                codes=spec.omop_codes,  # type: ignore[arg-type]
                domains=spec.domains,
                drug_level=spec.drug_level,  # type: ignore[arg-type]
            )
    except DataError:
        raise
    except UserError as exc:
        raise DataError(_refused(spec.location, exc)) from None


def _refused(location: str, exc: UserError) -> ValidationReport:
    """A report of one error naming the location (its password hidden): what the app refused to read."""
    from engine.io.redact import redact
    from engine.io.validation import Finding

    report = ValidationReport()
    report.add(Finding("error", redact(location) or "(no location)", None, str(exc), "", kind="refused"))
    return report


def import_dataset(
    source_data,
    name: str,
    spec: ImportSpec | None = None,
    *,
    upload: tuple[str, bytes] | None = None,
    cohort_list: tuple[str, bytes] | None = None,
) -> Loaded[Dataset]:
    """A `Loaded[Dataset]` of an import with its cohort (`spec.cohort`, module docstring): the events
    of `source_data`; `upload` the uploaded source file (name, bytes) when there is one, for a
    long-form group column; `cohort_list` the uploaded id list (name, bytes) of a `list` cohort.
    Raises DataError when the report has errors (the source's or the cohort's)."""
    ds = source_data.dataset(name)
    cohort = spec.cohort if spec is not None else CohortSpec()
    report = ValidationReport(list(source_data.report.findings))  # the source's findings, then the cohort's

    def groups() -> SourceGroups:
        assert spec is not None
        up_name, up_data = upload if upload is not None else ("", None)
        return source_groups(spec, name=up_name, data=up_data, column=cohort.column)

    ids, read = cohort_ids(cohort, ds.events.patient_ids, report, cohort_list=cohort_list, groups=groups)
    if report.ok:  # a source of no patient is refused by name, as on the command line (issue 37)
        n = ds.events.n_patients
        where = redact(spec.location) if spec is not None and spec.location else name
        check_patients(report, where, {"population": n, "cohort": n if ids is None else len(ids)})
    report.raise_if_errors()
    ds = replace(ds.with_cohort(ids), sources={**ds.sources, **read})
    return Loaded(ds, report, dict(ds.sources), ds.spellings)


def source_groups(
    spec: ImportSpec, *, name: str = "", data: bytes | None = None, column: str = ""
) -> SourceGroups:
    """The groups an import's source defines (`engine.io.groups`), read like `load_import` reads the
    source: an uploaded file's bytes, else `spec.location` inside the data roots and named
    connections (a refusal is an error finding naming the location)."""
    from engine.io.deployment import PathRefused, app_location

    if data is None:
        try:
            location = app_location(spec.location)
        except UserError as exc:
            return SourceGroups(report=_refused(spec.location, exc))
    else:
        location = ""
    try:
        with confined():
            return read_groups(
                spec.source,
                location,
                schema=spec.schema or None,
                name=name,
                data=data,
                mapping=spec.mapping,
                sheet=spec.sheet or None,
                column=column,
            )
    except PathRefused as exc:  # a table or split file linked out of the data roots
        return SourceGroups(report=_refused(spec.location, exc))


def cohort_ids(
    cohort: CohortSpec,
    population: np.ndarray,
    report: ValidationReport,
    *,
    cohort_list: tuple[str, bytes] | None = None,
    groups: Callable[[], SourceGroups] | None = None,
) -> tuple[np.ndarray | None, dict[str, str]]:
    """(the cohort's patient ids, or None for the whole source; the files read, name -> sha256).

    `list`: `cohort_list` read by `engine.io.loaders.load_ids` against `population` (the reader of
    the "Upload files" cohort list: a column `patient_id` or `person_id`, or one id per line; ids
    outside the population, blank ids and an empty list are errors naming the file, rows and
    column). `group`: the group `cohort.name` of `groups()`; its patients without events are left
    out, counted in a warning (none left is an error). Findings go to `report`; on an error the
    ids are None and the caller raises (`ValidationReport.raise_if_errors`)."""
    if cohort.kind == "whole":
        return None, {}
    if cohort.kind == "list":
        return _list_ids(cohort, population, report, cohort_list)
    got = groups() if groups is not None else SourceGroups()
    report.extend(got.report)
    if not got.report.ok:
        return None, {}
    fc = FileCheck(got.where or "the source", np.zeros(0, dtype=np.int64), report)
    if cohort.name not in got.groups:
        known = ", ".join(repr(g) for g in list(got.groups)[:MAX_ROWS]) or "none"
        fc.note(
            "error",
            cohort.column or None,
            f"the source has no group {cohort.name!r} (its groups: {known})",
            "a group the source defines",
            "missing_group",
        )
        return None, {}
    ids = got.groups[cohort.name]
    inside = pd.Index(population).get_indexer(ids) >= 0
    if not inside.all():
        out = ids[~inside]
        examples = ", ".join(repr(str(i)) for i in out[:MAX_ROWS])
        fc.note(
            "warning" if inside.any() else "error",
            cohort.column or None,
            f"{len(out):,} of the {len(ids):,} patients of the group {cohort.name!r} have no events in the source "
            f"({examples}): "
            + (f"the cohort is the other {int(inside.sum()):,}" if inside.any() else "no cohort"),
            "group patients with events in the source",
            "group_outside_source",
        )
    return (ids[inside] if inside.any() else None), {}


def _list_ids(
    cohort: CohortSpec,
    population: np.ndarray,
    report: ValidationReport,
    cohort_list: tuple[str, bytes] | None,
) -> tuple[np.ndarray | None, dict[str, str]]:
    """An uploaded cohort list (`cohort_ids`)."""
    if cohort_list is None:
        FileCheck(cohort.name or "the cohort list", np.zeros(0, dtype=np.int64), report).note(
            "error",
            None,
            "the cohort list is not loaded: upload it again with the import (uploaded files are not kept)",
            "the uploaded list of the cohort's patient ids",
            "missing_cohort_list",
        )
        return None, {}
    try:
        got = load_ids(cohort_list, population=population, group="cohort")
    except DataError as exc:
        assert isinstance(exc.report, ValidationReport)  # load_ids raises with its ValidationReport
        report.extend(exc.report)
        return None, {}
    report.extend(got.report)
    if len(got.data) == 0:
        FileCheck(cohort_list[0], np.zeros(0, dtype=np.int64), report).note(
            "error", None, "the list holds no patient id", "at least one patient id", "empty_file"
        )
        return None, {}
    return got.data, dict(got.sources)


# ---------------------------------------------------------------------------------- sample variants
def variant_location(variant: str, directory: Path = SAMPLE_DIR) -> Path:
    """Where a sample variant lives (FileNotFoundError naming the command that writes it)."""
    paths = {
        "icd9cm": directory / "events.parquet",
        "icd10cm": directory / "icd10cm" / "events.parquet",
        "mixed": directory / "mixed" / "events.parquet",
        "omop": directory / "omop" / "cdm.duckdb",
        "meds": directory / "meds",
        "paper": directory / "paper" / "events.parquet",
    }
    if variant not in paths:
        raise ImportSourceError(f"no sample variant {variant!r} (variants: {', '.join(SAMPLE_VARIANTS)})")
    p = paths[variant]
    if not p.exists():
        command = (
            f"--scale paper --out {directory / 'paper'}"
            if variant == "paper"
            else "--formats icd10cm,mixed,omop,meds"
        )
        raise FileNotFoundError(f"{p} is missing (run `python -m engine sample {command}`)")
    return p


def load_sample_variant(
    variant: str,
    *,
    unknown_codes: str = "keep",
    drop_duplicates: bool = False,
    directory: Path = SAMPLE_DIR,
    progress: Progress | None = None,
) -> Loaded[Dataset]:
    """A variant of the shipped sample with the sample's groups (memoized per process: read-only).

    ICD-10-CM and mixed: the same patients, read with the sample's cohort, biobank, genotypes and lab
    orders. OMOP and MEDS number the sample's patients in order of first appearance (P000001 -> 1, as
    `engine.synth.formats` writes them): the cohort and biobank are the sample's, renumbered by that
    rule, restricted to the patients the variant holds (the OMOP database holds the first 5,000); a
    warning in the report says how many were left out. Paper scale: another population
    (`sample_data/paper/`, `engine.synth.chunked`) read with its own groups, genotypes and lab orders.
    `progress` follows the stages of a load that is not memoized yet (`load_dataset`)."""
    p = variant_location(variant, Path(directory))
    stamp = (variant, str(p), p.stat().st_mtime_ns, unknown_codes, bool(drop_duplicates))
    token = _PROGRESS.set(progress)
    try:
        return _variant_memo(stamp, str(directory))
    finally:
        _PROGRESS.reset(token)


# the progress callback of the load under way in this thread: not part of the memo's key
_PROGRESS: ContextVar[Progress | None] = ContextVar("sample_variant_progress", default=None)


@lru_cache(maxsize=4)
def _variant_memo(stamp: tuple, directory: str) -> Loaded[Dataset]:
    variant, path, _, unknown_codes, drop_duplicates = stamp
    d = Path(directory) / "paper" if variant == "paper" else Path(directory)
    label = f"sample ({SAMPLE_VARIANTS[variant]})"
    if variant in ("icd9cm", "icd10cm", "mixed", "paper"):

        def shipped(name: str) -> Path | None:
            return d / name if (d / name).exists() else None

        return load_dataset(
            Path(path),
            biobank=shipped("biobank.csv"),
            cohort=shipped("cohort.csv"),
            genotypes=shipped("genotypes.parquet"),
            labs=shipped("labs.parquet"),
            name=label,
            unknown_codes=unknown_codes,
            drop_duplicates=drop_duplicates,
            defer_labs=True,  # as the sample's: read when first asked for (issue 24)
            progress=_PROGRESS.get(),
        )
    from engine.io import read_source

    data = read_source(path, source=variant, unknown_codes=unknown_codes, drop_duplicates=drop_duplicates)
    ds = data.dataset(label)
    numbering = _sample_numbering(d)
    present = pd.Index(ds.events.patient_ids.astype(str))
    groups: dict[str, np.ndarray] = {}
    for role in ("biobank", "cohort"):
        f = d / f"{role}.csv"
        if not f.exists():
            continue
        ids = pd.read_csv(f, dtype=str)["patient_id"]
        renum = ids.map(numbering).dropna().astype(np.int64).astype(str)
        kept = renum[present.get_indexer(renum) >= 0].to_numpy(dtype=object)
        groups[role] = kept
        if len(kept) < len(ids):
            FileCheck(f.name, np.zeros(0, dtype=np.int64), data.report).note(
                "warning",
                "patient_id",
                f"{len(ids) - len(kept)} of {len(ids)} {role} patients are not in the {SAMPLE_VARIANTS[variant]} "
                f"variant ({ds.events.n_patients:,} patients); the {role} is the other {len(kept)}",
                "the sample's groups, patients numbered in order of first appearance (P000001 -> 1)",
                "group_outside_variant",
            )
    ds = Dataset(name=label, events=ds.events, groups=groups, labs=ds.labs, sources=ds.sources)
    return Loaded(ds, data.report, dict(ds.sources))


def _sample_numbering(directory: Path) -> dict[str, int]:
    """Sample patient id -> the number OMOP and MEDS variants give it (first appearance, from 1)."""
    ev = pd.read_parquet(directory / "mixed" / "events.parquet", columns=["patient_id"])
    _, pids = pd.factorize(ev["patient_id"].astype(str), sort=False)
    return {str(p): i + 1 for i, p in enumerate(pids)}


# ---------------------------------------------------------------------------------- utility policy
CDM_POLICY_LABEL = (
    "the CDM's hierarchy (the codes below each concept 2 levels under its root, one constraint)"
)


def default_utility_policy(items, concepts=None) -> tuple[object, str]:
    """The shipped PNAS default utility policy that fits the data's vocabulary: ICD-9-CM (Table 1),
    ICD-10-CM (`utility_policy_default_icd10cm.csv`, the same 18 diseases), or for data holding both
    vocabularies each disease with its codes of both; for a CDM's standard concepts (`concepts`, its
    `engine.io.concepts.ConceptParents`, naming some item) the CDM's own (`runs.cdm_utility_policy`).
    Returns (UtilityPolicy, what it is)."""
    if concepts is not None and any(str(i) in concepts.concept_id for i in items):
        from engine.study.runs import cdm_utility_policy

        return cdm_utility_policy(concepts, items), CDM_POLICY_LABEL
    from engine.io.normalize import vocabularies_of
    from engine.utility.queries import DEFAULT_UTILITY_POLICY_ICD10CM, UtilityPolicy, read_utility_policy
    from engine.vocab import ICD9CM, ICD10CM

    counts = vocabularies_of([str(i) for i in items])
    has9, has10 = counts.get(ICD9CM, 0) > 0, counts.get(ICD10CM, 0) > 0
    if has10 and not has9:
        return read_utility_policy(DEFAULT_UTILITY_POLICY_ICD10CM), "the PNAS default policy in ICD-10-CM"
    icd9 = read_utility_policy()
    if not has10:
        return icd9, "the PNAS default policy (Table 1, ICD-9-CM)"
    icd10 = read_utility_policy(DEFAULT_UTILITY_POLICY_ICD10CM)
    both = UtilityPolicy(
        {d: codes | icd10.diseases.get(d, frozenset()) for d, codes in icd9.diseases.items()},
        dict(icd9.comments),
    )
    return both, "the PNAS default policy in ICD-9-CM and ICD-10-CM (mixed data)"
