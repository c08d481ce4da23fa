"""`python -m engine risk`: distinguishability of every cohort patient under one adversary.

    python -m engine risk --events EVENTS [--population IDS] [--cohort IDS]
        --scope {cohort,population} --knowledge {single_visit,all_visits,whole_record} [--k K]
        [--count-repeats] [--threads N] [--up-to-k]
        [--shards DIR [--scheduler ADDR | --dask-workers N]] --out OUT.csv

Writes `patient_id,distinguishability` for every cohort patient (cohort order) and prints the summary
(records, share unique, share below k, median). EVENTS is a long-form CSV or Parquet file; IDS a file
of patient ids. The population defaults to every patient in EVENTS, the cohort to the population.
Files are read and validated by `engine.io.loaders` (errors name file, row and column).

With `--shards DIR` (population scope), the candidates are the population in the Parquet shards of DIR
(`python -m engine shards EVENTS DIR N` writes them) and EVENTS holds the cohort's events: each shard
is read and counted on its own (engine/scale/shards.py), or on Dask with `--scheduler tcp://HOST:8786` or
`--dask-workers N` (a LocalCluster; engine/scale/distributed.py). The backend, the kernel that ran
(`engine.risk.record_kernels`) and each shard's progress are printed. Results equal the in-process run.

Every run also prints the maximum risk (1 / the smallest distinguishability), the average risk (mean of
1 / distinguishability) and the records at risk (above the threshold 1/k), `engine.risk.risk_measures`.

k-map without the population (issue 27): `--scope population --population-size N` with no population at
hand (EVENTS need hold only the cohort's events) estimates the share of cohort records unique and below
k in a population of N patients from the cohort alone (`engine.estimate.kmap`, `--model`), with their 95 %
spread under the model (not a measured error) and the model-free upper bound of the cohort alone,
headed by its warning. `--selected-by random` (or none) assumes the cohort is a simple random sample of
the population, which underestimates the risk of a cohort selected by its codes; `--selected-by 250,401`
states that every population patient with a code starting with 250 or 401 is in the cohort: known sets
holding such a code are then counted exactly, the rest estimated (issue #36, finding 4).
`--population-code-counts FILE` (CSV code,count: the population's patients holding each code, aggregate
counts far easier to obtain than patient data) makes sets of one code exact, bounds every set by its
rarest code's count and estimates it at that code's share in the cohort. `--out` then holds each
record's estimate (patient_id, cohort distinguishability, expected population distinguishability,
probability unique, probability below k). `--report R.json` writes the figures printed as JSON.

`--explain FILE` (steward only: it names SOURCE patient ids) writes, for every record below k, the
minimal part of what the attacker knows that singles it out and the cheapest change that brings it to
k (`engine.estimate.explain`), as CSV: a generalization recodes its category in every record, a
suppression removes the code from the record; each change is counted again by `engine.risk` on the
release it makes ("distinguishability after"; the number that reach k is printed) and states its cost
over every record it touches (pairs and events lost, records, pairs and events recoded). On an OMOP
source read in standard concepts (`--omop-codes standard`) with its vocabulary tables, a generalization
climbs the CDM's own hierarchy (a concept to its parent, issue 37); otherwise ICD's 3-digit codes /
categories.

`--sensitive [CATEGORIES|FILE] --rho RHO [--sensitive-m M] [--sensitive-out RULES.csv]` (issue 39):
rho-uncertainty of the cohort (`engine.disclosure.sensitive`): per sensitive category (the shipped ones,
some of them by name, or the officer's CSV) the rules q -> s above rho over every set of up to M known
non-sensitive codes under the adversary, and the share of records whose sensitive code is inferred;
RULES.csv lists every rule above rho (spreadsheet-safe).

`--in-database` (issue 37; `--cohort`, an OMOP CDM as EVENTS, a DuckDB file or a PostgreSQL URL with
`--schema`, its ICD source values): the population's events stay in the database; the per-code
supports and each known set's candidates (those holding its rarest code; under `--scope cohort` the
cohort's patients) are counted in SQL and only the cohort's conditions are loaded
(`engine.io.omop_counts`). Results equal the in-process run (tests/test_omop_indb.py, DuckDB;
tests/test_omop_counts_pg.py, PostgreSQL).

`--up-to-k` counts every known set only up to k (`Matching(cap=k)`, engine/risk.py `count_known_sets`): the
share unique, the share below k and every record below k are exact, values of k or more read k, and
the population-scale run grows about linearly with the population (issue 15).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from engine.adversary import KNOWLEDGES, SCOPES, Adversary, k_argument
from engine.commands.inputs import InputOptions, load_groups, shard_progress
from engine.commands.paths import path_roles
from engine.disclosure.sensitive import (
    DEFAULT_M,
    Categories,
    category_argument,
    check_m,
    check_rho,
    rho_uncertainty,
)
from engine.estimate.kmap import MODELS
from engine.io.concepts import ConceptParents
from engine.io.errors import UserError
from engine.io.export import write_table_csv
from engine.records import Records
from engine.risk import (
    KnownSets,
    Matching,
    original_distinguishability,
    record_kernels,
    risk_measures,
    summarize,
    thread_count,
    threshold_of_k,
)


def _matching(args: argparse.Namespace) -> Matching:
    """The matching of `--count-repeats`, `--threads` and `--up-to-k`."""
    return Matching(
        count_repeats=args.count_repeats, threads=args.threads, cap=args.k if args.up_to_k else None
    )


def _sharded(args: argparse.Namespace, cohort: Records, adversary: Adversary):
    """Distinguishability of the cohort against the population in the shards of `--shards`, and the
    number of candidates."""
    from engine.scale.shards import sharded_known_set_distinguishability

    folder = Path(args.shards)
    paths = sorted(folder.glob("shard-*.parquet"))
    if not paths:
        raise UserError(f"--shards: no shard-*.parquet file in {str(folder)!r}")
    matching = _matching(args)
    if args.scheduler or args.dask_workers is not None:
        from engine.scale.distributed import dask_known_set_distinguishability

        where = args.scheduler or f"a local cluster of {args.dask_workers} workers"
        print(f"backend: Dask ({where}), {len(paths)} shards; kernel chosen per shard on the workers")
        ks: KnownSets = dask_known_set_distinguishability(
            cohort,
            paths,
            adversary.knowledge,
            matching,
            scheduler=args.scheduler,
            n_workers=args.dask_workers or 2,
            progress=shard_progress(),
        )
    else:
        print(f"backend: {len(paths)} shards, one at a time, {thread_count(args.threads)} threads")
        with record_kernels() as ran:
            ks = sharded_known_set_distinguishability(
                cohort, paths, adversary.knowledge, matching, progress=shard_progress(ran)
            )
    return ks.per_record(), ks.n_candidates


def register(sub) -> None:
    p = sub.add_parser(
        "risk",
        help="distinguishability of every cohort patient under one adversary",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--events", required=True, help="long-form events, CSV or Parquet (patient_id, code, [visit])"
    )
    p.add_argument(
        "--population", help="file of patient ids: the population (default: every patient in EVENTS)"
    )
    p.add_argument("--cohort", help="file of patient ids: the cohort (default: the population)")
    p.add_argument("--scope", required=True, choices=SCOPES, help="candidates: the cohort or the population")
    p.add_argument(
        "--knowledge",
        required=True,
        choices=KNOWLEDGES,
        help="one visit's codes, all codes, or the whole record (also the codes it does not hold)",
    )
    p.add_argument("--k", type=k_argument, default=5, help="k for the share below k (default 5)")
    p.add_argument(
        "--count-repeats",
        action="store_true",
        help="all-visits knowledge includes how often each code was assigned (Tamersoy 2010)",
    )
    p.add_argument(
        "--threads",
        type=int,
        help="threads of the risk kernel (default: COHORTSHIELD_THREADS, else every core); "
        "results are the same for every count",
    )
    p.add_argument(
        "--up-to-k",
        action="store_true",
        help="count each known set only up to k: the verdict (unique, below k) stays exact, values of k "
        "or more read k, and population-scale runs are about linear in the population",
    )
    p.add_argument(
        "--in-database",
        action="store_true",
        help="EVENTS an OMOP CDM in a DuckDB file or PostgreSQL (URL, --schema): count the candidates' side "
        "in SQL (per-code supports, candidates through each known set's rarest code) and load only the "
        "--cohort's conditions",
    )
    p.add_argument("--shards", help="folder of Parquet shards holding the population (population scope)")
    p.add_argument("--scheduler", help="with --shards: count the shards on this Dask scheduler (tcp://...)")
    p.add_argument(
        "--dask-workers", type=int, help="with --shards: count on a local Dask cluster of N workers"
    )
    p.add_argument(
        "--population-size",
        type=int,
        help="with --scope population and no population at hand: estimate k-map from the cohort alone for "
        "a population of N patients (assumes the cohort is a simple random sample of it)",
    )
    p.add_argument(
        "--selected-by",
        help="with --population-size: how the cohort was selected, 'random' (a simple random sample) or "
        "comma-separated code prefixes (e.g. 250,401: every population patient with a code starting with "
        "one is in the cohort); known sets holding such a code are then counted exactly",
    )
    p.add_argument(
        "--population-code-counts",
        help="with --population-size: CSV code,count of the population's patients holding each code "
        "(aggregate counts; codes left out bound nothing): sets of one code are then exact, every set "
        "bounded by its rarest code's count",
    )
    p.add_argument(
        "--model",
        choices=MODELS,
        default="negative_binomial",
        help="with --population-size: the estimator (default negative_binomial)",
    )
    p.add_argument(
        "--sensitive",
        nargs="?",
        const="all",
        help="rho-uncertainty of sensitive codes: 'all' (the default) or comma-separated shipped categories "
        "(hiv, mental_health, substance_use, reproductive_health), or a CSV "
        "category,vocabulary,first,last,source",
    )
    p.add_argument("--rho", type=float, help="with --sensitive: the highest confidence allowed, 0 <= rho < 1")
    p.add_argument(
        "--sensitive-m",
        type=int,
        default=DEFAULT_M,
        help=f"with --sensitive: the attacker knows up to M non-sensitive codes (default {DEFAULT_M})",
    )
    p.add_argument("--sensitive-out", help="with --sensitive: CSV of every rule above rho")
    p.add_argument("--report", help="write the figures printed as JSON to this file")
    p.add_argument(
        "--explain",
        help="CSV: for every record below k, what singles it out and the cheapest change to k "
        "(IDENTIFYING: names source patient ids; steward only)",
    )
    p.add_argument(
        "--out", help="output CSV: patient_id,distinguishability (required unless --population-size)"
    )
    p.set_defaults(
        func=run,
        **path_roles(
            ("--events", "--population", "--cohort", "--shards", "--population-code-counts"),
            ("--out", "--report", "--explain", "--sensitive-out"),
        ),
    )


def _records_and_groups(args: argparse.Namespace) -> tuple[Records, Records, ConceptParents | None]:
    """(population, cohort, the CDM's hierarchy when the events are its standard concepts: --explain's
    generalizations climb it, issue 37)."""
    inputs = load_groups(
        args.events, population=args.population, cohort=args.cohort, options=InputOptions.of(args)
    )
    return inputs.population, inputs.cohort, inputs.concepts


def _check_folder(option: str, value: str | None) -> None:
    if value:
        parent = Path(value).parent
        if parent and not parent.exists():
            raise UserError(f"{option}: folder {str(parent)!r} does not exist")


def _write_report(path: str | None, figures: dict[str, Any]) -> None:
    if path:
        Path(path).write_text(json.dumps(figures, indent=2, allow_nan=False) + "\n", encoding="utf-8")
        print(f"wrote the figures to {path}")


def _measures_lines(dis, k: int) -> dict[str, Any]:
    m = risk_measures(dis, threshold_of_k(k))
    print(f"threshold checked: maximum risk 1/k = {m.threshold:.2f} (k = {k})")
    print(f"maximum risk (1 / smallest distinguishability): {m.prosecutor_max:.4f}")
    print(f"average risk (mean of 1 / distinguishability): {m.average:.4f}")
    print(f"records at risk (risk above 1/k): {m.records_at_risk} ({m.share_at_risk:.2%})")
    return m.as_dict()


def _selection(value: str | None) -> tuple[str, ...] | None:
    """`--selected-by`: None for 'random' (or not given), else the code prefixes."""
    if value is None or value.strip().lower() == "random":
        return None
    codes = tuple(c.strip() for c in value.split(","))
    if not all(codes):
        raise UserError(
            f"--selected-by: an empty code in {value!r} (give codes separated by commas, or random)"
        )
    return codes


def _code_counts(path: str | None) -> dict[str, int] | None:
    """`--population-code-counts`: a CSV (or Parquet) of code,count, read and checked by the loaders'
    reader; errors name the file, row and column."""
    if path is None:
        return None
    from engine.io.loaders import as_source, read_table
    from engine.io.validation import ValidationReport

    report = ValidationReport()
    src = as_source(path)
    got = read_table(src, report)
    report.raise_if_errors()
    if got is None:
        raise UserError(f"--population-code-counts: {src.name}: nothing read")
    frame, check = got
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    missing = [c for c in ("code", "count") if c not in frame.columns]
    if missing:
        raise UserError(
            f"--population-code-counts: {src.name}: no column {missing[0]!r} (columns code,count)"
        )
    out: dict[str, int] = {}
    for row, code, count in zip(check.rownum.tolist(), frame["code"], frame["count"], strict=True):
        where = f"--population-code-counts: {src.name}, row {row}"
        text = "" if pd.isna(code) else str(code).strip()
        if not text:
            raise UserError(f"{where}, column 'code': empty")
        number = "" if pd.isna(count) else str(count).strip()
        if not number.isdigit():
            raise UserError(f"{where}, column 'count': {number!r} is not a whole number of patients")
        if text in out:
            raise UserError(f"{where}, column 'code': {text!r} is listed twice")
        out[text] = int(number)
    return out


def _estimate(args: argparse.Namespace, cohort: Records) -> int:
    """k-map without the population (`engine.estimate.kmap`): printed, and written to --out / --report."""
    from engine.estimate.kmap import CodeCountsError, SelectionError, estimate_kmap

    selected_by = _selection(args.selected_by)
    code_counts = _code_counts(args.population_code_counts)
    try:
        est = estimate_kmap(
            cohort,
            args.population_size,
            args.knowledge,
            args.k,
            model=args.model,
            matching=_matching(args),
            selected_by=selected_by,
            population_code_counts=code_counts,
        )
    except SelectionError as exc:
        raise UserError(f"--selected-by: {exc}") from None
    except CodeCountsError as exc:
        raise UserError(f"--population-code-counts: {exc}") from None
    except ValueError as exc:
        raise UserError(f"--population-size: {exc}") from None
    print(f"WARNING: {est.warning}")
    how = (
        "a simple random sample (assumed)" if selected_by is None else "selected by " + ", ".join(selected_by)
    )
    print(
        f"k-map estimated without the population ({est.model}): cohort {est.cohort_size} patients of a "
        f"population of {est.population_size} (sampling fraction {est.sampling_fraction:.4f}), {how}; "
        f"knowledge {args.knowledge.replace('_', ' ')}"
    )
    if selected_by is not None or code_counts is not None:
        why = " and ".join(
            w
            for w, on in (("holding a selection code", selected_by), ("by the code counts", code_counts))
            if on is not None
        )
        print(f"known sets counted exactly ({why}): {est.exact_sets} of {est.n_sets}")
    shares: dict[str, Any] = {}
    bound = {"share unique": est.cohort_only.share_unique, "share below k": est.cohort_only.share_below_k}
    for name, share in (("share unique", est.share_unique), (f"share below k = {args.k}", est.share_below_k)):
        key = name.split(" = ")[0]
        print(
            f"estimated {name}: {share.estimate:.2%} (spread under the model, {share.confidence:.0%}: "
            f"{share.low:.2%} to {share.high:.2%}; not a measured error); at most {bound[key]:.2%} "
            "(the cohort alone: an upper bound whatever the selection)"
        )
        shares[key] = {
            "estimate": share.estimate,
            "low": share.low,
            "high": share.high,
            "confidence": share.confidence,
            "interval": "spread under the model",
            "cohort-only upper bound": bound[key],
        }
    if args.out:
        write_table_csv(
            args.out,
            pd.DataFrame(
                {
                    "patient_id": cohort.patient_ids.astype(str),
                    "cohort_distinguishability": est.sample_distinguishability,
                    "expected_population_distinguishability": est.expected_population,
                    "p_unique": est.p_unique,
                    "p_below_k": est.p_below_k,
                }
            ),
        )
        print(f"wrote {cohort.n_patients} rows to {args.out}")
    _write_report(
        args.report,
        {
            "kind": "k-map estimate without the population",
            "warning": est.warning,
            "model": est.model,
            "combine": est.combine,
            "knowledge": args.knowledge,
            "k": args.k,
            "population size": est.population_size,
            "cohort size": est.cohort_size,
            "sampling fraction": est.sampling_fraction,
            "selected by": list(selected_by) if selected_by is not None else "random sample (assumed)",
            "population code counts": args.population_code_counts is not None,
            "exact known sets": est.exact_sets,
            "known sets": est.n_sets,
            **shares,
        },
    )
    return 0


def _explain(
    args: argparse.Namespace,
    cohort: Records,
    population: Records,
    adversary: Adversary,
    dis,
    concepts: ConceptParents | None = None,
) -> None:
    from engine.estimate.explain import explain_records, explanations_frame

    print(
        f"WARNING: {args.explain} names SOURCE patient ids (identifying): for the steward only; "
        "never send it with a release.",
        file=sys.stderr,
    )
    found = explain_records(cohort, adversary, args.k, population, distinguishability=dis, concepts=concepts)
    write_table_csv(args.explain, explanations_frame(found, with_ids=True))
    print(f"wrote {len(found)} explanations (records below k = {args.k}) to {args.explain}")
    fixable = [e for e in found if e.fixable]
    print(
        f"re-verified by engine.risk: {sum(e.verified for e in fixable)} of {len(fixable)} changes bring "
        f"their record to k = {args.k} on the release they make (a generalization recodes every record)"
        + (f"; {len(found) - len(fixable)} records cannot be fixed" if len(fixable) < len(found) else "")
    )


def _sensitive_options(args: argparse.Namespace) -> Categories | None:
    """The categories of `--sensitive` with `--rho` and `--sensitive-m` checked, or None without it."""
    if args.sensitive is None:
        for option in ("--rho", "--sensitive-out"):
            if getattr(args, option[2:].replace("-", "_")) is not None:
                raise UserError(f"{option} goes with --sensitive")
        return None
    if args.population_size is not None or args.shards:
        raise UserError("--sensitive counts in process: it cannot go with --population-size or --shards")
    if args.rho is None:
        raise UserError("--sensitive needs --rho: the highest confidence of an inference the study allows")
    check_rho(args.rho)
    check_m(args.sensitive_m)
    _check_folder("--sensitive-out", args.sensitive_out)
    value = args.sensitive.strip()
    if value.lower() == "all":
        value = "hiv,mental_health,substance_use,reproductive_health"
    return category_argument(value)


def _sensitive(
    args: argparse.Namespace,
    categories: Categories,
    cohort: Records,
    population: Records,
    adversary: Adversary,
) -> dict[str, Any]:
    """Print rho-uncertainty per category (`engine.disclosure.sensitive`), write --sensitive-out."""
    got = rho_uncertainty(
        cohort, adversary, categories, rho=args.rho, m=args.sensitive_m, candidates=population
    )
    print(
        f"sensitive codes: rho = {args.rho:g}, up to {got.m} known non-sensitive codes, "
        f"{got.combinations:,} combinations enumerated; {got.message()}"
    )
    summary = got.summary()
    for row in summary.itertuples(index=False):
        print(
            f"  {row.category}: {row[1]} records hold it, {row[2]} inferred above rho "
            f"({row[3]:.2%} of {cohort.n_patients}), {row[5]} rules above rho, highest confidence {row[4]:.3f}"
        )
        for rule in got.rules[got.rules["category"] == row.category].head(3).itertuples(index=False):
            print(f"    {rule[1]} -> {row.category}: {rule[4]} of {rule[3]} ({rule[5]:.3f})")
    if args.sensitive_out:
        write_table_csv(args.sensitive_out, got.rules)
        print(f"wrote {len(got.rules)} rules above rho to {args.sensitive_out}")
    return {
        "sensitive": {
            "rho": got.rho,
            "known codes at most": got.m,
            "combinations enumerated": got.combinations,
            "meets rho": got.ok,
            "categories": summary.to_dict(orient="records"),
        }
    }


def run(args: argparse.Namespace) -> int:
    if args.k < 1:
        raise UserError(f"--k must be a positive whole number, not {args.k}")
    estimating = args.population_size is not None
    if args.knowledge == "whole_record":  # issue 39: these model the papers' attacker only
        for option, given in (("--population-size", estimating), ("--explain", args.explain),
                              ("--count-repeats", args.count_repeats)):  # fmt: skip
            if given:
                raise UserError(
                    f"{option} is for the papers' attacker: it does not go with whole-record knowledge"
                )
    if estimating and args.scope != "population":
        raise UserError("--population-size estimates k-map: it needs --scope population")
    if estimating and (args.shards or args.population):
        raise UserError(
            "--population-size estimates without the population: give no --shards or --population"
        )
    for option in ("--selected-by", "--population-code-counts"):
        if getattr(args, option[2:].replace("-", "_")) is not None and not estimating:
            raise UserError(
                f"{option} is for the estimate without the population: it goes with --population-size"
            )
    if estimating and args.explain:
        raise UserError("--explain needs the population's records: it cannot go with --population-size")
    if not estimating and not args.out:
        raise UserError("--out is required (except with --population-size)")
    if args.explain and args.shards:
        raise UserError("--explain counts in process: it cannot go with --shards")
    for option in ("--report", "--explain"):
        _check_folder(option, getattr(args, option[2:]))
    if args.threads is not None and args.threads < 1:
        raise UserError(f"--threads must be a positive whole number, not {args.threads}")
    _check_folder("--out", args.out)
    if (args.scheduler or args.dask_workers is not None) and not args.shards:
        raise UserError("--scheduler and --dask-workers need --shards")
    if args.dask_workers is not None and args.dask_workers < 1:
        raise UserError(f"--dask-workers must be a positive whole number, not {args.dask_workers}")
    categories = _sensitive_options(args)
    if args.in_database:
        _check_in_database(args)
        cohort, dis, n_cand = _in_database(args)
        _distinguishability_report(args, Adversary(args.scope, args.knowledge), cohort, dis, n_cand)
        return 0
    population, cohort, concepts = _records_and_groups(args)
    if estimating:
        return _estimate(args, cohort)
    adversary = Adversary(args.scope, args.knowledge)
    if args.shards and args.scope == "population":
        dis, n_cand = _sharded(args, cohort, adversary)
    else:
        print(f"backend: in process, {thread_count(args.threads)} threads")
        with record_kernels() as ran:
            dis = original_distinguishability(cohort, adversary, population, _matching(args))
        print(f"kernel: {', '.join(ran)}")
        n_cand = cohort.n_patients if args.scope == "cohort" else population.n_patients
    _distinguishability_report(args, adversary, cohort, dis, n_cand, population, categories, concepts)
    return 0


def _check_in_database(args: argparse.Namespace) -> None:
    """`--in-database` goes with an OMOP CDM (DuckDB or PostgreSQL), a cohort file and the papers'
    single-visit or all-visits knowledge counted without repeats (`engine.io.omop_counts`)."""
    if not args.cohort:
        raise UserError(
            "--in-database counts the cohort of --cohort against the CDM's population (or itself under "
            "--scope cohort): give --cohort IDS"
        )
    if args.knowledge == "whole_record" or args.count_repeats:
        raise UserError("--in-database counts single-visit and all-visits knowledge without --count-repeats")
    if getattr(args, "source", "auto") not in ("auto", "omop") or getattr(args, "omop_codes", None) not in (
        None,
        "source",
    ):
        raise UserError(
            "--in-database reads an OMOP CDM's ICD source values (--source omop, --omop-codes source)"
        )
    for option in ("--shards", "--population", "--population-size", "--explain", "--sensitive"):
        if getattr(args, option[2:].replace("-", "_"), None) is not None:
            raise UserError(f"--in-database: {option} is not counted in the database; leave it out")
    if getattr(args, "normalize_codes", False) or getattr(args, "mapping", None):
        raise UserError("--in-database reads the source values as written: no --normalize-codes or --map")


def _in_database(args: argparse.Namespace):
    """The cohort (loaded), its distinguishability and the number of candidates, the population's side
    counted in the CDM's database, DuckDB or PostgreSQL (`engine.io.omop_counts`)."""
    from engine.io.loaders import load_ids
    from engine.io.omop_counts import database_distinguishability, load_cohort, open_cdm

    ids = load_ids(args.cohort, na_ids=InputOptions.of(args).na_ids, group="cohort").data
    db = open_cdm(args.events, getattr(args, "schema", None))
    try:
        cohort = load_cohort(db, ids, where=f"--cohort {Path(args.cohort).name}")
        print(
            f"backend: in the database ({db.label}): {args.scope} supports and candidate filters in SQL, "
            f"the cohort's {cohort.n_patients} patients loaded"
        )
        cap = args.k if args.up_to_k else None
        got = database_distinguishability(db, cohort, args.knowledge, cap, args.scope)
    finally:
        db.close()
    return cohort, got.distinguishability, got.n_candidates


def _distinguishability_report(
    args: argparse.Namespace,
    adversary: Adversary,
    cohort: Records,
    dis,
    n_cand: int,
    population: Records | None = None,
    categories: Categories | None = None,
    concepts: ConceptParents | None = None,
) -> None:
    """Write --out, print the summary and the risk measures, write --report (and --sensitive,
    --explain, which need the population in process; `concepts`: the CDM's hierarchy for --explain)."""
    out = Path(args.out)
    write_table_csv(
        out, pd.DataFrame({"patient_id": cohort.patient_ids.astype(str), "distinguishability": dis})
    )
    s = summarize(dis, args.k)
    print(f"adversary: {adversary.label}{' (repeats counted)' if args.count_repeats else ''}")
    print(f"cohort: {cohort.n_patients} patients; candidates: ", end="")
    print(f"{n_cand} patients")
    print(f"share unique (distinguishability 1): {s.share_unique:.2%}")
    print(f"share below k = {args.k}: {s.share_below_k:.2%}")
    capped = " (counted up to k: a median of k means k or more)" if args.up_to_k else ""
    print(f"median distinguishability: {s.median:g}{capped}")
    measures = _measures_lines(dis, args.k)
    if args.up_to_k:
        print("  (counted up to k: maximum and average risk are upper bounds; records at risk exact)")
    print(f"wrote {len(dis)} rows to {out}")
    sensitive = {}
    if categories is not None and population is not None:
        sensitive = _sensitive(args, categories, cohort, population, adversary)
    _write_report(
        args.report,
        {
            "kind": "distinguishability",
            "adversary": adversary.label,
            "k": args.k,
            "cohort size": cohort.n_patients,
            "candidates": n_cand,
            "share unique": s.share_unique,
            "share below k": s.share_below_k,
            "median distinguishability": s.median,
            "counted up to k": bool(args.up_to_k),
            **measures,
            **sensitive,
        },
    )
    if args.explain and population is not None:
        _explain(args, cohort, population, adversary, dis, concepts)
