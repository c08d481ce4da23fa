"""`python -m engine anonymize generalize`: Heatherly 2013's frequency-bin generalization.

    python -m engine anonymize generalize --events EVENTS [--population IDS] [--biobank IDS]
        --cohort IDS --k K [--scope cohort|biobank|population]
        [--constraints phecode|icd9:LEVEL|cdm[:DEPTH]|none] [--complete [--completion rarest|phewas]] [--with-visits]
        --out RELEASED.csv [--codemap CODEMAP.csv] [--report REPORT.json]
        [--genotypes GENOTYPES --dataset DIR]

The options become `engine.study.runs.HeatherlySettings` through `settings_of`, the one function
`anonymize generalize` and `study add ... generalize` share, the settings the app and a study run with.
`--scope cohort` anonymizes the cohort alone (DEMO_D), `biobank` the biobank and then extracts the
cohort (DEMO_B), `population` the whole population (DEMO_S). RELEASED.csv is long form (`patient_id`,
`code` holding the released item, e.g. `{401.0,401.1}`; one row per patient and item, the papers'
form, Heatherly Figure 13b), written through the export gate (engine/io/export.py) only when the risk
engine verified exactly that file under single-visit knowledge; CODEMAP.csv maps each released item to
its original codes. Both are written atomically; when verification fails, a release an earlier run
left at these paths is removed. REPORT.json (parameters, inputs, the procedure's figures, Diagnosis
Count and Code Count with and without generalization, the verification with the failing records, the
release fingerprint and the sha256 of the files written) is written either way.
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
    from engine import risk
    from engine.anonymize.population import (
        SCOPE_NAMES,
        export_label,
        suppress_rare,
    )
    from engine.commands.anonymize_release import release_and_publish, write_report
    from engine.commands.inputs import InputOptions, load_groups
    from engine.io import export
    from engine.study.runs import RunInputs, SettingsError
    from engine.utility.retention import code_count_phrase, figures

    paths = export.release_paths(args.out, codemap=args.codemap, report=args.report)
    settings = settings_of(args)
    constraints = settings.constraints
    inputs = load_groups(
        args.events,
        population=args.population,
        cohort=args.cohort,
        biobank=args.biobank,
        options=InputOptions.of(args),
    )
    sources, cohort = inputs.sources, inputs.cohort
    cohort_ids = cohort.patient_ids
    groups = {"cohort": cohort, "population": inputs.population}
    if inputs.biobank is not None:  # given whenever --scope biobank is (checked above)
        groups["biobank"] = inputs.biobank
    group = groups[args.scope]
    outside = np.setdiff1d(cohort_ids.astype(str), group.patient_ids.astype(str))
    if len(outside):
        raise UserError(
            f"{args.cohort}: {len(outside)} cohort patient(s) are not in the {args.scope} anonymized with "
            f"--scope {args.scope}, e.g. {', '.join(outside[:5])}"
        )
    if args.with_visits and not group.has_visits:
        raise UserError(
            export.refuse(
                paths, f"--with-visits: {args.events} has no visit column, so there are no visits to keep"
            )
        )
    try:  # the settings the app and a study run with
        result = settings.run_result(
            RunInputs(inputs.population, cohort, inputs.biobank, concepts=inputs.concepts)
        )
    except SettingsError as exc:
        raise UserError(f"anonymize generalize: {exc}") from None
    print(f"Heatherly {SCOPE_NAMES[args.scope]} export: {export_label(args.with_visits)}")
    made, outcome = release_and_publish(args, settings, inputs, paths, release=result.release.checked(cohort))
    release, verification = made.release, made.verification
    _, plain_cohort = suppress_rare(group, cohort_ids, args.k)
    before = risk.original_distinguishability(cohort, verification.adversary, group)
    original, released = figures(cohort), figures(release.records, release.item_codes, original=cohort)
    retention = {
        "original": original.__dict__,
        "with generalization": released.__dict__,
        "without generalization": figures(plain_cohort).__dict__,
    }
    report: dict[str, object] = {
        "method": f"Heatherly 2013, {SCOPE_NAMES[args.scope]} (frequency-bin generalization, then suppression)",
        "parameters": release.params,
        "inputs": sources,
        "input_warnings": inputs.warnings,
        "records": {"anonymized group": group.n_patients, "cohort": cohort.n_patients},
        "procedure": release.loss,
        "retention": retention,
        "suppressed events": len(release.suppressed),
        "verification": {
            "ok": verification.ok,
            "adversary": verification.adversary.label,
            "k": args.k,
            "message": verification.message(),
            "before": risk.summarize(before, args.k).as_dict(),
            "after": risk.summarize(verification.distinguishability, args.k).as_dict(),
            "failing": verification.failing.astype({"distinguishability": int}).to_dict("records"),
        },
    }
    report["export"] = outcome
    write_report(
        args, report, outcome, hint="" if args.complete else " (--complete adds the completion pass)"
    )
    print(
        f"Heatherly {SCOPE_NAMES[args.scope]} k={args.k} ({constraints}{', completed' if args.complete else ''}): "
        f"{cohort.n_patients} records, DC {released.diagnosis_count} of "
        f"{original.diagnosis_count}, {code_count_phrase(released, original)}; {verification.message()} Release {export.structure_note(release)}."
    )
    return 0
