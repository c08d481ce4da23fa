"""`python -m engine anonymize lda`: the Longitudinal Data Anonymizer (Tamersoy 2011 thesis, chapter IV).

    python -m engine anonymize lda --events EVENTS --cohort IDS --k K [--w-icd W]
        [--method a-gs|baseline] [--age-domain LO-HI]
        [--codes paper|all|C1,C2,... | --top-codes N] [--roll-up 3-digit]
        [--icd-levels thesis|full|phecode|cdm] --out RELEASED.csv [--codemap CODEMAP.csv]
        [--report REPORT.json] [--genotypes GENOTYPES --dataset DIR]

The options become `engine.study.runs.LDASettings` (`settings_of`). Each cohort patient's (ICD, Age)
pairs form a trajectory; MDAV clusters of at least k records are anonymized by A-GS (or Baseline)
alignment. RELEASED.csv is `patient_id,code,age`, where code and age may be generalized (`401`,
`240-279`, `Any`, `[33-36]`), verified in cohort scope against all-visits knowledge of the (code, age)
pairs with repeats. Written as `engine.commands.anonymize` says; REPORT.json adds ILM / ALM, AvgRE,
DGH-level shares and the clusters.
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
    add_code_options,
    add_data_options,
    add_k_option,
    add_release_options,
    check_release_k,
    code_selection_of,
)
from engine.io.errors import UserError

if TYPE_CHECKING:
    from engine.study.runs import LDASettings


ICD_LEVELS = {"thesis": "icd9-thesis", "full": "icd9-4digit", "phecode": "phecode", "cdm": "cdm"}


def register(methods, *, study=None) -> argparse.ArgumentParser:
    """The `lda` parser under `anonymize` (runs `run`), or under `study add` when `study` is the
    command to run there: the same method options, no output files, the data optional."""
    p = methods.add_parser("lda", help="LDA: k-anonymize (ICD, Age) trajectories by alignment and clustering")
    add_data_options(
        p,
        study=study is not None,
        population=False,
        events_help="events file (CSV or Parquet): patient_id, code, age[, visit]",
        cohort_help="patient ids of the cohort to release",
    )
    add_k_option(p, study=study is not None)
    from engine.study.runs import LDASettings

    add_parameter_options(p, LDASettings, ("w_icd", "alignment"))  # the declarations' options (issue 38)
    p.add_argument(
        "--age-domain", help="age hierarchy domain LO-HI (default 1-128 as the thesis, else 0-127)"
    )
    add_code_options(p)
    add_parameter_options(p, LDASettings, ("roll_up",))
    p.add_argument(
        "--icd-levels",
        choices=tuple(ICD_LEVELS),
        default="thesis",
        help="ICD hierarchy: thesis = 5-digit/3-digit/section/chapter/Any; full adds 4-digit; phecode = "
        "codes under their phecodes; cdm = an OMOP CDM's own concept_ancestor (--omop-codes standard)",
    )
    if study is not None:
        p.set_defaults(func=study, settings_of=settings_of, **path_roles(DATA_INPUTS, ("STUDY:study",)))
        return p
    p.add_argument("--out", required=True, help="released trajectories CSV (patient_id,code,age)")
    p.add_argument(
        "--codemap",
        help="CSV: released_item (code|age), original_code (the original code|age pairs it stands for)",
    )
    p.add_argument("--report", help="JSON report")
    add_release_options(p)
    p.set_defaults(func=run, **path_roles(DATA_INPUTS, RELEASE_OUTPUTS, RELEASE_FOLDERS, "--out"))
    return p


def parse_age_domain(text: str) -> tuple[int, int]:
    """`33-40` -> (33, 40); UserError otherwise."""
    lo, sep, hi = text.partition("-")
    if not sep or not lo.strip().isdigit() or not hi.strip().isdigit():
        raise UserError(f"--age-domain must look like LO-HI with whole numbers, e.g. 1-128; got {text!r}")
    a, b = int(lo), int(hi)
    if b <= a:
        raise UserError(f"--age-domain {text}: HI must be greater than LO")
    return a, b


def settings_of(args: argparse.Namespace, inputs) -> LDASettings:
    """The command's options as the typed settings the app and a study run with (engine.study.runs):
    the one way from `anonymize lda` or `study add ... lda` options to the LDA. The age domain, when
    not given, comes from every age of the cohort of `inputs` (`default_age_domain`, as the app)."""
    from engine.anonymize.trajectories import default_age_domain
    from engine.study.runs import LDASettings, SettingsError

    check_release_k(args.k)
    checked_option(LDASettings, "w_icd", args.w_icd)
    codes = code_selection_of(args)
    ages = inputs.cohort.event_age
    if args.age_domain:
        low, high = parse_age_domain(args.age_domain)
    elif ages is None:
        raise UserError("the events have no column 'age'; trajectories need the age of each code")
    else:
        low, high = default_age_domain(ages)
    settings = LDASettings(
        k=args.k,
        codes=codes,
        icd_hierarchy=ICD_LEVELS[args.icd_levels],
        age_low=low,
        age_high=high,
        w_icd=args.w_icd,
        alignment=args.method,
        roll_up=args.roll_up or "",
    )
    try:
        settings.validate()
    except SettingsError as exc:
        raise UserError(f"anonymize lda: {exc}") from None
    return settings


def concepts_of(events: str, inputs):
    """The CDM's own hierarchy for `--icd-levels cdm`: the concept_ancestor read with the events
    (`GroupInputs.concepts`); a UserError naming what it needs for any other events (issue 37)."""
    from engine.io.redact import redact
    from engine.study.runs import CDM_HIERARCHY_NEEDS

    if inputs.concepts is None:
        raise UserError(
            f"--icd-levels cdm needs {CDM_HIERARCHY_NEEDS}; {Path(redact(events)).name} is not one"
        )
    return inputs.concepts


def run(args: argparse.Namespace) -> int:
    from engine.commands import method_reports
    from engine.commands.anonymize_release import anonymize, load_inputs, outputs
    from engine.io import export
    from engine.io.redact import redact
    from engine.study.runs import LDASettings, RunInputs

    check_release_k(args.k)
    paths = outputs(args)
    checked_option(LDASettings, "w_icd", args.w_icd)  # the option checks of settings_of, before the data
    if args.age_domain:
        parse_age_domain(args.age_domain)
    code_selection_of(args)
    inputs = load_inputs(args)
    if inputs.events.event_age is None:
        raise UserError(
            f"{Path(redact(args.events)).name}: column 'age' is missing; trajectories need the age of each code"
        )
    settings = settings_of(args, inputs)
    concepts = concepts_of(args.events, inputs) if settings.icd_hierarchy == "cdm" else None
    traj = settings.trajectories(inputs.cohort)
    if int((traj.lengths > 0).sum()) == 0:
        raise UserError("no cohort patient has any of the selected codes; nothing to anonymize")
    run_inputs = RunInputs(inputs.population, inputs.cohort, concepts=concepts)
    try:
        res = settings.run_result(run_inputs, trajectories=traj)
    except ValueError as exc:
        raise UserError(export.refuse(paths, str(exc))) from None
    return anonymize(
        args,
        settings,
        inputs,
        paths,
        res.release().checked(res.source_pairs()),  # as LDASettings.run: one way to a release
        lambda made: method_reports.lda(made, inputs, settings, res, traj),
        run_inputs=run_inputs,
    )
