"""`python -m engine dp-table`: a differentially private code prevalence table (issue 39, third bullet).

    python -m engine dp-table --events EVENTS [--population IDS] [--cohort IDS] --epsilon EPS
        [--delta DELTA] [--max-codes N] [--codes FILE | --phecodes | --phewas --genotypes G]
        [--ledger LEDGER.json --recipient NAME [--budget EPS[,DELTA]]] --out OUT.csv

Writes `code,patients` for every category: the cohort's patients holding the code, with OpenDP's noise
(`engine.disclosure.dp_tables`: Laplace, or Gaussian with --delta), each patient's codes first bounded to
--max-codes (the sensitivity). The categories are the codes of --codes (a CSV with a `code` column: a
public list, e.g. a vocabulary) or else every code of EVENTS (the population's codes, which the table then
takes as public: say so to the recipient); with --phecodes, patients per phecode over every phecode of
the v1.2 map (the bound then counts phecodes per patient). Prints the budget spent, the noise scale, the accuracy of a
cell, the patients truncated and, for the steward only, the error against the exact table.

With `--phewas --genotypes G` (`engine.disclosure.dp_phewas`): `snp,phecode,genotype,cases,controls`
for every SNP column of G and every phecode of the map, --max-codes then bounding the phecodes where a
patient is not a control (the sensitivity is snps x (bound + 1)); printed for the steward, the
associations at p <= 0.05 of the exact PheWAS kept, lost and false when recomputed from the noisy
tables.

With `--ledger` (`engine.disclosure.dp_budget`), the table is spent against the recipient's budget
(stated once with `--budget`, the file made when missing): refused (exit 2) before any noise is drawn
when the recipient's tables would together exceed it, else recorded with the table's sha256.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import pandas as pd

from engine.commands.inputs import InputOptions, load_groups
from engine.commands.paths import path_roles
from engine.disclosure.dp_budget import Spend, read_ledger
from engine.disclosure.dp_tables import (
    ALPHA,
    DEFAULT_MAX_CODES,
    PatientSets,
    check_budget,
    dp_prevalence,
    exact_prevalence,
)
from engine.io.errors import UserError
from engine.io.export import write_table_csv


def register(sub) -> None:
    p = sub.add_parser(
        "dp-table",
        help="a differentially private code prevalence table (OpenDP)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--events", required=True, help="long-form events, CSV or Parquet (patient_id, code, [visit])"
    )
    p.add_argument(
        "--population", help="file of patient ids: the population (default: every patient in EVENTS)"
    )
    p.add_argument("--cohort", help="file of patient ids: the patients counted (default: the population)")
    p.add_argument("--epsilon", type=float, required=True, help="the privacy budget this table spends")
    p.add_argument("--delta", type=float, help="with a delta: the Gaussian mechanism, (epsilon, delta)-DP")
    p.add_argument(
        "--max-codes",
        type=int,
        default=DEFAULT_MAX_CODES,
        help=f"codes counted per patient, the sensitivity (default {DEFAULT_MAX_CODES})",
    )
    p.add_argument(
        "--codes", help="CSV with a `code` column: the table's categories (default: every code of EVENTS)"
    )
    p.add_argument(
        "--ledger", help="privacy budget ledger (JSON; made when missing): the spend is checked and recorded"
    )
    p.add_argument("--recipient", help="with --ledger: to whom the table goes")
    p.add_argument(
        "--budget", type=_budget, help="with --ledger: the recipient's budget, EPS or EPS,DELTA (stated once)"
    )
    p.add_argument(
        "--phecodes",
        action="store_true",
        help="count patients per phecode (the v1.2 map's, every one of them: a public list) instead of per code",
    )
    p.add_argument(
        "--phewas",
        action="store_true",
        help="the PheWAS case/control counts per SNP, phecode and genotype (needs --genotypes)",
    )
    p.add_argument("--genotypes", help="with --phewas: patient_id + one column per SNP (0/1/2)")
    p.add_argument("--out", required=True, help="output CSV: code,patients")
    p.set_defaults(
        func=run,
        **path_roles(
            ("--events", "--population", "--cohort", "--codes", "--genotypes"), ("--out", "--ledger")
        ),
    )


def _budget(text: str) -> tuple[float, float]:
    """An argparse `type` for `--budget`: EPS or EPS,DELTA (argparse's error, exit 2, otherwise)."""
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        values = []
    if len(values) not in (1, 2):
        raise argparse.ArgumentTypeError(f"the budget must be EPS or EPS,DELTA, not {text!r}")
    return values[0], values[1] if len(values) == 2 else 0.0


def _ledger(args: argparse.Namespace, epsilon: float, delta: float | None):
    """The ledger with the recipient's budget, this table's spend checked (before any noise)."""
    if args.ledger is None:
        if args.recipient or args.budget:
            raise UserError("--recipient and --budget go with --ledger")
        return None
    if not args.recipient:
        raise UserError("--ledger needs --recipient: the budget is a recipient's")
    ledger = read_ledger(args.ledger)
    if args.budget is not None:
        ledger = ledger.with_budget(args.recipient, *args.budget)
    ledger.check(args.recipient, epsilon, delta or 0.0)
    return ledger


def _categories(path: str | None, fallback) -> list[str]:
    if path is None:
        return sorted(map(str, fallback))
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise UserError(f"--codes {path}: cannot read it as CSV ({exc})") from None
    if "code" not in frame.columns:
        raise UserError(
            f"--codes {path}: no column named 'code' (columns: {', '.join(map(str, frame.columns))})"
        )
    codes = [c.strip() for c in frame["code"]]
    for row, c in enumerate(codes, start=2):
        if not c:
            raise UserError(f"--codes {path}: row {row}, column code: empty")
    return sorted(set(codes))


def _record(args: argparse.Namespace, ledger, epsilon: float, delta: float | None) -> None:
    """The table written to --out spent in the ledger (when one is kept), the recipient's total said."""
    if ledger is None:
        return
    spend = Spend(args.recipient, Path(args.out).name, epsilon, delta or 0.0,
                  hashlib.sha256(Path(args.out).read_bytes()).hexdigest())  # fmt: skip
    ledger = ledger.with_spend(spend)
    Path(args.ledger).write_text(ledger.to_json(), encoding="utf-8")
    s_eps, s_delta = ledger.spent(args.recipient)
    b_eps, b_delta = ledger.budgets[args.recipient]
    print(
        f"ledger: {args.recipient} has spent epsilon {s_eps:g} of {b_eps:g}, delta {s_delta:g} of {b_delta:g}"
    )


def _phewas(args: argparse.Namespace, g, ledger, epsilon: float, delta: float | None) -> int:
    """`--phewas`: the DP case/control tables, and the associations kept against the exact PheWAS."""
    from engine.commands.inputs import load_genotypes_checked
    from engine.disclosure.dp_phewas import associations_kept, dp_phewas, phewas_of_dp
    from engine.utility.phewas import phewas_of_records

    if args.codes or args.phecodes:
        raise UserError("--phewas counts every phecode of the map: it does not go with --codes or --phecodes")
    genotypes = load_genotypes_checked(args.genotypes, InputOptions.of(args)).data
    release = dp_phewas(g.cohort, genotypes, epsilon, delta, args.max_codes)
    write_table_csv(args.out, release.table)
    _record(args, ledger, release.noise.epsilon, release.noise.delta)
    noise = release.noise
    spent = f"epsilon {noise.epsilon:g}" + ("" if noise.delta is None else f", delta {noise.delta:g}")
    print(f"mechanism: OpenDP {noise.mechanism}, noise scale {noise.scale:.4g}; budget spent: {spent}")
    print(
        f"phecodes per patient where not a control: at most {release.max_phecodes}; sensitivity "
        f"{release.sensitivity} ({len(release.counts.snps)} SNPs x (bound + 1)); "
        f"{release.truncated:,} of {release.patients:,} patients truncated"
    )
    print(f"accuracy: each cell within {noise.accuracy:.1f} patients with probability {1 - ALPHA:.0%}")
    kept = associations_kept(phewas_of_records(g.cohort, genotypes), phewas_of_dp(release))
    print(
        f"for the steward only, associations at p <= 0.05 of the exact PheWAS: {kept['original']:,}; "
        f"from the noisy tables kept {kept['kept']:,}, lost {kept['lost']:,}, false {kept['false']:,}"
    )
    print(f"wrote {len(release.table):,} rows (SNP x phecode x genotype) to {args.out}")
    return 0


def run(args: argparse.Namespace) -> int:
    epsilon, delta = check_budget(args.epsilon, args.delta)
    if args.phewas != bool(args.genotypes):
        raise UserError("--phewas and --genotypes go together: the PheWAS tables count genotypes")
    ledger = _ledger(args, epsilon, delta)  # checked before any noise is drawn
    g = load_groups(
        args.events, population=args.population, cohort=args.cohort, options=InputOptions.of(args)
    )
    if args.phewas:
        return _phewas(args, g, ledger, epsilon, delta)
    if args.phecodes:
        if args.codes:
            raise UserError("--phecodes counts every phecode of the map: it does not go with --codes")
        sets = PatientSets.of_phecodes(g.cohort)
        categories = [str(c) for c in sets.labels]
        print(f"categories: the {len(categories):,} phecodes of the v1.2 map")
    else:
        sets = PatientSets.of_codes(g.cohort)
        categories = _categories(args.codes, g.population.items)
    table = dp_prevalence(sets, categories, epsilon, delta, args.max_codes)
    write_table_csv(args.out, table.table)
    _record(args, ledger, table.epsilon, table.delta)
    spent = f"epsilon {table.epsilon:g}" + ("" if table.delta is None else f", delta {table.delta:g}")
    print(f"mechanism: OpenDP {table.mechanism}, noise scale {table.scale:.4g}; budget spent: {spent}")
    print(
        f"codes per patient kept: {table.max_codes} (the sensitivity); {table.truncated:,} of {table.patients:,} patients truncated"
    )
    print(f"accuracy: each cell within {table.accuracy:.1f} patients with probability {1 - ALPHA:.0%}")
    err = table.error(exact_prevalence(sets, categories))
    print(
        f"for the steward only, against the exact table: mean absolute error {err['mean absolute error']:.2f}, "
        f"largest {err['largest absolute error']:.0f}, cells within the accuracy {err['cells within accuracy']:.1%}"
    )
    print(f"wrote {len(table.table):,} categories to {args.out}")
    return 0
