"""The vocabulary of each event, and the opt-in normalization of code spellings, never silent.

Issue 14. A code's vocabulary (ICD-9-CM or ICD-10-CM, `engine.vocab`) is decided per row, first rule
that applies:

1. **explicit**: a prefix on the code (`ICD9:250.00`, `ICD10CM/E11.9`, MEDS' `ICD//9//25000`, our own
   `ICD10CM:V45.5`), a vocabulary column (`vocabulary`, OMOP's `vocabulary_id`: `ICD9CM`, `ICD10CM`,
   also `ICD9`, `ICD-9-CM`, `9`, `ICD10`, `10`, any case), or a vocabulary given for the whole source;
   a prefix contradicting the column is an error;
2. **syntax**: only one vocabulary can read the code (`250.00`, `E849.0` are ICD-9-CM; `E11.9`, `I50.0`,
   `S72.001A` are ICD-10-CM);
3. **file**: the code reads in both (V codes such as `V45.5`; undotted `E8490`, `E849`), and every
   other code of the source was decided by its syntax in one vocabulary: the source is that vocabulary;
4. **known code**: only one reading is a code of its vocabulary's tables (`V4581` is ICD-9-CM V45.81;
   ICD-10-CM has no V45.81);
5. **date**: the event date (the `date` column given, e.g. the visit date) against 2015-10-01, the
   day US billing switched to ICD-10-CM: earlier events are ICD-9-CM, later ones ICD-10-CM;
6. otherwise the row is **ambiguous**: its code is kept as written, its vocabulary empty, and the
   report lists it (the loader refuses such rows, naming them).

Normalization (`rewrite=True`, opt-in) rewrites a spelling only into a valid code of the decided
vocabulary: surrounding and inner spaces removed (`spaces`), upper case (`case`), prefix stripped
(`prefix`), the dot put back (`dot`: ICD-9-CM `25000` -> `250.00`, `V4581` -> `V45.81`, `E8490` ->
`E849.0`; ICD-10-CM `I500` -> `I50.0`, `E119` -> `E11.9`). A spelling with no valid reading is left as
it is, for the code checks to report. Without `rewrite` only the vocabulary is decided and nothing is
changed. The report counts the rows and distinct spellings of each rewrite with examples, and the
rows decided by each rule; the original spelling of every row is kept (`Normalized.original`) for the
code map of an export (`Normalized.spellings`).

The output `code` column holds item labels (`engine.vocab.item_label`): ICD-10-CM codes that ICD-9-CM
could read carry the prefix `ICD10CM:` so the two vocabularies never share an item.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from engine.io.validation import MAX_ROWS, FileCheck, is_known_icd9
from engine.vocab import (
    ICD9_CODE,
    ICD9CM,
    ICD10_CODE,
    ICD10CM,
    ICD10CM_PREFIX,
    ICD10CM_START,
    VOCABULARY_NAMES,
    Vocabulary,
    icd10cm_item,
    is_known_icd10cm,
    item_label,
)

REWRITES: tuple[str, ...] = ("spaces", "case", "prefix", "dot")
RULES: tuple[str, ...] = ("explicit", "syntax", "file", "known code", "date", "ambiguous", "unrecognized")

_VOCABULARY_VALUES: dict[str, Vocabulary] = {
    **dict.fromkeys(("icd9cm", "icd9", "icd-9-cm", "icd-9", "icd9-cm", "9"), ICD9CM),
    **dict.fromkeys(("icd10cm", "icd10", "icd-10-cm", "icd-10", "icd10-cm", "10"), ICD10CM),
}
# MEDS / MIMIC-IV (`ICD//9//25000`, `DIAGNOSIS//ICD//10//E119`), i2b2 (`ICD9:250.00`), `ICD10CM/E11.9`
_PREFIXES = (
    re.compile(r"^(?:DIAGNOSIS//)?ICD//(9|10)(?:CM)?//(.+)$"),
    re.compile(r"^ICD[-_]?(9|10)(?:[-_]?CM)?(?::|/|\|)(.+)$"),
)
_UNDOTTED_ICD9 = (
    (re.compile(r"^\d{4,5}$"), 3),
    (re.compile(r"^V\d{3,4}$"), 3),
    (re.compile(r"^E\d{4}$"), 4),
)
_UNDOTTED_ICD10 = re.compile(r"^[A-Z](?:\d[0-9A-Z]|[A-Z]\d)[0-9A-Z]{1,4}$")
_VOCAB_ORDER = {ICD9CM: 0, ICD10CM: 1}


def vocabulary_value(value: str) -> Vocabulary | None:
    """`ICD9CM`/`ICD10CM` for the accepted spellings of a vocabulary column's value, else None."""
    return _VOCABULARY_VALUES.get(str(value).strip().lower())


def split_prefix(code: str) -> tuple[Vocabulary | None, str]:
    """(vocabulary, rest) for a code carrying a vocabulary prefix (`ICD//9//25000` ->
    ('ICD9CM', '25000'), `ICD10CM/E11.9` -> ('ICD10CM', 'E11.9')), else (None, code). As written:
    no case folding, no trimming."""
    for pattern in _PREFIXES:
        m = pattern.match(code)
        if m:
            return (ICD9CM if m.group(1) == "9" else ICD10CM), m.group(2)
    return None, code


def _readings(s: str, rewrite: bool) -> dict[Vocabulary, str]:
    """The valid code each vocabulary reads in `s` (already cleaned), dotted."""
    out: dict[Vocabulary, str] = {}
    if ICD9_CODE.match(s):
        out[ICD9CM] = s
    elif rewrite:
        for pattern, cut in _UNDOTTED_ICD9:
            if pattern.match(s):
                out[ICD9CM] = f"{s[:cut]}.{s[cut:]}"
                break
    if ICD10_CODE.match(s):
        out[ICD10CM] = s
    elif rewrite and _UNDOTTED_ICD10.match(s):
        out[ICD10CM] = f"{s[:3]}.{s[3:]}"
    return out


@dataclass(frozen=True)
class _Spelling:
    """What one distinct (spelling, vocabulary hint) becomes, before the per-row date rule."""

    readings: dict[Vocabulary, str]  # candidate codes (one when decided)
    rule: str  # RULES, provisional ("syntax" may become "file"; "both" is resolved later)
    kinds: dict[Vocabulary, tuple[str, ...]]  # rewrites applied for each reading
    conflict: str = ""


def _spelling(raw: str, hint: Vocabulary | None, rewrite: bool) -> _Spelling:
    kinds: list[str] = []
    s = raw
    if rewrite:
        t = re.sub(r"\s+", "", s)
        if t != s:
            kinds.append("spaces")
        u = t.upper()
        if u != t:
            kinds.append("case")
        s = u
    prefix_vocab: Vocabulary | None = None
    rest = s[len(ICD10CM_PREFIX) :]
    if s.startswith(ICD10CM_PREFIX) and ICD10_CODE.match(rest) and icd10cm_item(rest) == s:
        prefix_vocab, s = ICD10CM, rest  # an item label of ours (`ICD10CM:V45.5`): read, not rewritten
    elif rewrite:
        found, rest = split_prefix(s)
        if found is not None:
            prefix_vocab, s = found, rest
            kinds.append("prefix")
    readings = _readings(s, rewrite)

    def kinds_for(code: str) -> tuple[str, ...]:
        return (*kinds, "dot") if code != s else tuple(kinds)

    if prefix_vocab is not None and hint is not None and prefix_vocab != hint:
        return _Spelling(
            {},
            "unrecognized",
            {},
            f"prefix says {VOCABULARY_NAMES[prefix_vocab]}, the vocabulary column {VOCABULARY_NAMES[hint]}",
        )
    explicit = prefix_vocab or hint
    if explicit is not None:
        if explicit not in readings:
            return _Spelling({}, "unrecognized", {})
        code = readings[explicit]
        return _Spelling({explicit: code}, "explicit", {explicit: kinds_for(code)})
    if not readings:
        return _Spelling({}, "unrecognized", {})
    rule = "syntax" if len(readings) == 1 else "both"
    return _Spelling(readings, rule, {v: kinds_for(c) for v, c in readings.items()})


@dataclass(frozen=True)
class RewriteCount:
    """Rows and distinct spellings changed by one kind of rewrite, with examples (before, after)."""

    kind: str
    rows: int
    distinct: int
    examples: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class NormalizationReport:
    """What normalization changed and how each row's vocabulary was decided (module docstring)."""

    source: str
    column: str
    rewrite: bool
    rewrites: tuple[RewriteCount, ...]
    rules: dict[str, int]  # rows decided by each rule (RULES)
    vocabularies: dict[str, int]  # rows per vocabulary ('' = undecided)
    ambiguous: dict[str, int]  # spelling -> rows left ambiguous, most rows first
    unrecognized: dict[str, int]  # spelling -> rows no vocabulary reads
    conflicts: dict[str, int] = field(default_factory=dict)  # spelling -> rows whose prefix contradicts

    @property
    def rows_rewritten(self) -> int:
        return max((r.rows for r in self.rewrites), default=0)

    def to_frame(self) -> pd.DataFrame:
        """One row per rewrite kind: `rewrite`, `rows`, `distinct`, `examples` ('25000' -> '250.00')."""
        return pd.DataFrame(
            [
                {
                    "rewrite": r.kind,
                    "rows": r.rows,
                    "distinct": r.distinct,
                    "examples": "; ".join(f"{a!r} -> {b!r}" for a, b in r.examples),
                }
                for r in self.rewrites
            ],
            columns=["rewrite", "rows", "distinct", "examples"],
        )

    def lines(self) -> list[str]:
        """A short plain-text account (for the CLI and the app)."""
        out = []
        for r in self.rewrites:
            ex = ", ".join(f"{a!r} -> {b!r}" for a, b in r.examples)
            out.append(f"{r.kind}: {r.rows} rows ({r.distinct} distinct spellings) rewritten, e.g. {ex}")
        voc = ", ".join(f"{VOCABULARY_NAMES.get(v, 'undecided')} {n}" for v, n in self.vocabularies.items())
        out.append(f"vocabulary per row: {voc}")
        out.append("decided by: " + ", ".join(f"{k} {n}" for k, n in self.rules.items() if n))
        return out


@dataclass(frozen=True, eq=False)
class Normalized:
    """A frame whose `code` column holds item labels, with each row's vocabulary and original cell.

    Per row, `cells` indexes the distinct (spelling, vocabulary value, reading) outcomes whose label,
    original spelling and vocabulary are `cell_label`, `cell_original`, `cell_vocabulary`; `label_codes`
    indexes the distinct labels `labels` (so callers check each distinct code once).
    """

    frame: pd.DataFrame
    vocabulary: np.ndarray  # (n_rows,) object: 'ICD9CM', 'ICD10CM' or '' (ambiguous / unrecognized)
    report: NormalizationReport
    undecided: np.ndarray  # (n_rows,) bool: ambiguous or contradictory rows
    cells: np.ndarray
    cell_label: np.ndarray
    cell_original: np.ndarray
    cell_vocabulary: np.ndarray
    label_codes: np.ndarray  # (n_rows,) index into `labels`
    labels: np.ndarray  # distinct item labels

    @property
    def original(self) -> np.ndarray:
        """(n_rows,) object: the code cell as given."""
        return self.cell_original[self.cells]

    def spellings(self) -> pd.DataFrame:
        """Distinct (item, vocabulary, original spelling) with their rows, for the code map of an
        export: every spelling that became each item, sorted by item then spelling."""
        rows = np.bincount(self.cells, minlength=len(self.cell_label))
        used = np.flatnonzero(rows)
        df = pd.DataFrame(
            {
                "item": self.cell_label[used].astype(str),
                "vocabulary": self.cell_vocabulary[used].astype(str),
                "original": self.cell_original[used].astype(str),
                "rows": rows[used],
            }
        )
        return df.groupby(["item", "vocabulary", "original"], sort=True)["rows"].sum().reset_index()


def _dates(values: pd.Series) -> np.ndarray:
    """Per row: True on or after 2015-10-01, False before, and a mask of rows with a date."""
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        d = pd.to_datetime(values)
    else:
        d = pd.to_datetime(values.astype("string"), format="ISO8601", errors="coerce")
    has = d.notna().to_numpy()
    later = np.zeros(len(values), dtype=bool)
    later[has] = (d[has] >= pd.Timestamp(ICD10CM_START)).to_numpy()
    return np.stack([later, has])


def normalize_codes(
    frame: pd.DataFrame,
    *,
    code: str = "code",
    vocabulary: str | None = None,
    default_vocabulary: Vocabulary | None = None,
    date: str | None = None,
    rewrite: bool = False,
    source: str = "input",
    fc: FileCheck | None = None,
) -> Normalized:
    """Decide each row's vocabulary and (with `rewrite`) normalize the code spellings (module
    docstring). `vocabulary` names a column of vocabulary values, `default_vocabulary` applies to
    every row without one, `date` names a column of event dates (ISO text or datetimes).

    With `fc`, findings go to its report naming rows and columns: a warning per rewrite kind, an error
    for unknown vocabulary values, contradicting prefixes and ambiguous rows. Work is done once per
    distinct (spelling, vocabulary value).
    """
    n = len(frame)
    raw_codes, raw_uniques = pd.factorize(frame[code].astype("string").fillna(""), use_na_sentinel=False)
    raw_uniques = np.asarray(raw_uniques, dtype=object)
    hint_codes = np.zeros(n, dtype=np.int64)
    hint_values: list[Vocabulary | None] = [default_vocabulary]
    if vocabulary is not None:
        hc, hu = pd.factorize(frame[vocabulary].astype("string").fillna(""), use_na_sentinel=False)
        hu = [str(v) for v in hu]
        parsed = [vocabulary_value(v) if v.strip() else default_vocabulary for v in hu]
        bad = np.array([p is None and v.strip() != "" for p, v in zip(parsed, hu, strict=True)])
        if bad.any() and fc is not None:
            shown = ", ".join(repr(hu[i]) for i in np.flatnonzero(bad)[:MAX_ROWS])
            fc.flag(
                "error",
                vocabulary,
                bad[hc],
                f"vocabulary not understood: {shown}",
                "ICD9CM or ICD10CM (also ICD9, ICD-9-CM, 9, ICD10, ICD-10-CM, 10), or an empty cell",
                "vocabulary_value",
            )
        hint_codes, hint_values = hc.astype(np.int64), parsed
    key = raw_codes.astype(np.int64) * len(hint_values) + hint_codes
    combo_codes, combo_keys = pd.factorize(key, sort=False)
    combos = [
        _spelling(str(raw_uniques[k // len(hint_values)]), hint_values[k % len(hint_values)], rewrite)
        for k in combo_keys
    ]
    # rule 3: a source whose codes decided by syntax are all of one vocabulary
    syntax_vocab = {next(iter(c.readings)) for c in combos if c.rule in ("syntax", "explicit")}
    file_vocab = next(iter(syntax_vocab)) if len(syntax_vocab) == 1 else None
    n_combo = len(combos)
    rule_index = {r: i for i, r in enumerate(RULES)}
    choice = np.full(n_combo, 2, dtype=np.int64)  # column: 0 ICD9CM, 1 ICD10CM, 2 undecided
    rule = np.zeros(n_combo, dtype=np.int8)
    for i, c in enumerate(combos):
        if c.rule == "both":
            if file_vocab is not None:
                choice[i], rule[i] = _VOCAB_ORDER[file_vocab], rule_index["file"]
                continue
            known = [v for v in (ICD9CM, ICD10CM) if _is_known(v, c.readings[v])]
            if len(known) == 1:
                choice[i], rule[i] = _VOCAB_ORDER[known[0]], rule_index["known code"]
            else:
                rule[i] = rule_index["date"]  # decided per row below
        elif c.readings:
            choice[i], rule[i] = _VOCAB_ORDER[next(iter(c.readings))], rule_index[c.rule]
        else:
            rule[i] = rule_index["unrecognized"]
    row_col = choice[combo_codes]
    row_rule = rule[combo_codes]
    by_date = row_rule == rule_index["date"]
    if by_date.any():
        if date is not None:
            later, has = _dates(frame[date])
            row_col = np.where(by_date & has, later.astype(np.int64), row_col)
            row_rule = np.where(by_date & ~has, rule_index["ambiguous"], row_rule).astype(np.int8)
        else:
            row_rule = np.where(by_date, rule_index["ambiguous"], row_rule).astype(np.int8)
    # one cell per (combo, column): its label, original spelling, vocabulary, rewrites
    vocabs = (ICD9CM, ICD10CM)
    cell_label = np.empty(n_combo * 3, dtype=object)
    cell_original = np.empty(n_combo * 3, dtype=object)
    cell_vocab = np.array([*vocabs, ""] * n_combo, dtype=object)
    cell_kinds: list[tuple[str, ...]] = []
    for i, c in enumerate(combos):
        raw = str(raw_uniques[combo_keys[i] // len(hint_values)])
        for j, v in enumerate(vocabs):
            cell_original[3 * i + j] = raw
            cell_label[3 * i + j] = item_label(v, c.readings[v]) if v in c.readings else raw
            cell_kinds.append(c.kinds.get(v, ()))
        # the third column (no vocabulary): the code as written, never rewritten
        cell_original[3 * i + 2] = cell_label[3 * i + 2] = raw
        cell_kinds.append(())
    cells = combo_codes.astype(np.int64) * 3 + row_col
    cell_rows = np.bincount(cells, minlength=n_combo * 3)
    cell_changed = cell_label != cell_original
    rewrites = []
    for kind in REWRITES:
        hit_cell = np.array([kind in k for k in cell_kinds], dtype=bool) & cell_changed & (cell_rows > 0)
        if hit_cell.any():
            pairs = pd.DataFrame(
                {"a": cell_original[hit_cell], "b": cell_label[hit_cell], "rows": cell_rows[hit_cell]}
            )
            counts = pairs.groupby(["a", "b"], sort=True)["rows"].sum().reset_index()
            counts = counts.sort_values(["rows", "a"], ascending=[False, True], kind="stable")
            examples = tuple(zip(counts["a"].head(MAX_ROWS), counts["b"].head(MAX_ROWS), strict=True))
            n_hit = int(counts["rows"].sum())
            rewrites.append(RewriteCount(kind, n_hit, len(counts), examples))
            if fc is not None:
                ex = ", ".join(f"{a!r} -> {b!r}" for a, b in examples)
                fc.flag(
                    "warning",
                    code,
                    hit_cell[cells],
                    f"{n_hit} row(s) normalized ({kind}; {len(counts)} distinct spellings): {ex}",
                    "codes written as the vocabulary writes them (normalization was asked for)",
                    f"normalized_{kind}",
                )
    conflict_combo = np.array([bool(c.conflict) for c in combos], dtype=bool)
    conflict_rows = conflict_combo[combo_codes]
    ambiguous_rows = row_rule == rule_index["ambiguous"]
    unrecognized_rows = (row_rule == rule_index["unrecognized"]) & ~conflict_rows

    def spelling_counts(mask: np.ndarray) -> dict[str, int]:
        if not mask.any():
            return {}
        s = pd.Series(raw_uniques[raw_codes[mask]]).value_counts(sort=False)
        s = s.sort_index().sort_values(ascending=False, kind="stable")
        return {str(k): int(v) for k, v in s.items()}

    ambiguous = spelling_counts(ambiguous_rows)
    conflicts = spelling_counts(conflict_rows)
    if fc is not None and conflicts:
        reasons = {c.conflict for c in combos if c.conflict}
        fc.flag(
            "error",
            code,
            conflict_rows,
            f"the code's prefix contradicts the vocabulary column ({'; '.join(sorted(reasons))}): "
            + ", ".join(repr(k) for k in list(conflicts)[:MAX_ROWS]),
            "one vocabulary per row",
            "vocabulary_conflict",
            conflicts,
        )
    if fc is not None and ambiguous:
        why = "no event date" if date is None else "no event date in these rows"
        fc.flag(
            "error",
            code,
            ambiguous_rows,
            f"{len(ambiguous)} code(s) read as both ICD-9-CM and ICD-10-CM and the source mixes both "
            f"vocabularies ({why}): " + ", ".join(repr(k) for k in list(ambiguous)[:MAX_ROWS]),
            "a vocabulary column (ICD9CM / ICD10CM), prefixed codes (ICD9:..., ICD10CM:...), or event "
            f"dates (ICD-10-CM from {ICD10CM_START})",
            "ambiguous_vocabulary",
            ambiguous,
        )
    rule_rows = np.bincount(row_rule.astype(np.int64), minlength=len(RULES))
    rules = {r: int(rule_rows[i]) for i, r in enumerate(RULES)}
    col_rows = np.bincount(row_col, minlength=3)
    vocab_counts = {v: int(col_rows[j]) for j, v in enumerate((*vocabs, "")) if col_rows[j]}
    report = NormalizationReport(
        source,
        code,
        rewrite,
        tuple(rewrites),
        rules,
        vocab_counts,
        ambiguous,
        spelling_counts(unrecognized_rows),
        conflicts,
    )
    # the code column: one take from the distinct labels (arrow strings, not a Python object per row)
    present = np.flatnonzero(cell_rows)
    label_codes, label_uniques = pd.factorize(cell_label[present])
    cell_to_label = np.full(n_combo * 3, -1, dtype=np.int64)
    cell_to_label[present] = label_codes
    row_label = cell_to_label[cells]
    out = frame.assign(
        **{code: pd.array(np.asarray(label_uniques, dtype=object), dtype="str").take(row_label)}
    )
    return Normalized(
        out,
        np.array([*vocabs, ""], dtype=object)[row_col],
        report,
        ambiguous_rows | conflict_rows,
        cells,
        cell_label,
        cell_original,
        cell_vocab,
        row_label,
        np.asarray(label_uniques, dtype=object),
    )


def concept_labels(frame: pd.DataFrame, *, code: str, vocabulary: str, source: str = "input") -> Normalized:
    """Codes a reader already wrote as item labels of their concepts (`engine.vocab.concept_item`:
    `SNOMED:900001025`, `RxNorm:1234`; issue 37), with each row's vocabulary id in the column
    `vocabulary`: taken as given (rule `explicit`), nothing rewritten, no ICD reading tried."""
    n = len(frame)
    label_codes, labels = pd.factorize(frame[code].astype("string").fillna(""), use_na_sentinel=False)
    labels = np.asarray(labels, dtype=object)
    vocab = frame[vocabulary].astype(str).to_numpy(dtype=object)
    label_vocab = np.empty(len(labels), dtype=object)
    label_vocab[label_codes] = vocab
    names, counts = np.unique(vocab.astype(str), return_counts=True)
    report = NormalizationReport(
        source,
        code,
        False,
        (),
        {r: (n if r == "explicit" else 0) for r in RULES},
        {str(v): int(c) for v, c in zip(names, counts, strict=True)},
        {},
        {},
    )
    return Normalized(
        frame,
        vocab,
        report,
        np.zeros(n, dtype=bool),
        label_codes.astype(np.int64),
        labels,
        labels,
        label_vocab,
        label_codes.astype(np.int64),
        labels,
    )


def _is_known(vocabulary: Vocabulary, code: str) -> bool:
    return is_known_icd9(code) if vocabulary == ICD9CM else is_known_icd10cm(code)


def vocabularies_of(labels: Sequence[str]) -> dict[str, int]:
    """How many of the given item labels belong to each vocabulary ('' for neither)."""
    from engine.vocab import vocabulary_of_item

    out: dict[str, int] = {}
    for lab in labels:
        v = vocabulary_of_item(str(lab)) or ""
        out[v] = out.get(v, 0) + 1
    return out
