"""Report: the study's releases verified under all four adversaries, the IRB report (HTML, PDF,
JSON), the release bundle, and the study file (save, and reopen with a rebuild of every release)."""

from __future__ import annotations

from dataclasses import replace as _replace

import pandas as pd
import streamlit as st

from engine.disclosure.cells import PRESETS, SmallCellError, SmallCellPolicy
from engine.report.bundle import make_bundle
from engine.report.glossary import help_for
from engine.report.report import SMALL_CELL_RULE, PhewasResults, ReleaseInput, ReportError, build_report
from engine.report.signing import office_public_pem
from engine.study.joint import JointRefused, refuse_unless_verified
from engine.study.ledger import ledger as _ledger
from engine.study.ledger import ledger_frame, study_ledger_releases
from engine.study.study import StudyError, verification_matrix
from ui import cache, dp_view, honest, literal, measures, progress, threshold
from ui import study as session_study
from ui.context import Context, warn_if_whole_population
from ui.downloads import AUDIT_SESSION, crosswalk_download, report_download
from ui.fingerprints import release_key
from ui.state import ABSENT, declare
from ui.teach import intro

_REOPENED, _REOPEN_RESULT = (
    "_study_reopened",
    "study_reopen_result",
)  # the study file last reopened; its outcome
_BUILT = "report_built"  # (key, report, its HTML page) of the last build, or (key, error)
declare(__name__, held=dict.fromkeys((_REOPENED, _REOPEN_RESULT, _BUILT), ABSENT))
_LEDGERS = 2  # the study's ledger (ui.cache, this session: the session's study)


def _matrix(ctx: Context, release):
    """`verification_matrix` at the sidebar's k, each adversary's distinguishability memoized
    (`ui.study.verify_under`: k only thresholds it)."""
    return verification_matrix(
        release,
        ctx.population,
        int(ctx.k),
        lambda rel, adv, k, _population: session_study.verify_under(rel, ctx, adv, k),
    )


def render(ctx: Context) -> None:
    """The Report page: the study file, the releases under the four adversaries, the small-cell policy and
    the ledger, the IRB report and bundle, the DP tables and the session's audit log."""
    st.title("Report")
    intro("report")
    warn_if_whole_population(ctx)
    study = session_study.session(ctx)
    published = session_study.current(ctx)
    session_study.others_note(ctx)

    # ------------------------------------------------ the determination: to whom, the context, why (issue 27)
    study = threshold.controls(ctx)
    threshold.caption(ctx)

    # ------------------------------------------------------------------------ reopen / save the study
    with st.expander("Study file: save, or reopen one (every release is rebuilt and its files compared)"):
        names = session_study.session_input_names()
        include = st.checkbox(
            "Include the input files (patient data) in the study file",
            key="study_include_data",
            disabled=not names,
            help="A zip of the study file and the files uploaded in the sidebar, so that it reopens without "
            "uploading them again. It holds patient data: share it as you would the data.",
        )
        if include and names:
            try:
                package = session_study.study_package(study)
            except StudyError as exc:
                literal.error(exc)
            else:
                report_download(
                    package,
                    "Download the study with its input files (zip)",
                    "cohortshield_study.zip",
                    "study_save",
                )
                st.caption(literal.md("Includes patient data: " + ", ".join(names)))
        else:
            report_download(
                study.to_json(), "Download the study file (JSON)", "cohortshield_study.json", "study_save"
            )
            st.caption(
                "The study file holds the settings, the input files' sha256, the load options and every "
                "release's file hashes and verification; no patient data."
                + ("" if names else " The shipped sample and imports are named in it, not included.")
            )
        up = st.file_uploader(
            "Reopen a study file (JSON, or zip with its input files)",
            type=["json", "zip"],
            key="study_upload",
        )
        try:
            checks = session_study.reopen_pending(ctx)  # its data was loaded by this run's sidebar
            if checks is None and up is not None and st.session_state.get(_REOPENED) != up.file_id:
                st.session_state[_REOPENED] = up.file_id
                checks = session_study.open_study_file(ctx, up.getvalue(), up.name)
        except StudyError as exc:
            st.session_state[_REOPEN_RESULT] = ("error", str(exc))
        else:
            if checks is not None:
                st.session_state[_REOPEN_RESULT] = (
                    "ok",
                    [(c.name, c.passed, c.differences()) for c in checks],
                )
                study, published = session_study.session(ctx), session_study.current(ctx)
                session_study.follow_reopened(ctx)  # the sidebar moves to the study's adversary and k
        result = st.session_state.get(_REOPEN_RESULT)
        if result is not None and result[0] == "error":
            literal.error(result[1])
        elif result is not None:
            if not result[1]:
                st.info("The study file holds no release of the data loaded now.")
            for name, passed, differences in result[1]:
                if passed:
                    st.success(
                        literal.md(f"{name}: rebuilt byte-identical and verified again at k = {ctx.k}.")
                    )
                else:  # a changed or stale file, or a release that fails the study's k: never exportable
                    literal.error(f"Release {name!r} is not exportable: " + "; ".join(differences) + ".")

    # ------------------------------------------------- the study's releases: remove, public, undo / redo
    if study.current() or session_study.can_undo() or session_study.can_redo():
        st.subheader("The study's releases")
        session_study.edit_panel(ctx)  # issue 35, finding 6: a study one can edit

    # ------------------------------------------------------------------ verification, four adversaries
    st.subheader(
        f"Verification of every release at k = {ctx.k} under the four adversaries and the whole-record attacker"
    )
    if not published:
        st.info(
            'No release in the study yet: make one on the Anonymize page and press "Add to study", or '
            "reopen a study file above. A report without releases records the data only."
        )
    else:
        st.caption(f"The study's adversary (the sidebar's): {ctx.adversary.label}.")
        rows = []
        for name, (_entry, held) in published.items():
            m = _matrix(ctx, held.release)
            failing = m.loc[~m["verified"], "adversary"].tolist()
            rows.append(m.assign(release=name)[["release", *m.columns]])
            if failing:
                literal.warning(f"{name}: not verified at k = {ctx.k} against {', '.join(failing)}.")
        st.dataframe(pd.concat(rows, ignore_index=True), hide_index=True, key="report_matrix")
        for name, (_entry, held) in published.items():  # issue 16: what each release leaves out
            honest.show_flags(held.release, ctx.cohort, name)

    # ------------------------------------------------------------- crosswalks (identifying, steward only)
    exportable = {n: held for n, (entry, held) in published.items() if entry.exportable}
    if exportable:
        with st.expander("Crosswalks: release id to source id (IDENTIFYING: for the steward only)"):
            st.warning(
                "A crosswalk names every patient of a release by the source's id (e.g. the MRN). Keep it with "
                "the steward; never send it with the release. It is not part of the bundle."
            )
            for i, (n, held) in enumerate(exportable.items()):
                crosswalk_download(held.release, study.pseudonyms, n, f"crosswalk_{i}")

    # ------------------------------------------------------- issue 28: small cells and the ledger
    st.subheader("Small cells and releases that add up")

    _choices = [*PRESETS, "custom"]
    _policy_now = study.small_cells
    sc1, sc2 = st.columns([3, 1])
    _name = sc1.selectbox(
        "Small-cell policy of every count table that leaves (report, bundle, table downloads)",
        _choices,
        index=_choices.index(_policy_now.name),
        key="report_small_cells",
        format_func=lambda n: PRESETS[n][2] if n in PRESETS else "custom: counts below N suppressed",
        help=help_for("small_cell_policy"),
    )
    _n = sc2.number_input(
        "N (smallest publishable count)",
        2,
        1000,
        max(2, _policy_now.high + 1),
        key="report_small_cells_n",
        disabled=_name != "custom",
    )
    try:
        _policy = SmallCellPolicy.min_cell(int(_n)) if _name == "custom" else SmallCellPolicy.preset(_name)
    except SmallCellError as exc:
        literal.error(exc)
    else:
        if _policy != study.small_cells:
            study = _replace(study, small_cells=_policy)
            session_study.update(study)
    st.caption(literal.md(f"In force: {study.small_cells.describe()}. {SMALL_CELL_RULE}"))
    _pairs = None  # the ledger's pairs, when the study has two releases or more (handed to the build)
    if len(published) > 1:
        _lkey = (  # everything the ledger reads: each release's content, its recipient, the attacker
            tuple((n, release_key(held.release), e.recipient) for n, (e, held) in published.items()),
            study.determination.recipient,
            ctx.population.fingerprint,
            ctx.adversary,
            int(ctx.k),
        )

        def _linked():
            _held = study_ledger_releases(study, {n: held.release for n, (_e, held) in published.items()})
            return _ledger(_held, ctx.adversary, int(ctx.k), ctx.population)

        _pairs = cache.memo(
            "report ledger",
            _lkey,
            _linked,
            size=_LEDGERS,
            spinner="Linking every pair of releases sharing patients and verifying each as one…",
        )
        if _pairs:
            st.dataframe(ledger_frame(_pairs), hide_index=True, key="report_ledger")
            # the table says it of every pair: a sentence for each pair not verified together, one line for the rest
            _together = sum(_p.ok for _p in _pairs)
            if _together:
                st.caption(
                    f"{_together} of {len(_pairs)} pairs sharing patients are verified together at k = {ctx.k} "
                    "(the table's 'verified' column)."
                )
            for _p in _pairs:
                if not _p.ok:
                    literal.warning(_p.message())
            if not all(_p.ok for _p in _pairs):
                st.caption(
                    "A set of releases one recipient would hold that fails together is refused: no bundle of "
                    "it and no download of one of its releases (issue 35). Withdraw a release (Remove above, "
                    "or leave it out of the report), or derive the releases from one anonymization."
                )
        else:
            st.caption("No two releases of the study share a patient.")

    # ---------------------------------------------------------------------------- the IRB report
    st.subheader("IRB report and release bundle")
    st.caption(
        "One page of plain-language summary, one section per release (parameters, risk, utility, the "
        "verification under all four adversaries), the records (version, commit, sha256 of every input and "
        "released file, load options) and the appendix. Every release is verified again under the sidebar's "
        "adversary and k; only verified releases' files go into the bundle, and none when they fail "
        "together under linkage (every pair sharing patients, and the whole set, verified as one)."
    )
    left_out = st.multiselect(
        "Releases to leave out (every other release is reported)", list(published), key="report_left_out"
    )
    chosen = [n for n in published if n not in left_out]
    recipient = study.determination.recipient  # set at the top of the page (ui.threshold.controls)
    reproducible = st.checkbox(
        "Reproducible (no generation time: the same inputs give byte-identical files)",
        key="report_reproducible",
    )
    key = (
        study.to_json(),
        tuple(chosen),
        recipient,
        reproducible,
        tuple(release_key(published[n][1].release) for n in chosen),
    )

    def _phewas_results(names: list[str]) -> PhewasResults | None:
        """The report's PheWAS tables (default settings) of the cohort and of each release, the PheWAS
        page's own memos (`ui.measures`): a rebuild, or the PheWAS page before it, does not run them again."""
        genotypes = ctx.dataset.genotypes
        if genotypes is None or genotypes.empty:
            return None
        from engine.utility.phewas import PhewasSettings

        settings = PhewasSettings()
        released = {n: measures.released_phewas(ctx, published[n][1].release, settings) for n in names}
        return PhewasResults(measures.original_phewas(ctx, settings), released)

    def _build(step) -> tuple | ReportError:
        """The report and its HTML page (the preview; the other formats are rendered when downloaded, each
        once: `Report` keeps their bytes); run in a worker process (issue 24), so it may write only the
        app's cache."""
        inputs = {}
        for i, n in enumerate(chosen):
            step(0.5 * i / max(len(chosen), 1), f"verifying {n!r} under the study's attacker")
            held = published[n][1]
            v = session_study.reverify(ctx, held.release)
            # the gate's files of this session (made when added), checked against the study's sha256
            inputs[n] = ReleaseInput(held.release, v, (held.files or None) if v.ok else None)
        step(0.5, "the PheWAS tables and the four-adversary matrices")
        phewas = _phewas_results(chosen)
        matrices = {n: _matrix(ctx, published[n][1].release) for n in chosen}  # thresholds only
        # what this page already measured (the release warnings' memos, the ledger above): not again
        rels = {n: published[n][1].release for n in chosen}
        figures = {
            n: honest.file_figures(r, ctx.cohort, inputs[n].files, study.pseudonyms) for n, r in rels.items()
        }
        headlines = {n: honest.figures(r, ctx.cohort) for n, r in rels.items()}
        step(0.7, "writing the report")
        try:
            report = build_report(
                study,
                inputs,
                ctx.population,
                ctx.cohort,
                genotypes=ctx.dataset.genotypes,
                phewas=phewas,
                concepts=ctx.dataset.concepts,
                recipient=recipient,
                reproducible=reproducible,
                matrices=matrices,
                ledger=_pairs,
                figures=figures,
                headlines=headlines,
                biobank=session_study.run_inputs(ctx).biobank,  # DEMO_B's paper's procedure (issue 36)
                public={  # held by every recipient even when left out (issue 35)
                    n: published[n][1].release
                    for n in left_out
                    if published[n][0].public and published[n][0].exportable
                },
            )
        except ReportError as exc:
            return exc
        step(0.8, "rendering the HTML")
        return report, report.to_html()  # the PDF and the bundle when their download is clicked

    if st.button("Build the report", type="primary", key="report_build") or progress.underway(
        "report_run", key
    ):
        made = progress.run("Building the report", _build, key="report_run", job=key, probe=False)
        if made is not None:
            st.session_state[_BUILT] = (key, made) if isinstance(made, ReportError) else (key, *made)
    built = st.session_state.get(_BUILT)
    if built is None or built[0] != key:
        st.info("Build the report to download it; it reflects the releases and settings chosen above.")
    elif len(built) == 2:
        literal.error(f"The report cannot be built: {built[1]}")
    else:
        _, report, page = built
        c1, c2, c3, c4, c5 = st.columns(5)
        # the PDF (fpdf2: most of a build's time) and the bundle that holds it are rendered when clicked,
        # once (`Report.to_pdf` keeps its bytes: the bundle's PDF is the downloaded one)
        try:  # the joint gate (issue 35): no bundle of releases that fail together under linkage
            refuse_unless_verified(report.joint, "The release bundle")
        except JointRefused as exc:
            literal.error(exc)
        else:
            report_download(
                lambda: make_bundle(report),
                "Release bundle (zip: verified files, report, manifest)",
                "cohortshield_release.zip",
                where=c1,
            )
        report_download(report.to_pdf, "IRB report (PDF)", "cohortshield_report.pdf", where=c2)
        report_download(page, "IRB report (HTML)", "cohortshield_report.html", where=c3)
        report_download(report.to_json, "IRB report (JSON)", "cohortshield_report.json", where=c4)
        report_download(report.to_markdown, "IRB report (Markdown)", "cohortshield_report.md", where=c5)
        # issue 39: the bundle is signed with the office key; its public half is what recipients check it with
        report_download(office_public_pem, "Office public key (PEM, for verify)", "cohortshield_office.pub")
        st.caption(
            "The bundle's manifest is signed with the office's key. Give recipients the office public key "
            "once; they check a bundle offline with `python -m engine verify cohortshield_release.zip "
            "--key cohortshield_office.pub` (every file, and the signature)."
        )
        unverified = [r["name"] for r in report.data["releases"] if not r["verification"]["verified"]]
        if unverified:
            literal.warning(
                f"Not verified at k = {ctx.k} ({ctx.adversary.label}): {', '.join(unverified)}. They are "
                "reported, but their files are not in the bundle."
            )
        # the page is self-contained, every text in it escaped, scripts forbidden by its own CSP
        st.iframe(page.decode("utf-8"), height=900)

    # ------------------------------------------------------------ issue 39: differentially private tables
    st.subheader("Differentially private tables")
    dp_view.show(ctx)

    # ------------------------------------------------------------------ this session's audit entries
    st.subheader("This session's downloads (audit log)")
    audit_rows = st.session_state.get(AUDIT_SESSION) or []
    if not audit_rows:
        st.caption(
            "Nothing downloaded in this session yet. Every download is written to the audit log when clicked."
        )
    else:
        st.dataframe(
            pd.DataFrame(audit_rows)[
                ["time", "user", "what", "file_name", "release", "adversary", "k", "sha256"]
            ],
            hide_index=True,
            key="report_audit",
        )
