"""Loaders for CSV and Parquet: events, lab orders, genotypes, patient-id lists, whole datasets.

ARCHITECTURE section 2 (formats) and 8 (reliability). Every loader validates before anything runs
(checks and row-number convention in `engine.io.validation`): errors stop loading with a `DataError`
naming file, rows, column and what was expected; warnings come back in the `ValidationReport`
returned along with the data. Nothing is dropped silently: unknown ICD-9-CM codes and duplicate rows
are kept unless the caller asks to drop them, and the report says which was done.

Files are read from bytes (a path or an upload), parsed as data only (no pickle, no eval), never
written anywhere; the sha256 of each file goes into `Dataset.sources`.

Conventions:
- Text files must be UTF-8 (a BOM is accepted); the separator is ',' unless the header line has tabs
  or semicolons and no comma. Whitespace-only lines are skipped (they hold no data).
- Duplicate events are rows equal on every column when the file has a `visit` column. Without one,
  rows repeating a (patient, code) pair are the code's repeat counts (Tamersoy 2010), not duplicates.
- Visit labels that are all whole numbers become integers (so visit 10 follows visit 9); others stay
  text (ISO dates then sort chronologically; other date formats get a warning).
- Lab `day` is a whole day number or an ISO date; genotype values are 0/1/2 or missing (empty, NA,
  NaN, '.'), returned as float with NaN for missing.
- Patient ids are text and are never changed: integers stored as numbers in Parquet (int64, uint64,
  with or without nulls) are written exactly in decimal; cells such as `NA`, `NaN`, `null` are an error
  unless the caller accepts them as ids (`na_ids="accept"`). A headerless id list is recognized by
  its content (see `_first_row_is_header`).
- Every data row must have no more fields than the header (no silent reshaping into an index).
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import threading
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import numpy as np
import pandas as pd

from engine.dataset import Dataset, Deferred
from engine.io.errors import DataError, InputFileError, MissingFileError
from engine.io.progress import Progress
from engine.io.validation import (
    AGE_RANGE,
    BLOCK_ROWS,
    MAX_ROWS,
    FileCheck,
    NaIds,
    Text,
    ValidationReport,
    check_blank,
    check_duplicates,
    check_ids,
    closest_column,
    first_occurrence_duplicates,
    match_columns,
    parse_integers,
    per_row,
    visit_labels,
    whole_numbers,
)
from engine.records import AGE, CODE, PATIENT, VISIT, Records

if TYPE_CHECKING:
    from engine.io.concepts import ConceptParents
    from engine.io.events import Events

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "sample_data"
SAMPLE_NAME = "sample"  # the shipped (ICD-9-CM) sample's dataset name, as a study records it
SAMPLE_FILES = {
    "events": "events.parquet",
    "biobank": "biobank.csv",
    "cohort": "cohort.csv",
    "genotypes": "genotypes.parquet",
    "labs": "labs.parquet",
}
MISSING_GENOTYPE = {"", "na", "nan", "n/a", "none", "null", "."}
Action = Literal["keep", "drop"]
T = TypeVar("T")


@dataclass(frozen=True)
class Source:
    """A file's name and bytes (from disk or an upload)."""

    name: str
    data: bytes

    @classmethod
    def from_path(cls, path: str | Path) -> Source:
        """Read a file; a folder or an unreadable path is an `InputFileError` naming the path. A text
        file is checked against the line-length and row limits while it is read (`TextLimits`): a
        file that breaks one is refused at that line, never read whole (`LimitExceeded`)."""
        p = Path(path)
        if p.is_dir():
            raise InputFileError(f"{path}: is a folder, not a file")
        if not p.exists():
            raise MissingFileError(f"{path}: no such file")
        try:
            with p.open("rb") as fh:
                first = fh.read(1 << 20)
                binary = (
                    first[:4] in (b"PAR1",)
                    or first[:2] == b"PK"
                    or p.name.lower().endswith((".parquet", ".pq", ".xlsx", ".xlsm"))
                )
                check = None if binary else TextLimits(p.name)
                parts = [first]
                if check is not None:
                    check.feed(first)
                for block in iter(lambda: fh.read(8 << 20), b""):
                    if check is not None:
                        check.feed(block)
                    parts.append(block)
                if check is not None:
                    check.done()
            return cls(p.name, b"".join(parts))
        except OSError as exc:
            raise InputFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def is_parquet(self) -> bool:
        return self.data[:4] == b"PAR1" or self.name.lower().endswith((".parquet", ".pq"))


class TextLimits:
    """Checks a text file block by block against the line-length and row limits
    (`engine.io.deployment.limits`: `max_line_bytes`, `max_rows`), so that a file breaking one is
    refused where it breaks it, before it is decoded or parsed (a 1 GiB line, a billion rows).
    Line breaks are `\\n` and `\\r`; rows are counted by `\\n`."""

    def __init__(self, name: str) -> None:
        from engine.io.deployment import limits

        lim = limits()
        self.name, self.max_line, self.max_rows = name, lim.max_line_bytes, lim.max_rows
        self.offset = 0  # bytes fed so far
        self.line_start = 0  # offset where the current line began
        self.newlines = 0  # `\\n` seen so far

    def _refuse_line(self, line: int) -> None:
        from engine.io.deployment import LimitExceeded, Limits

        raise LimitExceeded(
            f"{self.name}, row {line}: a line longer than {self.max_line:,} bytes (the limit "
            f"{Limits.setting('max_line_bytes')}); the file was not read further"
        )

    def feed(self, block: bytes) -> None:
        step = 16 << 20
        for at in range(0, len(block), step):
            part = block[at : at + step]
            arr = np.frombuffer(part, dtype=np.uint8)
            breaks = np.flatnonzero((arr == 10) | (arr == 13)) + self.offset
            if len(breaks):
                starts = np.concatenate(([self.line_start], breaks[:-1] + 1))
                long = np.flatnonzero(breaks - starts > self.max_line)
                if long.size:
                    cut = int(breaks[long[0]] - self.offset)
                    self._refuse_line(self.newlines + part.count(b"\n", 0, cut) + 1)
                self.line_start = int(breaks[-1]) + 1
            self.newlines += part.count(b"\n")
            self.offset += len(part)
            if self.offset - self.line_start > self.max_line:
                self._refuse_line(self.newlines + 1)
            if self.newlines > self.max_rows + 1:
                from engine.io.deployment import LimitExceeded, Limits

                raise LimitExceeded(
                    f"{self.name}: more than {self.max_rows:,} rows (the limit "
                    f"{Limits.setting('max_rows')}); the file was not read further"
                )

    def done(self) -> None:
        if self.offset - self.line_start > self.max_line:
            self._refuse_line(self.newlines + 1)


def check_columns(name: str, header: list[str]) -> None:
    """A header with more columns than `max_columns` is refused (`LimitExceeded`)."""
    from engine.io.deployment import LimitExceeded, Limits, limits

    most = limits().max_columns
    if len(header) > most:
        raise LimitExceeded(
            f"{name}, row 1: {len(header):,} columns, more than {most:,} (the limit "
            f"{Limits.setting('max_columns')})"
        )


def check_text(name: str, data: bytes) -> None:
    """Line-length, row and header-column limits of a text file's bytes (`LimitExceeded`)."""
    check = TextLimits(name)
    check.feed(data)
    check.done()
    for raw in data[: (1 << 20) * 4].splitlines():
        line = raw.decode("utf-8-sig", errors="replace")
        if line.strip():
            sep = "," if "," in line else "\t" if "\t" in line else ";" if ";" in line else ","
            check_columns(name, next(csv.reader([line], delimiter=sep), []))
            return


SourceLike = Source | str | Path | tuple[str, bytes]


def as_source(src: SourceLike) -> Source:
    if isinstance(src, Source):
        return src
    if isinstance(src, tuple):
        return Source(str(src[0]), bytes(src[1]))
    return Source.from_path(src)


@dataclass(frozen=True)
class Loaded(Generic[T]):
    """What a loader returns: the validated data, the report of its (non-fatal) findings, the files
    read, and (events only) each code's spellings in the source when normalization rewrote any
    (`Events.spelling_map`; the `source_spelling` column of an export's code map)."""

    data: T
    report: ValidationReport
    sources: dict[str, str] = field(default_factory=dict)  # file name -> sha256
    spellings: dict[str, tuple[str, ...]] | None = None
    concepts: ConceptParents | None = None  # an OMOP CDM's own hierarchy (`SourceData.concepts`)


# ------------------------------------------------------------------------------------ reading
def read_table(
    src: Source, report: ValidationReport, header: bool = True, *, text_codes: bool = False
) -> tuple[pd.DataFrame, FileCheck] | None:
    """Parse a CSV (as text cells) or Parquet file; None after reporting an unreadable file.

    `text_codes`: a Parquet file's text columns come as pandas categoricals (`_read_parquet`), for a
    reader that only factorizes them (`Text.of` gives the same codes and values either way)."""
    fc = FileCheck(src.name, np.zeros(0, dtype=np.int64), report)
    if len(src.data) == 0:
        fc.note(
            "error",
            None,
            "the file is empty (0 bytes)",
            "a header row and at least one data row",
            "empty_file",
        )
        return None
    if src.is_parquet:
        return _read_parquet(src, fc, text_codes)
    if src.data[:2] == b"PK":
        from engine.io.excel import is_xlsx, read_xlsx

        if is_xlsx(src.name, src.data):  # Excel workbooks: the first sheet, engine/io/excel.py
            got = read_xlsx(src.name, src.data, report)
            return None if got is None else got[:2]
        fc.note(
            "error",
            None,
            "this is a zip/spreadsheet file, not CSV",
            "CSV text (export as CSV UTF-8) or Parquet",
            "not_text",
        )
        return None
    from engine.io.deployment import LimitExceeded

    try:
        check_text(src.name, src.data)  # before decoding or parsing: line length, rows, columns
    except LimitExceeded as exc:
        fc.note("error", None, str(exc), "a file within the input limits", "limit")
        return None
    try:
        text = src.data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        off = exc.start
        line = src.data.count(b"\n", 0, off) + 1
        char = off - (src.data.rfind(b"\n", 0, off) + 1) + 1
        fc.note(
            "error",
            None,
            f"not UTF-8 text: byte 0x{src.data[off]:02x} at byte offset {off} (line {line}, character {char})",
            "UTF-8 encoded text (re-save the file as UTF-8)",
            "not_utf8",
            rows=(line,),
        )
        return None
    if "\x00" in text:
        fc.note("error", None, "binary content (NUL bytes)", "CSV text or Parquet", "not_text")
        return None
    lines = text.splitlines()
    nonblank = np.array([i + 1 for i, ln in enumerate(lines) if ln.strip()], dtype=np.int64)
    if len(nonblank) == 0:
        fc.note(
            "error",
            None,
            "the file is empty (no text)",
            "a header row and at least one data row",
            "empty_file",
        )
        return None
    first = lines[nonblank[0] - 1]
    sep = "," if "," in first else "\t" if "\t" in first else ";" if ";" in first else ","
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pd.errors.ParserWarning)
            df = pd.read_csv(
                io.StringIO(text),
                sep=sep,
                dtype=str,
                keep_default_na=False,
                header=0 if header else None,
                index_col=False,  # never turn extra fields into an index (that reshapes the rows)
            )
        warned = any(issubclass(w.category, pd.errors.ParserWarning) for w in caught)
        if warned and _longer_rows(text, sep, nonblank, fc):
            return None
    except pd.errors.ParserError as exc:
        m = re.search(r"line (\d+), saw (\d+)", str(exc))
        rows = (int(m.group(1)),) if m else ()
        what = f"this row has {m.group(2)} fields, more than the header" if m else f"cannot parse: {exc}"
        fc.note(
            "error",
            None,
            what,
            "the same number of fields on every row as in the header",
            "parse_error",
            rows,
        )
        return None
    except pd.errors.EmptyDataError:
        fc.note("error", None, "the file is empty", "a header row and at least one data row", "empty_file")
        return None
    if header and _repeated_names(next(csv.reader([first], delimiter=sep), []), fc):
        return None
    data_lines = nonblank[1:] if header else nonblank
    fc.rownum = data_lines if len(data_lines) == len(df) else np.arange(len(df)) + (2 if header else 1)
    if len(df) == 0:
        fc.note(
            "error",
            None,
            "the file has a header but no data rows",
            "at least one data row",
            "empty_file",
            (1,),
        )
        return None
    df.columns = [str(c) for c in df.columns]
    return df, fc


def _longer_rows(text: str, sep: str, nonblank: np.ndarray, fc: FileCheck) -> bool:
    """Error naming the rows with more fields than the first line (pandas would drop the extra
    fields); False when there are none."""
    rows = list(csv.reader(io.StringIO(text), delimiter=sep))
    width = len(rows[nonblank[0] - 1]) if rows else 0
    longer = [i + 1 for i, r in enumerate(rows) if len(r) > width and any(c.strip() for c in r)]
    n = len(longer)
    if not n:
        return False
    fc.note(
        "error",
        None,
        f"{n} row(s) have more fields than the header ({width})",
        "the same number of fields on every row as in the header",
        "parse_error",
        tuple(longer[:MAX_ROWS]),
    )
    return True


def _repeated_names(names: list[str], fc: FileCheck) -> bool:
    """Error (row 1) when a column name appears more than once in the header."""
    seen = pd.Series([n.strip() for n in names])
    repeated = sorted(set(seen[seen.duplicated()]))
    if repeated:
        fc.note(
            "error",
            ", ".join(repeated),
            f"column name(s) repeated in the header: {', '.join(repr(n) for n in repeated)}",
            "each column name once",
            "duplicate_column",
            (1,),
        )
    return bool(repeated)


def _exact_integers(arrow_type: Any) -> Any:
    """pandas dtype for an Arrow integer column: nullable, so nulls never turn integers into floats."""
    import pyarrow as pa

    if pa.types.is_integer(arrow_type):
        return pd.api.types.pandas_dtype(str(arrow_type).replace("int", "Int").replace("uInt", "UInt"))
    return None


def _text_columns(data: bytes) -> list[str]:
    """The names of a Parquet file's top-level text (string, large_string) columns; none when a name
    is repeated (pyarrow then refuses `read_dictionary`) or the file is unreadable."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(io.BytesIO(data))
    except Exception:  # not readable: read as text, whose error (as before) names the problem
        return []
    if len(set(schema.names)) < len(schema.names):
        return []
    return [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]


def _integers_of(table: Any) -> Callable[[Any], Any] | None:
    """`_exact_integers` when an integer column of `table` has a null; else None: numpy integers,
    whose values a reader that only factorizes or takes whole numbers sees alike, without the
    nullable copy and its mask (issue 24)."""
    import pyarrow as pa

    nulls = any(c.null_count for c in table.columns if pa.types.is_integer(c.type))
    return _exact_integers if nulls else None


def _read_parquet(
    src: Source, fc: FileCheck, text_codes: bool = False
) -> tuple[pd.DataFrame, FileCheck] | None:
    """A Parquet file as a frame, integers nullable (`_exact_integers`). With `text_codes`, text
    columns are read as dictionaries (pandas categoricals): Parquet stores them dictionary-encoded, so
    no string is decoded nor hashed; on the shipped lab orders that halves the read and its
    factorizing (issue 24). Integers are then nullable only when one has a null (`_integers_of`).

    First the input limits from the footer (`engine.io.limits.check_parquet`: rows, cells, decoded
    bytes and expansion), so that a bomb is refused by name before a row group is read (issue 40)."""
    from engine.io.deployment import LimitExceeded, limits
    from engine.io.limits import check_parquet

    lim = limits()  # a bad setting is its own UserError, never taken for an unreadable file
    try:
        check_parquet(src.data, src.name, lim=lim)
    except LimitExceeded as exc:
        fc.note("error", None, str(exc), "a file within the input limits", "limit")
        return None
    except Exception:  # pyarrow's error for an unreadable footer: the read below names it, as before
        pass
    try:
        import pyarrow.parquet as pq

        codes = _text_columns(src.data) if text_codes else []
        table = pq.read_table(io.BytesIO(src.data), read_dictionary=codes or None)
        df = table.to_pandas(types_mapper=_integers_of(table) if text_codes else _exact_integers)
    except Exception as exc:  # pyarrow raises several types for a corrupt or non-Parquet file
        fc.note(
            "error",
            None,
            f"not a readable Parquet file ({type(exc).__name__}: {exc})",
            "a Parquet file",
            "bad_parquet",
        )
        return None
    if len(df) == 0:
        fc.note("error", None, "the file has columns but no data rows", "at least one data row", "empty_file")
        return None
    df = df.reset_index(drop=True)
    df.columns = [str(c) for c in df.columns]
    fc.rownum = np.arange(len(df), dtype=np.int64) + 2
    return df, fc


def _extra_columns(df: pd.DataFrame, fc: FileCheck, used: Mapping[str, str]) -> None:
    extra = [c for c in df.columns if c not in used.values()]
    if extra:
        fc.note(
            "warning",
            ", ".join(extra),
            f"column(s) not used (ignored, never released): {', '.join(extra)}",
            f"only {', '.join(used)}",
            "extra_columns",
        )


def _absent(text: Text, population: pd.Index) -> np.ndarray:
    """Rows whose (non-blank) patient id is not in `population`."""
    outside = (population.get_indexer(text.uniques) < 0) & (text.uniques != "")
    return per_row(outside, text.codes)


# ------------------------------------------------------------------------------------ events
def _events(
    src: Source,
    report: ValidationReport,
    unknown_codes: Action,
    drop_duplicates: bool,
    na_ids: NaIds,
    normalize: bool = False,
) -> Events | None:
    """The checked events of a long-form file with their spellings (as `engine.io.events.check_events`
    gives every other source), or None after reporting errors."""
    read = read_table(src, report)
    if read is None:
        return None
    df, fc = read
    n_err = len(report.errors)
    cols = match_columns(df, fc, (PATIENT, CODE), (VISIT, AGE))
    if len(report.errors) > n_err:
        return None
    _extra_columns(df, fc, cols)
    pid = Text.of(df[cols[PATIENT]], fc, cols[PATIENT])
    check_ids(pid, fc, cols[PATIENT], na_ids, df[cols[PATIENT]])
    from engine.io.events import Events, check_code_column

    # ICD-9-CM and ICD-10-CM codes, each row's vocabulary decided (the visit date settles codes both
    # read), spellings normalized only when asked; engine/io/normalize.py
    code = check_code_column(
        df, fc, cols[CODE], date=cols.get(VISIT), normalize=normalize, unknown_codes=unknown_codes
    )
    if code is None:
        return None
    out: dict[str, Any] = {PATIENT: pid.array(), CODE: code.array}
    keys = [pid.codes, code.keys]
    if VISIT in cols:
        visit, visit_key = visit_labels(df[cols[VISIT]], fc, cols[VISIT])
        out[VISIT] = visit
        keys.append(visit_key)
    if AGE in cols:
        age = parse_integers(df[cols[AGE]], fc, cols[AGE], *AGE_RANGE)
        if age is not None:
            out[AGE] = age
            keys.append(age)
    if len(report.errors) > n_err:
        return None
    drop = code.drop.copy()
    if VISIT in cols:
        used = [cols[c] for c in (PATIENT, CODE, VISIT, AGE) if c in cols]
        dup = check_duplicates(keys, fc, used, "drop" if drop_duplicates else "keep")
        if drop_duplicates:
            drop |= dup
    frame, vocabulary = pd.DataFrame(out), code.vocabulary
    patients: tuple[np.ndarray, np.ndarray] | None = (pid.codes, pid.uniques)
    if drop.any():  # a patient may lose every row: the records factorize what is left
        frame, vocabulary = frame.loc[~drop].reset_index(drop=True), vocabulary[~drop]
        patients = None
    spellings = code.normalized.spellings()
    return Events(frame, vocabulary, spellings, code.normalized.report, patients)


def load_events(
    src: SourceLike,
    *,
    unknown_codes: Action = "keep",
    drop_duplicates: bool = False,
    na_ids: NaIds = "error",
    normalize: bool = False,
) -> Loaded[pd.DataFrame]:
    """Events (`patient_id`, `code`, optional `visit`, `age`) as a clean long-form frame.

    Codes are ICD-9-CM or ICD-10-CM (`engine.io.normalize` decides each row's vocabulary; ICD-10-CM
    codes ICD-9-CM could also read are written `ICD10CM:V45.5`). `unknown_codes`: keep or drop rows
    whose well-formed code is unknown to its vocabulary (reported either way); `drop_duplicates`: drop
    rows repeating an earlier row (reported either way); `na_ids`: whether ids such as `NA` or `null`
    are an error (default) or accepted as ids; `normalize`: rewrite undotted and prefixed spellings
    (reported, counts and examples; the original spellings in `Loaded.spellings`). Raises DataError
    on any error.
    """
    s = as_source(src)
    report = ValidationReport()
    events = _events(s, report, unknown_codes, drop_duplicates, na_ids, normalize)
    report.raise_if_errors()
    assert events is not None
    return Loaded(events.frame, report, {s.name: s.sha256}, events.spelling_map())


# ------------------------------------------------------------------------------------ labs
def _labs(
    src: Source,
    report: ValidationReport,
    drop_duplicates: bool,
    na_ids: NaIds,
    population: pd.Index | None = None,
) -> pd.DataFrame | None:
    """The lab orders' frame after their checks; with `population`, a warning names the rows (of the
    file, before any duplicate is dropped) whose patient has no events."""
    read = read_table(src, report, text_codes=True)  # every text column is only factorized
    if read is None:
        return None
    df, fc = read
    n_err = len(report.errors)
    cols = match_columns(df, fc, (PATIENT, "day", "lab"))
    if len(report.errors) > n_err:
        return None
    _extra_columns(df, fc, cols)
    pid = Text.of(df[cols[PATIENT]], fc, cols[PATIENT])
    check_ids(pid, fc, cols[PATIENT], na_ids, df[cols[PATIENT]])
    lab = Text.of(df[cols["lab"]], fc, cols["lab"])
    check_blank(lab, fc, cols["lab"], "a lab test name or LOINC code in every row")
    day = _days(df[cols["day"]], fc, cols["day"])
    if len(report.errors) > n_err or day is None:
        return None
    day_key = day.view(np.int64) if day.dtype.kind == "M" else day
    lab = _by_value(lab)
    dup = check_duplicates(
        [pid.codes, day_key, lab.codes],
        fc,
        [cols[PATIENT], cols["day"], cols["lab"]],
        "drop" if drop_duplicates else "keep",
    )
    if population is not None:
        _flag_outside(fc, cols[PATIENT], pid, population, "labs")
    frame = pd.DataFrame({PATIENT: pid.array(), "day": day, "lab": lab.array()})
    if drop_duplicates and dup.any():
        frame = frame.loc[~dup].reset_index(drop=True)
    return frame


def _by_value(text: Text) -> Text:
    """`text` with its distinct values in sorted order, its codes renumbered in place (a block at a
    time: no fresh 55 MB array, issue 24); the same values row by row. The duplicate check only
    compares codes; so numbered, a file sorted by patient, day and lab (as the shipped sample) packs
    into keys already in order, and its sort is skipped (0.05 s of 6.9 million rows)."""
    order = np.argsort(text.uniques.astype(str))
    rank = np.empty(len(order) + 1, dtype=np.int64)
    rank[order] = np.arange(len(order))
    rank[-1] = -1  # a missing cell stays missing
    for start in range(0, len(text.codes), BLOCK_ROWS):
        part = text.codes[start : start + BLOCK_ROWS]
        part[:] = rank[part]
    return Text(text.codes, text.uniques[order], text.original)


def _days(values: pd.Series, fc: FileCheck, column: str) -> np.ndarray | None:
    """Whole day numbers (int64), or ISO dates (datetime64); None after reporting bad cells."""
    ints = whole_numbers(values)
    if ints is not None:
        return ints
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        bad = values.isna().to_numpy()
        if bad.any():
            fc.flag(
                "error", column, bad, "empty cell", "a day number or an ISO date in every row", "day_invalid"
            )
            return None
        return values.to_numpy()
    text = Text.of(values)
    u = pd.Series(text.uniques, dtype=object).astype(str)
    int_u = u.str.fullmatch(r"-?\d+").to_numpy(dtype=bool)
    counts = text.counts()
    if counts[int_u].sum() * 2 >= counts.sum():  # mostly day numbers: the rest are wrong
        bad_u, kind = ~int_u, "not a whole day number"
    else:  # mostly dates
        bad_u, kind = (
            pd.to_datetime(u, format="ISO8601", errors="coerce").isna().to_numpy(),
            "not an ISO date",
        )
    bad = per_row(bad_u, text.codes, missing=True)
    if bad.any():
        fc.flag(
            "error",
            column,
            bad,
            f"{kind}: {text.examples(bad_u) or 'empty cell'}",
            "a whole day number (e.g. 17) or an ISO date (2010-03-12), the same kind in every row",
            "day_invalid",
        )
        return None
    if int_u.all():
        return u.astype(np.int64).to_numpy()[text.codes]
    return pd.to_datetime(u, format="ISO8601").to_numpy()[text.codes]


def load_labs(
    src: SourceLike, *, drop_duplicates: bool = False, na_ids: NaIds = "error"
) -> Loaded[pd.DataFrame]:
    """Lab orders (`patient_id`, `day`, `lab`); Johnson 2018's input. Raises DataError on any error."""
    s = as_source(src)
    report = ValidationReport()
    frame = _labs(s, report, drop_duplicates, na_ids)
    report.raise_if_errors()
    return Loaded(frame, report, {s.name: s.sha256})


# ------------------------------------------------------------------------------------ genotypes
def _genotypes(
    src: Source, report: ValidationReport, na_ids: NaIds, population: pd.Index | None = None
) -> pd.DataFrame | None:
    """The genotypes' frame after their checks; with `population` and no error, a warning names the
    rows whose patient has no events (as `_labs`)."""
    read = read_table(src, report)
    if read is None:
        return None
    df, fc = read
    n_err = len(report.errors)
    cols = match_columns(df, fc, (PATIENT,))
    if len(report.errors) > n_err:
        return None
    snps = [c for c in df.columns if c != cols[PATIENT]]
    if not snps:
        fc.note(
            "error",
            None,
            "no SNP columns",
            "patient_id plus one column per SNP (minor-allele counts)",
            "no_snps",
            (1,),
        )
        return None
    pid = Text.of(df[cols[PATIENT]], fc, cols[PATIENT])
    blank = check_ids(pid, fc, cols[PATIENT], na_ids, df[cols[PATIENT]])
    twice = first_occurrence_duplicates([pid.codes]) & ~blank
    if twice.any():
        fc.flag(
            "error",
            cols[PATIENT],
            twice,
            "patient listed more than once",
            "one row per patient",
            "duplicate_patient",
        )
    out: dict[str, Any] = {PATIENT: pid.array()}
    for snp in snps:
        values = df[snp]
        if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype):
            num = values.to_numpy(dtype=float, na_value=np.nan)
            bad = ~np.isnan(num) & ~np.isin(num, (0.0, 1.0, 2.0))
            examples = ", ".join(repr(str(v)) for v in pd.unique(num[bad])[:MAX_ROWS])
        else:
            text = Text.of(values)
            missing_u = np.isin(np.char.lower(text.uniques.astype(str)), list(MISSING_GENOTYPE))
            num_u = pd.to_numeric(pd.Series(text.uniques, dtype=object), errors="coerce").to_numpy(
                dtype=float
            )
            bad_u = ~missing_u & ~np.isin(num_u, (0.0, 1.0, 2.0))
            num = np.append(np.where(missing_u, np.nan, num_u), np.nan)[text.codes]
            bad = per_row(bad_u, text.codes)
            examples = text.examples(bad_u)
        if bad.any():
            fc.flag(
                "error",
                snp,
                bad,
                f"genotype values other than 0/1/2/missing: {examples}",
                "a minor-allele count 0, 1 or 2, or an empty cell / NA for missing",
                "genotype_value",
            )
        out[snp] = num
    if len(report.errors) > n_err:
        return None
    if population is not None:
        _flag_outside(fc, cols[PATIENT], pid, population, "genotypes")
    return pd.DataFrame(out)


def load_genotypes(src: SourceLike, *, na_ids: NaIds = "error") -> Loaded[pd.DataFrame]:
    """Genotypes: `patient_id` + one column per SNP (0/1/2/missing -> float, NaN). Raises DataError.

    Missing genotypes may be written NA, NaN, '.', ...; a patient id may not (unless `na_ids`)."""
    s = as_source(src)
    report = ValidationReport()
    frame = _genotypes(s, report, na_ids)
    report.raise_if_errors()
    return Loaded(frame, report, {s.name: s.sha256})


# ------------------------------------------------------------------------------------ id lists
ID_COLUMNS = ("person_id", "subject_id")  # OMOP's and MEDS's name of the patient, read as patient_id


def _ids(
    src: Source, report: ValidationReport, population: pd.Index | None, group: str, na_ids: NaIds = "error"
) -> np.ndarray | None:
    """Patient ids of a list: column `patient_id` (else `person_id` or `subject_id`, with a warning),
    or one unnamed column (see `_first_row_is_header`)."""
    read = read_table(src, report, header=src.is_parquet)
    if read is None:
        return None
    df, fc = read
    if not src.is_parquet:
        df, fc = _id_header(df, fc, population)
        if df is None:
            return None
    elif PATIENT not in df.columns and len(df.columns) == 1:
        fc.note(
            "warning",
            df.columns[0],
            f"column '{df.columns[0]}' read as '{PATIENT}'",
            f"the name '{PATIENT}'",
            "renamed_column",
            (1,),
        )
        df = df.rename(columns={df.columns[0]: PATIENT})
    names = [str(c).strip().lower() for c in df.columns]
    other = next((c for c, n in zip(df.columns, names, strict=True) if n in ID_COLUMNS), None)
    if PATIENT not in names and other is not None:
        fc.note(
            "warning",
            other,
            f"column '{other}' read as '{PATIENT}'",
            f"the name '{PATIENT}'",
            "renamed_column",
            (1,),
        )
        df = df.rename(columns={other: PATIENT})
    n_err = len(report.errors)
    cols = match_columns(df, fc, (PATIENT,))
    if len(report.errors) > n_err:
        return None
    _extra_columns(df, fc, cols)
    ids = Text.of(df[cols[PATIENT]], fc, cols[PATIENT])
    blank = check_ids(ids, fc, cols[PATIENT], na_ids, df[cols[PATIENT]])
    twice = first_occurrence_duplicates([ids.codes]) & ~blank
    if twice.any():
        fc.flag(
            "warning",
            cols[PATIENT],
            twice,
            "patient listed more than once (counted once)",
            "each patient once",
            "duplicate_patient",
        )
    if population is not None:
        absent = _absent(ids, population)
        if absent.any():
            fc.flag(
                "error",
                cols[PATIENT],
                absent,
                f"{int(absent.sum())} patient(s) of the {group} are absent from the population (no events): "
                f"{ids.examples(population.get_indexer(ids.uniques) < 0)}",
                f"every {group} patient among the population's patients (the events file)",
                "absent_patient",
            )
    if len(report.errors) > n_err:
        return None
    return ids.uniques[ids.uniques != ""].copy()  # distinct ids in order of first appearance


def _id_shape(value: str) -> str:
    """The form of an id: letters kept in case, every run of digits as '9' (`PATIENT_0003` -> `PATIENT_9`)."""
    return re.sub(r"\d+", "9", value.strip())


def _first_row_is_header(first: list[str], rest: pd.Series, population: pd.Index | None) -> bool:
    """Whether the first line of an id list is a header, decided by content.

    A file with several columns has a header. For one column, the first line is data when it is a
    patient of `population`, or when it has the form of the other lines (`_id_shape`: `PATIENT_0003`
    among `PATIENT_0004`, ...); it is a header when it reads `patient_id` (any case) or, failing
    both, names an id column without holding a digit (`closest_column`: `Patient ID`, `MRN`, ...).
    Anything else is data.
    """
    if len(first) != 1:
        return True
    cell = first[0].strip()
    if cell.lower() == PATIENT:
        return True
    if population is not None and population.get_indexer([cell])[0] >= 0:
        return False
    shapes = pd.Series([_id_shape(str(v)) for v in rest.head(1000)], dtype=object)
    if len(shapes) and _id_shape(cell) in set(shapes):
        return False
    return not re.search(r"\d", cell) and closest_column(PATIENT, [cell]) is not None


def _id_header(
    df: pd.DataFrame, fc: FileCheck, population: pd.Index | None = None
) -> tuple[pd.DataFrame | None, FileCheck]:
    """Decide whether the first row of a headerless read is a header (see `_first_row_is_header`)."""
    first = [str(v) for v in df.iloc[0]]
    if not _first_row_is_header(first, df.iloc[1:, 0], population):
        df = df.rename(columns={df.columns[0]: PATIENT})  # a single unnamed column: every row is an id
        fc.rownum = fc.rownum.copy()
        return df, fc
    if _repeated_names(first, fc):
        return None, fc
    body = df.iloc[1:].reset_index(drop=True)
    body.columns = first
    fc.rownum = fc.rownum[1:]
    if len(body) == 0:
        fc.note(
            "error",
            None,
            "the file has a header but no data rows",
            "at least one patient id",
            "empty_file",
            (1,),
        )
        return None, fc
    if len(first) == 1 and first[0].strip() != PATIENT:
        fc.note(
            "warning",
            first[0],
            f"the first line {first[0]!r} was read as the header, not as a patient id; column "
            f"'{first[0]}' read as '{PATIENT}'",
            f"the name '{PATIENT}'",
            "renamed_column",
            (1,),
        )
        body.columns = [PATIENT]
    return body, fc


def load_ids(
    src: SourceLike, *, population: np.ndarray | None = None, group: str = "group", na_ids: NaIds = "error"
) -> Loaded[np.ndarray]:
    """A patient-id list (unique, in file order). With `population`, ids outside it are errors."""
    s = as_source(src)
    report = ValidationReport()
    ids = _ids(s, report, None if population is None else pd.Index(population), group, na_ids)
    report.raise_if_errors()
    if ids is None:  # `_ids` returns None only after reporting an error
        raise RuntimeError(f"{s.name}: no ids read, yet no error reported")
    return Loaded(ids, report, {s.name: s.sha256})


# ------------------------------------------------------------------------------------ empty groups
EMPTY_WHY = (
    "no patient with an ICD-9-CM or ICD-10-CM code was read (the warnings say which rows were left out)"
)


def check_patients(
    report: ValidationReport, source: str, sizes: Mapping[str, int], why: str = EMPTY_WHY
) -> None:
    """An error in `report` naming every group of `sizes` (group -> number of patients) that holds
    no patient (issue 37): measured, an empty cohort read "0 records at risk" and exited 0, which a
    pipeline takes for "no risk". Every command that measures or releases, and the app's import,
    reads its groups through this check."""
    empty = [group for group, n in sizes.items() if n == 0]
    if empty:
        FileCheck(source, np.zeros(0, dtype=np.int64), report).note(
            "error",
            None,
            f"the {' and the '.join(empty)} {'holds' if len(empty) == 1 else 'hold'} no patient: {why}; "
            "nothing is measured or released for an empty group",
            "at least one patient in every group",
            "empty_group",
        )


def require_patients(source: str, sizes: Mapping[str, int], why: str = EMPTY_WHY) -> None:
    """`check_patients` raising its DataError (a UserError: exit 2 on the command line)."""
    report = ValidationReport()
    check_patients(report, source, sizes, why)
    report.raise_if_errors()


# ------------------------------------------------------------------------------------ datasets
def load_dataset(
    events: SourceLike,
    biobank: SourceLike | None = None,
    cohort: SourceLike | None = None,
    genotypes: SourceLike | None = None,
    labs: SourceLike | None = None,
    *,
    name: str = "uploaded",
    unknown_codes: Action = "keep",
    drop_duplicates: bool = False,
    na_ids: NaIds = "error",
    normalize: bool = False,
    defer_labs: bool = False,
    progress: Progress | None = None,
) -> Loaded[Dataset]:
    """Load and cross-check a dataset's files; every file's findings before any DataError.

    Groups (Heatherly's Figure 14): `population` is every patient with events, `biobank` and `cohort`
    the given id lists (each must lie within the population; a cohort outside the biobank is a
    warning). Genotype or lab patients without events are reported as warnings. With `normalize`,
    the codes' original spellings are kept in `Dataset.spellings` (and `Loaded.spellings`).

    `defer_labs` (the shipped sample, issue 24): the lab orders' file is read now (its sha256 is in
    `sources`) but parsed and validated when `Dataset.labs` is first read, by the same checks; their
    findings are then added to this load's report, and an error raises the `DataError` there.

    `progress(fraction, message)` is told each stage as it starts (issue 36: the paper-scale
    population's first load takes a minute; the fractions are the stages' shares of that load).
    """
    report = ValidationReport()
    stage = progress or (lambda fraction, message: None)
    srcs = {
        role: as_source(s)
        for role, s in (
            ("events", events),
            ("biobank", biobank),
            ("cohort", cohort),
            ("genotypes", genotypes),
            ("labs", labs),
        )
        if s is not None
    }
    stage(0.0, f"reading and checking the events ({srcs['events'].name})")
    events_ = _events(srcs["events"], report, unknown_codes, drop_duplicates, na_ids, normalize)
    stage(0.5, "building the patients' records")
    records = None if events_ is None else Records.from_frame(events_.frame, patients=events_.patients)
    population = None if records is None else pd.Index(records.patient_ids)
    groups: dict[str, np.ndarray] = {}
    for role in ("biobank", "cohort"):
        if role in srcs:
            stage(0.75 if role == "biobank" else 0.85, f"reading the {role} ({srcs[role].name})")
            ids = _ids(srcs[role], report, population, role, na_ids)
            if ids is not None:
                groups[role] = ids
    if "biobank" in groups and "cohort" in groups:
        # a hash lookup: pandas' isin on string ids makes a pyarrow scalar of each biobank id (2.8 s of
        # the paper-scale load, 478,375 ids; 0.2 s this way)
        outside = pd.Index(groups["biobank"]).unique().get_indexer(groups["cohort"]) < 0
        if outside.any():
            examples = ", ".join(map(str, groups["cohort"][outside][:MAX_ROWS]))
            FileCheck(srcs["cohort"].name, np.zeros(0, dtype=np.int64), report).note(
                "warning",
                PATIENT,
                f"{int(outside.sum())} cohort patient(s) are not in the biobank: {examples}",
                "a research cohort drawn from the biobank (Heatherly's Figure 14)",
                "cohort_outside_biobank",
            )
    if "genotypes" in srcs:
        stage(0.9, f"reading the genotypes ({srcs['genotypes'].name})")
    geno = _genotypes(srcs["genotypes"], report, na_ids, population) if "genotypes" in srcs else None
    read_now = "labs" in srcs and not defer_labs
    lab = _labs(srcs["labs"], report, drop_duplicates, na_ids, population) if read_now else None
    if records is not None:
        sizes = {"population": records.n_patients, **{role: len(ids) for role, ids in groups.items()}}
        check_patients(report, srcs["events"].name, sizes)
    report.raise_if_errors()
    assert records is not None and events_ is not None and population is not None
    sources, spellings = _source_hashes(srcs), events_.spelling_map()
    labs_value: pd.DataFrame | Deferred[pd.DataFrame | None] | None = lab
    if "labs" in srcs and defer_labs:
        labs_value = Deferred(
            partial(_deferred_labs, srcs["labs"], report, population, drop_duplicates, na_ids),
            fingerprint=deferred_labs_fingerprint(srcs["labs"], drop_duplicates, na_ids),
        )
    dataset = Dataset(
        name=name,
        events=records,
        groups=groups,
        genotypes=geno,
        labs=labs_value,
        sources=sources,
        spellings=spellings,
    )
    stage(1.0, "loaded")
    return Loaded(dataset, report, sources, spellings)


def deferred_labs_fingerprint(src: Source, drop_duplicates: bool, na_ids: NaIds) -> str:
    """The content fingerprint of lab orders read by `_deferred_labs` from `src`: the frame is a
    function of the file's bytes (held in memory since the load, never read again from disk) and the
    read's options, so their sha256 names it whole without parsing 6.9 million rows (issue 24: hashing
    the frame took 0.6-1.1 s on the first opening of the Lab orders page)."""
    options = f"labs|{src.sha256}|drop_duplicates={bool(drop_duplicates)}|na_ids={na_ids}"
    return hashlib.sha256(options.encode()).hexdigest()


def _deferred_labs(
    src: Source, report: ValidationReport, population: pd.Index, drop_duplicates: bool, na_ids: NaIds
) -> pd.DataFrame | None:
    """A dataset's deferred lab orders (`load_dataset(defer_labs=True)`): the checks `load_dataset`
    runs on them at once (`_labs`, then patients without events), their findings added to the load's
    `report`, their errors raised as a `DataError` of their own."""
    own = ValidationReport()
    lab = _labs(src, own, drop_duplicates, na_ids, population)
    report.extend(own)
    own.raise_if_errors()
    return lab


def _flag_outside(fc: FileCheck, column: str, text: Text, population: pd.Index, role: str) -> None:
    """Warning for the rows of `fc`'s file whose patient id (`text`, of `column`) has no events."""
    outside = _absent(text, population)
    if outside.any():
        fc.flag(
            "warning",
            column,
            outside,
            f"{role} of patient(s) without events: {text.examples(population.get_indexer(text.uniques) < 0)}",
            "patients of the population (the events file)",
            "outside_population",
        )


def _source_hashes(srcs: Mapping[str, Source]) -> dict[str, str]:
    out: dict[str, str] = {}
    for role, s in srcs.items():
        key = s.name if s.name not in out else f"{role}:{s.name}"
        out[key] = s.sha256
    return out


def load_uploaded(
    events: tuple[str, bytes],
    biobank: tuple[str, bytes] | None = None,
    cohort: tuple[str, bytes] | None = None,
    genotypes: tuple[str, bytes] | None = None,
    labs: tuple[str, bytes] | None = None,
    *,
    unknown_codes: Action = "keep",
    drop_duplicates: bool = False,
    na_ids: NaIds = "error",
    normalize: bool = False,
) -> Loaded[Dataset]:
    """A dataset from uploaded files, each (file name, bytes); nothing touches the disk."""
    return load_dataset(
        events,
        biobank,
        cohort,
        genotypes,
        labs,
        name=f"uploaded: {events[0]}",
        unknown_codes=unknown_codes,
        drop_duplicates=drop_duplicates,
        na_ids=na_ids,
        normalize=normalize,
    )


def sample_paths(directory: str | Path = SAMPLE_DIR) -> dict[str, Path]:
    """The shipped sample's files that exist, by role (events is required)."""
    d = Path(directory)
    paths = {role: d / f for role, f in SAMPLE_FILES.items() if (d / f).exists()}
    if "events" not in paths:
        raise FileNotFoundError(
            f"no sample data: {d / SAMPLE_FILES['events']} is missing (run `python -m engine sample`)"
        )
    return paths


def load_sample_checked(
    directory: str | Path = SAMPLE_DIR,
    *,
    unknown_codes: Action = "keep",
    drop_duplicates: bool = False,
    na_ids: NaIds = "error",
) -> Loaded[Dataset]:
    """The shipped sample with its validation report (population = every patient with events).

    Memoized per process on the files' paths, sizes and modification times (the sample is read-only
    shared data; a regenerated sample is read again). Uploaded files are never memoized here. The lab
    orders are validated when first read (`load_dataset(defer_labs=True)`, issue 24: the first load
    draws the sidebar and the Cohort page, which read none of them).
    """
    paths = sample_paths(directory)
    stamp = tuple((role, str(p), p.stat().st_size, p.stat().st_mtime_ns) for role, p in sorted(paths.items()))
    return _sample_memo(stamp, unknown_codes, drop_duplicates, na_ids)


@lru_cache(maxsize=2)
def _sample_memo(
    stamp: tuple[tuple[str, str, int, int], ...], unknown_codes: Action, drop_duplicates: bool, na_ids: NaIds
) -> Loaded[Dataset]:
    paths = {role: Path(p) for role, p, _, _ in stamp}
    return load_dataset(
        paths["events"],
        paths.get("biobank"),
        paths.get("cohort"),
        paths.get("genotypes"),
        paths.get("labs"),
        name=SAMPLE_NAME,
        unknown_codes=unknown_codes,
        drop_duplicates=drop_duplicates,
        na_ids=na_ids,
        defer_labs=True,
    )


def warm_sample_labs(
    dataset: Dataset, after: threading.Thread, then: Callable[[pd.DataFrame], object] | None = None
) -> threading.Thread | None:
    """Read and validate the dataset's deferred lab orders in a daemon thread, once, after `after`
    ends (the server's script run that loaded the shipped sample: its first page drawn first, issue
    24), then `then(frame)` when there are any (the app builds what the Lab orders page opens on).
    None when the lab orders are not deferred. The app decides where this is worth it (`ui.sidebar`:
    in a Streamlit server, not in tests)."""
    value = dataset.__dict__["_labs"]
    if not isinstance(value, Deferred):
        return None

    def read(frame: pd.DataFrame | None) -> None:
        if then is not None and frame is not None and len(frame):
            then(frame)

    return value.warm(after, read)


def load_sample(directory: str | Path = SAMPLE_DIR) -> Dataset:
    """The shipped sample (`sample_data/`: events.parquet, biobank.csv, cohort.csv, genotypes.parquet,
    labs.parquet), validated like any upload; raises DataError if it fails validation."""
    return load_sample_checked(directory).data


__all__ = [
    "SAMPLE_DIR",
    "DataError",
    "Loaded",
    "Source",
    "ValidationReport",
    "load_dataset",
    "load_events",
    "load_genotypes",
    "load_ids",
    "load_labs",
    "load_sample",
    "load_sample_checked",
    "load_uploaded",
]
