"""`python -m engine anonymize ugaclip|aclip`: clinical profiles (Loukides et al. 2010, PNAS).

    python -m engine anonymize ugaclip|aclip --events EVENTS --cohort IDS --k K
        --knowledge single_visit|all_visits [--utility-policy POLICY.csv] [--max-suppressed N] [--with-visits]
        --out RELEASED.csv --codemap CODEMAP.csv [--report REPORT.json]

PPE extracts the privacy policy from the cohort (filtering condition = the attacker's knowledge);
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
import json
from pathlib import Path

from engine.commands.release_options import add_release_options
from engine.io.errors import UserError

KNOWLEDGES = ("single_visit", "all_visits")


def register(methods) -> None:
    for name, help_text in (
        ("ugaclip", "UGACLIP: utility-guided anonymization of clinical profiles (PPE privacy policy)"),
        ("aclip", "ACLIP: the same privacy policy, generalization by information loss only"),
    ):
        p = methods.add_parser(name, help=help_text)
        p.add_argument(
            "--events", required=True, help="events file (CSV or Parquet): patient_id, code, visit"
        )
        p.add_argument("--cohort", required=True, help="patient ids of the cohort to release")
        p.add_argument("--k", type=int, required=True, help="privacy parameter k (>= 2)")
        p.add_argument("--knowledge", choices=KNOWLEDGES, required=True, help="PPE filtering condition")
        p.add_argument(
            "--utility-policy",
            help="CSV of disease,icd9_codes[,comment] (default: the Table 1 policy; ignored by aclip)",
        )
        p.add_argument("--max-suppressed", type=int, help="stop when more distinct codes must be suppressed")
        p.add_argument(
            "--with-visits",
            action="store_true",
            help="keep the visit grouping in the release (patient_id, visit, code; single_visit only); "
            "default: one set of codes per patient (patient_id, code), the paper's released profiles",
        )
        p.add_argument("--out", required=True, help="released events CSV")
        p.add_argument("--codemap", required=True, help="CSV mapping each released item to its codes")
        p.add_argument("--report", help="JSON report")
        add_release_options(p)
        p.set_defaults(func=run, profiles_method=name.upper())


def run(args: argparse.Namespace) -> int:
    from engine.adversary import Adversary
    from engine.anonymize.population import export_label
    from engine.anonymize.profiles import SuppressionLimitExceeded
    from engine.commands.inputs import (
        InputOptions,
        announce,
        findings_json,
        load_groups,
        publish,
    )
    from engine.commands.release_options import pseudonyms_of
    from engine.io import export
    from engine.study.runs import ProfilesSettings, RunInputs

    method = args.profiles_method
    if args.k < 2:
        raise UserError(f"--k must be >= 2 for a release (k = 1 protects nobody), not {args.k}")
    paths = export.release_paths(args.out, codemap=args.codemap, report=args.report)
    if args.max_suppressed is not None and args.max_suppressed < 0:
        raise UserError(f"--max-suppressed must be >= 0, not {args.max_suppressed}")
    try:
        policy_text = None if args.utility_policy is None else Path(args.utility_policy).read_text("utf-8")
    except FileNotFoundError as exc:
        raise UserError(f"--utility-policy: no such file {args.utility_policy}") from exc
    except UnicodeDecodeError as exc:
        raise UserError(f"--utility-policy {args.utility_policy}: not UTF-8 text ({exc.reason})") from exc
    if args.with_visits and args.knowledge != "single_visit":
        raise UserError(
            export.refuse(
                paths,
                "--with-visits needs --knowledge single_visit: an attacker who knows every visit could "
                "match them one by one in a file that keeps them",
            )
        )
    inputs = load_groups(args.events, cohort=args.cohort, options=InputOptions.of(args))
    cohort, sources = inputs.cohort, inputs.sources
    settings = ProfilesSettings(  # the settings the app and a study run with
        algorithm=method,
        k=args.k,
        knowledge=args.knowledge,
        utility_policy_csv=policy_text,
        max_suppressed=args.max_suppressed,
        with_visits=args.with_visits,
    )
    try:
        utility = settings.utility_policy([str(x) for x in cohort.items])
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
    try:
        result = settings.run_result(RunInputs(cohort, cohort))
    except SuppressionLimitExceeded as exc:
        raise UserError(export.refuse(paths, str(exc))) from exc
    print(f"{method} export: {export_label(args.with_visits)}")
    policy, release, check, verification = result.policy, result.release, result.check, result.verification
    release = release.checked(cohort)
    sat, re_ = result.satisfaction, result.relative_error
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
        "utility_constraints": sat.to_dict(orient="records"),
        "relative_error": {"queries": len(re_.queries), "mean": re_.mean, "std": re_.std},
    }
    adversary = Adversary("cohort", args.knowledge)
    blocked = None if check.ok else f"{check.message()} {verification.message()}"
    report["export"] = publish(
        inputs,
        release,
        verification,
        adversary,
        args.k,
        paths,
        blocked=blocked,
        pseudonyms=pseudonyms_of(args),
        crosswalk_path=args.crosswalk,
    )
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2, default=str) + "\n")
    if not report["export"]["written"]:
        raise UserError(export.refusal_message(report["export"]))
    print(
        f"{method} k={args.k} {args.knowledge}: {cohort.n_patients} records, {len(policy)} privacy constraints; "
        f"{release.loss['generalized_items']} generalized items, {release.loss['suppressed_codes']} codes suppressed "
        f"({release.loss['share_suppressed_events']:.2%} of events); utility constraints satisfied "
        f"{int(sat['satisfied'].sum())}/{len(sat)}; RE mean {re_.mean:.3f} (sd {re_.std:.3f}); {verification.message()} Release {export.structure_note(release)}."
    )
    return 0
