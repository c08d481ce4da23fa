"""`python -m engine sample --out DIR --patients N --seed S`: write synthetic sample data (issue #2)."""

from __future__ import annotations

import argparse
import time

from engine.cli import UserError


def register(sub) -> None:
    parser = sub.add_parser(
        "sample", help="write a synthetic population, biobank, cohort, genotypes and labs"
    )
    parser.add_argument("--out", required=True, help="directory to write into (created if missing)")
    parser.add_argument("--patients", type=int, default=30_000, help="population size (default 30000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--labs",
        choices=("auto", "yes", "no"),
        default="auto",
        help="lab orders (about 220 rows per patient): auto = only up to 200,000 patients (default)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.synth import write_sample

    if args.patients < 1:
        raise UserError(f"--patients must be a positive number of patients, not {args.patients}")
    if args.seed < 0:
        raise UserError(f"--seed must be a non-negative integer, not {args.seed}")
    t0 = time.perf_counter()
    labs = {"auto": None, "yes": True, "no": False}[args.labs]
    paths = write_sample(args.out, args.patients, args.seed, labs=labs)
    for name, path in paths.items():
        print(f"{name}: {path} ({path.stat().st_size / 1e6:.2f} MB)")
    print(f"{args.patients} patients, seed {args.seed}, {time.perf_counter() - t0:.1f} s")
    return 0
