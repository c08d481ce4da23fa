"""`python -m engine sample --out DIR --patients N --seed S [--formats icd10cm,mixed,omop,meds]`: write
synthetic sample data (issue #2) and, with --formats, its ICD-10-CM and mixed variants (`icd10cm/`,
`mixed/`, engine/synth/icd10.py) and its OMOP CDM DuckDB database and MEDS folder (`omop/`, `meds/`,
engine/synth/formats.py) (issue 14), and a CDM coded in synthetic standard concepts (`omop_snomed/`,
engine/synth/omop_vocabulary.py, issue 37).
`--scale paper`: Heatherly 2013's 1,366,786 patients (or `--patients`), written block by block in
bounded memory with a progress line per block, lab orders for the research cohort only
(engine/synth/chunked.py, issue #36)."""

from __future__ import annotations

import argparse
import time

from engine.commands.paths import path_roles
from engine.io.errors import UserError


def register(sub) -> None:
    parser = sub.add_parser(
        "sample", help="write a synthetic population, biobank, cohort, genotypes and labs"
    )
    parser.add_argument("--out", required=True, help="directory to write into (created if missing)")
    parser.add_argument(
        "--scale",
        choices=("sample", "paper"),
        default="sample",
        help="sample = the shipped sample's way, in memory (default); paper = Heatherly 2013's "
        "1,366,786 patients written block by block in bounded memory, lab orders for the research "
        "cohort only",
    )
    parser.add_argument(
        "--patients",
        type=int,
        default=None,
        help="population size (default 30000; 1366786 with --scale paper)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--labs",
        choices=("auto", "yes", "no"),
        default="auto",
        help="lab orders (about 220 rows per patient): auto = only up to 200,000 patients (default)",
    )
    parser.add_argument(
        "--parameters",
        choices=("calibrated", "shipped"),
        default="calibrated",
        help="code draw and group selection: calibrated = issue 16's (default), shipped = the earlier "
        "ones the shipped sample_data/ was generated with (sample_data/CALIBRATION.md)",
    )
    parser.add_argument(
        "--formats",
        default="",
        help="comma-separated extra forms of the sample: icd10cm (ICD-10-CM variant), mixed (ICD-9-CM "
        "history, ICD-10-CM later visits), omop (OMOP CDM v5.4 DuckDB file), meds (MEDS folder), "
        "omop-snomed (OMOP CDM folder in synthetic SNOMED/CPT4/RxNorm concepts with its vocabulary tables)",
    )
    parser.set_defaults(func=run, **path_roles())


FORMATS = ("icd10cm", "mixed", "omop", "meds", "omop-snomed")


def parse_formats(text: str) -> list[str]:
    """The --formats list, each one of FORMATS; UserError names an unknown one."""
    out = [f.strip() for f in text.split(",") if f.strip()]
    bad = [f for f in out if f not in FORMATS]
    if bad:
        raise UserError(f"--formats: unknown format(s) {', '.join(bad)}; use any of {', '.join(FORMATS)}")
    return out


def run(args: argparse.Namespace) -> int:
    from engine.synth.chunked import PAPER_PATIENTS, write_chunked
    from engine.synth.generator import PARAMETERS, SHIPPED_PARAMETERS, write_sample

    patients = args.patients
    if patients is None:
        patients = PAPER_PATIENTS if args.scale == "paper" else 30_000
    if patients < 1:
        raise UserError(f"--patients must be a positive number of patients, not {patients}")
    if args.seed < 0:
        raise UserError(f"--seed must be a non-negative integer, not {args.seed}")
    formats = parse_formats(args.formats)
    parameters = SHIPPED_PARAMETERS if args.parameters == "shipped" else PARAMETERS
    t0 = time.perf_counter()
    if args.scale == "paper":
        if formats or args.labs != "auto":
            raise UserError(
                "--scale paper writes lab orders for the research cohort only and no --formats "
                "(they read the whole population into memory); leave out --labs and --formats"
            )
        paths = write_chunked(
            args.out,
            patients,
            args.seed,
            parameters=parameters,
            progress=lambda line: print(f"{time.perf_counter() - t0:6.1f} s  {line}", flush=True),
        )
    else:
        labs = {"auto": None, "yes": True, "no": False}[args.labs]
        paths = write_sample(args.out, patients, args.seed, labs=labs, parameters=parameters)
    if formats:
        from engine.synth.formats import write_formats

        paths.update(write_formats(args.out, formats))
    if "omop-snomed" in formats:
        from engine.synth.omop_vocabulary import write_snomed_cdm

        paths.update(write_snomed_cdm(args.out, args.seed))
    for name, path in paths.items():
        print(f"{name}: {path} ({path.stat().st_size / 1e6:.2f} MB)")
    print(
        f"{patients} patients, seed {args.seed}, {args.parameters} parameters, "
        f"{time.perf_counter() - t0:.1f} s"
    )
    return 0
