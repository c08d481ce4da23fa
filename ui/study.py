"""The session's study (issue 13): the releases the user made, explicitly, on the data loaded now.

The study (`engine.study.study.Study`) lives in `st.session_state["study"]`; beside it, per release name,
the `Release` object and the files the export gate wrote (name -> bytes), for the pages and the
downloads (`st.session_state["study_made"]`). Its `DataRef` comes from the sidebar: the events'
content fingerprint, the groups chosen (their ids' fingerprints), the inputs' sha256
(`Dataset.sources`) and the load options (unknown codes, duplicates); its adversary and k are the
sidebar's, re-read on every run.

A release enters the study only through `add` (the "Add to study" button of a method view), and only
when verified under the sidebar's adversary and k (`Study.admit`: one that is not is refused with its
verdict); it leaves through `remove` (the Report page's "Remove" per release); `undo` and `redo`
step through the last `HISTORY_SIZE` edits (add, remove, public). Viewing a page never adds, replaces
or removes one. Every release download of a method view passes the joint gate (`joint_block`, issue
35): the release with those of the study the study's recipient holds, judged together under linkage. Releases made from other data or groups stay in the
study (and in its file) but are not shown as current; the pages say how many there are (`others_note`).
Every page that shows a release shows it verified again under the sidebar's adversary and k
(`reverify`: the distinguishability memoized per release content, population and adversary, k only
thresholding it). Memos go through `ui.cache`: a preview of the shipped sample is shared by the
server's sessions, anything derived from an upload stays in this session.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from engine.adversary import Adversary
from engine.release import Release
from engine.risk import Verification
from engine.study.package import StudyInput, read_study_file, write_package
from engine.study.runs import MethodSettings, RunInputs
from engine.study.study import (
    DataRef,
    RebuildCheck,
    Study,
    StudyError,
    StudyRelease,
    data_ref,
    make_release,
    rebuild,
    sha256_of,
)
from ui import cache, errors, literal, state
from ui import progress as progress_ui
from ui.context import Context
from ui.data_choice import SESSION_FILES
from ui.fingerprints import release_key
from ui.state import ABSENT
from ui.verifications import session_pseudonym_key, verification

STUDY, MADE = "study", "study_made"
REOPENED_ATTACKER = "_study_reopened_attacker"  # (scope, knowledge, k) of a study just reopened
RESTORED_UPLOADS = "_study_restored_uploads"  # role -> RestoredUpload, from a reopened study package
_RESTORE_DATA = "_study_restore_data"  # how to load a reopened study's data, applied before the sidebar
_PENDING_REOPEN = "_study_pending_reopen"  # (study file bytes, name): rebuilt once its data is loaded
HISTORY = "_study_history"  # {"undo": [...], "redo": [...]}: (study, made) before / after each edit
HISTORY_SIZE = 20  # edits kept for undo (issue 35, finding 6)
# bounds of the study's memos (ui.cache): previews (shared by the server's sessions on the sample: the
# key is the data's content fingerprint and groups plus the typed settings, a Release is immutable, so
# eight sessions on the sample compute each release once), the data reference, the ledger check
# before "Add to study" and the study package
_PREVIEWS, _DATA_REFS, _LEDGER_CHECKS, _PACKAGES, _JOINT_CHECKS = 32, 4, 2, 1, 4
state.declare(
    __name__,
    held={
        STUDY: ABSENT,
        MADE: ABSENT,
        REOPENED_ATTACKER: ABSENT,
        RESTORED_UPLOADS: ABSENT,
        _RESTORE_DATA: ABSENT,
        _PENDING_REOPEN: ABSENT,
        HISTORY: ABSENT,
    },
)


@dataclass(frozen=True, eq=False)
class MadeFiles:
    """A release of the study as the session holds it: the `Release` and the gate's files."""

    release: Release
    files: dict[str, bytes]


# ---------------------------------------------------------------------------------- the data
def _biobank(ctx: Context):
    from engine.study.runs import biobank_between  # the biobank between cohort and population, if any

    return biobank_between(ctx.dataset, ctx.population_group, ctx.cohort_group, ctx.cohort, ctx.population)


def run_inputs(ctx: Context) -> RunInputs:
    """The records a method runs on, from the sidebar's choices."""
    return RunInputs(ctx.population, ctx.cohort, _biobank(ctx), concepts=ctx.dataset.concepts)


def load_options() -> dict[str, object]:
    """The sidebar's load options that change the data (recorded with every release)."""
    from ui import import_view  # source kind, column mapping, normalization, sample variant

    return {
        "unknown_codes": st.session_state.get("unknown_codes", "keep"),
        "drop_duplicates": bool(st.session_state.get("drop_duplicates", False)),
        **import_view.load_options(),
    }


def data_of(ctx: Context) -> DataRef:
    """The `DataRef` of the data loaded now (memoized per data, groups and load options; shared by the
    server's sessions on the shipped sample: its groups' id fingerprints cost a new session tens of
    milliseconds, issue 24). The load options are the context's, read by the sidebar in the script run
    (in a page's job there is no session to read them from)."""
    options = dict(ctx.load_options)
    key = (ctx.key, ctx.dataset.events.fingerprint, ctx.population_group, ctx.cohort_group, repr(options))

    def ref() -> DataRef:
        inputs = run_inputs(ctx)
        return data_ref(
            ctx.dataset.name,
            ctx.dataset.events,
            inputs,
            population=ctx.population_group,
            cohort=ctx.cohort_group,
            biobank="biobank" if inputs.biobank is not None else None,
            sources=dict(ctx.dataset.sources),
            load_options=options,
        )

    return cache.memo("study data", key, ref, size=_DATA_REFS, data=ctx)  # key: the data by content


def session(ctx: Context) -> Study:
    """The session's study on the data loaded now, under the sidebar's adversary and k."""
    data = data_of(ctx)
    study: Study | None = st.session_state.get(STUDY)
    if study is None:
        study = Study(data, ctx.adversary, int(ctx.k), pseudonym_key=_session_key())
    else:
        if study.data != data:
            study = study.with_data(data)
        if study.adversary != ctx.adversary or study.k != int(ctx.k):
            study = study.with_attacker(ctx.adversary, int(ctx.k))
    st.session_state[STUDY] = study
    return study


def _session_key() -> str:
    """The pseudonym key of the session's study (made once; a download before the study exists
    uses the same one, `ui.downloads.session_pseudonyms`)."""
    return session_pseudonym_key()


def update(study: Study) -> Study:
    """The session's study becomes `study` (a determination or small-cell policy set on the Report
    page); returns it."""
    st.session_state[STUDY] = study
    return study


def made() -> dict[str, MadeFiles]:
    return st.session_state.setdefault(MADE, {})


def current(ctx: Context) -> dict[str, tuple[StudyRelease, MadeFiles]]:
    """The study's releases of the data loaded now that this session holds, by name (study order)."""
    held = made()
    return {e.name: (e, held[e.name]) for e in session(ctx).current() if e.name in held}


def others_note(ctx: Context) -> int:
    """Say how many of the study's releases belong to other data or groups (never shown as current);
    that number, so a page does not also say the study is empty (issue 26)."""
    n = len(session(ctx).others())
    if n:
        st.info(
            f"{n} release(s) of this study were made from other data or other groups than those loaded "
            "now: they stay in the study file but are not shown or reported here. Load their data and "
            "groups again to see them."
        )
    return n


# ------------------------------------------------------------------------------- the releases
def derived_from(ctx: Context, settings: MethodSettings) -> Context | None:
    """What the release of `settings` is derived from, for `ui.cache`: the loaded data, or nothing
    shareable when the settings carry a user's file (an uploaded or edited utility policy), so that
    release stays in this session even on the shipped sample."""
    return None if getattr(settings, "utility_policy_csv", None) is not None else ctx


def preview(ctx: Context, settings: MethodSettings, progress: Callable | None = None) -> Release:
    """The release of `settings` on the data loaded now (memoized per data and settings: settings are
    frozen dataclasses, hashable keys; shared by the server's sessions on the shipped sample)."""
    return cache.memo(
        "previews",
        (data_of(ctx).key, settings),
        lambda: settings.run(run_inputs(ctx), progress),
        size=_PREVIEWS,
        data=derived_from(ctx, settings),
    )


def remember(ctx: Context, settings: MethodSettings, release: Release) -> None:
    """Record a release a view computed another way (e.g. Heatherly's three-scope comparison) as the
    preview of `settings`, so "Add to study" reuses it. It must be what `settings.run` gives."""
    key = (data_of(ctx).key, settings)
    cache.put("previews", key, release, size=_PREVIEWS, data=derived_from(ctx, settings))


def previewed(ctx: Context, settings: MethodSettings) -> Release | None:
    """The memoized preview of `settings` on the data loaded now, None when not computed yet."""
    return cache.held("previews", (data_of(ctx).key, settings), data=derived_from(ctx, settings))


def reverify(ctx: Context, release: Release) -> Verification:
    """`risk.verify` of the release under the sidebar's adversary and k against the population
    (memoized per release content, population, adversary and k)."""
    return verify_under(release, ctx, ctx.adversary, int(ctx.k))


def verify_under(release: Release, ctx: Context, adversary: Adversary, k: int) -> Verification:
    """`risk.verify` of the release under `adversary` and k against the population
    (`ui.downloads.verification`: the distinguishability memoized per release content, population
    and adversary, k only thresholding it)."""
    return verification(release, adversary, int(k), ctx.population, data=(release, ctx.population))


def add(ctx: Context, name: str, settings: MethodSettings, *, suppress_rho: bool = False) -> StudyRelease:
    """Make the release of `settings` (the preview's, not run twice), verify it under the sidebar's
    adversary and k, export it through the gate when verified, and add it to the study."""
    study = session(ctx)
    name = name.strip()
    if not name:
        raise StudyError("give the release a name")
    if any(r.name == name for r in study.releases):
        raise StudyError(f"a release named {name!r} is already in the study: choose another name")
    release = previewed(ctx, settings) or preview(
        ctx, settings, progress_ui.tracker(f"{settings.method}: making the release")
    )
    m = make_release(
        name,
        settings,
        run_inputs(ctx),
        study.data,
        study.adversary,
        study.k,
        spellings=ctx.dataset.spellings,
        pseudonyms=study.pseudonyms,
        release=release,
        rho=study.sensitive,  # issue 39: above the study's rho is refused by name, like below k
        suppress_rho=suppress_rho,  # issue 39: the method option, recorded with the release
    )
    admitted = study.admit(m.entry)  # refused when not verified (issue 35, finding 6)
    _edited(admitted, {**made(), name: MadeFiles(release, m.files)})
    return m.entry


def remove(ctx: Context, name: str) -> None:
    """Withdraw release `name` from the study (undone by `undo`)."""
    study = session(ctx).remove(name)
    _edited(study, {n: m for n, m in made().items() if n != name})


def set_public(ctx: Context, name: str, public: bool) -> None:
    """Mark release `name` public (held by every recipient: `engine.study.joint`) or not."""
    _edited(session(ctx).with_public(name, public), dict(made()))


# ------------------------------------------------------------------------- undo / redo (finding 6)
def _history() -> dict[str, list[tuple[Study, dict[str, MadeFiles]]]]:
    """The undo / redo lists, read only (a view draws the buttons from them); an edit stores a new dict
    (`_edited`, `_step`), so viewing never writes the session's state."""
    h = st.session_state.get(HISTORY)
    return {"undo": list(h["undo"]), "redo": list(h["redo"])} if h else {"undo": [], "redo": []}


def _edited(study: Study, held: dict[str, MadeFiles]) -> None:
    """The session's study becomes `study` with `held`, the state before kept for `undo` (the last
    `HISTORY_SIZE`); a new edit forgets what was undone."""
    h = _history()
    before = st.session_state.get(STUDY)
    if before is not None:
        h["undo"] = [*h["undo"], (before, dict(made()))][-HISTORY_SIZE:]
    h["redo"] = []
    st.session_state[HISTORY] = h
    st.session_state[STUDY] = study
    st.session_state[MADE] = held


def _step(back: bool) -> bool:
    """Undo (`back`) or redo the last edit; False when there is none."""
    h = _history()
    source, target = ("undo", "redo") if back else ("redo", "undo")
    if not h[source]:
        return False
    study, held = h[source][-1]
    h[source] = h[source][:-1]
    h[target] = [*h[target], (st.session_state[STUDY], dict(made()))][-HISTORY_SIZE:]
    st.session_state[HISTORY] = h
    st.session_state[STUDY] = study
    st.session_state[MADE] = held
    return True


def undo() -> bool:
    return _step(True)


def redo() -> bool:
    return _step(False)


def can_undo() -> bool:
    return bool(_history()["undo"])


def can_redo() -> bool:
    return bool(_history()["redo"])


def edit_panel(ctx: Context) -> None:
    """The study's releases of the data loaded now, each with its verdict, a "Public" box and a
    "Remove" button, and Undo / Redo of the last edits (issue 35, finding 6)."""
    study = session(ctx)
    u, r, _ = st.columns([1, 1, 4])
    if u.button("Undo", key="study_undo", disabled=not can_undo(), help="Undo the last change to the study"):
        undo()
        st.rerun()
    if r.button("Redo", key="study_redo", disabled=not can_redo(), help="Redo the change undone"):
        redo()
        st.rerun()
    for i, entry in enumerate(study.current()):
        c1, c2, c3 = st.columns([4, 1, 1])
        # the name is untrusted text, shown literally inside the bold markers (escaped, not the markers)
        c1.markdown(
            f"**{literal.md(entry.name)}** "
            + literal.md(f"({entry.settings.method}): {entry.verdict_message()}")
        )
        public = c2.checkbox(
            "Public",
            value=entry.public,
            key=f"study_public_{i}:{entry.name}:{entry.public}",
            help="A public release is held by every recipient: it is judged with each one's releases.",
        )
        if public != entry.public:
            set_public(ctx, entry.name, public)
            st.rerun()
        if c3.button(
            "Remove", key=f"study_remove_{i}:{entry.name}", help="Withdraw this release from the study"
        ):
            remove(ctx, entry.name)
            st.rerun()


# ------------------------------------------------------------------------- the joint gate (issue 35)
def joint_block(release: Release, adversary: Adversary, k: int, population) -> str | None:
    """Why a download of `release` may not leave (`engine.study.joint.refuse_unless_verified`): the
    releases of the session's study that its recipient holds (their own, else the study's, and every
    public one: exportable ones only), with this one when it is not among them, fail jointly under
    linkage; None when they pass or there is nothing to judge it with. Memoized per the releases'
    contents, population, adversary and k."""
    from engine.study.joint import JointRefused, held_by, joint_verdict, refuse_unless_verified
    from engine.study.ledger import LedgerRelease

    study: Study | None = st.session_state.get(STUDY)
    if study is None or population is None:
        return None
    exportable = {e.name for e in study.current() if e.exportable}
    have = {n: m.release for n, m in made().items() if n in exportable}
    held = held_by(study, have)
    mine = release_key(release)
    if all(release_key(h.release) != mine for h in held):
        held.append(LedgerRelease("", "this release", study.determination.recipient, release))
    if len(held) < 2:
        return None
    key = (tuple((h.name, release_key(h.release)) for h in held), population.fingerprint, adversary, int(k))

    def check() -> str | None:
        verdict = joint_verdict(held, adversary, int(k), population, recipient=study.determination.recipient)
        try:
            refuse_unless_verified(verdict, "This download")
        except JointRefused as exc:
            return str(exc)
        return None

    return cache.memo(
        "joint check", key, check, size=_JOINT_CHECKS, spinner="Judging the release with the study's others…"
    )


def ledger_warning(ctx: Context, settings: MethodSettings) -> None:
    """Before "Add to study" (issue 28): the previewed release linked with every release of the study
    sharing its patients and verified as one (`engine.study.ledger.check_addition`); a warning names
    each pair that would bring a shared patient below k. Memoized per release contents, population,
    adversary and k; nothing when the preview is not computed yet."""
    from engine.study.ledger import LedgerRelease, check_addition, study_ledger_releases

    release = previewed(ctx, settings)
    held = current(ctx)
    if release is None or not held:
        return
    key = (
        release_key(release),
        tuple((n, release_key(m.release)) for n, (_e, m) in held.items()),
        ctx.population.fingerprint,
        ctx.adversary,
        int(ctx.k),
    )

    def check() -> list | str:
        study = session(ctx)
        existing = study_ledger_releases(study, {n: m.release for n, (_e, m) in held.items()})
        new = LedgerRelease("", "this release", study.determination.recipient, release)
        try:
            return check_addition(existing, new, ctx.adversary, int(ctx.k), ctx.population)
        except Exception as exc:  # a ReleaseInvariantError is a bug: a reference, not its text
            return errors.message(exc)

    pairs = cache.memo("ledger check", key, check, size=_LEDGER_CHECKS)  # the session's study: its own
    if isinstance(pairs, str):
        literal.warning(f"This release could not be checked with the study's others on the ledger: {pairs}")
        return
    for pair in pairs:
        if not pair.ok:
            literal.warning(
                "Adding this release would bring patients it shares with another release below k across "
                f"the study's ledger: {pair.message()}. A recipient holding both could single them out."
            )


def add_to_study(
    ctx: Context,
    settings: MethodSettings | None,
    default_name: str,
    key: str,
    why_not: str | None = None,
) -> None:
    """The "Add to study" control of a method view: a name (a readable default) and the button.
    `settings` None: the view's parameters cannot be recorded; no button, and `why_not` says why."""
    study = session(ctx)
    st.markdown("**Add this release to the study**")
    if settings is None:
        literal.warning(why_not or "These parameters cannot be recorded in a study.")
        return
    ledger_warning(ctx, settings)
    base = study.unique_name(default_name)
    c1, c2 = st.columns([3, 1])
    name = c1.text_input("Release name", value=base, key=f"{key}_name:{base}")
    rho = study.sensitive  # issue 39: the method option, offered when the study states rho
    suppress = rho is not None and st.checkbox(
        literal.md(
            f"Suppress the codes implying {', '.join(rho.categories)} until the release meets the study's "
            f"rho = {rho.rho:g}"
        ),
        key=f"{key}_rho",
    )
    c2.write("")
    if c2.button("Add to study", key=f"{key}_add", type="primary"):
        try:
            with st.spinner("Verifying the release and writing its files through the export gate…"):
                entry = add(ctx, name, settings, suppress_rho=suppress)
        except Exception as exc:  # a UserError's message, else a reference (ui/errors.py)
            errors.show(exc)
            return
        st.success(literal.md(f"Added {entry.name!r} to the study: {entry.verdict_message()}."))
    names = [e.name for e in session(ctx).current()]
    if names:
        st.caption(
            literal.md(f"{len(names)} release(s) in the study on this data: " + ", ".join(map(repr, names)))
        )


# ------------------------------------------------------------------- the input files of the study
@dataclass(frozen=True, eq=False)
class RestoredUpload:
    """An input file restored from a study package; the sidebar reads it like an uploaded file."""

    role: str
    name: str
    data: bytes

    @property
    def file_id(self) -> str:
        return "study:" + sha256_of(self.data)

    @property
    def size(self) -> int:
        return len(self.data)

    def getvalue(self) -> bytes:
        return self.data


def session_input_names() -> list[str]:
    """The names of the uploaded (or restored) files the data loaded now came from; empty for the
    shipped sample and for imports (those are named in the study's load options, not included)."""
    return [f.name for f in (st.session_state.get(SESSION_FILES) or {}).values()]


def study_package(study: Study) -> bytes:
    """The study with the files its data came from, as a zip (`engine.study.package`), built once per
    study content and set of files in this session (not on every render of the page)."""
    files = st.session_state.get(SESSION_FILES) or {}
    key = (study.to_json(), tuple((role, f.file_id) for role, f in files.items()))

    def package() -> bytes:
        return write_package(
            study, {role: StudyInput(role, f.name, f.getvalue()) for role, f in files.items()}
        )

    return cache.memo("study package", key, package, size=_PACKAGES)


# ------------------------------------------------------------------------------ reopen a study
def open_study_file(ctx: Context, data: bytes, source: str) -> list[RebuildCheck]:
    """Reopen a study file (JSON) or package (zip with its input files). When it names other data
    than those loaded now but says how to load them (the package's input files, or a sample variant,
    path or URL in its load options), they are put in place and the app reruns: the releases are
    rebuilt on that run (`reopen_pending`), once the sidebar has loaded the study's data."""
    study, inputs = read_study_file(data, source)
    if study.data.key == data_of(ctx).key:
        return reopen(ctx, study, source)
    if inputs or _restorable(study.data):
        st.session_state[_RESTORE_DATA] = (study.data, inputs)
        st.session_state[_PENDING_REOPEN] = (data, source)
        st.rerun()
    return reopen(ctx, study, source)  # names the data it needs


def reopen_pending(ctx: Context) -> list[RebuildCheck] | None:
    """The rebuild of a study whose data the previous run put in place (`open_study_file`)."""
    pending = st.session_state.pop(_PENDING_REOPEN, None)
    if pending is None:
        return None
    data, source = pending
    study, _inputs = read_study_file(data, source)
    return reopen(ctx, study, source)


def _restorable(data: DataRef) -> bool:
    """Whether the app can load a study's data without an upload: the shipped sample (any variant)
    or an import from a path or URL."""
    from engine.io.loaders import SAMPLE_NAME
    from ui import import_view

    return data.name == SAMPLE_NAME or import_view.restorable(dict(data.load_options))


def take_restore() -> tuple[DataRef, dict[str, str], bool] | None:
    """A reopened study's data waiting to be loaded (`open_study_file`), taken once, before the sidebar
    draws its widgets: (its data reference, its load options, whether it came with its input files).
    Its input files become this session's
    restored uploads (`RESTORED_UPLOADS`); the sidebar sets its own choices from the rest
    (`ui.sidebar.apply_restore`)."""
    wanted = st.session_state.pop(_RESTORE_DATA, None)
    if wanted is None:
        return None
    data, inputs = wanted
    if inputs:
        st.session_state[RESTORED_UPLOADS] = {r: RestoredUpload(r, i.name, i.data) for r, i in inputs.items()}
    return data, dict(data.load_options), bool(inputs)


def forget_restored_uploads() -> None:
    """The user forgot the files restored from a study package (the sidebar's button)."""
    st.session_state.pop(RESTORED_UPLOADS, None)


def take_reopened_attacker() -> tuple[str, str, int] | None:
    """The (scope, knowledge, k) of a study just reopened (`reopen`), taken once by the sidebar."""
    return st.session_state.pop(REOPENED_ATTACKER, None)


def reopen(ctx: Context, loaded: Study, source: str) -> list[RebuildCheck]:
    """Reopen a study on the data loaded now: the data key must match; every release of it is
    made again from its settings, re-verified under the study's adversary and k (a verdict read from
    the file is never believed: one that disagrees is an error naming the release) and its files'
    sha256 compared with the recorded ones (`engine.study.study.rebuild`). The session's study becomes
    the reopened one, with the verdicts just computed; a release that failed is not exportable."""
    data = data_of(ctx)
    if loaded.data.key != data.key:
        raise StudyError(
            f"{source}: the study was made from other data or groups ({loaded.data.name!r}, events "
            f"{loaded.data.events_fingerprint[:12]}…) than those loaded now ({data.name!r}, events "
            f"{data.events_fingerprint[:12]}…): load its data and groups first"
        )
    step = progress_ui.tracker("Rebuilding and re-verifying the study's releases")
    checks = rebuild(loaded, run_inputs(ctx), data, step, spellings=ctx.dataset.spellings)
    step.bar.empty()
    held = {c.name: MadeFiles(c.made.release, c.made.files if c.passed else {}) for c in checks if c.made}
    session_pseudonym_key(adopt=loaded.pseudonym_key)
    st.session_state[STUDY] = loaded.with_data(data).reverified(checks)
    st.session_state[MADE] = held
    st.session_state[HISTORY] = {"undo": [], "redo": []}  # a study reopened: nothing of the last to undo
    st.session_state[REOPENED_ATTACKER] = (loaded.adversary.scope, loaded.adversary.knowledge, loaded.k)
    return checks


def follow_reopened(ctx: Context) -> None:
    """After `reopen`: when the study's adversary or k differ from the sidebar's, rerun so that the
    sidebar (drawn before the page, so not changeable in this run) moves to them and says so
    (`ui.sidebar.apply_reopened`)."""
    wanted = st.session_state.get(REOPENED_ATTACKER)
    if wanted is not None and wanted != (ctx.adversary.scope, ctx.adversary.knowledge, int(ctx.k)):
        st.rerun()
    st.session_state.pop(REOPENED_ATTACKER, None)
