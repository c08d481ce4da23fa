"""The recipient's dataset (issue #35): one release for a recipient, in one release-id space.

Heatherly 2013 and Loukides 2010 release diagnosis codes *with* DNA, for the PheWAS and GWAS a
release exists for. The dataset is what a controlled-access deposit expects, dbGaP's layout as the
reference (SubjectConsent / subject-sample mapping, subject phenotypes, genotypes, data dictionary),
each file a spreadsheet-safe CSV (`export.safe_csv_bytes`):

- `subjects.csv`: every released record's patient by release id (dbGaP's SUBJID), the consent group and
  affection status as placeholders for the steward to set, whether the subject has genotypes and codes;
- `phenotypes.csv`: the released codes, byte for byte the release file the export gate writes
  (`release.csv`: with or without visits, as the release is);
- `code_map.csv`: the release's code map (released item -> original codes), as the gate writes it;
- `genotypes.csv`: `patient_id` + one column per SNP (minor-allele counts 0/1/2, empty when missing)
  for the released patients with genotypes, and only them;
- `data_dictionary.csv`: every variable of every file (dbGaP's DD: name, description, type, units,
  values).

One id space: the release file's ids are `export.release_ids` (same key, same HMAC order, same salt).
A released record with no row in the release file (every code censored or suppressed: GCCens on
selected codes) is still a released patient, a control of every phecode in the steward's PheWAS of
the release; it is numbered after the file's patients in the same keyed order (`export.subject_ids`,
which the crosswalk maps back too), so the release file's ids stay exactly what they are. Patients outside the released records (outside the
cohort, or genotyped and not released) never appear. The files are made only after the export gate
(`export.release_files`) passed, and written as one set with their manifest (`write_dataset`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from engine.adversary import Adversary
from engine.io import export
from engine.io.errors import UserError
from engine.io.export import subject_ids
from engine.io.pseudonyms import Pseudonyms
from engine.records import Records
from engine.release import Release
from engine.risk import Verification

SUBJECTS_FILE = "subjects.csv"
PHENOTYPES_FILE = "phenotypes.csv"
CODE_MAP_FILE = export.CODE_MAP_FILE
GENOTYPES_FILE = "genotypes.csv"
DICTIONARY_FILE = "data_dictionary.csv"
DATASET_FILES = (SUBJECTS_FILE, PHENOTYPES_FILE, CODE_MAP_FILE, GENOTYPES_FILE, DICTIONARY_FILE)
DICTIONARY_COLUMNS = ["file", "variable", "description", "type", "units", "values"]
CONSENT_PLACEHOLDER = 1
AFFECTION_UNKNOWN = 0
_ID = "patient_id"


class DatasetError(UserError, ValueError):
    """A recipient's dataset folder that cannot be read as one (the message names the file)."""


# ------------------------------------------------------------------------------------- writing
def _by_number(release_id: str) -> tuple[int, str]:
    """Release ids in numeric order (`R999` before `R1000`, which `subject_ids` may add)."""
    return len(release_id), release_id


def _genotype_frame(genotypes: pd.DataFrame, ids: Mapping[str, str]) -> pd.DataFrame:
    """The genotype rows of the patients of `ids` relabelled, sorted by release id; counts as integers
    (missing left empty)."""
    source = genotypes[_ID].astype(str)
    rows = genotypes.loc[source.isin(set(ids))].copy()
    rows[_ID] = source[rows.index].map(ids).to_numpy()
    for snp in rows.columns.drop(_ID):
        rows[snp] = pd.to_numeric(rows[snp]).astype("Int64")
    rid = rows[_ID].to_numpy(dtype=str)
    order = np.lexsort((rid, np.char.str_len(rid)))  # `_by_number`, vectorized
    return rows.iloc[order].reset_index(drop=True)


def _subject_frame(ids: Mapping[str, str], coded: set[str], genotyped: set[str]) -> pd.DataFrame:
    rids = sorted(ids.values(), key=_by_number)
    return pd.DataFrame(
        {
            _ID: rids,
            "consent": CONSENT_PLACEHOLDER,
            "affection_status": AFFECTION_UNKNOWN,
            "has_genotypes": [int(r in genotyped) for r in rids],
            "has_codes": [int(r in coded) for r in rids],
        }
    )


_RELEASE_ID = (
    "release id of the subject (dbGaP SUBJID): the same id in every file of this dataset and in the "
    "release file; keyed by the steward's secret, it says nothing of the hospital's id"
)
_DESCRIBED: dict[tuple[str, str], tuple[str, str, str, str]] = {
    (SUBJECTS_FILE, _ID): (_RELEASE_ID, "string", "", "R followed by a zero-padded number"),
    (SUBJECTS_FILE, "consent"): (
        "consent group (dbGaP SubjectConsent CONSENT); a placeholder the steward sets before a deposit",
        "integer",
        "",
        f"{CONSENT_PLACEHOLDER}=placeholder consent group",
    ),
    (SUBJECTS_FILE, "affection_status"): (
        "affection status of a study trait (dbGaP / PLINK); a placeholder: the phenotypes are the "
        "diagnosis codes of phenotypes.csv",
        "integer",
        "",
        f"{AFFECTION_UNKNOWN}=unknown",
    ),
    (SUBJECTS_FILE, "has_genotypes"): (
        "whether genotypes.csv has a row for the subject",
        "integer",
        "",
        "0=no;1=yes",
    ),
    (SUBJECTS_FILE, "has_codes"): (
        "whether phenotypes.csv has a row for the subject; 0: a released record whose every code was "
        "censored or suppressed (in a PheWAS a control of every phecode)",
        "integer",
        "",
        "0=no;1=yes",
    ),
    (PHENOTYPES_FILE, _ID): (_RELEASE_ID, "string", "", "R followed by a zero-padded number"),
    (PHENOTYPES_FILE, "visit"): (
        "visit number of the subject, 1, 2, 3 ... in time order (never a date)",
        "integer",
        "",
        "",
    ),
    (PHENOTYPES_FILE, "code"): (
        "released diagnosis item: an ICD-9-CM or ICD-10-CM code, or a generalized item (a set {a,b} or "
        "a higher-level code) whose original codes code_map.csv lists",
        "string",
        "",
        "",
    ),
    (PHENOTYPES_FILE, "age"): ("age at the visit; ages above 89 are one category", "string", "years", "90+"),
    (CODE_MAP_FILE, "released_item"): ("a released item of phenotypes.csv", "string", "", ""),
    (CODE_MAP_FILE, "original_code"): ("an original code the released item stands for", "string", "", ""),
    (CODE_MAP_FILE, "source_spelling"): ("the original code as the source spelled it", "string", "", ""),
    (CODE_MAP_FILE, "description"): ("the original code's concept_name (an OMOP CDM)", "string", "", ""),
    (CODE_MAP_FILE, "note"): ("how the files' text cells are written (first row)", "string", "", ""),
    (GENOTYPES_FILE, _ID): (_RELEASE_ID, "string", "", "R followed by a zero-padded number"),
}


def _dictionary(columns: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """One row per (file, variable) of `columns`; a genotype column is a SNP's minor-allele count."""
    rows = []
    for name, cols in columns.items():
        for col in cols:
            described = _DESCRIBED.get((name, col))
            if described is None and name == GENOTYPES_FILE:
                described = (f"minor-allele count of {col}", "integer", "alleles", "0;1;2;empty=missing")
            if described is None:  # a column no file of the gate writes: a bug, never an empty row
                raise KeyError(f"{name}: the data dictionary does not describe the column {col!r}")
            rows.append((name, col, *described))
    return pd.DataFrame(rows, columns=DICTIONARY_COLUMNS)


def _header(data: bytes) -> list[str]:
    return list(export.read_text_csv(data.split(b"\n", 1)[0] + b"\n").columns)


def dataset_files(
    release: Release,
    verification: Verification | None,
    adversary: Adversary,
    k: int,
    genotypes: pd.DataFrame,
    spellings: Mapping[str, Sequence[str]] | None = None,
    *,
    pseudonyms: Pseudonyms,
    gated: Mapping[str, bytes] | None = None,
    names: Mapping[str, str] | None = None,
) -> dict[str, bytes]:
    """The dataset's files (`DATASET_FILES`, module docstring) after the export gate
    (`export.release_files` raises `ExportRefused` for a release it would not write): the release
    file as `phenotypes.csv`, its code map, and the subjects, genotypes and data dictionary under
    `subject_ids`. `gated`: the gate's files of this release already made (a study's, checked against
    the sha256 it recorded), taken as they are after `export.gate` passes again. `names`: a CDM's
    concept names, the code map's descriptions."""
    if gated is None:
        gated = export.release_files(
            release, verification, adversary, k, spellings, pseudonyms=pseudonyms, names=names
        )
    else:
        export.gate(release, verification, adversary, k)
    ids = subject_ids(release, pseudonyms)
    geno = _genotype_frame(genotypes, ids)
    r = release.records
    with_events = np.bincount(r.event_patient, minlength=r.n_patients) > 0  # a row in the file
    coded = {ids[str(p)] for p in r.patient_ids[with_events]}
    files = {
        SUBJECTS_FILE: export.safe_csv_bytes(_subject_frame(ids, coded, set(geno[_ID]))),
        PHENOTYPES_FILE: gated[export.RELEASE_FILE],
        CODE_MAP_FILE: gated[export.CODE_MAP_FILE],
        GENOTYPES_FILE: export.safe_csv_bytes(geno),
    }
    columns = {name: _header(data) for name, data in files.items()}
    files[DICTIONARY_FILE] = export.safe_csv_bytes(_dictionary(columns))
    return {name: files[name] for name in DATASET_FILES}


def manifest_file(files: Mapping[str, bytes]) -> tuple[str, bytes]:
    """The name and bytes of the dataset's manifest (`sha256sum` format, as `write_dataset` writes it
    beside the files), for a copy of the dataset that is not written to a folder (the bundle's)."""
    name = export.manifest_path(dataset_paths(".")).name
    return name, export.manifest_text({n: hashlib.sha256(b).hexdigest() for n, b in files.items()}).encode()


def dataset_paths(folder: str | Path) -> dict[str, Path]:
    """The dataset's files in `folder`, by name (the manifest is `subjects.csv.sha256` beside them)."""
    return {name: Path(folder) / name for name in DATASET_FILES}


# ------------------------------------------------------------------------------------- reading
@dataclass(frozen=True, eq=False)
class RecipientDataset:
    """A dataset as its recipient reads it: the release (every subject a released record, those
    without codes as empty records), the genotypes and the subjects table, all in release ids."""

    release: Release
    genotypes: pd.DataFrame
    subjects: pd.DataFrame


def with_subjects(release: Release, ids: Sequence[str]) -> Release:
    """`release` with the patients `ids` added as released records without visits or events: the
    subjects without codes of a dataset (`has_codes` 0), or of a crosswalk (`phewas --crosswalk`)."""
    if not len(ids):
        return release
    r, n = release.records, len(ids)
    records = Records(
        patient_ids=np.concatenate([r.patient_ids, np.asarray(ids, dtype=object)]),
        items=r.items,
        visit_ptr=np.concatenate([r.visit_ptr, np.full(n, r.visit_ptr[-1])]).astype(np.int64),
        visit_ids=r.visit_ids,
        event_ptr=r.event_ptr,
        event_item=r.event_item,
        event_age=r.event_age,
        has_visits=r.has_visits,
    )
    return replace(release, records=records)


def read_dataset(folder: str | Path) -> RecipientDataset:
    """The dataset in `folder` as `dataset_files` wrote it, checked against its manifest; the release
    holds every subject (those with `has_codes` 0 as records without events). Raises DatasetError
    naming the file for a missing file, a file the manifest does not name, or a patient that is no
    subject."""
    from engine.io.loaders import load_genotypes

    paths = dataset_paths(folder)
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise DatasetError(f"{folder}: not a recipient's dataset, no file {', '.join(missing)}")
    problems = export.check_manifest(paths)
    if problems:
        raise DatasetError("; ".join(problems))
    subjects = export.read_text_csv(paths[SUBJECTS_FILE].read_bytes())
    if _ID not in subjects.columns:
        raise DatasetError(f"{paths[SUBJECTS_FILE]}: no column {_ID}")
    known = set(subjects[_ID])
    try:
        release = export.read_release_bytes(
            paths[PHENOTYPES_FILE].read_bytes(), paths[CODE_MAP_FILE].read_bytes(), "recipient's dataset"
        )
    except ValueError as exc:
        raise DatasetError(f"{paths[PHENOTYPES_FILE]}: {exc}") from None
    coded = [str(p) for p in release.records.patient_ids]
    _only_subjects(coded, known, paths[PHENOTYPES_FILE])
    genotypes = load_genotypes(paths[GENOTYPES_FILE]).data
    _only_subjects(genotypes[_ID].astype(str).tolist(), known, paths[GENOTYPES_FILE])
    release = with_subjects(release, sorted(known - set(coded), key=_by_number))
    return RecipientDataset(release, genotypes, subjects)


def _only_subjects(ids: Sequence[str], subjects: set[str], path: Path) -> None:
    outside = sorted(set(ids) - subjects)
    if outside:
        raise DatasetError(
            f"{path}: {len(outside)} patient(s) are not in {SUBJECTS_FILE}, e.g. {', '.join(outside[:5])}"
        )


def write_dataset(files: Mapping[str, bytes], folder: str | Path) -> dict[str, str]:
    """Write the dataset's files into `folder` as one set with its manifest
    (`export.write_release_files`); returns the sha256 of each file written, by path."""
    return export.write_release_files(files, dataset_paths(folder))
