"""`python -m engine anonymize ugaclip|aclip`: clinical profiles (Loukides et al. 2010, PNAS).

    python -m engine anonymize ugaclip|aclip --events EVENTS --cohort IDS --k K
        --knowledge single_visit|all_visits [--utility-policy POLICY.csv | --utility-hierarchy cdm]
        [--max-suppressed N] [--with-visits]
        --out RELEASED.csv --codemap CODEMAP.csv [--report REPORT.json]
        [--genotypes GENOTYPES --dataset DIR]

The options become `engine.study.runs.ProfilesSettings` (`settings_of`). PPE extracts the privacy
policy from the cohort (filtering condition = the attacker's knowledge); UGACLIP (with the utility
policy, default: the shipped Table 1 policy) or ACLIP anonymizes. Written as `engine.commands.anonymize`
says, only when the policy check passes too (cohort scope, same knowledge); anonymized items are
labelled `{c1,c2,...}`. REPORT.json adds the policy, the utility constraints satisfied, suppression
and relative error. Paths ending in `.gz` are gzip-compressed (large anonymized items repeat long
labels: compression shrinks them a hundredfold and more).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from engine.commands.parameter_options import add_parameter_options, checked_option
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
    checked_option(ProfilesSettings, "max_suppressed", args.max_suppressed)
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
    from engine.commands import method_reports
    from engine.commands.anonymize_release import anonymize, load_inputs, outputs, refuse_without_visits
    from engine.commands.inputs import announce
    from engine.io import export
    from engine.study.runs import CDM_HIERARCHY_NEEDS, RunInputs

    cells = min_cell_of(args)
    check_release_k(args.k)
    paths = outputs(args)
    if args.with_visits and args.knowledge != "single_visit":
        raise UserError(export.refuse(paths, WITH_VISITS_NEEDS))
    settings = settings_of(args)  # the settings the app and a study run with
    inputs = load_inputs(args)
    cohort = inputs.cohort
    if settings.utility_hierarchy and inputs.concepts is None:
        raise UserError(f"--utility-hierarchy cdm needs {CDM_HIERARCHY_NEEDS}")
    try:
        utility = settings.utility_policy([str(x) for x in cohort.items], inputs.concepts)
    except ValueError as exc:
        raise UserError(f"--utility-policy {args.utility_policy}: {exc}") from exc
    announce(utility.report)
    refuse_without_visits(args, paths, cohort)
    if cohort.n_patients < args.k:
        raise UserError(
            export.refuse(paths, f"the cohort has {cohort.n_patients} records, fewer than k = {args.k}.")
        )
    run_inputs = RunInputs(cohort, cohort, concepts=inputs.concepts)  # no population: cohort scope
    try:  # make_release verifies
        result = settings.run_result(run_inputs, verify_now=False)
    except SuppressionLimitExceeded as exc:
        raise UserError(export.refuse(paths, str(exc))) from exc
    print(f"{args.profiles_method} export: {export_label(args.with_visits)}")
    check = result.check
    return anonymize(
        args,
        settings,
        inputs,
        paths,
        result.release.checked(cohort),
        lambda made: method_reports.profiles(
            made, inputs, settings, result, utility, cells, args.utility_policy
        ),
        run_inputs=run_inputs,
        blocked=lambda made: None if check.ok else f"{check.message()} {made.verification.message()}",
    )
