"""`python -m engine anonymize generalize`: Heatherly 2013's frequency-bin generalization.

    python -m engine anonymize generalize --events EVENTS [--population IDS] [--biobank IDS]
        --cohort IDS --k K [--scope cohort|biobank|population]
        [--constraints phecode|icd9:LEVEL|cdm[:DEPTH]|none] [--complete [--completion rarest|phewas]] [--with-visits]
        --out RELEASED.csv [--codemap CODEMAP.csv] [--report REPORT.json]
        [--genotypes GENOTYPES --dataset DIR]

The options become `engine.study.runs.HeatherlySettings` (`settings_of`). `--scope cohort` anonymizes
the cohort alone (DEMO_D), `biobank` the biobank and then extracts the cohort (DEMO_B), `population`
the whole population (DEMO_S). A released item such as `{401.0,401.1}` (Heatherly Figure 13b) is
verified under single-visit knowledge. Written as `engine.commands.anonymize` says; REPORT.json adds
the procedure's figures and Diagnosis Count and Code Count with and without generalization.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import numpy as np

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
from engine.io.errors import UserError

if TYPE_CHECKING:
    from engine.study.runs import HeatherlySettings


def register(methods, *, study=None) -> argparse.ArgumentParser:
    """The `generalize` parser under `anonymize` (runs `run`), or under `study add` when `study` is the
    command to run there: the same method options, no output files, the data optional."""
    p = methods.add_parser(
        "generalize",
        help="Heatherly: generalize rare codes within PheWAS codes, then suppress (single-visit k)",
    )
    add_data_options(
        p, study=study is not None, biobank=True, cohort_help="patient ids of the research cohort"
    )
    add_k_option(p, study=study is not None)
    from engine.study.runs import HeatherlySettings

    # the options of the declarations (issue 38); --complete is a switch, off unless given
    add_parameter_options(
        p, HeatherlySettings, ("scope", "constraints", "complete", "completion", "with_visits")
    )
    if study is not None:
        p.set_defaults(func=study, settings_of=settings_of, **path_roles(DATA_INPUTS, ("STUDY:study",)))
        return p
    p.add_argument("--out", required=True, help="released events CSV (patient_id, [visit,] code)")
    p.add_argument(
        "--codemap", help="CSV: released_item, original_code (and source_spelling after --normalize-codes)"
    )
    p.add_argument("--report", help="JSON report: parameters, DC / CC figures, verification")
    add_release_options(p)
    p.set_defaults(func=run, **path_roles(DATA_INPUTS, RELEASE_OUTPUTS, RELEASE_FOLDERS, "--out"))
    return p


def settings_of(args: argparse.Namespace, inputs=None) -> HeatherlySettings:
    """The command's options as the typed settings the app and a study run with (engine.study.runs):
    the one way from `anonymize generalize` or `study add ... generalize` options to Heatherly's
    method. `inputs` (the loaded groups), when given, is checked to hold the group the scope names."""
    from engine.anonymize.population import parse_constraints
    from engine.study.runs import HeatherlySettings

    check_release_k(args.k)
    try:
        constraints = parse_constraints(args.constraints)
    except ValueError as exc:
        raise UserError(f"--constraints: {exc}") from None
    if args.scope == "biobank" and not args.biobank and (inputs is None or inputs.biobank is None):
        raise UserError("--scope biobank needs --biobank IDS")
    settings = HeatherlySettings(
        k=args.k,
        scope=args.scope,
        constraints=constraints,
        complete=args.complete,
        with_visits=args.with_visits,
        completion=args.completion,
    )
    settings.validate()
    return settings


def run(args: argparse.Namespace) -> int:
    from engine.anonymize.population import SCOPE_NAMES, export_label
    from engine.commands import method_reports
    from engine.commands.anonymize_release import anonymize, load_inputs, outputs, refuse_without_visits
    from engine.study.runs import SettingsError

    paths = outputs(args)
    settings = settings_of(args)
    inputs = load_inputs(args)
    cohort = inputs.cohort
    group = {"cohort": cohort, "population": inputs.population, "biobank": inputs.biobank}[args.scope]
    assert group is not None  # --scope biobank needs --biobank (settings_of)
    outside = np.setdiff1d(cohort.patient_ids.astype(str), group.patient_ids.astype(str))
    if len(outside):
        raise UserError(
            f"{args.cohort}: {len(outside)} cohort patient(s) are not in the {args.scope} anonymized with "
            f"--scope {args.scope}, e.g. {', '.join(outside[:5])}"
        )
    refuse_without_visits(args, paths, group)
    try:  # the settings the app and a study run with; make_release verifies
        result = settings.run_result(inputs.run_inputs, verify_now=False)
    except SettingsError as exc:
        raise UserError(f"anonymize generalize: {exc}") from None
    print(f"Heatherly {SCOPE_NAMES[args.scope]} export: {export_label(args.with_visits)}")
    return anonymize(
        args,
        settings,
        inputs,
        paths,
        result.release.checked(cohort),
        lambda made: method_reports.heatherly(made, inputs, settings),
    )
