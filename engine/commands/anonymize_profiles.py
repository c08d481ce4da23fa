"""`python -m engine anonymize ugaclip|aclip`: clinical profiles (Loukides et al. 2010, PNAS).

    python -m engine anonymize ugaclip|aclip --events EVENTS --cohort IDS --k K
        --knowledge single_visit|all_visits [--utility-policy POLICY.csv | --utility-hierarchy cdm]
        [--max-suppressed N] [--with-visits]
        --out RELEASED.csv --codemap CODEMAP.csv [--report REPORT.json]
        [--genotypes GENOTYPES --dataset DIR]

The options become `engine.study.runs.ProfilesSettings` through `settings_of`, the one function
`anonymize ugaclip|aclip` and `study add ... ugaclip|aclip` share. PPE extracts the privacy policy from the cohort (filtering condition = the attacker's knowledge);
UGACLIP (with the utility policy, default: the shipped Table 1 policy) or ACLIP anonymizes; the
release is written through the export gate (engine/io/export.py), atomically, only when both the
policy check and the risk engine (cohort scope, same knowledge) verified exactly that file; when
either fails, a release an earlier run left at these paths is removed. RELEASED.csv is long form
(`patient_id`, `code`: one row per patient and item, the PNAS released profiles) with anonymized
items labelled `{c1,c2,...}`; CODEMAP.csv maps each released item to its original codes. REPORT.json
holds parameters, input hashes, the policy, utility constraints satisfied, suppression, relative
error, both verifications, the release fingerprint and the sha256 of the files written; it is
written either way. Paths ending in `.gz` are gzip-compressed (large anonymized items repeat long
labels: compression shrinks them a hundredfold and more).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from engine.commands.parameter_options import add_parameter_options
from engine.commands.paths import path_roles
from engine.commands.release_options import (
    DATA_INPUTS,
    RELEASE_FOLDERS,
    RELEASE_OUTPUTS,
    add_data_options,
    add_k_option,
    add_release_options,
    check_release_k,
)
from engine.disclosure.cells import add_min_cell_option, min_cell_of
from engine.io.errors import UserError

if TYPE_CHECKING:
    from engine.study.runs import ProfilesSettings

WITH_VISITS_NEEDS = (
    "--with-visits needs --knowledge single_visit: an attacker who knows every "
    "visit could match them one by one in a file that keeps them"
)


def register(methods, *, study=None) -> list[argparse.ArgumentParser]:
    """The `ugaclip` and `aclip` parsers under `anonymize` (running `run`), or under `study add` when
    `study` is the command to run there: the same method options, no output files, the data optional."""
    from engine.study.runs import ProfilesSettings

    out = []
    for name, help_text in (
        ("ugaclip", "UGACLIP: utility-guided anonymization of clinical profiles (PPE privacy policy)"),
        ("aclip", "ACLIP: the same privacy policy, generalization by information loss only"),
    ):
        p = methods.add_parser(name, help=help_text)
        add_data_options(
            p,
            study=study is not None,
            population=False,
            events_help="events file (CSV or Parquet): patient_id, code, visit",
            cohort_help="patient ids of the cohort to release",
        )
        add_k_option(p, study=study is not None)
        add_parameter_options(p, ProfilesSettings, ("knowledge",), required=("knowledge",))
        p.add_argument(
            "--utility-policy",
            help="CSV of disease,icd9_codes[,comment] (default: the Table 1 policy; ignored by aclip)",
        )
        add_parameter_options(p, ProfilesSettings, ("utility_hierarchy", "max_suppressed", "with_visits"))
        inputs = (*DATA_INPUTS, "--utility-policy")
        if study is not None:
            p.set_defaults(
                func=study,
                settings_of=settings_of,
                profiles_method=name.upper(),
                **path_roles(inputs, ("STUDY:study",)),
            )
        else:
            p.add_argument("--out", required=True, help="released events CSV")
            p.add_argument("--codemap", required=True, help="CSV mapping each released item to its codes")
            p.add_argument("--report", help="JSON report")
            add_min_cell_option(p, "the report's patients per disease of the utility policy")
            add_release_options(p)
            p.set_defaults(
                func=run,
                profiles_method=name.upper(),
                **path_roles(inputs, RELEASE_OUTPUTS, RELEASE_FOLDERS, "--out"),
            )
        out.append(p)
    return out


def settings_of(args: argparse.Namespace, inputs=None) -> ProfilesSettings:
    """The command's options as the typed settings the app and a study run with (engine.study.runs):
    the one way from `anonymize ugaclip|aclip` or `study add ... ugaclip|aclip` options to the
    method; the utility policy is read as the CSV text a study keeps."""
    from engine.study.runs import ProfilesSettings

    check_release_k(args.k)
    if args.max_suppressed is not None and args.max_suppressed < 0:
        raise UserError(f"--max-suppressed must be >= 0, not {args.max_suppressed}")
    try:
        policy_text = None if args.utility_policy is None else Path(args.utility_policy).read_text("utf-8")
    except FileNotFoundError as exc:
        raise UserError(f"--utility-policy: no such file {args.utility_policy}") from exc
    except UnicodeDecodeError as exc:
        raise UserError(f"--utility-policy {args.utility_policy}: not UTF-8 text ({exc.reason})") from exc
    if args.with_visits and args.knowledge != "single_visit":
        raise UserError(WITH_VISITS_NEEDS)
    if args.utility_hierarchy and args.utility_policy is not None:
        raise UserError("give --utility-policy or --utility-hierarchy, not both")
    settings = ProfilesSettings(
        algorithm=args.profiles_method,
        k=args.k,
        knowledge=args.knowledge,
        utility_policy_csv=policy_text,
        max_suppressed=args.max_suppressed,
        with_visits=args.with_visits,
        utility_hierarchy=args.utility_hierarchy or "",
    )
    settings.validate()
    return settings


def run(args: argparse.Namespace) -> int:
    from engine.anonymize.population import export_label
    from engine.anonymize.profiles import SuppressionLimitExceeded
    from engine.commands.anonymize_release import release_and_publish, write_report
    from engine.commands.inputs import InputOptions, announce, findings_json, load_groups
    from engine.disclosure.cells import suppress_frame
    from engine.io import export

    cells = min_cell_of(args)
    from engine.study.runs import CDM_HIERARCHY_NEEDS, RunInputs
    from engine.utility.queries import satisfaction_words

    method = args.profiles_method
    check_release_k(args.k)
    paths = export.release_paths(args.out, codemap=args.codemap, report=args.report)
    if args.with_visits and args.knowledge != "single_visit":
        raise UserError(export.refuse(paths, WITH_VISITS_NEEDS))
    settings = settings_of(args)  # the settings the app and a study run with
    inputs = load_groups(args.events, cohort=args.cohort, options=InputOptions.of(args))
    cohort, sources = inputs.cohort, inputs.sources
    if settings.utility_hierarchy and inputs.concepts is None:
        raise UserError(f"--utility-hierarchy cdm needs {CDM_HIERARCHY_NEEDS}")
    try:
        utility = settings.utility_policy([str(x) for x in cohort.items], inputs.concepts)
    except ValueError as exc:
        raise UserError(f"--utility-policy {args.utility_policy}: {exc}") from exc
    announce(utility.report)
    if args.with_visits and not cohort.has_visits:
        raise UserError(
            export.refuse(
                paths, f"--with-visits: {args.events} has no visit column, so there are no visits to keep"
            )
        )
    if cohort.n_patients < args.k:
        raise UserError(
            export.refuse(paths, f"the cohort has {cohort.n_patients} records, fewer than k = {args.k}.")
        )
    run_inputs = RunInputs(cohort, cohort, concepts=inputs.concepts)  # no population: cohort scope
    try:
        result = settings.run_result(run_inputs)
    except SuppressionLimitExceeded as exc:
        raise UserError(export.refuse(paths, str(exc))) from exc
    print(f"{method} export: {export_label(args.with_visits)}")
    policy, check = result.policy, result.check
    blocked = None if check.ok else f"{check.message()} {result.verification.message()}"
    made, outcome = release_and_publish(
        args,
        settings,
        inputs,
        paths,
        run_inputs=run_inputs,
        release=result.release.checked(cohort),
        blocked=blocked,
    )
    release, verification = made.release, made.verification
    sat, re_ = result.satisfaction, result.relative_error
    count_cols = ["original_records", "released_records"]  # patients per disease: the report's cells
    shown_sat, sat_note = suppress_frame(sat, cells, count_cols, table="utility constraints")
    report = {
        "method": method,
        "paper": "Loukides, Gkoulalas-Divanis, Malin 2010, PNAS 107(17):7898-7903",
        "params": {
            "k": args.k,
            "knowledge": args.knowledge,
            "utility_policy": args.utility_policy or settings.describe()["utility policy"],
            "max_suppressed": args.max_suppressed,
        },
        "sources": sources,
        "input_warnings": findings_json(utility.report, inputs.report),
        "cohort": {"records": cohort.n_patients, "visits": cohort.n_visits, "events": cohort.n_events},
        "privacy_policy": {
            "constraints": len(policy),
            "collected": policy.n_collected,
            "already_protected": policy.n_already_protected,
            "covered_by_superset": policy.n_covered,
        },
        "policy_check": {"ok": check.ok, "violated": check.n_violated, "message": check.message()},
        "verification": {"ok": verification.ok, "message": verification.message()},
        "loss": release.loss,
        "steps": len(release.params.get("trace", [])),
        "utility_constraints": shown_sat.to_dict(orient="records"),
        "small_cells": {"policy": cells.to_dict(), "description": cells.describe(), **sat_note.to_dict()},
        "relative_error": {"queries": len(re_.queries), "mean": re_.mean, "std": re_.std},
    }
    report["export"] = outcome
    write_report(args, report, outcome)
    print(
        f"{method} k={args.k} {args.knowledge}: {cohort.n_patients} records, {len(policy)} privacy constraints; "
        f"{release.loss['generalized_items']} generalized items, {release.loss['suppressed_codes']} codes suppressed "
        f"({release.loss['share_suppressed_events']:.2%} of events); utility constraints satisfied "
        f"{satisfaction_words(sat)}; RE mean {re_.mean:.3f} (sd {re_.std:.3f}); {verification.message()} Release {export.structure_note(release)}."
    )
    return 0
