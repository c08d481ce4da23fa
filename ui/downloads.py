"""Every download the app offers, through one module (issue 12, findings 5 and 7).

- `table_download`: any table that is not a release (a chart's data, measures, a policy): CSV written
  by `engine.io.export.safe_csv_bytes`, so no cell is evaluated by a spreadsheet. `report_download`:
  a method's or the IRB report (JSON or Markdown), which holds no released records.
- `release_downloads`: a release's files (`release.csv` and `code_map.csv`, by
  `engine.io.export.release_files`) only through the export gate, under the adversary and k the sidebar
  names. The release must also have passed its method's own verification. When either refuses, the
  page says why and which records fall short, and offers nothing of the release.
- `release_table_download`: a table made of a release's records (e.g. released records beside the
  originals), offered only when the same gate lets the release itself out.

The verification the gate needs is of exactly the release offered (same `Release.fingerprint`) under
the sidebar's adversary and k, and the release offered must carry the cohort it was made from
(`Release.source`, set by `Release.checked`): without it the risk engine cannot take a single-visit
attacker's knowledge from the original visits (`risk.attacker_known_visits`) and understates him on a
file of one set per patient. The method's own verification is used when it is of that release under
that adversary and k and the source cannot change it (all-visits knowledge, or visits shown); else
the risk engine verifies the release with its source again (`verification`: the distinguishability
memoized per release content (source included), population and adversary; k only thresholds it).
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from engine.adversary import Adversary
from engine.io.export import (
    CODE_MAP_FILE,
    RELEASE_FILE,
    ExportRefused,
    crosswalk_bytes,
    gate,
    release_files,
    safe_csv_bytes,
)
from engine.io.pseudonyms import Pseudonyms
from engine.records import Records
from engine.release import Release
from engine.risk import Verification
from ui import errors, state
from ui.literal import md
from ui.state import ABSENT
from ui.verifications import session_pseudonyms, verification

AUDIT_SESSION = "_audit_entries"  # this session's audit entries (the Report page lists them)
state.declare(__name__, held={AUDIT_SESSION: ABSENT})

CSV, GZIP = "text/csv", "application/gzip"
# a download reruns nothing (it changes no state): twice in `make test` the browser study walk's next
# download never arrived when clicked while the app was still rerunning after the previous click
ON_CLICK = "ignore"


def audit_context(
    release: str | None = None, adversary: Adversary | None = None, k: int | None = None
) -> dict:
    """Who and what an audit entry names, taken when the button is drawn (a click's callable runs
    outside the script run, without session state): the signed-in user (ui/auth.py), the session
    study's fingerprint (never its key), the release, the adversary and k (default the sidebar's),
    this session's list of entries, and the session itself (`owner`: only it may have the file,
    ui/media_guard.py)."""
    from engine.audit.log import study_fingerprint
    from ui.auth import current_user
    from ui.media_guard import this_session

    ctx = st.session_state.get("context")
    study = st.session_state.get("study")
    adversary = adversary if adversary is not None else getattr(ctx, "adversary", None)
    k = k if k is not None else getattr(ctx, "k", None)
    return {
        "user": current_user(),
        "study": study_fingerprint(study) if study is not None else None,
        "release": release,
        "adversary": adversary.label if adversary is not None else None,
        "k": None if k is None else int(k),
        "session": st.session_state.setdefault(AUDIT_SESSION, []),
        "owner": this_session(),
    }


def audited(data_fn: Callable[[], bytes], what: str, file_name: str, context: dict) -> Callable[[], bytes]:
    """`data_fn` for a download button, through the audit log's write-ahead export
    (`engine.audit.exports.audited_export`, the CLI's too) when the bytes are built on click: a `begin`
    entry with their sha256 and the file name, then the bytes are handed over, then the completion
    entry (this session's list), all under `context` (`audit_context`). An entry that cannot be written
    (unwritable or full log: a `UserError`) fails the download: nothing leaves unlogged.
    Only for the session that drew the button (`context["owner"]`; another session's request builds
    nothing and logs nothing: issue 40, finding 2), and its bytes are then fetched by that session's
    credential once, within the time limit (`ui.media_guard`: finding 1)."""

    def build() -> bytes:
        from engine.audit.exports import audited_export
        from ui import media_guard

        owner = context.get("owner")
        media_guard.admit(owner)
        data = data_fn()
        done = audited_export(what, {file_name: data}, lambda: {file_name: data}, context)
        context["session"].extend(done)
        media_guard.hand_over(owner, data)
        return data

    return build


def session_small_cells():
    """The session study's small-cell policy (`Study.small_cells`, chosen on the Report page); none
    before a study exists (issue 28)."""
    from engine.disclosure.cells import NO_POLICY

    study = st.session_state.get("study")
    return getattr(study, "small_cells", NO_POLICY) if study is not None else NO_POLICY


def small_cells_of(frame: pd.DataFrame, counts: Sequence[str], derived: Sequence[str] = (), policy=None):
    """(`frame` under the policy, caption of what was suppressed and why, "" when nothing): the cells
    of `counts` (counts of patients) in the policy's range read "suppressed", and the `derived` cells of
    their rows (figures that would give them back, e.g. a share of patients). A PheWAS result table
    (`n_cases`, `n_controls` and the allele frequencies) loses its whole row when any count or allele
    count is small, or differs by a small amount from a nested row's (`engine.disclosure.cells.suppress_phewas`);
    original and released results side by side (`engine.utility.phewas.paired`) are judged together,
    a release's row a small amount from the original's withheld (`suppress_paired_phewas`, issue #35)."""
    from engine.disclosure.cells import (
        PAIRED_SIDES,
        SUPPRESSED,
        suppress_frame,
        suppress_paired_phewas,
        suppress_phewas,
    )

    policy = session_small_cells() if policy is None else policy
    cols = [c for c in counts if c in frame.columns]
    if not policy.active or not cols or frame.empty:
        return frame, ""
    if {"n_cases", "n_controls"} <= set(cols) and {"case_maf", "control_maf"} <= set(frame.columns):
        out, note = suppress_phewas(frame, policy)
    elif {"n_cases_original", "n_cases_released"} <= set(cols) and {"snp", "phecode"} <= set(frame.columns):
        out, note = suppress_paired_phewas(frame, policy)  # each side's statistics with its cases
        derived = [c for c in derived if not str(c).endswith(PAIRED_SIDES) and c != "change"]
    else:
        out, note = suppress_frame(frame, policy, cols)
    hit = out[cols].eq(SUPPRESSED).any(axis=1).to_numpy()
    extra = [c for c in derived if c in out.columns]
    n_derived = 0
    if hit.any() and extra:
        for c in extra:
            out[c] = out[c].astype(object)
            n_derived += int((out.loc[hit, c] != SUPPRESSED).sum())
            out.loc[hit, c] = SUPPRESSED
    caption = note.caption()
    if caption and n_derived:
        caption += f" {n_derived:,} derived cell(s) of those rows ({', '.join(extra)}) too: they would give the counts back."
    return out, caption


def table_download(
    frame: pd.DataFrame,
    label: str,
    file_name: str,
    key: str,
    *,
    where: Any = st,
    counts: Sequence[str] | None = None,
    derived: Sequence[str] = (),
) -> None:
    """A download button for a table that holds no release records (spreadsheet-safe CSV). The CSV is
    written when the button is clicked, not on every run that draws it (29 buttons; their CSVs were
    15% of a rerun's time under load, bench/load_ws.py), from the table as it was drawn: pandas'
    copy-on-write keeps the snapshot from any later change of `frame`. `counts`: the columns holding
    counts of patients, under the study's small-cell policy in the file (`small_cells_of`; issue 28),
    with a caption under the button saying what was suppressed and why."""
    snapshot = frame.copy(deep=False)
    caption = ""
    if counts is not None:
        snapshot, caption = small_cells_of(snapshot, counts, derived)
    payload = audited(lambda: safe_csv_bytes(snapshot), "table CSV", file_name, audit_context())
    where.download_button(label, payload, file_name=file_name, mime=CSV, key=key, on_click=ON_CLICK)
    if caption:
        where.caption(md(caption))


REPORT_MIME = {
    ".json": "application/json",
    ".md": "text/markdown",
    ".html": "text/html",
    ".pdf": "application/pdf",
    ".zip": "application/zip",
    ".pub": "application/x-pem-file",
}


REPORT_WHAT = {  # the audit log's `what` of the Report page's files; any other is a "report"
    "cohortshield_release.zip": "release bundle",
    "cohortshield_study.json": "study file",
    "cohortshield_study.zip": "study file with its input package",
    "cohortshield_office.pub": "office public key",
}


def report_download(
    data: str | bytes | Callable[[], str | bytes],
    label: str,
    file_name: str,
    key: str | None = None,
    *,
    where: Any = st,
) -> None:
    """A report or a bundle built by the engine (JSON, Markdown, HTML, PDF, zip): its release files,
    if any, were written by the export gate (engine.report.bundle); the MIME type follows the file name.
    `data` may be a function that builds it: then it is built when the button is clicked."""
    mime = REPORT_MIME[file_name[file_name.rfind(".") :]]

    def body(value: str | bytes) -> bytes:
        return value.encode("utf-8") if isinstance(value, str) else value

    payload = (lambda: body(data())) if callable(data) else (lambda: body(data))  # type: ignore[arg-type]
    what = REPORT_WHAT.get(file_name, "report")
    where.download_button(
        label,
        audited(payload, what, file_name, audit_context()),
        file_name=file_name,
        mime=mime,
        key=key,
        on_click=ON_CLICK,
    )


NO_SOURCE = (
    "This release does not carry the cohort it was made from, so the risk engine cannot take a "
    "single-visit attacker's knowledge from the original visits; it is not offered. (A page passes "
    "`Release.checked(cohort)`.)"
)


def _source_matters(release: Release, adversary: Adversary) -> bool:
    """Whether `risk.verify` reads `release.source` for this adversary (`attacker_known_visits`)."""
    return adversary.knowledge == "single_visit" and not release.shows_visits


def sidebar_verification(
    release: Release,
    method_verification: Verification,
    adversary: Adversary,
    k: int,
    population: Records | None,
) -> Verification:
    """The verification of exactly `release` (with its `source`) under the sidebar's adversary and k."""
    v = method_verification
    same = v.adversary == adversary and v.k == k and v.release_fingerprint == release.fingerprint
    if same and not _source_matters(release, adversary):
        return v
    return verification(release, adversary, k, population, data=(release, population))


def export_check(
    release: Release,
    method_verification: Verification,
    adversary: Adversary,
    k: int,
    population: Records | None,
    blocked: str | None = None,
) -> tuple[Verification | None, str | None]:
    """(the sidebar verification, None) when the gate lets the release out, else (the verification
    that fell short or None, the plain-language reason). `blocked`: a reason from the method's own
    checks (e.g. a violated privacy policy) that refuses the release too. A release without its
    `source` is refused (`NO_SOURCE`)."""
    if release.source is None:
        return None, NO_SOURCE
    if blocked:
        shown = None if method_verification.ok else method_verification
        return shown, f"{blocked} Nothing of this release can be downloaded."
    if not method_verification.ok:
        return (
            method_verification,
            f"{method_verification.message()} Nothing of this release can be downloaded.",
        )
    try:
        v = sidebar_verification(release, method_verification, adversary, k, population)
    except Exception as exc:  # e.g. a population adversary with no population (a UserError)
        why = errors.message(exc)
        return None, f"The release cannot be verified for the {adversary.label} adversary: {why}"
    try:
        gate(release, v, adversary, k)
    except ExportRefused as exc:
        return v, f"{exc} (the sidebar's adversary and k; no download)"
    from ui.study import joint_block  # issue 35: with the releases its recipient holds, judged together

    return v, joint_block(release, adversary, k, population)


def loaded_spellings() -> dict[str, tuple[str, ...]] | None:
    """The loaded data's spellings of its codes (`Dataset.spellings`: set when normalization rewrote
    any), for the code map of every export."""
    ctx = st.session_state.get("context")
    return None if ctx is None else getattr(ctx.dataset, "spellings", None)


def loaded_concept_names() -> dict[str, str] | None:
    """The loaded OMOP CDM's concept names (`ConceptParents.names`; issue 37), the code map's
    descriptions of every export; None for other data."""
    ctx = st.session_state.get("context")
    concepts = None if ctx is None else getattr(ctx.dataset, "concepts", None)
    return None if concepts is None else concepts.names


def crosswalk_download(
    release: Release, pseudonyms: Pseudonyms, name: str, key: str, where: Any = st
) -> None:
    """The crosswalk of a release (release id -> source id), built on click and labelled identifying
    (`engine.io.export.crosswalk_bytes`). Never offered for a release that may not leave."""
    file_name = f"IDENTIFYING_crosswalk_{safe_file_stem(name)}.csv"
    where.download_button(
        f"{name}: crosswalk (CSV, IDENTIFYING)",
        audited(
            lambda: crosswalk_bytes(release, pseudonyms),
            "crosswalk (IDENTIFYING)",
            file_name,
            audit_context(name),
        ),
        file_name=file_name,
        mime=CSV,
        key=key,
        help="release_id, source_id: re-identifies every patient of this release. Steward only.",
        on_click=ON_CLICK,
    )


def safe_file_stem(name: str) -> str:
    """A release name as a file-name part: letters, digits, `-` and `_` only."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:80] or "release"


def release_file_bytes(
    release: Release,
    verification: Verification | None,
    adversary: Adversary,
    k: int,
    *,
    compress: bool = False,
) -> dict[str, bytes]:
    """The bytes a release download holds: `engine.io.export.release_files` (the gate again, on exactly
    what is written), gzip-compressed (deterministic, no time stamp) when `compress`."""
    out = release_files(
        release,
        verification,
        adversary,
        k,
        loaded_spellings(),
        pseudonyms=session_pseudonyms(),
        names=loaded_concept_names(),
    )
    return {n: gzip.compress(b, compresslevel=9, mtime=0) for n, b in out.items()} if compress else out


def _refused(reason: str, verification: Verification | None, key: str, where: Any) -> None:
    where.error(md(reason))
    if verification is not None and not verification.ok:
        failing = verification.failing
        where.caption(
            f"The {len(failing):,} records below k = {verification.k} ({verification.adversary.label}):"
        )
        where.dataframe(failing.head(500), hide_index=True)
        table_download(
            failing, "Download the records below k (CSV)", f"{key}_below_k.csv", f"{key}_below_k", where=where
        )


def release_downloads(
    release: Release,
    method_verification: Verification,
    adversary: Adversary,
    k: int,
    population: Records | None,
    *,
    name: str,
    key: str,
    compress: bool = False,
    blocked: str | None = None,
    where: Any = st,
) -> bool:
    """The release file and its code map, gated; or the reason and the records below k. `name`
    prefixes the file names (e.g. `heatherly_DEMO_D` -> heatherly_DEMO_D_release.csv); `compress`
    writes them gzip-compressed; `blocked` refuses them for a reason of the method's own (see
    `export_check`). Returns whether the download was offered."""
    verification, reason = export_check(release, method_verification, adversary, k, population, blocked)
    if reason is not None:
        _refused(reason, verification, key, where)
        return False

    def files() -> dict[str, bytes]:
        return release_file_bytes(release, verification, adversary, k, compress=compress)

    suffix, mime = (".gz", GZIP) if compress else ("", CSV)
    context = audit_context(name, adversary, k)
    release_name, map_name = f"{name}_{RELEASE_FILE}{suffix}", f"{name}_{CODE_MAP_FILE}{suffix}"
    a, b = where.columns(2)
    a.download_button(
        "Download the release (CSV" + (", gzip)" if compress else ")"),
        audited(lambda: files()[RELEASE_FILE], "release file", release_name, context),
        file_name=release_name,
        mime=mime,
        key=f"{key}_release",
        help=f"{RELEASE_FILE}: exactly the rows verified ({verification.adversary.label}, k = {k}).",
        on_click=ON_CLICK,
    )
    b.download_button(
        "Download the code map (CSV" + (", gzip)" if compress else ")"),
        audited(lambda: files()[CODE_MAP_FILE], "code map", map_name, context),
        file_name=map_name,
        mime=mime,
        key=f"{key}_codemap",
        help=f"{CODE_MAP_FILE}: the original codes each released item stands for.",
        on_click=ON_CLICK,
    )
    return True


def release_table_download(
    frame: pd.DataFrame,
    release: Release,
    method_verification: Verification,
    adversary: Adversary,
    k: int,
    population: Records | None,
    *,
    label: str,
    file_name: str,
    key: str,
    blocked: str | None = None,
    where: Any = st,
) -> bool:
    """A table built from a release's records, offered only when the release itself may leave
    (`export_check`); otherwise a caption saying why there is no download."""
    _, reason = export_check(release, method_verification, adversary, k, population, blocked)
    if reason is not None:
        where.caption(md(f"No download of these records: {reason}"))
        return False
    table_download(frame, label, file_name, key, where=where)
    return True
