"""Work that survives a reload (issue 25): the session's study, sidebar choices and uploaded files are
saved on the server per user (`engine.store`) after every run that changed them, and offered back on a
reload or in a new session of the same user.

app.py calls `serve(navigation)` in place of `navigation.run()`:

- before the page: the Resume offer ("Resume your study from <time>: N releases", Resume / Discard) at
  the top of the page while the user has not answered it, and the rebuild of a study being resumed;
- after the page (also when it stops or reruns): `save()`, which writes only when the fingerprint of
  (study JSON, choices, files' sha256) differs from the one last saved or seen, never on a run that
  changed nothing, and never while the offer is unanswered (the stored study is kept until the user
  chooses).

Resume (a button callback, so before the sidebar draws): the stored choices go back into their widget
keys (the sidebar's `KEYS`, the method settings of `ui.persist`, the import's options), the stored
uploads into the sidebar's kept uploads (`ui.sidebar.KEPT_UPLOADS`), and the study JSON waits until the
sidebar has loaded its data; then `ui.study.reopen` rebuilds every release from its settings and
re-verifies it (a verdict read from the store is never believed). The study JSON holds the study's
pseudonym key: it is stored nowhere else (the store is as sensitive as the data: docs/deployment.md).

The user is `ui.auth.current_user()`, the key of the signed-in user (`oidc:<iss>#<sub>`, `header:<value>`,
single-user local mode: `local:<OS user>`), never a name the user can claim (issue 40).
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

import streamlit as st

from engine.io.errors import UserError
from engine.store import Store, Stored, StoreError
from ui import cache, literal
from ui.server_store import shared_store
from ui.state import ABSENT, declare, kept_defaults, kept_keys, restore

OFFER = "_resume_offer"  # None: not asked yet; a Stored summary: offered, unanswered; False: answered
PENDING = "_resume_pending"  # the stored study JSON, rebuilt once its data is loaded
SAVED = "_resume_saved"  # fingerprint of what is stored (or was seen) for this session
PROBLEM = "_resume_problem"  # the last store error, shown at the top of the page
RESULT = "_resume_result"  # what the last resume did, shown once
NO_FILES = "_resume_no_files"  # the user deleted the stored files: this session stores no more
WRITTEN = "_resume_written"  # this user has a record (written by this session, or resumed)
HAS_FILES = "_resume_has_files"  # the store holds files of this user (the delete button is shown)
_HASHES = 32  # (role, file id, name, size) -> sha256 held (ui.cache, this session): an upload is hashed once
declare(
    __name__,
    held={OFFER: None, PENDING: ABSENT, SAVED: ABSENT, PROBLEM: ABSENT, RESULT: ABSENT, NO_FILES: False}
    | {WRITTEN: False, HAS_FILES: False},
)
_IMPORT, _IMPORT_ROLE = "import", "import"  # the applied import's options, and its uploaded file's role
_SIMPLE = (str, int, float, bool, type(None))


def _store() -> Store:
    return shared_store()


def _user() -> str:
    from ui.auth import current_user

    return current_user()


# ------------------------------------------------------------------------------------ what is saved
def _simple(value: Any) -> bool:
    if isinstance(value, _SIMPLE):
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(v, _SIMPLE) for v in value)


def choice_keys() -> list[str]:
    """The session-state keys saved as choices: every kept key (`ui.state`: the sidebar's, the
    method settings', the pages' and the import view's)."""
    return kept_keys()


def choices() -> dict[str, Any]:
    """The session's choices (JSON values only: a value of another type is not saved)."""
    from ui import import_view, sidebar

    state = st.session_state
    out: dict[str, Any] = {}
    for key in choice_keys():
        if key in state and _simple(state[key]):
            value = state[key]
            out[key] = list(value) if isinstance(value, tuple) else value
    applied = import_view.applied()
    if applied is not None:
        out[_IMPORT] = applied[0].to_options()
    # the cohort list the sidebar last saw: a resumed session keeps the user's cohort group
    # (`ui.sidebar._select_new_cohort` selects a cohort list it has not seen as the cohort)
    if state.get(sidebar.COHORT_LIST_SEEN) is not None:
        out[sidebar.COHORT_LIST_SEEN] = state[sidebar.COHORT_LIST_SEEN]
    return out


def _uploads() -> dict[str, Any]:
    """The uploaded files the session holds, by role: the data's (upload mode) or those kept across a
    switch of dataset mode, and an import's uploaded file."""
    from ui import import_view, sidebar
    from ui.data_choice import SESSION_FILES, UPLOAD

    state = st.session_state
    if state.get(NO_FILES):
        return {}
    if state.get("dataset_choice") == UPLOAD:
        files = dict(state.get(SESSION_FILES) or state.get(sidebar.KEPT_UPLOADS) or {})
    else:
        files = dict(state.get(sidebar.KEPT_UPLOADS) or {})
    applied = import_view.applied()
    if applied is not None and applied[2] is not None:
        files[_IMPORT_ROLE] = _Bytes(applied[1], applied[2])
    return files


class _Bytes:
    def __init__(self, name: str, data: bytes) -> None:
        self.name, self.data = name, data
        self.file_id, self.size = "bytes:" + hashlib.sha256(data).hexdigest(), len(data)

    def getvalue(self) -> bytes:
        return self.data


def _sha(role: str, f: Any) -> str:
    key = (role, getattr(f, "file_id", None), f.name, getattr(f, "size", None))
    return cache.memo("upload hashes", key, lambda: hashlib.sha256(f.getvalue()).hexdigest(), size=_HASHES)


def _study_json() -> str | None:
    from ui.study import STUDY

    study = st.session_state.get(STUDY)
    return None if study is None else study.to_json()


def fingerprint() -> str:
    """sha256 of what a save would write: study JSON, choices, files (role, name, sha256)."""
    files = sorted((r, f.name, _sha(r, f)) for r, f in _uploads().items())
    text = json.dumps([_study_json(), choices(), files], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def save() -> bool:
    """Write the session's work for its user when it changed since the last save (module docstring);
    True when written."""
    state = st.session_state
    if state.get(OFFER) is not False or PENDING in state:
        return False  # the offer is not answered yet, or a resume is under way
    try:
        now = fingerprint()
        if state.get(SAVED) == now:
            return False
        if not state.get(WRITTEN) and not _worth_keeping():
            state[SAVED] = now  # defaults only (a first visit): no record, hence no offer, for that
            return False
        files = {r: (f.name, f.getvalue()) for r, f in _uploads().items()}
        _store().save(_user(), _study_json(), choices(), files)
    except StoreError as exc:
        state[PROBLEM] = str(exc)
        print(f"cohortshield: the study store: {exc}", file=sys.stderr)
        return False
    state[SAVED] = now
    state[WRITTEN] = True
    state[HAS_FILES] = bool(files)
    state.pop(PROBLEM, None)
    return True


def _worth_keeping() -> bool:
    """Whether the session holds anything but defaults: releases, a determination, files, an import,
    or a sidebar choice or method setting changed from its default."""
    from engine.study.study import Determination
    from ui import import_view
    from ui.study import STUDY

    state = st.session_state
    study = state.get(STUDY)
    if study is not None and (study.releases or study.determination != Determination()):
        return True
    if _uploads() or import_view.applied() is not None:
        return True
    defaults = kept_defaults()
    return any(key in state and state[key] != default for key, default in defaults.items())


# ------------------------------------------------------------------------------------ the offer
def _releases(stored: Stored) -> int | None:
    """How many releases the stored study holds (None: it cannot be read)."""
    if stored.study_json is None:
        return 0
    try:
        return len(json.loads(stored.study_json).get("releases", []))
    except (json.JSONDecodeError, AttributeError):
        return None


def _when(stored: Stored) -> str:
    return stored.saved_at.astimezone().strftime("%Y-%m-%d %H:%M")


def offer() -> None:
    """The Resume offer at the top of the page, and the rebuild of a study being resumed."""
    state = st.session_state
    if state.get(PROBLEM):
        literal.warning(f"Your work is not being saved on the server: {state[PROBLEM]}")
    if PENDING in state:
        _rebuild()
    result = state.pop(RESULT, None)
    if result is not None:
        kind, text = result
        (st.success if kind == "success" else st.warning)(literal.md(text))
    if state.get(OFFER) is None:
        try:
            stored = _store().summary(_user())
        except StoreError as exc:
            state[PROBLEM] = str(exc)
            state[OFFER] = False
            return
        if stored is None:
            state[OFFER] = False
            state[WRITTEN] = False
            return
        state[OFFER] = stored
        state[HAS_FILES] = bool(stored.file_names)
    stored = state.get(OFFER)
    if isinstance(stored, Stored):
        _draw_offer(stored)
    _stored_files_control()


def _draw_offer(stored: Stored) -> None:
    n = _releases(stored)
    box = st.container(border=True, key="resume_offer")
    what = "the study cannot be read" if n is None else f"{n} release{'s' if n != 1 else ''}"
    box.markdown(f"**Resume your study from {_when(stored)}: {what}**")
    details = []
    dataset = stored.choices.get("dataset_choice")
    if dataset:
        details.append(f"dataset: {dataset}")
    if stored.file_names:
        details.append("uploaded files kept on the server: " + ", ".join(stored.file_names.values()))
    if details:
        box.caption(literal.md("; ".join(details)))
    box.caption(
        "Until you choose, nothing of this session is saved: the stored study stays as it is. Resuming "
        "makes every release again from its settings and verifies it again."
    )
    c1, c2, _ = box.columns([1, 1, 4])
    c1.button("Resume", key="resume_yes", type="primary", on_click=_resume, disabled=n is None)
    c2.button("Discard", key="resume_no", on_click=_discard)


def _stored_files_control() -> None:
    """The sidebar's "Delete my stored files" (the uploads kept on the server for this user)."""
    state = st.session_state
    if state.get(OFFER) is not False:
        return
    if not _uploads() and not state.get(HAS_FILES):
        return
    st.sidebar.caption("Your work is saved on this server for you, with your uploaded files.")
    st.sidebar.button("Delete my stored files", key="resume_delete_files", on_click=_delete_files)


# ------------------------------------------------------------------------------------ the answers
def _resume() -> None:
    """Resume (a callback: before the sidebar draws): the stored choices and files back in place; the
    study waits for its data (`_rebuild`)."""
    from ui import sidebar
    from ui.sidebar import UPLOAD_ROLES
    from ui.study import RestoredUpload

    state = st.session_state
    state[OFFER] = False
    try:
        stored = _store().load(_user())
    except StoreError as exc:
        state[PROBLEM] = str(exc)
        return
    if stored is None:
        state[RESULT] = ("warning", "Your stored study is no longer there: nothing was resumed.")
        return
    from ui.views import import_all

    import_all()  # every method's kept settings declared before they are put back
    keys = set(choice_keys()) | {sidebar.COHORT_LIST_SEEN}
    restore({key: value for key, value in stored.choices.items() if key in keys})
    roles = {r for r, _ in UPLOAD_ROLES}
    kept = {r: RestoredUpload(r, f.name, f.data) for r, f in stored.files.items() if r in roles}
    if kept:
        sidebar.keep_uploads(kept)
    _restore_import(stored)
    if stored.damaged:
        state[RESULT] = (
            "warning",
            "Some stored files no longer match their sha256 and were not used: " + ", ".join(stored.damaged),
        )
    if stored.study_json is not None:
        state[PENDING] = stored.study_json
    state.pop(SAVED, None)
    state[WRITTEN] = True
    state[HAS_FILES] = bool(stored.files)


def _restore_import(stored: Stored) -> None:
    from engine.io.imports import ImportSpec
    from ui import import_view

    options = stored.choices.get(_IMPORT)
    if not isinstance(options, dict):
        return
    try:
        spec = ImportSpec.from_options(options)
    except UserError:  # a malformed recorded mapping
        return
    if spec is None:
        return
    upload = stored.files.get(_IMPORT_ROLE)
    if upload is not None:
        import_view.apply(spec, upload.name, upload.data)
    elif spec.location:
        import_view.restore(options)  # a path or URL: read once the user confirms (ui.import_view)


def _discard() -> None:
    state = st.session_state
    state[OFFER] = False
    try:
        _store().delete(_user())
    except StoreError as exc:
        state[PROBLEM] = str(exc)
        return
    state[SAVED] = fingerprint()  # what this session holds now: saved at its first change
    state[WRITTEN] = False
    state[HAS_FILES] = False
    state[RESULT] = ("success", "Your stored study was discarded.")


def _delete_files() -> None:
    state = st.session_state
    try:
        n = _store().delete_files(_user())
    except StoreError as exc:
        state[PROBLEM] = str(exc)
        return
    state[NO_FILES] = True
    state[HAS_FILES] = False
    state[SAVED] = None
    state[RESULT] = (
        "success",
        f"Deleted {n} stored file(s) from the server; this session stores no files any more (the study "
        "and your choices still are). After a reload, upload the files again to resume on them.",
    )


def _rebuild() -> None:
    """The resumed study's releases, made again on the data this run's sidebar loaded."""
    from engine.study.study import Study, StudyError
    from ui import study as session_study

    state = st.session_state
    ctx = state.get("context")
    text = state[PENDING]
    try:
        study = Study.from_json(text, "your stored study")
    except StudyError as exc:
        state.pop(PENDING)
        literal.error(exc)
        return
    if ctx is None or session_study.data_of(ctx).key != study.data.key:
        box = st.container(border=True, key="resume_waiting")
        literal.warning(
            f"Your stored study's data ({study.data.name}) are not loaded: load them in the sidebar "
            "(upload its files again if you deleted them) and its releases are rebuilt.",
            box,
        )
        if box.button("Stop resuming", key="resume_stop"):
            state.pop(PENDING)
            st.rerun()
        return
    state.pop(PENDING)
    checks = session_study.reopen(ctx, study, "your stored study")
    session_study.take_reopened_attacker()  # the sidebar already holds the stored choices
    failed = [c for c in checks if not c.passed]
    for c in failed:
        literal.error(f"{c.name}: " + "; ".join(c.differences()))
    st.success(
        f"Resumed your study: {len(checks) - len(failed)} of {len(checks)} release(s) rebuilt "
        "byte-identical and verified again."
    )


def serve(navigation: Any) -> None:
    """app.py's call in place of `navigation.run()`: the offer, the page, then the save."""
    offer()
    try:
        navigation.run()
    finally:
        save()
