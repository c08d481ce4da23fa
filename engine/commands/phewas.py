"""`python -m engine phewas`: PheWAS on original data, and on a release when one is given.

    python -m engine phewas (--events EVENTS | --shards DIR) --genotypes GENOTYPES [--cohort IDS]
        [--released RELEASED.csv --codemap CODEMAP.csv [--crosswalk CROSSWALK.csv]] [--min-code-count N]
        [--min-cases N]
        [--test allelic|genotypic] [--min-cell N|cms|aou|ohdsi|none] --out OUT.csv

    python -m engine phewas --dataset DIR [--min-code-count N] [--min-cases N] [--test ...] --out OUT.csv

`--dataset DIR` (issue #35): the PheWAS of a recipient's dataset as its recipient holds it
(`engine.io.dataset_export`: subjects, released codes, code map and genotypes, all in release ids,
checked against the folder's manifest); no original data, no crosswalk. It equals the steward's
PheWAS of the release (`engine.utility.phewas.phewas_of_release`).

`--min-cell` (issue 28): the small-cell policy of what is written; N is the smallest publishable count
(counts 1..N-1 suppressed; 11 = CMS, 21 = All of Us, 5 = OHDSI) or a preset's name. A row any of
whose counts (cases, controls, minor and major alleles of cases and of controls) is small is written
with its counts and statistics as `suppressed`, and so is a row whose counts differ by a small amount
from those of a nested row (a parent phecode and its child; the original and the release's row of a
phecode, written side by side) or leave a small remainder below its children
(`engine.disclosure.cells.suppress_phewas_tables`, issue #35); zeros are published. The line printed
says how many rows were withheld.

With `--shards DIR` the original data are the event shards of DIR (`python -m engine shards`), read
one at a time: each shard's case and control genotype counts add up
(engine.scale.shards.sharded_phewas), and the table equals the in-process one. A release is compared
in memory, so `--released` needs `--events`.

A release file names its patients by release ids (`engine.io.pseudonyms`), the cohort by source ids:
the steward compares the two through the identifying crosswalk the release was written with
(`--crosswalk`, from `anonymize ... --crosswalk` or `study crosswalk`); without it a release in release
ids is an error that says so (issue #35, finding 2).

OUT.csv: snp, phecode, phenotype, n_cases, n_controls, odds_ratio, p (original), and with a release
the same columns suffixed `_released`.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import pandas as pd

from engine.commands.inputs import shard_progress
from engine.commands.paths import path_roles
from engine.disclosure.cells import add_min_cell_option
from engine.io.errors import UserError
from engine.io.export import write_table_csv

if TYPE_CHECKING:
    from engine.utility.phewas import PhewasSettings


def register(sub) -> None:
    p = sub.add_parser("phewas", help="PheWAS of every SNP against every phecode, original vs released")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--events", help="events file (CSV or Parquet): patient_id, code[, visit]")
    src.add_argument("--shards", help="folder of event shards (shard-NNNNN.parquet), read one at a time")
    src.add_argument(
        "--dataset", help="a recipient's dataset folder (subjects, phenotypes, code map, genotypes)"
    )
    p.add_argument("--genotypes", help="genotype file: patient_id + one column per SNP (0/1/2)")
    p.add_argument("--cohort", help="patient ids of the cohort (default: every patient in EVENTS)")
    p.add_argument("--released", help="released events CSV (from `anonymize ... --out`)")
    p.add_argument("--codemap", help="code map CSV of the release (released_item, original_code)")
    p.add_argument(
        "--crosswalk",
        help="the release's crosswalk (release_id, source_id; IDENTIFYING): joins the release ids of "
        "--released to the cohort's ids",
    )
    p.add_argument("--min-code-count", type=int, default=1, help="occurrences for a case (default 1)")
    p.add_argument("--min-cases", type=int, default=20, help="cases needed before a test runs (default 20)")
    p.add_argument("--test", choices=("allelic", "genotypic"), default="allelic")
    add_min_cell_option(p, "the written table (cases, controls and their alleles)")
    p.add_argument("--out", required=True, help="output CSV")
    p.set_defaults(
        func=run,
        **path_roles(
            (
                "--events",
                "--shards",
                "--dataset",
                "--genotypes",
                "--cohort",
                "--released",
                "--codemap",
                "--crosswalk",
            ),
            ("--out",),
        ),
    )


def _read_csv(path: str) -> pd.DataFrame:
    """A release file as text cells, read like every input (errors name file, rows and column)."""
    from engine.io.loaders import Source, read_table
    from engine.io.validation import ValidationReport

    report = ValidationReport()
    read = read_table(Source.from_path(path), report)
    report.raise_if_errors()
    assert read is not None
    return read[0]


def _in_source_ids(
    released: pd.DataFrame, records, args: argparse.Namespace
) -> tuple[pd.DataFrame, list[str]]:
    """The released rows with patients named by the cohort's ids: through `--crosswalk` when given;
    else as read, when every released patient is a cohort patient. A UserError names the file and
    what to give otherwise (issue #35, finding 2: a release names patients by release ids). Also the
    crosswalk's patients without a row (released records whose every code was censored or
    suppressed: controls of every phecode, as in `phewas_of_release`)."""
    from engine.commands.inputs import literal
    from engine.io.export import unneutralize_column
    from engine.io.pseudonyms import CROSSWALK_COLUMNS

    if args.crosswalk:
        walk = _read_csv(args.crosswalk)
        missing = [c for c in CROSSWALK_COLUMNS if c not in walk.columns]
        if missing:
            raise UserError(
                f"{args.crosswalk}: no column {', '.join(missing)} (a crosswalk has release_id, source_id)"
            )
        walk = walk.apply(unneutralize_column)
        to_source = dict(zip(walk["release_id"], walk["source_id"], strict=True))
        source = released["patient_id"].map(to_source)
        unknown = released.loc[source.isna(), "patient_id"].unique()
        if len(unknown):
            raise UserError(
                f"{args.crosswalk}: {len(unknown)} released patient(s) of {args.released} have no row, "
                f"e.g. {', '.join(literal(str(x)) for x in unknown[:5])}: not this release's crosswalk"
            )
        released = released.assign(patient_id=source)
    ids = released["patient_id"].astype(str)
    rowless = sorted(set(to_source.values()) - set(ids)) if args.crosswalk else []
    ids = pd.concat([ids, pd.Series(rowless, dtype=object)], ignore_index=True)
    outside = ids[~ids.isin(set(records.patient_ids.astype(str)))].unique()
    if not len(outside):
        return released, rowless
    if not args.crosswalk and ids.str.fullmatch(r"R\d+").all():
        raise UserError(
            f"{args.released}: its patients are named by release ids (R001, ...), the cohort by its own "
            f"ids: give --crosswalk CROSSWALK.csv (the identifying table `anonymize ... --crosswalk` or "
            f"`study crosswalk` wrote with this release) to compare the release with the original, or "
            f"run `phewas --dataset DIR` on the recipient's dataset (`anonymize ... --dataset DIR`)"
        )
    raise UserError(
        f"{args.released}: {len(outside)} released patient(s) are not in the cohort, "
        f"e.g. {', '.join(literal(str(x)) for x in outside[:5])}"
    )


def _by_person_id(genotypes: pd.DataFrame, records, events: str, options) -> pd.DataFrame:
    """Genotypes named by an OMOP CDM's person_source_value (the source's patient ids, as a biobank
    names them) renamed to its person_id, the events' ids (issue 37, finding d), when none of their
    ids is an events patient and some are source values; a note on stderr says so. Else as given."""
    import sys

    from engine.io import detect_source

    if options.source not in ("omop", "auto") or (
        options.source == "auto" and detect_source(events) != "omop"
    ):
        return genotypes
    given = genotypes["patient_id"].astype(str)
    if given.isin(set(map(str, records.patient_ids))).any():
        return genotypes
    from engine.io.omop import person_source_ids

    inverse = {v: k for k, v in person_source_ids(events, schema=options.schema).items()}
    mapped = given.map(inverse)
    if not mapped.notna().any():
        return genotypes
    print(
        f"note: the genotypes are named by the CDM's person_source_value; {int(mapped.notna().sum()):,} of "
        f"{len(given):,} joined to the events' person_id through the person table",
        file=sys.stderr,
    )
    return genotypes[mapped.notna().to_numpy()].assign(patient_id=mapped[mapped.notna()].to_numpy())


def _genotyped_somebody(genotypes: pd.DataFrame, records, path: str) -> None:
    """A UserError when no patient of the cohort has a genotype row: the PheWAS would test nobody
    (e.g. a recipient's dataset's genotypes, named by release ids, against the source's events)."""
    if len(genotypes) and not genotypes["patient_id"].astype(str).isin(set(records.patient_ids)).any():
        named = (
            " (they are named by release ids)"
            if genotypes["patient_id"].astype(str).str.fullmatch(r"R\d+").all()
            else ""
        )
        raise UserError(
            f"{path}: no patient of the cohort has a genotype row{named}; give the genotypes of the "
            f"cohort's patients, or run `phewas --dataset DIR` on a recipient's dataset"
        )


def _warn_unmapped(unmapped: pd.DataFrame, where: str) -> None:
    """One stderr line: codes absent from the phecode map, and whose controls their patients leave."""
    from engine.commands.inputs import literal

    if not len(unmapped):
        return
    shown = "; ".join(
        f"{literal(r.code)} ({r.patients} patient(s), not a control of {r.excluded_from})"
        if r.excluded_from
        else f"{literal(r.code)} ({r.patients} patient(s), category unknown to the map: no effect)"
        for r in unmapped.head(5).itertuples()
    )
    more = f" (and {len(unmapped) - 5} more)" if len(unmapped) > 5 else ""
    print(
        f"warning: {len(unmapped)} code(s) of {where} are absent from the phecode map v1.2; they count "
        f"toward no phecode, and their patients are left out of the controls of their category's "
        f"phecodes: {shown}{more}",
        file=sys.stderr,
    )


def _sharded(args: argparse.Namespace, genotypes: pd.DataFrame, settings: PhewasSettings) -> pd.DataFrame:
    """The PheWAS of the patients in the shards of `--shards` (those of `--cohort` when given)."""
    from pathlib import Path

    from engine.commands.inputs import InputOptions, announced
    from engine.io.loaders import load_ids
    from engine.scale.shards import sharded_phewas

    paths = sorted(Path(args.shards).glob("shard-*.parquet"))
    if not paths:
        raise UserError(f"--shards: no shard-*.parquet file in {str(args.shards)!r}")
    na_ids = InputOptions.of(args).na_ids
    cohort = announced(load_ids(args.cohort, group="cohort", na_ids=na_ids)).data if args.cohort else None
    print(f"backend: {len(paths)} shards, one at a time")
    return sharded_phewas(
        paths,
        genotypes,
        settings,
        cohort=cohort,
        progress=shard_progress(),
    )


RECIPIENT_ONLY = ("--genotypes", "--cohort", "--released", "--codemap", "--crosswalk")


def _recipient(args: argparse.Namespace, settings: PhewasSettings, policy) -> int:
    """`--dataset DIR`: the released PheWAS from the dataset's files alone (module docstring)."""
    from engine.disclosure.cells import suppress_phewas
    from engine.io.dataset_export import read_dataset
    from engine.utility import phewas

    given = [o for o in RECIPIENT_ONLY if getattr(args, o[2:].replace("-", "_"), None)]
    if given:
        raise UserError(
            f"--dataset holds the codes and genotypes: {', '.join(given)} cannot be given with it"
        )
    data = read_dataset(args.dataset)
    release = data.release
    _warn_unmapped(phewas.unmapped_codes(release.records, release.item_codes), "the dataset")
    result = phewas.phewas_of_release(release, data.genotypes, settings)
    shown, note = suppress_phewas(result, policy)
    write_table_csv(args.out, shown[OUT_COLUMNS])
    if policy.active:
        print(f"small cells ({policy.describe()}): {note.rows_withheld:,} of {len(result):,} row(s) withheld")
    n_sig = int((result["p"] <= 0.05).sum())
    print(
        f"{len(result):,} tests, {n_sig:,} at p <= 0.05 in the dataset's {release.records.n_patients:,} "
        f"subjects; written to {args.out}"
    )
    return 0


OUT_COLUMNS = ["snp", "phecode", "phenotype", "n_cases", "n_controls", "odds_ratio", "p"]


def run(args: argparse.Namespace) -> int:
    from engine.commands.inputs import InputOptions, load_genotypes_checked, load_groups
    from engine.io.dataset_export import with_subjects
    from engine.release import release_from_frames
    from engine.utility import phewas

    if args.min_code_count < 1 or args.min_cases < 1:
        raise UserError("--min-code-count and --min-cases must be at least 1")
    if (args.released is None) != (args.codemap is None):
        raise UserError("--released and --codemap go together")
    if args.crosswalk and not args.released:
        raise UserError("--crosswalk joins a release to the cohort: it needs --released and --codemap")
    if args.shards and args.released:
        raise UserError("--released needs --events: a release is compared with the original in memory")
    from engine.disclosure.cells import min_cell_of, suppress_phewas_tables

    policy = min_cell_of(args)
    settings = phewas.PhewasSettings(args.min_code_count, args.min_cases, args.test)
    if args.dataset:
        return _recipient(args, settings, policy)
    if not args.genotypes:
        raise UserError("--genotypes is needed with --events or --shards")
    options = InputOptions.of(args)
    genotypes = load_genotypes_checked(args.genotypes, options).data
    if args.shards:
        result = _sharded(args, genotypes, settings)
    else:
        records = load_groups(args.events, cohort=args.cohort, options=options).cohort
        genotypes = _by_person_id(genotypes, records, args.events, options)
        _genotyped_somebody(genotypes, records, args.genotypes)
        _warn_unmapped(phewas.unmapped_codes(records), "the events")
        result = phewas.phewas_of_records(records, genotypes, settings)
    cols = OUT_COLUMNS
    tables = [result]
    if args.released:
        released, code_map = _read_csv(args.released), _read_csv(args.codemap)
        rowless: list[str] = []
        if "patient_id" in released.columns:
            released, rowless = _in_source_ids(released, records, args)
        try:
            release = with_subjects(release_from_frames(released, code_map), rowless)
        except ValueError as exc:
            raise UserError(f"{args.released}: {exc}") from None
        _warn_unmapped(phewas.unmapped_codes(release.records, release.item_codes), "the release")
        tables.append(phewas.phewas_of_release(release, genotypes, settings))
    # one file: the released rows are judged beside the original's (suppress_phewas_tables)
    (shown, note), *rel = suppress_phewas_tables(tables, policy)
    out = shown[cols]
    if rel:
        rel_shown, rel_note = rel[0]
        if rel_note.rows_withheld:
            print(f"small cells ({policy.describe()}): {rel_note.rows_withheld:,} released row(s) withheld")
        out = out.merge(rel_shown[cols], on=["snp", "phecode"], how="outer", suffixes=("", "_released"))
        out = out.drop(columns=["phenotype_released"])
    write_table_csv(args.out, out)
    n_sig = int((result["p"] <= 0.05).sum())
    if policy.active:
        print(f"small cells ({policy.describe()}): {note.rows_withheld:,} of {len(result):,} row(s) withheld")
    print(f"{len(result):,} tests, {n_sig:,} at p <= 0.05 in the original data; written to {args.out}")
    return 0
