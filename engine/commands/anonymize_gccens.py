"""`python -m engine anonymize gccens`: censor repeated codes under k-map (Tamersoy 2010, GCCens).

    python -m engine anonymize gccens --events EVENTS [--population IDS] --cohort IDS --k K
        [--cap C | --caps 250=2,272=2,...] [--scope population|cohort] [--variant faithful|targeted]
        --out RELEASED.csv [--codemap CODEMAP.csv] [--report REPORT.json]

The options become `engine.study.runs.GCCensSettings` (all codes), the settings the app and a study
run with. Without `--cap`/`--caps` every code is capped at its maximum repeat count in the cohort (the paper's
scan of S). RELEASED.csv is long form, `patient_id,code`, one row per remaining instance (visits and
ages are not released: GCCens releases repeat counts only); CODEMAP.csv maps each released code to
itself and, after `--normalize-codes`, to its spellings in the source. Both are written through the
export gate (engine/io/export.py), atomically, only when the risk engine verified exactly that file; when it fails,
a release an earlier run left at `--out` is removed. REPORT.json (parameters, input hashes, per-record
CUL, the CUL statistics, the censoring steps, the verification, the release fingerprint and the
sha256 of the file written) is written either way.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.commands.release_options import add_release_options
from engine.io.errors import UserError

SCOPES = ("population", "cohort")
VARIANTS = ("faithful", "targeted")


def register(methods) -> None:
    p = methods.add_parser("gccens", help="GCCens: censor repeated diagnosis codes until k-map holds")
    p.add_argument("--events", required=True, help="events file (CSV or Parquet): patient_id, code[, visit]")
    p.add_argument("--population", help="patient ids of the population (default: every patient in EVENTS)")
    p.add_argument("--cohort", required=True, help="patient ids of the cohort (the sample to release)")
    p.add_argument("--k", type=int, required=True, help="privacy parameter k (>= 2)")
    caps = p.add_mutually_exclusive_group()
    caps.add_argument("--cap", type=int, help="one universal cap for every code")
    caps.add_argument("--caps", help="per-code caps, e.g. 250=2,272=2,401=0,724=1 (others: sample maximum)")
    p.add_argument(
        "--scope", choices=SCOPES, default="population", help="k-map (population) or k-anonymity (cohort)"
    )
    p.add_argument("--variant", choices=VARIANTS, default="faithful", help="faithful Algorithm 1 or targeted")
    p.add_argument("--out", required=True, help="released events CSV (patient_id,code)")
    p.add_argument(
        "--codemap", help="CSV: released_item, original_code (and source_spelling after --normalize-codes)"
    )
    p.add_argument("--report", help="JSON report with parameters, CUL and verification")
    add_release_options(p)
    p.set_defaults(func=run)


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


def run(args: argparse.Namespace) -> int:
    from engine import risk
    from engine.adversary import Adversary
    from engine.anonymize.censor import report as gccens_report
    from engine.commands.inputs import InputOptions, load_groups, publish
    from engine.commands.release_options import pseudonyms_of
    from engine.io import export
    from engine.study.runs import CodeSelection, GCCensSettings, RunInputs, SettingsError

    if args.k < 2:
        raise UserError(f"--k must be >= 2 for a release (k = 1 protects nobody), not {args.k}")
    paths = export.release_paths(args.out, codemap=args.codemap, report=args.report)
    if args.cap is not None and args.cap < 0:
        raise UserError(f"--cap must be >= 0, not {args.cap}")
    caps = parse_caps(args.caps) if args.caps is not None else None
    inputs = load_groups(
        args.events, population=args.population, cohort=args.cohort, options=InputOptions.of(args)
    )
    population, cohort, sources = inputs.population, inputs.cohort, inputs.sources
    settings = GCCensSettings(
        k=args.k,
        scope=args.scope,
        codes=CodeSelection("all"),
        cap=args.cap,
        caps=tuple(sorted((caps or {}).items())),
        variant=args.variant,
    )
    try:
        prepared = settings.prepare_input(RunInputs(population, cohort))
    except SettingsError as exc:
        raise UserError(f"anonymize gccens: {exc}") from None
    unknown = sorted(set(caps or {}) - set(prepared.problem.code_labels))
    if unknown:
        print(
            f"note: --caps names codes not in the cohort, ignored: {', '.join(unknown[:10])}", file=sys.stderr
        )
    release = settings.release_of(prepared, cohort)  # the settings the app and a study run with
    adversary = Adversary(args.scope, "all_visits")
    verification = risk.verify(release, adversary, args.k, population)
    before = risk.original_distinguishability(
        cohort, adversary, population, risk.Matching(count_repeats=True)
    )
    report = gccens_report(
        release,
        verification,
        before,
        original_codes=cohort.n_events,
        population_size=population.n_patients,
        sources=sources,
    )
    report["input_warnings"] = inputs.warnings
    report["export"] = publish(
        inputs,
        release,
        verification,
        adversary,
        args.k,
        paths,
        pseudonyms=pseudonyms_of(args),
        crosswalk_path=args.crosswalk,
    )
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2, default=str) + "\n")
    if not report["export"]["written"]:
        pool = population.n_patients if args.scope == "population" else cohort.n_patients
        raise UserError(
            f"{export.refusal_message(report['export'])} k = {args.k} cannot be reached with {args.scope} "
            f"scope (even an empty record has only {pool} candidates)"
        )
    print(
        f"GCCens k={args.k} {args.scope} {args.variant}: {cohort.n_patients} records, "
        f"{release.records.n_events} of {cohort.n_events} codes released "
        f"({release.loss['censored_by_caps']} censored by caps, {release.loss['censored_by_loop']} by the loop), "
        f"mean CUL {report['cul_statistics']['mean']:.3f}; {verification.message()} Release {export.structure_note(release)}."
    )
    return 0
