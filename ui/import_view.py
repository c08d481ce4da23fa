"""The import view (issue 14): choose the source kind, see a preview of the raw rows, map columns to
patient / code / visit or date / age / vocabulary (with suggestions), opt in to code normalization,
load, and see the normalization and validation reports.

Drawn on the Cohort page when the sidebar's dataset is "Import a source". Nothing is read until the
user presses "Load": the view then stores what to load (`APPLIED`: an `engine.io.imports.ImportSpec`
and, for an uploaded file, its name and bytes, in this session's memory only) and the sidebar loads it
on every page (`ui.sidebar`). The spec is written into the study's load options (`load_options`) and
a reopened study's options put back into the widgets (`restore`).

Long-form and Excel files come as an upload or a path on the server; OMOP, MEDS and i2b2 as a path
(folder or DuckDB file) or, for OMOP and i2b2, a database URL (`postgresql+psycopg://user@host/db`).
Switching the source kind clears the location, sheet, schema, connection, mapping and group choices
of the previous kind (`_kind_changed`). Column names, codes, ids and file names from the source are
shown in tables or escaped (`ui.literal`).

The cohort (issue 26, finding 6), for every kind (`engine.dataset.CohortSpec`): the whole source (the
population is the same patients), a list of patient ids uploaded here (kept in this session's memory
only, `COHORT_LIST`; a reopened study asks for it again), or a group the source defines
(`engine.io.groups`: OMOP's cohort table, i2b2's patient sets, MEDS subject splits, a column of a
long-form file). The engine makes the cohort (`engine.io.imports.import_dataset`); the sidebar hands
it over (`cohort_list`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd
import streamlit as st

from engine.dataset import COHORT_KINDS, CohortSpec
from engine.io.deployment import CONNECTION_PREFIX, roots_text
from engine.io.errors import UserError
from engine.io.groups import WHERE as GROUPS_WHERE
from engine.io.groups import SourceGroups
from engine.io.imports import IMPORT_KINDS, SAMPLE_VARIANTS, ImportSpec, preview, sheet_names, source_groups
from engine.io.mapping import MODEL_COLUMNS, REQUIRED, ColumnMapping, suggest_mapping
from engine.io.validation import Finding, ValidationReport
from ui import cache, errors, literal, state
from ui.data_choice import IMPORT, SAMPLE
from ui.literal import md
from ui.state import ABSENT, LAZY

APPLIED = "_import_applied"  # (ImportSpec, upload name, upload bytes or None)
CONFIRM = "_import_confirm"  # a reopened study's import, read only once the user confirms it
NORMALIZATION = "_import_normalization"  # the last load's normalization report (frame)
# the cohort of the import (module docstring)
COHORT_KIND = "import_cohort_kind"  # radio: whole / list / group (engine.dataset.COHORT_KINDS)
COHORT_GROUP = "import_cohort_group"  # the chosen group of the source
COHORT_COLUMN = "import_cohort_column"  # a long-form file's group column
COHORT_UPLOAD = "import_cohort_upload"  # the cohort list's file uploader
COHORT_LIST = "_import_cohort_list"  # (name, bytes) of the list applied by Load, this session only
COHORT_WANTED = "_import_cohort_wanted"  # a reopened study's list, by name, to be uploaded again
NONE = "(none)"
KIND_LABELS = dict(IMPORT_KINDS)
MODEL_HELP = {
    "patient_id": "the patient (MRN, person id)",
    "code": "the diagnosis code (ICD-9-CM or ICD-10-CM)",
    "visit": "the visit or encounter (an id or a date)",
    "age": "the patient's age at the event (whole years)",
    "vocabulary": "a column naming each code's vocabulary (ICD9CM / ICD10CM, 9 / 10)",
    "date": "the event date (for codes both vocabularies read: before / after 2015-10-01)",
}
OMOP_CODES = "import_omop_codes"  # radio: the CDM's codes (`ImportSpec.omop_codes`, issue 37)
OMOP_DOMAINS = "import_domains"  # multiselect: its tables, with standard concepts (`ImportSpec.domains`)
OMOP_DRUG_LEVEL = (
    "import_drug_level"  # radio: drugs as ingredients or clinical drugs (`ImportSpec.drug_level`)
)
# widget keys of the view (kept across page switches by `ui.state.keep`)
KEYS = (
    "import_kind",
    "import_location",
    "import_sheet",
    "import_schema",
    "import_normalize",
    COHORT_KIND,
    COHORT_GROUP,
    COHORT_COLUMN,
    OMOP_CODES,
    OMOP_DOMAINS,
    OMOP_DRUG_LEVEL,
)
state.declare(
    __name__,
    kept=dict.fromkeys((*KEYS, *(f"import_map_{m}" for m in MODEL_COLUMNS)), LAZY),
    held=dict.fromkeys((APPLIED, CONFIRM, NORMALIZATION, COHORT_LIST, COHORT_WANTED), ABSENT),
)
# what belongs to one source kind: cleared when the kind changes (`_kind_changed`)
OMOP_DOMAIN_LABELS = {
    "condition": "condition",
    "procedure": "procedure",
    "drug": "drug",
    "measurement": "measurement (the LOINC concept measured; values are not part of the known set)",
    "observation": "observation",
}
OMOP_DRUG_LEVEL_LABELS = {
    "ingredient": "RxNorm ingredients",
    "clinical": "RxNorm clinical drugs (ingredient, strength and form)",
}
OMOP_CODE_LABELS = {
    "source": "ICD source values (condition_source_value)",
    "standard": "Standard concepts (SNOMED, CPT4, RxNorm, LOINC; the CDM's own hierarchy)",
    "icd": "Standard conditions mapped back to ICD codes (concept_relationship; for PheWAS)",
}
KIND_KEYS = (
    "import_location",
    "import_sheet",
    "import_schema",
    "import_connection",
    OMOP_CODES,
    OMOP_DOMAINS,
    OMOP_DRUG_LEVEL,
    COHORT_GROUP,
    COHORT_COLUMN,
    *(f"import_map_{m}" for m in MODEL_COLUMNS),
)
WHOLE_SOURCE = (
    "The cohort is the whole source ({n:,} patients): every release will hold all of them. To share a "
    "smaller cohort, choose it under Cohort on the Cohort page (a list of patient ids or a group of the "
    "source) and press Load."
)


def applied() -> tuple[ImportSpec, str, bytes | None] | None:
    """What the user last chose to load (None before the first "Load")."""
    return st.session_state.get(APPLIED)


def apply(spec: ImportSpec, name: str, data: bytes | None) -> None:
    """Load this import on the next run, as "Load" does (a resumed session's stored upload)."""
    st.session_state[APPLIED] = (spec, name, data)


def cohort_list() -> tuple[str, bytes] | None:
    """The cohort list (file name, bytes) applied with the import, for the sidebar's load (None when
    the cohort is no list, or when a reopened study's list was not uploaded again)."""
    return st.session_state.get(COHORT_LIST)


def _kind_changed() -> None:
    """The source kind changed: the previous kind's location, sheet, schema, connection, mapping and
    group choices no longer apply (a folder of OMOP tables is no long-form file)."""
    for key in KIND_KEYS:
        st.session_state.pop(key, None)


def load_options() -> dict[str, str]:
    """The import's options for the study's load options (`ImportSpec.to_options`): the applied
    import when the dataset is an import, the sample variant when it is the sample."""
    choice = st.session_state.get("dataset_choice")
    if choice == IMPORT:
        got = applied()
        if got is not None:
            spec, name, data = got
            opts = spec.to_options()
            if data is not None:
                opts["location"] = f"uploaded: {name}"
            return opts
    variant = st.session_state.get("sample_variant", "icd9cm")
    if choice == SAMPLE and variant != "icd9cm":  # the ICD-9-CM sample records nothing new
        return {"sample_variant": variant}
    return {}


def restorable(options: dict[str, str]) -> bool:
    """Whether `restore` loads a study's data with no upload: a sample variant, or an import from a
    path or URL (an import of an uploaded file needs the file again; a cohort list too, which the
    view then asks for, by name)."""
    if "sample_variant" in options and "source" not in options:
        return True
    try:
        spec = ImportSpec.from_options(options)
    except UserError:  # a malformed recorded mapping
        return False
    return spec is not None and bool(spec.location) and not spec.location.startswith("uploaded: ")


def restore(options: dict[str, object]) -> dict[str, str] | None:
    """Put a study's recorded import into the widgets and apply it (for a path or URL; an uploaded
    file must be uploaded again). Returns the sidebar's choices for it (`dataset_choice`, and
    `sample_variant` for a sample variant), which the sidebar, their owner, sets; None when the
    options record neither."""
    if "sample_variant" in options and "source" not in options:
        return {"dataset_choice": SAMPLE, "sample_variant": str(options["sample_variant"])}
    spec = ImportSpec.from_options(options)
    if spec is None:
        return None
    st.session_state["import_kind"] = spec.source
    st.session_state["import_location"] = "" if spec.location.startswith("uploaded: ") else spec.location
    st.session_state["import_sheet"] = spec.sheet or None
    st.session_state["import_schema"] = spec.schema
    st.session_state["import_normalize"] = spec.normalize
    st.session_state[OMOP_CODES] = spec.omop_codes
    st.session_state[OMOP_DOMAINS] = list(spec.domains)
    st.session_state[OMOP_DRUG_LEVEL] = spec.drug_level
    mapping = ColumnMapping.parse(spec.mapping).as_dict() if spec.mapping else {}
    for m in MODEL_COLUMNS:
        st.session_state[f"import_map_{m}"] = mapping.get(m, NONE)
    st.session_state[COHORT_KIND] = spec.cohort.kind
    st.session_state[COHORT_GROUP] = spec.cohort.name if spec.cohort.kind == "group" else None
    st.session_state[COHORT_COLUMN] = spec.cohort.column or NONE
    st.session_state.pop(COHORT_LIST, None)
    if spec.cohort.kind == "list":  # never stored: the view asks for it by name
        st.session_state[COHORT_WANTED] = spec.cohort.name
    else:
        st.session_state.pop(COHORT_WANTED, None)
    if st.session_state["import_location"]:  # never read by itself: the user confirms (`render`)
        st.session_state.pop(APPLIED, None)
        st.session_state[CONFIRM] = spec
    return {"dataset_choice": IMPORT}


def _mapping_widgets(columns: list[str], where: Any) -> str | None:
    """One select box per model column, seeded with the suggestions; the mapping text, or None
    (with the reason shown) while a required column is unmapped or a column is used twice."""
    suggested = suggest_mapping(columns)
    options = [NONE, *columns]
    cols = where.columns(3)
    chosen: dict[str, str] = {}
    for i, model in enumerate(MODEL_COLUMNS):
        key = f"import_map_{model}"
        if st.session_state.get(key) not in options:  # a new file: take the suggestion
            st.session_state[f"import_map_{model}"] = suggested.get(model, NONE)
        label = f"{model}{' (required)' if model in REQUIRED else ''}"
        value = cols[i % 3].selectbox(label, options, key=key, help=MODEL_HELP[model])
        if value != NONE:
            chosen[model] = value
    if suggested:
        where.caption(
            "Suggested from the header: "
            + md(", ".join(f"{m} = {c}" for m, c in suggested.items()))
            + ". Only a suggestion: check each choice."
        )
    text = ",".join(f"{m}={c}" for m, c in chosen.items())
    try:
        ColumnMapping.parse(text)
    except Exception as exc:  # a UserError's message, else a reference (ui/errors.py)
        errors.show(exc, where, warning=True)
        return None
    where.code(f"--map {text}", language=None)  # the same mapping on the command line
    return text


def render(where: Any = st) -> None:
    """The import view (module docstring)."""
    where.header("Import a source")
    pending = st.session_state.get(CONFIRM)
    if pending is not None:
        where.info(
            md(
                f"The reopened study reads its data from {pending.location} ({KIND_LABELS.get(pending.source, '')}); "
                f"its cohort: {pending.cohort.describe()}. Nothing is read until you confirm."
            )
        )
        if where.button("Read the study's data", type="primary", key="import_confirm"):
            st.session_state.pop(CONFIRM, None)
            st.session_state[APPLIED] = (pending, "", None)
            st.rerun()
    kinds = [k for k, _ in IMPORT_KINDS]
    if st.session_state.get("import_kind") not in kinds:
        st.session_state["import_kind"] = "long"
    kind = where.selectbox(
        "Source kind",
        kinds,
        key="import_kind",
        format_func=lambda k: KIND_LABELS[k],
        on_change=_kind_changed,
        help="Changing the kind clears the location and the choices made for the previous kind.",
    )
    name, data = "", None
    location = ""
    if kind in ("long", "excel"):
        types = ["xlsx", "xlsm"] if kind == "excel" else ["csv", "tsv", "txt", "parquet", "pq"]
        up = where.file_uploader("Upload the file", type=types, key=f"import_upload_{kind}")
        if up is not None:
            name, data = up.name, up.getvalue()
        else:
            location = where.text_input(
                "… or a file path on this server",
                key="import_location",
                help=f"Only inside the data folders: {roots_text()}",
            ).strip()
    else:
        hint = {
            "omop": "a folder of OMOP CDM v5.4 tables (person.csv, condition_occurrence.parquet, …) or a "
            "DuckDB file, or a database connection the administrator named",
            "meds": "a MEDS dataset folder (data/*.parquet under it)",
            "i2b2": "a folder of i2b2 tables (observation_fact.csv, patient_dimension.csv, …) or a DuckDB "
            "file, or a database connection the administrator named",
        }[kind]
        hint += f". Only inside: {roots_text()}"
        named = _connections() if kind in ("omop", "i2b2") else []
        if named:
            choice = where.selectbox(
                "Database connection (defined by the administrator)", [NONE, *named], key="import_connection"
            )
            if choice != NONE:
                st.session_state["import_location"] = f"{CONNECTION_PREFIX}{choice}"
        location = where.text_input("Path on this server", key="import_location", help=hint).strip()
        where.caption(hint)
        if kind in ("omop", "i2b2"):
            where.text_input("Schema (optional)", key="import_schema")
    omop_codes, domains, drug_level = (
        _omop_widgets(where) if kind == "omop" else ("source", ("condition",), "ingredient")
    )
    if data is None and not location:
        where.info("Upload a file or give a path to see a preview.")
        return
    sheet = None
    if kind == "excel" or (data is not None and name.lower().endswith((".xlsx", ".xlsm"))):
        raw = data if data is not None else _read_path(location)
        sheets = sheet_names(name or location, raw) if raw is not None else []
        if sheets:
            if st.session_state.get("import_sheet") not in sheets:
                st.session_state["import_sheet"] = sheets[0]
            sheet = where.selectbox("Sheet", sheets, key="import_sheet")
    schema = (st.session_state.get("import_schema") or "").strip() or None
    where.subheader("Preview of the raw rows")
    try:
        shown, head = preview(kind, location=location, name=name, data=data, sheet=sheet, schema=schema)
    except Exception as exc:
        errors.show(exc, where)
        return
    where.caption(f"First {len(head)} rows of {md(shown)} as written in the source.")
    where.dataframe(head, hide_index=True, width="stretch")
    mapping = ""
    if kind in ("long", "excel"):
        where.subheader("Columns")
        got = _mapping_widgets([str(c) for c in head.columns], where)
        if got is None:
            return
        mapping = got
    else:
        where.caption(
            {
                "omop": "Columns are fixed by OMOP CDM v5.4: patient = person_id, code = "
                "condition_source_value (vocabulary from the source concept) or the standard concept "
                "chosen under Codes, visit = visit_start_date, age from year_of_birth.",
                "meds": "Columns are fixed by MEDS: patient = subject_id, code = code (vocabulary from its "
                "prefix), visit = the day of time, age from MEDS_BIRTH.",
                "i2b2": "Columns are fixed by i2b2: patient = patient_num, code = concept_cd (ICD9: / ICD10: "
                "scheme), visit = the encounter's start_date, age from birth_date.",
            }[kind]
        )
    where.checkbox(
        "Normalize code spellings (undotted 25000 → 250.00, prefixes ICD9:250.00 → 250.00, case, spaces); "
        "every rewrite is reported",
        key="import_normalize",
    )
    spec = ImportSpec(
        source=kind,
        location=location if data is None else "",
        mapping=mapping,
        sheet=sheet or "",
        schema=schema or "",
        normalize=bool(st.session_state.get("import_normalize")),
        omop_codes=omop_codes,
        domains=domains,
        drug_level=drug_level,
    )
    columns = (
        [str(c) for c in head.columns if str(c) != ColumnMapping.parse(mapping).as_dict()["patient_id"]]
        if mapping
        else []
    )
    chosen = _cohort_widgets(where, spec, name, data, columns)
    current = applied()
    if chosen is not None:
        cohort, listed = chosen
        spec = replace(spec, cohort=cohort)
        if where.button("Load", type="primary", key="import_load"):
            st.session_state[APPLIED] = (spec, name, data)
            if listed is None:
                st.session_state.pop(COHORT_LIST, None)
            else:
                st.session_state[COHORT_LIST] = listed
                st.session_state.pop(COHORT_WANTED, None)
            st.rerun()
        if current is not None and (current[0] != spec or current[1] != name or _list_changed(listed)):
            where.info("The choices above differ from the data loaded now: press Load to read them.")
    _normalization_report(where)


def _omop_widgets(where: Any) -> tuple[str, tuple[str, ...], str]:
    """The CDM's codes and, with standard concepts, its domains and (with drugs) the drugs' RxNorm
    level (issue 37; `engine.io.omop.read_omop`)."""
    from engine.io.omop import DOMAINS, DRUG_LEVELS

    if st.session_state.get(OMOP_CODES) not in OMOP_CODE_LABELS:
        st.session_state[OMOP_CODES] = "source"
    codes = where.radio("Codes", list(OMOP_CODE_LABELS), key=OMOP_CODES, format_func=OMOP_CODE_LABELS.get)
    if codes != "standard":
        return codes, ("condition",), "ingredient"
    if not st.session_state.get(OMOP_DOMAINS):
        st.session_state[OMOP_DOMAINS] = ["condition"]
    chosen = where.multiselect(
        "Domains", list(DOMAINS), key=OMOP_DOMAINS, format_func=lambda d: OMOP_DOMAIN_LABELS.get(d, d)
    )
    domains = tuple(d for d in DOMAINS if d in chosen) or ("condition",)
    if "drug" not in domains:
        return codes, domains, "ingredient"
    if st.session_state.get(OMOP_DRUG_LEVEL) not in DRUG_LEVELS:
        st.session_state[OMOP_DRUG_LEVEL] = "ingredient"
    level = where.radio(
        "Drugs as", list(DRUG_LEVELS), key=OMOP_DRUG_LEVEL, format_func=OMOP_DRUG_LEVEL_LABELS.get
    )
    return codes, domains, str(level)


def _list_changed(listed: tuple[str, bytes] | None) -> bool:
    held = cohort_list()
    return listed is not None and (held is None or held[1] != listed[1])


def _cohort_widgets(
    where: Any, spec: ImportSpec, name: str, data: bytes | None, columns: list[str]
) -> tuple[CohortSpec, tuple[str, bytes] | None] | None:
    """The cohort of the import (module docstring): (CohortSpec, the uploaded list or None), or None
    (with the reason shown) while the choice is incomplete: no list uploaded, no group chosen."""
    where.subheader("Cohort")
    labels = dict(COHORT_KINDS)
    if st.session_state.get(COHORT_KIND) not in labels:
        st.session_state[COHORT_KIND] = "whole"
    kind = where.radio(
        "The cohort (the patients to share)",
        list(labels),
        key=COHORT_KIND,
        format_func=labels.get,
        horizontal=True,
    )
    if kind == "whole":
        where.caption(
            "The whole source is the cohort, and the population is the same patients: every release holds "
            "every patient of the source. To share fewer patients, upload their list or choose a group."
        )
        return CohortSpec(), None
    if kind == "list":
        return _list_widgets(where)
    return _group_widgets(where, spec, name, data, columns)


def _list_widgets(where: Any) -> tuple[CohortSpec, tuple[str, bytes] | None] | None:
    up = where.file_uploader(
        "Patient ids of the cohort (CSV or TXT: one id per line, or a column patient_id or person_id)",
        type=["csv", "txt", "tsv"],
        key=COHORT_UPLOAD,
    )
    wanted = st.session_state.get(COHORT_WANTED)
    if up is not None:
        listed = (up.name, up.getvalue())
    else:
        listed = cohort_list()  # the list loaded before (the uploader forgets it on another page)
        if listed is not None:
            where.caption(md(f"The list {listed[0]} loaded earlier; upload another to replace it."))
    if listed is None:
        if wanted:
            where.warning(
                md(
                    f"The reopened study's cohort is the list {wanted}: upload it again (uploaded files are "
                    "not kept with a study)."
                )
            )
        else:
            where.info("Upload the list of the cohort's patient ids, then press Load.")
        return None
    where.caption(
        "Every id must be a patient of the source: ids not in it are counted and named on Load, and the "
        "load is refused until the list is corrected."
    )
    return CohortSpec("list", listed[0]), listed


def _group_widgets(
    where: Any, spec: ImportSpec, name: str, data: bytes | None, columns: list[str]
) -> tuple[CohortSpec, None] | None:
    column = ""
    if spec.source in ("long", "excel"):
        if st.session_state.get(COHORT_COLUMN) not in [NONE, *columns]:
            st.session_state[COHORT_COLUMN] = NONE
        column = where.selectbox(
            "Group column (each of its values is a group of patients)", [NONE, *columns], key=COHORT_COLUMN
        )
        if column == NONE:
            where.info("Choose the column whose values name the groups.")
            return None
    got = _groups(spec, name, data, column)
    for finding in got.report.errors[:5]:
        literal.error(finding, where)
    if not got.report.ok:
        return None
    if not got.groups:
        where.info(
            f"This source defines no groups (read from: {GROUPS_WHERE[spec.source]}). Upload a list of "
            "patient ids instead."
        )
        return None
    names = list(got.groups)
    if st.session_state.get(COHORT_GROUP) not in names:
        st.session_state[COHORT_GROUP] = names[0]
    group = where.selectbox(
        "Group of the source",
        names,
        key=COHORT_GROUP,
        format_func=lambda g: f"{g} ({len(got.groups[g]):,} patients)",
    )
    where.caption(md(f"{len(names)} group(s) read from {got.where}."))
    return CohortSpec("group", str(group), column if column != NONE else ""), None


def _groups(spec: ImportSpec, name: str, data: bytes | None, column: str) -> SourceGroups:
    """The source's groups, read once per source and column in this session (`ui.cache`, the last
    source's only)."""
    import hashlib

    digest = None if data is None else hashlib.sha256(data).hexdigest()
    key = (replace(spec, cohort=CohortSpec(), normalize=False), name, digest, column)

    def read() -> SourceGroups:
        try:
            return source_groups(spec, name=name, data=data, column=column)
        except UserError as exc:  # a limit exceeded while reading: its message, one line
            report = ValidationReport()
            report.add(Finding("error", name or spec.location, None, errors.message(exc), "", kind="refused"))
            return SourceGroups(report=report)

    return cache.memo("import groups", key, read, size=1, spinner="Reading the source's groups…")


def _read_path(location: str) -> bytes | None:
    """A workbook on the server, only inside the data roots (`engine.io.deployment`); None otherwise
    (the preview then names the refusal)."""
    from engine.io.deployment import server_path
    from engine.io.errors import UserError
    from engine.io.loaders import Source

    try:
        p = server_path(location)
        return Source.from_path(p).data if p.is_file() else None
    except UserError:
        return None


def _connections() -> list[str]:
    """The names of the administrator's database connections (never their URLs)."""
    from engine.io.deployment import connections
    from engine.io.errors import UserError

    try:
        return sorted(connections())
    except UserError:
        return []


def _normalization_report(where: Any) -> None:
    frame = st.session_state.get(NORMALIZATION)
    if frame is None:
        return
    where.subheader("Code normalization")
    if len(frame) == 0:
        where.caption("No spelling was rewritten.")
        return
    where.caption("What normalization rewrote, by kind, with counts and examples (original → code):")
    where.dataframe(frame, hide_index=True, width="stretch")


def variant_label(key: str) -> str:
    return SAMPLE_VARIANTS.get(key, key)


def normalization_frame(source_data: Any) -> pd.DataFrame | None:
    """The normalization report of a load (None when nothing was read)."""
    events = getattr(source_data, "events", None)
    return None if events is None else events.normalization.to_frame()


def hold_normalization(source_data: Any) -> None:
    """Keep the last load's normalization report for the view (`_normalization_report`)."""
    st.session_state[NORMALIZATION] = normalization_frame(source_data)
