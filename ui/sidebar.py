"""The shared sidebar: dataset, population / cohort groups, adversary (scope x knowledge), k.

`render()` runs on every page (app.py calls it before the page). It loads the chosen data, builds a
`ui.context.Context` and stores it in `st.session_state["context"]` (removed when nothing valid is
loaded), and the load's validation report in `st.session_state["load_report"]` for the Cohort page.

State: every choice lives under a fixed session-state key (`KEYS`), seeded with its default once and
re-assigned on each run so that a widget not drawn on the current page (the Cohort page's unknown-code
decision) keeps its value across page switches. Uploaded files are parsed in memory and memoized in
this session's state only (`ui.cache.memo`: never a global cache, never the disk); the shipped sample
and its variants are shared, read-only objects (`ui.cache.load_shipped`), and so are their groups.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from dataclasses import dataclass
from functools import partial
from typing import Any

import pandas as pd
import streamlit as st

from engine.adversary import KNOWLEDGE, SCOPE, Adversary, K, check_k
from engine.dataset import Dataset
from engine.io.loaders import DataError, Loaded, load_sample_checked, load_uploaded, warm_sample_labs
from engine.io.validation import Finding, ValidationReport
from engine.records import Records
from engine.report.glossary import help_for
from ui import cache, errors, import_view, literal, progress, state, style, teach
from ui.context import SIDEBAR_RAN, WHOLE_POPULATION, Context, cohort_is_population
from ui.data_choice import IMPORT, SAMPLE, SESSION_FILES, UPLOAD
from ui.parameter_widgets import choices_of, widget_kwargs
from ui.state import ABSENT
from ui.study import RESTORED_UPLOADS, forget_restored_uploads, load_options

UPLOAD_ROLES: tuple[tuple[str, str], ...] = (
    ("events", "Events (patient_id, code, [visit], [age])"),
    ("biobank", "Biobank patient ids (optional)"),
    ("cohort", "Cohort patient ids (optional)"),
    ("genotypes", "Genotypes (patient_id + SNP columns, optional)"),
    ("labs", "Lab orders (patient_id, day, lab, optional)"),
)
UPLOAD_TYPES = ["csv", "tsv", "txt", "parquet", "pq"]
# the k input holds every k of a study file or the command line (issue 38: one declaration, engine.adversary.K)
K_MIN, K_MAX = widget_kwargs(K)["min_value"], widget_kwargs(K)["max_value"]
K_DEFAULT = K.default

# session-state key -> default; all survive page switches (see module docstring)
KEYS: dict[str, Any] = {
    "dataset_choice": SAMPLE,
    "sample_variant": "icd9cm",  # engine.io.imports.SAMPLE_VARIANTS
    "population_group": "population",
    "cohort_group": "cohort",
    "adversary_scope": SCOPE.default,
    "adversary_knowledge": KNOWLEDGE.default,
    "k": K_DEFAULT,
    "unknown_codes": "keep",  # drawn on the Cohort page
    "drop_duplicates": False,  # drawn on the Cohort page
}
COHORT_LIST_SEEN = "_sidebar_cohort_list"  # fingerprint of the last cohort list seen (see _select_new_cohort)
KEPT_UPLOADS = "_sidebar_kept_uploads"  # role -> upload kept across a dataset-mode switch
_REOPENED_NOTE = "_sidebar_reopened_note"
CONTEXT, LOAD_REPORT = "context", "load_report"  # the run's Context (ui.context.current) and LoadState
state.declare(
    __name__,
    kept=KEYS,
    held={
        COHORT_LIST_SEEN: ABSENT,
        KEPT_UPLOADS: ABSENT,
        _REOPENED_NOTE: ABSENT,
        CONTEXT: ABSENT,
        LOAD_REPORT: ABSENT,
        SIDEBAR_RAN: False,
        SESSION_FILES: ABSENT,
    },
)


@dataclass(frozen=True, eq=False)
class LoadState:
    """What the Cohort page shows about the load: the label, the report, and whether it failed."""

    label: str
    report: ValidationReport
    failed: bool
    uploaded: bool


def apply_restore() -> None:
    """Before the widgets are drawn: load a reopened study's data the way it was loaded (its input
    files as uploads, or its sample variant / import, its load options and groups;
    `ui.study.take_restore`)."""
    from ui.study import take_restore

    wanted = take_restore()
    if wanted is None:
        return
    data, options, with_files = wanted
    if "unknown_codes" in options:
        st.session_state["unknown_codes"] = options["unknown_codes"]
    if "drop_duplicates" in options:
        st.session_state["drop_duplicates"] = options["drop_duplicates"] == "True"
    if with_files:
        st.session_state["dataset_choice"] = UPLOAD
    else:  # the ICD-9-CM sample records no load option of its own
        choices = import_view.restore(options) or {"dataset_choice": SAMPLE, "sample_variant": "icd9cm"}
        st.session_state.update(choices)
    st.session_state["population_group"] = data.population
    st.session_state["cohort_group"] = data.cohort


def apply_reopened() -> None:
    """A study file just reopened (`ui.study.reopen`) sets the adversary and k to the study's, before
    their widgets are drawn; the sidebar says so while they stay at those values."""
    from ui.study import take_reopened_attacker

    wanted = take_reopened_attacker()
    if wanted is not None:
        scope, knowledge, k = wanted
        k = check_k(k)  # a study file's k is in range (engine.study.study): never reset by the input
        st.session_state.update(adversary_scope=scope, adversary_knowledge=knowledge, k=k)
        st.session_state[_REOPENED_NOTE] = wanted


def hand_over_k(k: int) -> None:
    """Set the sidebar's k (issue 27: a release context chosen on the Report page sets its precedent's
    k). Called from a widget callback, so the value is in place before the k input draws on the next
    run. A k outside the input's range is a UserError naming it, never clamped (issue 38)."""
    st.session_state["k"] = check_k(int(k))


def _reopened_note(sb: Any) -> None:
    note = st.session_state.get(_REOPENED_NOTE)
    if note is None:
        return
    scope, knowledge, k = note
    here = (st.session_state.get("adversary_scope"), st.session_state.get("adversary_knowledge"))
    if here != (scope, knowledge) or st.session_state.get("k") != k:
        st.session_state.pop(_REOPENED_NOTE)  # changed since: the study follows the sidebar again
        return
    sb.info(
        f"Set from the reopened study file: adversary {Adversary(scope, knowledge).label}, k = {k}. "
        "Change them here to verify the study's releases under another attacker."
    )


def seed_state() -> None:
    """Before any widget: a reopened study's choices, then the one keep (`ui.state.keep`)."""
    apply_restore()  # a reopened study's data (its package's files, sample variant or import)
    apply_reopened()
    state.keep()  # every kept key: the sidebar's, the method views' and pages' (ui/persist.py), the import view's


# bounds of the sidebar's memos (ui.cache): the sample's load options (2 x 2), the variants' (5 x 4);
# one upload or import held per session; a dataset's groups; the cohort-within-population check
_SAMPLES, _VARIANTS, _LOADED, _GROUPS, _WITHIN = 4, 20, 1, 8, 4


def warm_labs_here() -> bool:
    """Whether the shipped sample's lab orders are read ahead once it is loaded
    (`engine.io.loaders.warm_sample_labs`, issue 24: the first opening of Lab orders in a server then
    finds them): `COHORTSHIELD_WARM_LABS` 1 or 0 says; unset, in a Streamlit server (`streamlit run`
    loaded its bootstrap; the tests' AppTest does not, and reads them on first use)."""
    setting = os.environ.get("COHORTSHIELD_WARM_LABS", "")
    if setting in ("0", "1"):
        return setting == "1"
    return "streamlit.web.bootstrap" in sys.modules


def read_labs_ahead(dataset: Dataset, after: threading.Thread) -> threading.Thread | None:
    """Read the shipped sample's lab orders once `after` (the script run that loaded it) has ended,
    and build the patient-days the Lab orders page opens on into the app's cache
    (`ui.views.labs.read_ahead`); the thread, or None when they are not deferred."""

    def days(frame: pd.DataFrame) -> None:
        from ui.views.labs import read_ahead  # the page's module, imported by the reading thread

        read_ahead(dataset)

    return warm_sample_labs(dataset, after, days)


def _load_sample(unknown_codes: str, drop_duplicates: bool) -> Loaded[Dataset]:
    loaded = load_sample_checked(unknown_codes=unknown_codes, drop_duplicates=drop_duplicates)  # type: ignore[arg-type]
    if warm_labs_here():  # after this script run has drawn its page
        read_labs_ahead(loaded.data, threading.current_thread())
    return loaded


def _sample(unknown_codes: str, drop_duplicates: bool) -> Loaded[Dataset]:
    return cache.load_shipped(
        "sample",
        (unknown_codes, drop_duplicates),
        lambda: _load_sample(unknown_codes, drop_duplicates),
        size=_SAMPLES,
        spinner="Loading and validating the shipped sample…",
    )


def _variant(variant: str, unknown_codes: str, drop_duplicates: bool) -> Loaded[Dataset]:
    from engine.io.imports import load_sample_variant

    return cache.load_shipped(
        "sample variant",
        (variant, unknown_codes, drop_duplicates),
        lambda progress=None: load_sample_variant(
            variant, unknown_codes=unknown_codes, drop_duplicates=drop_duplicates, progress=progress
        ),
        size=_VARIANTS,
        spinner="Loading and validating the sample variant…",
        # the paper-scale population's first load takes a minute: its stages under a bar (issue 36)
        background=(
            partial(
                progress.in_background,
                "Loading the 1,366,786-patient population",
                ("sample variant", (variant, unknown_codes, drop_duplicates)),
            )
            if variant == "paper"
            else None
        ),
    )


def _load_import(options: tuple[str, bool]) -> tuple[Loaded[Dataset] | None, DataError | None, str, str]:
    """The import the user applied on the Cohort page (`ui.import_view`), read once per (import,
    options) in this session only; (loaded, error, memo key, label)."""
    from engine.io.imports import import_dataset, load_import

    spec, name, data = import_view.applied()  # type: ignore[misc]
    listed = import_view.cohort_list() if spec.cohort.kind == "list" else None
    label = f"imported: {name or spec.location}"
    if data is None and spec.location:
        from engine.io.sql import is_url, redacted

        label = f"imported: {redacted(spec.location) if is_url(spec.location) else spec.location}"
    digest = None if data is None else hashlib.sha256(data).hexdigest()
    key = (spec, name, digest, None if listed is None else hashlib.sha256(listed[1]).hexdigest(), options)

    def read() -> tuple[Loaded[Dataset] | None, DataError | None]:
        try:
            got = load_import(
                spec, name=name, data=data, unknown_codes=options[0], drop_duplicates=options[1]
            )
            import_view.hold_normalization(got)
            upload = None if data is None else (name, data)
            return import_dataset(got, label, spec, upload=upload, cohort_list=listed), None
        except DataError as exc:
            return None, exc
        except Exception as exc:  # a malformed mapping (a UserError's text), else a bug's reference
            report = ValidationReport()
            report.add(
                Finding(
                    "error", name or spec.location, None, errors.message(exc), "a mapping", kind="bad_mapping"
                )
            )
            return None, DataError(report)

    loaded, error = cache.memo(
        "loaded", ("import", key), read, size=_LOADED, spinner="Reading and validating the source…"
    )
    return loaded, error, repr(key), label


def _load_uploads(
    files: dict[str, Any], options: tuple[str, bool]
) -> tuple[Loaded[Dataset] | None, DataError | None, str]:
    """Parse the uploaded files once per (files, options) in this session only."""
    key = (tuple((role, f.file_id, f.name, f.size) for role, f in files.items()), options)

    def read() -> tuple[Loaded[Dataset] | None, DataError | None]:
        try:
            loaded = load_uploaded(
                **{role: (f.name, f.getvalue()) for role, f in files.items()},
                unknown_codes=options[0],  # type: ignore[arg-type]
                drop_duplicates=options[1],
            )
            return loaded, None
        except DataError as exc:
            return None, exc
        except Exception as exc:  # a loader bug must still not show the user a traceback
            report = ValidationReport()
            report.add(
                Finding(
                    "error",
                    ", ".join(f.name for f in files.values()),
                    None,
                    f"could not read the files ({errors.message(exc)})",
                    "CSV or Parquet files as described on the Cohort page",
                    kind="unreadable",
                )
            )
            return None, DataError(report)

    loaded, error = cache.memo(
        "loaded", ("upload", key), read, size=_LOADED, spinner="Validating the uploaded files…"
    )
    return loaded, error, repr(key)


def _group(dataset_key: str, dataset: Dataset, group: str) -> Records:
    """A group's records, once per dataset and group: shared when the dataset is the shipped sample's
    (`ui.cache`), else in this session only."""

    def records() -> Records:
        return dataset.events if group == "population" else dataset.group_records(group)

    return cache.memo("groups", (dataset_key, group), records, size=_GROUPS, data=dataset)


def _within(cohort: Records, population: Records) -> bool:
    """Every cohort patient is a population patient (hash lookups; same object: trivially). Memoized
    on both groups' content fingerprints (every run of every page asks): shared for the sample's groups."""
    if cohort is population:
        return True

    def inside() -> bool:
        return bool((pd.Index(population.patient_ids).get_indexer(cohort.patient_ids) >= 0).all())

    key = (cohort.fingerprint, population.fingerprint)
    return cache.memo("within", key, inside, size=_WITHIN, data=(cohort, population))


def group_names(dataset: Dataset) -> list[str]:
    """Groups to choose from: `population` first, then the dataset's other groups as given."""
    return ["population", *[g for g in dataset.groups if g != "population"]]


def _ids_fingerprint(ids: Any) -> str:
    """sha256 of a list of patient ids, every id counted (a content key, never a sample)."""
    return hashlib.sha256("\x1f".join(map(str, ids)).encode()).hexdigest()


def _select_new_cohort(dataset: Dataset) -> None:
    """A cohort list that was not loaded before (a new upload, a changed file, another dataset) is
    selected as the cohort: loading the events first and the cohort list after must not leave the
    cohort on the whole population (issue 12, finding 2). Choosing another group afterwards stays."""
    seen = _ids_fingerprint(dataset.groups["cohort"]) if "cohort" in dataset.groups else None
    if seen is not None and st.session_state.get(COHORT_LIST_SEEN) != seen:
        st.session_state["cohort_group"] = "cohort"
    st.session_state[COHORT_LIST_SEEN] = seen


def _choose(key: str, options: list[str], preferred: str) -> None:
    """Reset a stored choice that is not among the options (e.g. after switching datasets)."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = preferred if preferred in options else options[-1]


def _upload_widgets(sb: Any) -> dict[str, Any]:
    """The upload widgets; a role left empty takes the file restored from a reopened study package
    (`ui.study.RESTORED_UPLOADS`) until the user forgets them or uploads another file."""
    restored = st.session_state.get(RESTORED_UPLOADS) or {}
    kept = st.session_state.get(KEPT_UPLOADS) or {}
    files = {}
    for role, label in UPLOAD_ROLES:
        f = sb.file_uploader(label, type=UPLOAD_TYPES, key=f"upload_{role}")
        if f is not None:
            kept.pop(role, None)  # a file uploaded again replaces the kept one
        else:
            f = kept.get(role) or restored.get(role)
        if f is not None:
            files[role] = f
    held = [f.name for r, f in files.items() if kept.get(r) is f]
    if held:
        sb.caption(literal.md("Kept from earlier in this session or your saved study: " + ", ".join(held)))
        if sb.button("Forget the kept files", key="forget_kept"):
            st.session_state.pop(KEPT_UPLOADS, None)
            st.rerun()
    used = [f.name for r, f in files.items() if restored.get(r) is f]
    if used:
        sb.caption(literal.md("Restored from the study file: " + ", ".join(used)))
        if sb.button("Forget the restored files", key="forget_restored"):
            forget_restored_uploads()
            st.rerun()
    return files


def keep_uploads(files: dict[str, Any]) -> None:
    """Hold these uploads as the session's kept uploads (a resumed session's stored files:
    `ui.resume`), by role."""
    st.session_state[KEPT_UPLOADS] = files


def _keep_uploads(choice: str) -> None:
    """Uploads survive a switch of dataset mode (issue 25): on the run that leaves "Upload files" the
    upload widgets still hold their files (Streamlit drops a widget's state only after a run that did
    not draw it); they are kept by role (`KEPT_UPLOADS`) and `_upload_widgets` takes them back."""
    if choice == UPLOAD:
        return
    kept = dict(st.session_state.get(KEPT_UPLOADS) or {})
    for role, _label in UPLOAD_ROLES:
        f = st.session_state.get(f"upload_{role}")
        if f is not None:
            kept[role] = f
    if kept:
        st.session_state[KEPT_UPLOADS] = kept


def render() -> Context | None:
    """Draw the sidebar and store the Context (or remove it when nothing valid is loaded)."""
    st.session_state[SIDEBAR_RAN] = True  # this session runs through app.py (ui/context.py)
    seed_state()
    style.apply()  # metric labels and values wrap, never cut (ui/style.py)
    sb = st.sidebar
    sb.toggle("Teach mode (for classes)", key=teach.KEY, help=_TEACH_HELP)  # its owner: ui.teach
    sb.header("Data")
    choice = sb.radio("Dataset", (SAMPLE, UPLOAD, IMPORT), key="dataset_choice", horizontal=True)
    _keep_uploads(choice)
    options = (st.session_state["unknown_codes"], bool(st.session_state["drop_duplicates"]))
    loaded: Loaded[Dataset] | None = None
    variant = "icd9cm"
    if choice == SAMPLE:
        from engine.io.imports import SAMPLE_VARIANTS

        variant = sb.selectbox(
            "Sample variant",
            list(SAMPLE_VARIANTS),
            key="sample_variant",
            format_func=import_view.variant_label,
            help="The same synthetic patients in ICD-9-CM, ICD-10-CM, mixed ICD-9/10 codes, an OMOP CDM "
            "DuckDB database (first 5,000 patients) or a MEDS dataset; or a population at the scale of "
            "Heatherly 2013 (1,366,786 patients, `python -m engine sample --scale paper --out "
            "sample_data/paper`; its first load takes about 20 s on a quiet machine, about a minute on a busy one, "
            "its stages on a progress bar).",
        )
    if choice == SAMPLE and variant != "icd9cm":
        label = f"sample ({import_view.variant_label(variant)})"
        try:
            loaded = _variant(variant, *options)
        except FileNotFoundError as exc:
            return _fail(sb, LoadState(label, ValidationReport(), True, False), str(exc))
        except DataError as exc:
            return _fail(sb, LoadState(label, exc.report, True, False), str(exc))
        variant_key = f"variant:{variant}:{options}"

        def get_group(g: str) -> Records:
            return _group(variant_key, loaded.data, g)

    elif choice == IMPORT:
        if import_view.applied() is None:
            st.session_state.pop("context", None)
            st.session_state["load_report"] = LoadState("import", ValidationReport(), True, True)
            sb.info(
                "Choose the source, map its columns, choose its cohort and press Load on the Cohort page."
            )
            return None
        loaded, error, dataset_key, label = _load_import(options)
        if error is not None:
            return _fail(sb, LoadState(label, error.report, True, True), None)

        def get_group(g: str) -> Records:
            return _group(dataset_key, loaded.data, g)

    elif choice == SAMPLE:
        try:
            loaded = _sample(*options)
        except FileNotFoundError as exc:
            return _fail(sb, LoadState("shipped sample", ValidationReport(), True, False), str(exc))
        except DataError as exc:
            return _fail(sb, LoadState("shipped sample", exc.report, True, False), str(exc))

        def get_group(g: str) -> Records:
            return _group(f"sample:{options}", loaded.data, g)

    else:
        files = _upload_widgets(sb)
        if "events" not in files:
            st.session_state.pop("context", None)
            st.session_state["load_report"] = LoadState("uploaded files", ValidationReport(), True, True)
            sb.info("Upload an events file (CSV or Parquet) to begin.")
            return None
        loaded, error, dataset_key = _load_uploads(files, options)
        if error is not None:
            return _fail(sb, LoadState(f"uploaded: {files['events'].name}", error.report, True, True), None)

        def get_group(g: str) -> Records:
            return _group(dataset_key, loaded.data, g)

    assert loaded is not None
    dataset = loaded.data
    st.session_state[SESSION_FILES] = files if choice == UPLOAD else {}
    st.session_state["load_report"] = LoadState(dataset.name, loaded.report, False, choice != SAMPLE)
    if loaded.report.warnings:
        sb.caption(f"{len(loaded.report.warnings)} validation warning(s): see the Cohort page.")

    sb.header("Groups")
    names = group_names(dataset)
    _select_new_cohort(dataset)
    _choose("population_group", names, "population")
    _choose("cohort_group", names, "cohort")
    pop_group = sb.selectbox("Population", names, key="population_group")
    cohort_group = sb.selectbox("Cohort (the data to share)", names, key="cohort_group")
    population, cohort = get_group(pop_group), get_group(cohort_group)
    if not _within(cohort, population):
        return _fail(
            sb,
            st.session_state["load_report"],
            f"The cohort ({cohort_group}) must lie within the population ({pop_group}): choose a larger "
            "population or a smaller cohort.",
            keep_report=True,
        )

    sb.header("Adversary")
    scope = sb.radio("Scope", choices_of(SCOPE), key="adversary_scope", horizontal=True, help=_SCOPE_HELP)
    knowledge = sb.radio(
        "Knowledge",
        choices_of(KNOWLEDGE),
        key="adversary_knowledge",
        horizontal=True,
        format_func=lambda s: s.replace("_", " "),
        help=_KNOWLEDGE_HELP,
    )
    adversary = Adversary(scope, knowledge)
    sb.caption(adversary.describe())
    k = int(sb.number_input("k", **widget_kwargs(K, help=_K_HELP), step=1, key="k"))
    _reopened_note(sb)
    if k > cohort.n_patients:
        sb.error(
            f"k = {k} exceeds the cohort size ({cohort.n_patients} patients): no record can have "
            f"{k} indistinguishable candidates. Choose k ≤ {cohort.n_patients}."
        )
    if cohort_is_population(cohort, population):  # an import's cohort is chosen on the Cohort page
        sb.warning(
            (import_view.WHOLE_SOURCE if choice == IMPORT else WHOLE_POPULATION).format(n=cohort.n_patients)
        )
    ctx = Context(
        dataset=dataset,
        population_group=pop_group,
        cohort_group=cohort_group,
        population=population,
        cohort=cohort,
        adversary=adversary,
        k=k,
        load_options=tuple(load_options().items()),
    )
    st.session_state["context"] = ctx
    return ctx


def _fail(sb: Any, state: LoadState, message: str | None, keep_report: bool = False) -> None:
    """No valid context: say why (one line per error, never a traceback)."""
    st.session_state.pop("context", None)
    if not keep_report:
        st.session_state["load_report"] = state
    if message:
        literal.error(message, sb)
    for finding in state.report.errors[:5]:
        literal.error(finding, sb)  # findings quote file names and values: shown literally
    if len(state.report.errors) > 5:
        sb.error(f"… and {len(state.report.errors) - 5} more error(s): see the Cohort page.")
    return None


_SCOPE_HELP = help_for("k_anonymity", "k_map")  # scope cohort: k-anonymity; population: k-map
_KNOWLEDGE_HELP = help_for("single_visit", "all_visits", "whole_record")
_TEACH_HELP = "Each page then opens with two lines on what it shows and one suggested thing to try."
_K_HELP = help_for("k")
