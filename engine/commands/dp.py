"""`python -m engine dp-table`: a differentially private code prevalence table (issue 39, third bullet).

    python -m engine dp-table --events EVENTS [--population IDS] [--cohort IDS] --epsilon EPS
        [--delta DELTA] [--max-codes N] [--codes FILE] --out OUT.csv

Writes `code,patients` for every category: the cohort's patients holding the code, with OpenDP's noise
(`engine.disclosure.dp_tables`: Laplace, or Gaussian with --delta), each patient's codes first bounded to
--max-codes (the sensitivity). The categories are the codes of --codes (a CSV with a `code` column: a
public list, e.g. a vocabulary) or else every code of EVENTS (the population's codes, which the table then
takes as public: say so to the recipient). Prints the budget spent, the noise scale, the accuracy of a
cell, the patients truncated and, for the steward only, the error against the exact table.
"""

from __future__ import annotations

import argparse

import pandas as pd

from engine.commands.inputs import InputOptions, load_groups
from engine.commands.paths import path_roles
from engine.disclosure.dp_tables import ALPHA, DEFAULT_MAX_CODES, dp_prevalence, exact_prevalence
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
    p.add_argument("--out", required=True, help="output CSV: code,patients")
    p.set_defaults(func=run, **path_roles(("--events", "--population", "--cohort", "--codes"), ("--out",)))


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


def run(args: argparse.Namespace) -> int:
    g = load_groups(
        args.events, population=args.population, cohort=args.cohort, options=InputOptions.of(args)
    )
    categories = _categories(args.codes, g.population.items)
    table = dp_prevalence(g.cohort, categories, args.epsilon, args.delta, args.max_codes)
    write_table_csv(args.out, table.table)
    spent = f"epsilon {table.epsilon:g}" + ("" if table.delta is None else f", delta {table.delta:g}")
    print(f"mechanism: OpenDP {table.mechanism}, noise scale {table.scale:.4g}; budget spent: {spent}")
    print(
        f"codes per patient kept: {table.max_codes} (the sensitivity); {table.truncated:,} of {table.patients:,} patients truncated"
    )
    print(f"accuracy: each cell within {table.accuracy:.1f} patients with probability {1 - ALPHA:.0%}")
    err = table.error(exact_prevalence(g.cohort, categories))
    print(
        f"for the steward only, against the exact table: mean absolute error {err['mean absolute error']:.2f}, "
        f"largest {err['largest absolute error']:.0f}, cells within the accuracy {err['cells within accuracy']:.1%}"
    )
    print(f"wrote {len(table.table):,} categories to {args.out}")
    return 0
