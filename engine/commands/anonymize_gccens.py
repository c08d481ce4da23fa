"""`python -m engine anonymize gccens`: censor repeated codes under k-map (Tamersoy 2010, GCCens).

    python -m engine anonymize gccens --events EVENTS [--population IDS] --cohort IDS --k K
        [--codes paper|all|C1,C2,... | --top-codes N] [--cap C | --caps 250=2,272=2,...]
        [--scope population|cohort] [--variant faithful|targeted] --out RELEASED.csv [--codemap CODEMAP.csv] [--report REPORT.json]
        [--genotypes GENOTYPES --dataset DIR]

The options become `engine.study.runs.GCCensSettings` (`settings_of`; `--codes`: the app's code
selection, default all codes). Without `--cap`/`--caps` every code is capped at its maximum repeat
count in the cohort (the paper's scan of S). RELEASED.csv holds one row per remaining instance (visits
and ages are not released: GCCens releases repeat counts only); after `--normalize-codes` CODEMAP.csv
also maps each code to its spellings in the source. Written as `engine.commands.anonymize` says;
REPORT.json adds per-record CUL, the CUL statistics and the censoring steps.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from engine.commands.parameter_options import add_parameter_options
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
    from engine.study.runs import GCCensSettings


def register(methods, *, study=None) -> argparse.ArgumentParser:
    """The `gccens` parser under `anonymize` (runs `run`), or under `study add` when `study` is the
    command to run there: the same method options, no output files, the data optional."""
    p = methods.add_parser("gccens", help="GCCens: censor repeated diagnosis codes until k-map holds")
    add_data_options(p, study=study is not None)
    add_k_option(p, study=study is not None)
    add_code_options(p)
    from engine.study.runs import GCCensSettings

    caps = p.add_mutually_exclusive_group()
    add_parameter_options(caps, GCCensSettings, ("cap",))  # the options of the declarations (issue 38)
    caps.add_argument("--caps", help="per-code caps, e.g. 250=2,272=2,401=0,724=1 (others: sample maximum)")
    add_parameter_options(p, GCCensSettings, ("scope", "variant"))
    if study is not None:
        p.set_defaults(func=study, settings_of=settings_of, **path_roles(DATA_INPUTS, ("STUDY:study",)))
        return p
    p.add_argument("--out", required=True, help="released events CSV (patient_id,code)")
    p.add_argument(
        "--codemap", help="CSV: released_item, original_code (and source_spelling after --normalize-codes)"
    )
    p.add_argument("--report", help="JSON report with parameters, CUL and verification")
    add_release_options(p)
    p.set_defaults(func=run, **path_roles(DATA_INPUTS, RELEASE_OUTPUTS, RELEASE_FOLDERS, "--out"))
    return p


def parse_caps(text: str) -> dict[str, int]:
    """`250=2,272=2` -> {"250": 2, "272": 2}; a UserError naming the bad entry otherwise."""
    out: dict[str, int] = {}
    for n, entry in enumerate(text.split(","), start=1):
        entry = entry.strip()
        if not entry:
            continue
        code, sep, value = entry.partition("=")
        code, value = code.strip(), value.strip()
        if not sep or not code or not value.lstrip("-").isdigit():
            raise UserError(f"--caps entry {n} ({entry!r}) must look like CODE=CAP, e.g. 250=2")
        if int(value) < 0:
            raise UserError(f"--caps entry {n} ({entry!r}): a cap must be >= 0")
        if code in out:
            raise UserError(f"--caps entry {n}: code {code} is given twice")
        out[code] = int(value)
    if not out:
        raise UserError("--caps is empty; give CODE=CAP pairs, e.g. 250=2,272=2")
    return out


def settings_of(args: argparse.Namespace, inputs=None) -> GCCensSettings:
    """The command's options as the typed settings the app and a study run with (engine.study.runs):
    the one way from `anonymize gccens` or `study add ... gccens` options to GCCens."""
    from engine.study.runs import GCCensSettings

    check_release_k(args.k)
    if args.cap is not None and args.cap < 0:
        raise UserError(f"--cap must be >= 0, not {args.cap}")
    caps = parse_caps(args.caps) if args.caps is not None else {}
    settings = GCCensSettings(
        k=args.k,
        scope=args.scope,
        codes=code_selection_of(args),
        cap=args.cap,
        caps=tuple(sorted(caps.items())),
        variant=args.variant,
    )
    settings.validate()
    return settings


def run(args: argparse.Namespace) -> int:
    from engine.commands import method_reports
    from engine.commands.anonymize_release import anonymize, load_inputs, outputs
    from engine.study.runs import SettingsError

    check_release_k(args.k)
    paths = outputs(args)
    settings = settings_of(args)
    inputs = load_inputs(args)
    try:
        prepared = settings.prepare_input(inputs.run_inputs)
    except SettingsError as exc:
        raise UserError(f"anonymize gccens: {exc}") from None
    unknown = sorted(set(dict(settings.caps)) - set(prepared.problem.code_labels))
    if unknown:
        print(
            f"note: --caps names codes not in the cohort, ignored: {', '.join(unknown[:10])}", file=sys.stderr
        )
    return anonymize(
        args,
        settings,
        inputs,
        paths,
        settings.release_of(prepared, inputs.cohort),
        lambda made: method_reports.gccens(made, inputs, settings),
    )
