"""A column mapping for any long-form file (CSV, Parquet, Excel): which column is the patient, the code,
the visit or date, the age, the vocabulary (ARCHITECTURE section 2).

Written `patient_id=MRN,code=DX_CODE,visit=ENC_DATE` (the CLI's `--map`, kept in a study): model
names on the left (`patient_id`, `code`, `visit`, `age`, `vocabulary`, `date`), the file's column
names on the right, as the header writes them (a name may hold spaces; `,` and `=` separate). A file
whose header already uses the model names needs no mapping. `date` (an event date for the
ICD-9/ICD-10 rule of `engine.io.normalize`) defaults to the visit column when it holds ISO dates.
The mapping only names columns: values are never changed by it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from engine.io.errors import UserError
from engine.io.events import Action, SourceData, check_events
from engine.io.validation import ALIASES, FileCheck, NaIds, ValidationReport, closest_column
from engine.vocab import Vocabulary

REQUIRED = ("patient_id", "code")
OPTIONAL = ("visit", "age", "vocabulary", "date")
MODEL_COLUMNS = (*REQUIRED, *OPTIONAL)
_EXTRA_ALIASES = {
    "visit": ("encdate", "encounterdate", "dateofservice", "dos", "admitdate", "visitstartdate"),
    "vocabulary": ("vocabularyid", "codesystem", "codetype", "icdversion", "icdtype", "dxtype", "system"),
    "date": (
        "eventdate",
        "servicedate",
        "dxdate",
        "diagnosisdate",
        "admitdate",
        "encounterdate",
        "conditionstartdate",
    ),
}


class MappingError(UserError, ValueError):
    """A malformed column mapping (`patient_id=MRN,code=DX_CODE`); the message says what is wrong."""


@dataclass(frozen=True)
class ColumnMapping:
    """{model column: file column}; `patient_id` and `code` are required."""

    columns: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, text: str) -> ColumnMapping:
        """`patient_id=MRN,code=DX_CODE`; a MappingError (a UserError) saying what is wrong."""
        pairs: list[tuple[str, str]] = []
        for part in [p for p in text.split(",") if p.strip()]:
            model, sep, column = part.partition("=")
            model, column = model.strip().lower(), column.strip()
            if not sep or not column:
                raise MappingError(f"mapping {part.strip()!r}: expected model=column, e.g. code=DX_CODE")
            if model not in MODEL_COLUMNS:
                raise MappingError(
                    f"mapping {part.strip()!r}: {model!r} is not one of {', '.join(MODEL_COLUMNS)}"
                )
            if model in dict(pairs):
                raise MappingError(f"mapping: {model!r} is mapped twice")
            pairs.append((model, column))
        mapped = [c for _, c in pairs]
        twice = sorted({c for c in mapped if mapped.count(c) > 1})
        if twice:
            raise MappingError(
                f"mapping: column(s) {', '.join(map(repr, twice))} mapped to more than one model name"
            )
        missing = [m for m in REQUIRED if m not in dict(pairs)]
        if missing:
            raise MappingError(
                f"mapping: {', '.join(missing)} must be mapped (e.g. patient_id=MRN,code=DX_CODE)"
            )
        return cls(tuple(pairs))

    def as_dict(self) -> dict[str, str]:
        return dict(self.columns)

    def __str__(self) -> str:
        return ",".join(f"{m}={c}" for m, c in self.columns)


def suggest_mapping(columns: list[str]) -> dict[str, str]:
    """A proposed mapping for a header (exact names first, then common spellings and close names;
    each file column used once). Only a suggestion: nothing is read with it until it is accepted."""
    out: dict[str, str] = {}
    free = list(columns)
    for model in MODEL_COLUMNS:
        exact = [c for c in free if c.strip().lower() == model]
        hit = exact[0] if exact else None
        if hit is None:
            norm = {"".join(ch for ch in c.lower() if ch.isalnum()): c for c in free}
            for alias in _EXTRA_ALIASES.get(model, ()):
                if alias in norm:
                    hit = norm[alias]
                    break
        if hit is None and model in ALIASES:
            hit = closest_column(model, free)
        if hit is not None:
            out[model] = hit
            free.remove(hit)
    return out


def resolve(frame: pd.DataFrame, fc: FileCheck, mapping: ColumnMapping | None) -> dict[str, str] | None:
    """{model: frame column}; errors (row 1, the header) name mapped columns absent from the file,
    with the closest present name. Without a mapping the model names themselves are looked up (a
    name differing in case or spaces is used with a warning, as the events loader does)."""
    present = [str(c) for c in frame.columns]
    if mapping is None:
        from engine.io.validation import match_columns

        n_err = len(fc.report.errors)
        found = match_columns(frame, fc, REQUIRED, OPTIONAL)
        return None if len(fc.report.errors) > n_err else found
    out: dict[str, str] = {}
    ok = True
    for model, column in mapping.columns:
        if column in present:
            out[model] = column
            continue
        guess = closest_column(column, present) or next((c for c in present if c.strip() == column), None)
        hint = f"; did you mean {guess!r}?" if guess else ""
        fc.note(
            "error",
            column,
            f"the mapping names column {column!r} for {model}, but the file has no such column "
            f"(columns present: {', '.join(present)}){hint}",
            "a column of the file's header (names as written, case and spaces included)",
            "missing_column",
            (1,),
        )
        ok = False
    return out if ok else None


def read_long(
    name: str,
    data: bytes,
    mapping: ColumnMapping | None = None,
    *,
    sheet: str | None = None,
    default_vocabulary: Vocabulary | None = None,
    normalize: bool = False,
    unknown_codes: Action = "keep",
    drop_duplicates: bool = False,
    na_ids: NaIds = "error",
) -> SourceData:
    """A long-form file (CSV, Parquet or .xlsx) read through a column mapping; findings in the
    report (file, rows, column)."""
    from engine.io.excel import is_xlsx, read_xlsx
    from engine.io.loaders import Source, read_table

    report = ValidationReport()
    if is_xlsx(name, data):
        read = read_xlsx(name, data, report, sheet)
        if read is None:
            return SourceData(None, report)
        frame, fc, _ = read
    else:
        src = Source(name, data)
        got = read_table(src, report)
        if got is None:
            return SourceData(None, report, sources={name: src.sha256})
        frame, fc = got
    import hashlib

    sources = {name: hashlib.sha256(data).hexdigest()}
    columns = resolve(frame, fc, mapping)
    if columns is None:
        return SourceData(None, report, sources=sources)
    extra = [c for c in frame.columns if c not in columns.values()]
    if extra:
        fc.note(
            "warning",
            ", ".join(extra),
            f"column(s) not used: {', '.join(extra)}",
            f"only the mapped columns ({', '.join(f'{m}={c}' for m, c in columns.items())})",
            "extra_columns",
        )
    model = {m: c for m, c in columns.items() if m in ("patient_id", "code", "visit", "age")}
    date = columns.get("date") or columns.get("visit")
    events = check_events(
        frame,
        fc,
        model,
        vocabulary=columns.get("vocabulary"),
        default_vocabulary=default_vocabulary,
        date=date,
        normalize=normalize,
        unknown_codes=unknown_codes,
        drop_duplicates=drop_duplicates,
        na_ids=na_ids,
    )
    return SourceData(events, report, sources=sources)
