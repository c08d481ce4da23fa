"""The inputs most subcommands share: an events file and the patient-id lists of the groups
(Heatherly's Figure 14: population, biobank, cohort), loaded and validated once, the same way.

What the loaders found is never kept from the user: every warning (unknown codes with their counts and
examples, duplicate rows, unused or renamed columns, visit dates not in ISO form, ...) is printed on
stderr as soon as its file is read, and `GroupInputs.warnings` / `findings_json` give the same list for
the JSON reports. The options `--keep-unknown` / `--drop-unknown` and `--accept-na-ids`
(`add_input_options`, added by `engine.commands.cli` to every subcommand that reads patient data) decide what
the loaders do with unknown codes and with ids such as `NA`.

Default `--keep-unknown`: a reader never changes the data on its own, and keeping the rows is the
safe choice downstream. A kept unknown code is an item like any other to every anonymization method
and to the risk engine (so the release still meets k), and the PheWAS never makes its patient a
control of the phecodes the code may belong to (`engine.utility.phewas`, codes absent from the phecode map).
Dropping the rows instead would make that patient a control of, e.g., hypertension when `401.10` was
a mistyped hypertension code, so dropping is left to the user, who then sees how many rows went.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from engine.io.loaders import (
    Action,
    Loaded,
    load_events,
    load_genotypes,
    load_ids,
    load_labs,
    require_patients,
)
from engine.io.progress import Progress
from engine.io.redact import redact
from engine.io.validation import NaIds, ValidationReport
from engine.records import Records

if TYPE_CHECKING:
    from engine.io.concepts import ConceptParents
    from engine.io.pseudonyms import Pseudonyms
    from engine.study.runs import RunInputs
    from engine.study.study import MadeRelease

# options of a subcommand that name files holding patient ids / events
EVENT_OPTIONS = ("--events",)
ID_OPTIONS = ("--events", "--labs", "--genotypes", "--cohort", "--population", "--biobank")


@dataclass(frozen=True)
class InputOptions:
    """What the loaders do with well-formed codes unknown to their vocabulary and with `NA`-like ids,
    and how the events are read: source kind, column mapping, sheet, OMOP schema, normalization."""

    unknown_codes: Action = "keep"
    na_ids: NaIds = "error"
    source: str = "auto"
    mapping: str | None = None
    sheet: str | None = None
    schema: str | None = None
    normalize: bool = False
    codes: str = "source"  # OMOP: ICD source values or standard concepts (issue 37)
    domains: tuple[str, ...] = ("condition",)
    drug_level: str = "ingredient"  # OMOP drugs: RxNorm ingredient or clinical drug (issue 37)

    @classmethod
    def of(cls, args: argparse.Namespace | None) -> InputOptions:
        """The options given on the command line (defaults for a parser without them)."""
        return cls(
            getattr(args, "unknown_codes", None) or "keep",
            getattr(args, "na_ids", None) or "error",
            getattr(args, "source", None) or "auto",
            getattr(args, "mapping", None),
            getattr(args, "sheet", None),
            getattr(args, "schema", None),
            bool(getattr(args, "normalize_codes", False)),
            getattr(args, "omop_codes", None) or "source",
            parse_domains(getattr(args, "domains", None) or "condition"),
            getattr(args, "drug_level", None) or "ingredient",
        )

    @property
    def reads_through_io(self) -> bool:
        """True when the events need engine/io (a source kind, mapping, sheet or schema was given)."""
        return (
            self.source != "auto"
            or any((self.mapping, self.sheet, self.schema))
            or (self.codes, self.domains, self.drug_level) != ("source", ("condition",), "ingredient")
        )


def parse_domains(text: str) -> tuple[str, ...]:
    """`condition,procedure,drug` -> its names, in the order given, each once."""
    return tuple(dict.fromkeys(d.strip() for d in text.split(",") if d.strip()))


def load_events_input(path: str, options: InputOptions | None = None) -> Loaded:
    """The events of a command: a long-form file through the events loader, or (a folder, a DuckDB
    file, `--source`, `--map`, `--sheet`, `--schema`) through `engine.io.read_source`; either way the
    codes' original spellings in `Loaded.spellings` when `--normalize-codes` rewrote any. Raises
    DataError on errors and UserError for a malformed mapping."""

    from engine.io.errors import UserError

    opts = options or InputOptions()
    from engine.io import detect_source

    via_io = opts.reads_through_io or detect_source(path) != "long"
    if not via_io:
        return load_events(
            path, unknown_codes=opts.unknown_codes, na_ids=opts.na_ids, normalize=opts.normalize
        )
    from engine.io import read_source

    try:
        data = read_source(
            path,
            source=opts.source,  # type: ignore[arg-type]
            mapping=opts.mapping,
            normalize=opts.normalize,
            unknown_codes=opts.unknown_codes,
            sheet=opts.sheet,
            schema=opts.schema,
            na_ids=opts.na_ids,
            codes=opts.codes,  # type: ignore[arg-type]
            domains=opts.domains,
            drug_level=opts.drug_level,  # type: ignore[arg-type]
        )
    except ValueError as exc:
        raise UserError(f"--map: {exc}") from None
    data.report.raise_if_errors()
    assert data.events is not None
    return Loaded(
        data.events.frame, data.report, dict(data.sources), data.events.spelling_map(), data.concepts
    )


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """`--keep-unknown` / `--drop-unknown` (parsers reading events) and `--accept-na-ids`."""
    options = {o for o, a in parser._option_string_actions.items() if a.choices is None}  # file names
    if not options & set(ID_OPTIONS):
        return
    group = parser.add_argument_group("input checks")
    if options & set(EVENT_OPTIONS):
        unknown = group.add_mutually_exclusive_group()
        unknown.add_argument(
            "--keep-unknown",
            dest="unknown_codes",
            action="store_const",
            const="keep",
            default="keep",
            help="keep rows whose code is well formed but unknown to its vocabulary, ICD-9-CM or ICD-10-CM "
            "(default; reported on stderr "
            "and in the JSON report; the PheWAS never counts such a patient as a control of the phecodes "
            "the code may belong to)",
        )
        unknown.add_argument(
            "--drop-unknown",
            dest="unknown_codes",
            action="store_const",
            const="drop",
            help="drop those rows (reported with their count); their patients may then become PheWAS "
            "controls of the phenotype a mistyped code meant",
        )
        group.add_argument(
            "--source",
            choices=("auto", "long", "omop", "meds", "i2b2"),
            default="auto",
            help="what --events is: a long-form file (CSV, Parquet, .xlsx), an OMOP CDM v5.4 folder of "
            "CSV/Parquet tables, DuckDB file or database URL (postgresql+psycopg://user@host/db), a MEDS "
            "folder, or an i2b2 star schema (folder, DuckDB file or URL; default auto: by what the path is)",
        )
        group.add_argument(
            "--map",
            dest="mapping",
            metavar="MAPPING",
            help="columns of a long-form events file, e.g. patient_id=MRN,code=DX_CODE,visit=ENC_DATE "
            "(also age=, vocabulary=, date=)",
        )
        group.add_argument("--sheet", help="the sheet of an .xlsx events file (default: the first)")
        group.add_argument(
            "--schema", help="the schema of the OMOP or i2b2 tables in a DuckDB file or database"
        )
        group.add_argument(
            "--omop-codes",
            choices=("source", "standard", "icd"),
            default="source",
            help="OMOP CDM: the conditions' ICD-9-CM / ICD-10-CM source values (default), the standard "
            "concepts (SNOMED, CPT4, RxNorm, ...) named through the CDM's concept table, or (icd, for "
            "PheWAS) the standard conditions mapped to ICD codes through concept_relationship, the share "
            "mapped stated",
        )
        group.add_argument(
            "--domains",
            default="condition",
            help="OMOP CDM with --omop-codes standard: the tables the attacker knows, any of condition, procedure, "
            "drug, measurement, observation (drugs at the --drug-level; a measurement is its LOINC concept, "
            "its value is not part of the known set); a visit's items of all of them are one set "
            "(default condition)",
        )
        group.add_argument(
            "--drug-level",
            choices=("ingredient", "clinical"),
            default="ingredient",
            help="OMOP CDM drugs (--domains drug): each exposure as its RxNorm ingredients (default) or its "
            "clinical drug (ingredient, strength and form), through concept_ancestor",
        )
        group.add_argument(
            "--normalize-codes",
            action="store_true",
            help="rewrite undotted and prefixed codes (25000 -> 250.00, ICD//10//E119 -> E11.9, "
            "ICD9:401.1 -> 401.1), case and spaces; every rewrite is reported with counts and examples",
        )
    group.add_argument(
        "--accept-na-ids",
        dest="na_ids",
        action="store_const",
        const="accept",
        default="error",
        help="accept patient ids such as NA, NaN, null, None as real ids (default: an error naming "
        "file, rows and column)",
    )


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def literal(text: str) -> str:
    """Control characters (terminal escapes, line breaks) shown as escapes: untrusted text stays text."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def announce(report: ValidationReport, stream: TextIO | None = None) -> None:
    """Print every warning of `report` on stderr, one line each (`warning: file ..., rows ...`)."""
    out = sys.stderr if stream is None else stream
    for finding in report.warnings:
        print(f"warning: {literal(str(finding))}", file=out)


def findings_json(*reports: ValidationReport) -> list[dict]:
    """The warnings of `reports` as JSON-ready records (for the `input_warnings` of a report)."""
    return [rec for r in reports for rec in r.to_records() if rec["severity"] == "warning"]


def announced(loaded: Loaded, report: ValidationReport | None = None) -> Loaded:
    """`loaded` after printing its warnings (and adding them to `report` when given)."""
    announce(loaded.report)
    if report is not None:
        report.extend(loaded.report)
    return loaded


@dataclass(frozen=True, eq=False)
class GroupInputs:
    """Records of every group, the sha256 of every file read (for reports), and what the loaders found."""

    events: Records  # every patient of the events file
    population: Records
    cohort: Records
    biobank: Records | None = None
    sources: dict[str, str] = field(default_factory=dict)
    report: ValidationReport = field(default_factory=ValidationReport)
    spellings: dict[str, tuple[str, ...]] | None = None  # `Loaded.spellings` of the events
    concepts: ConceptParents | None = None  # `Loaded.concepts`: a CDM's own hierarchy (issue 37)

    @property
    def warnings(self) -> list[dict]:
        """Every loader warning of these inputs, JSON-ready (`input_warnings` of the JSON reports)."""
        return findings_json(self.report)

    @property
    def run_inputs(self) -> RunInputs:
        """The groups as a method runs on them (`engine.study.runs.RunInputs`), with the CDM's hierarchy."""
        from engine.study.runs import RunInputs

        return RunInputs(self.population, self.cohort, self.biobank, concepts=self.concepts)


def load_groups(
    events: str,
    population: str | None = None,
    cohort: str | None = None,
    biobank: str | None = None,
    *,
    options: InputOptions | None = None,
) -> GroupInputs:
    """Load EVENTS and the id lists. The population defaults to every patient in EVENTS and the cohort
    to the population; each list must lie within the population (a DataError names the file and the
    patients that do not). EVENTS without a patient (every row left out, e.g. OMOP conditions coded
    in SNOMED only) is a DataError naming the empty groups (`engine.io.loaders.require_patients`);
    a list is never empty (`load_ids`), so no group is. Warnings are printed on stderr as each file
    is read."""
    opts = options or InputOptions()
    report = ValidationReport()
    loaded = announced(load_events_input(events, opts), report)
    records = Records.from_frame(loaded.data)
    # the events' patients are the population every group lies within (issue 37)
    require_patients(redact(events), {"population": records.n_patients, "cohort": records.n_patients})
    sources = dict(loaded.sources)

    def ids(path: str, within: Records, group: str) -> Records:
        got = announced(
            load_ids(path, population=within.patient_ids, group=group, na_ids=opts.na_ids), report
        )
        sources.update(got.sources)
        return within.subset(got.data)

    pop = ids(population, records, "population") if population else records
    bio = ids(biobank, pop, "biobank") if biobank else None
    coh = ids(cohort, pop, "cohort") if cohort else pop
    return GroupInputs(records, pop, coh, bio, sources, report, loaded.spellings, loaded.concepts)


def publish(
    inputs: GroupInputs,
    made: MadeRelease,
    paths: Mapping[str, Path | str],
    *,
    args: argparse.Namespace,
    pseudonyms: Pseudonyms,
    blocked: str | None = None,
) -> dict:
    """`engine.io.export.publish` of the release `make_release` made, for a command: its files as
    `make_release` built them through the gate (the code map keeps the original spellings of the codes
    `inputs` were read with, `--normalize-codes`; patients named by the release ids of `pseudonyms`,
    the key of `--key-file`), not built again; the crosswalk written to `--crosswalk` when given
    (`engine.commands.release_options`). `blocked`: the method's own reason to refuse. With
    `--dataset DIR` the recipient's dataset (`engine.io.dataset_export`: the released patients'
    `--genotypes` in the same release ids) is written there as one set once the release is, and a
    refused release removes the dataset an earlier run left. Returns the JSON-ready export record
    (`dataset`: the folder and the sha256 of its files, when asked)."""
    from engine.commands.release_options import dataset_folder_of
    from engine.io import dataset_export, export
    from engine.report.bundle import MANIFEST_SIG, sign_dataset

    release, verification = made.release, made.verification
    adversary, k = verification.adversary, verification.k
    folder = dataset_folder_of(args)
    genotypes = load_genotypes_checked(args.genotypes, InputOptions.of(args)).data if folder else None
    names = None if inputs.concepts is None else inputs.concepts.names  # the code map's descriptions
    outcome = export.publish(
        release,
        verification,
        adversary,
        k,
        paths,
        blocked=blocked or made.entry.rho_refusal or None,
        spellings=inputs.spellings,
        pseudonyms=pseudonyms,
        crosswalk_path=getattr(args, "crosswalk", None),
        names=names,
        gated=made.files,
    )
    if folder is None:
        return outcome
    targets = dataset_export.dataset_paths(folder)
    if not outcome["written"]:
        outcome["removed_stale"] += [str(p) for p in export.remove_stale(targets)]
        signature = folder / MANIFEST_SIG  # an earlier run's signature signs nothing now
        if signature.is_file():
            signature.unlink()
            outcome["removed_stale"].append(str(signature))
        return outcome
    assert genotypes is not None
    files = dataset_export.dataset_files(
        release,
        verification,
        adversary,
        k,
        genotypes,
        inputs.spellings,
        pseudonyms=pseudonyms,
        gated=made.files,
        names=names,
    )
    folder.mkdir(exist_ok=True)
    outcome["dataset"] = {"folder": str(folder), "files": dataset_export.write_dataset(files, folder)}
    sign_dataset(folder)  # issue 39: the recipient checks it with `verify FOLDER --key OFFICE.pub`
    print(f"recipient's dataset ({', '.join(files)}) written to {folder}, signed with the office key")
    return outcome


def load_genotypes_checked(path: str, options: InputOptions | None = None) -> Loaded:
    """Genotypes for a command, warnings printed."""
    return announced(load_genotypes(path, na_ids=(options or InputOptions()).na_ids))


def load_labs_checked(path: str, options: InputOptions | None = None) -> Loaded:
    """Lab orders for a command, warnings printed."""
    return announced(load_labs(path, na_ids=(options or InputOptions()).na_ids))


def shard_progress(ran: list[str] | None = None) -> Progress:
    """The sharded commands' progress printer (`engine.io.progress.Progress`: "shard 3/8: <path>"),
    with the kernel the shard ran when `ran` is this thread's kernel log (`risk`)."""

    def show(fraction: float, message: str) -> None:
        kernel = f" (kernel: {ran[-1]})" if ran else ""
        print(f"  {message}{kernel}", flush=True)

    return show
