"""`python -m engine study ...`: a study from the command line, through the same engine as the app
(`engine.study.study` make_release / rebuild, `engine.report.report.build_report`,
`engine.report.bundle`, `engine.study.package`).

    study new STUDY.json --events E --cohort C [--population P] [--biobank B]
        --scope cohort|population --knowledge single_visit|all_visits --k N [input options]
        [--sensitive CATS --rho R --rho-reason TEXT [--rho-m M]]
    study set STUDY.json --sensitive CATS --rho R --rho-reason TEXT [--rho-m M] | --no-rho
    study add STUDY.json --name NAME [--recipient R] [--public] [--suppress-rho] METHOD [the options of `anonymize METHOD`, without outputs]
    study remove STUDY.json NAME
    study public STUDY.json NAME [--off]
    study run STUDY.json|STUDY.zip [--events E --cohort C ...]
    study report STUDY.json|STUDY.zip --out DIR [--genotypes G] [--recipient TEXT] [--events E ...]
    study package STUDY.json --out STUDY.zip [--with-inputs --events E --cohort C ...]
    study crosswalk STUDY.json|STUDY.zip NAME --out FILE [--events E ...]

`new` records the data (`DataRef`: the events' content fingerprint, every group's ids fingerprint,
the input files' sha256 and the load options, computed as `run` computes it) with the attacker
(adversary, k) and a fresh pseudonym key; the study file is written readable by its owner only (it
holds the key). `add` turns METHOD's options into its typed settings with the method module's
`settings_of` (the one function `anonymize METHOD` uses too; `--k` defaults to the study's k), makes
the release (`make_release`: verified under the study's adversary and k, its files through the
export gate), prints the verdict and appends it to the study; a release not verified under the
study's attacker is refused with its verdict and never enters (issue 35, finding 6); so is one above
the rho the study states (`--sensitive`, `--rho`, `--rho-reason` of `new` or `set`; issue 39), named by
its category, highest confidence and records inferred. `public` marks a
release public: held by every recipient, so judged with each recipient's releases.

The data of `add`, `run`, `report` and `crosswalk` is the input files of a study package (a zip
saved with its inputs), the shipped sample when the study was made on it, else the files given with
--events, --cohort, --biobank, --population (their sha256 and content fingerprints must match the
study's), read with the input options given (e.g. `--normalize-codes` when the study's data was
normalized; the code maps are then rebuilt with the codes' original spellings, as recorded).

`run` rebuilds every release and re-verifies it at the study's adversary and k (a verdict recorded
in the file is never believed). Exit 0 only when the study holds at least one release of its data and
every one rebuilt byte-identical and passed re-verification; 1 otherwise, each failure printed with
why (`RebuildCheck.differences`); 2 for a problem with the inputs. `report` rebuilds the same way
first and writes report.html, report.pdf, report.json, report.md and bundle.zip of the releases that
passed (`build_report(..., reproducible=True)`: the same study and data give the same bytes); a
failure is named and the exit status is 1. When the releases the bundle would hand over fail jointly
under linkage (`engine.study.joint`, issue 35) the report is written without bundle.zip (an earlier
one is deleted) and the refusal is an error (exit 2) naming the pairs or the set. `crosswalk` writes a release's release id -> source id
table: identifying, for the steward only.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from engine.commands.paths import path_roles
from engine.io.errors import UserError

if TYPE_CHECKING:
    from engine.commands.inputs import GroupInputs, InputOptions
    from engine.study.package import StudyInput
    from engine.study.runs import RunInputs
    from engine.study.study import DataRef, RebuildCheck, Study

DATA = ("--events", "--population", "--cohort", "--biobank")
REPORT_FILES = ("report.html", "report.pdf", "report.json", "report.md", "bundle.zip")


def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--events", help="events file the study was made from (default: the sample, if it was)")
    p.add_argument("--population", help="population id list (default: every patient with events)")
    p.add_argument("--cohort", help="cohort id list")
    p.add_argument("--biobank", help="biobank id list")


def _rho_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sensitive",
        help="sensitive categories the study protects: comma-separated shipped names "
        "(hiv, mental_health, substance_use, reproductive_health) or 'all'",
    )
    p.add_argument("--rho", type=float, help="with --sensitive: the highest confidence allowed, 0 <= rho < 1")
    p.add_argument("--rho-reason", help="with --rho: why this threshold (written in the study and report)")
    p.add_argument("--rho-m", type=int, help="with --rho: the attacker knows up to M non-sensitive codes")


def rho_policy_of(args: argparse.Namespace):
    """The study's `RhoPolicy` of `--sensitive --rho --rho-reason [--rho-m]`, None without them."""
    from engine.disclosure.sensitive import DEFAULT_M, RhoPolicy, load_categories

    given = [o for o in ("sensitive", "rho", "rho_reason", "rho_m") if getattr(args, o) is not None]
    if not given:
        return None
    for option in ("sensitive", "rho", "rho_reason"):
        if getattr(args, option) is None:
            raise UserError(f"--{option.replace('_', '-')} is needed with --{given[0].replace('_', '-')}")
    value = args.sensitive.strip()
    names = (
        load_categories().names
        if value.lower() == "all"
        else [n.strip() for n in value.split(",") if n.strip()]
    )
    m = DEFAULT_M if args.rho_m is None else args.rho_m
    return RhoPolicy(tuple(names), args.rho, args.rho_reason, m)


def register(sub) -> None:
    from engine.adversary import KNOWLEDGE, SCOPE, K, k_argument
    from engine.commands.parameter_options import add_parameter_options

    parser = sub.add_parser("study", help="studies: make, rebuild, report and package a study's releases")
    cmds = parser.add_subparsers(dest="study_command", required=True)

    new = cmds.add_parser("new", help="a new study of the data and the attacker (adversary, k)")
    new.add_argument("study", help="the study file to write (JSON; refused when it exists)")
    new.add_argument("--events", required=True, help="events file (CSV, Parquet, .xlsx, or a source)")
    new.add_argument("--population", help="population id list (default: every patient with events)")
    new.add_argument("--cohort", required=True, help="cohort id list (the patients to release)")
    new.add_argument("--biobank", help="biobank id list (Heatherly's DEMO_B scope)")
    add_parameter_options(new, (SCOPE, KNOWLEDGE), required=("scope", "knowledge"))
    new.add_argument(K.option, type=k_argument, required=True, help=K.help)
    _rho_options(new)
    new.set_defaults(func=new_study, **path_roles(DATA, ("STUDY:study",)))

    set_ = cmds.add_parser(
        "set", help="state the study's sensitive categories, rho and its reason (or --no-rho)"
    )
    set_.add_argument("study", help="the study file (JSON)")
    _rho_options(set_)
    set_.add_argument("--no-rho", action="store_true", help="the study no longer checks rho")
    set_.set_defaults(func=set_study, **path_roles((), ("STUDY:study",)))

    add = cmds.add_parser("add", help="make a release with a method and append it to the study")
    add.add_argument("study", help="the study file (JSON) to add the release to")
    add.add_argument("--name", required=True, help="the release's name in the study")
    add.add_argument(
        "--recipient", default="", help="to whom this release goes (default: the study's recipient)"
    )
    add.add_argument(
        "--public", action="store_true", help="a public release: held by every recipient (judged with each)"
    )
    add.add_argument(
        "--suppress-rho",
        action="store_true",
        help="suppress the codes implying the study's sensitive categories until the release meets its rho",
    )
    methods = add.add_subparsers(dest="method", required=True, metavar="METHOD")
    from engine.commands.anonymize import METHOD_MODULES

    for name in METHOD_MODULES:
        importlib.import_module(f"engine.commands.{name}").register(methods, study=add_release)

    remove = cmds.add_parser("remove", help="remove a release from the study")
    remove.add_argument("study", help="the study file (JSON)")
    remove.add_argument("name", help="the release's name")
    remove.set_defaults(func=remove_release, **path_roles((), ("STUDY:study",)))

    public = cmds.add_parser(
        "public", help="mark a release public (held by every recipient), or not public with --off"
    )
    public.add_argument("study", help="the study file (JSON)")
    public.add_argument("name", help="the release's name")
    public.add_argument("--off", action="store_true", help="no longer public")
    public.set_defaults(func=public_release, **path_roles((), ("STUDY:study",)))

    run = cmds.add_parser("run", help="rebuild every release of STUDY, re-verify it and compare its files")
    run.add_argument(
        "study", help="the study file saved from the app or by the engine (JSON, or zip with its input files)"
    )
    _data_options(run)
    run.set_defaults(func=run_study, **path_roles(("STUDY:study", *DATA)))

    report = cmds.add_parser("report", help="the IRB report and release bundle of the study")
    report.add_argument("study", help="the study file (JSON, or zip with its input files)")
    report.add_argument("--out", required=True, help="folder for " + ", ".join(REPORT_FILES) + " (created)")
    report.add_argument("--genotypes", help="genotypes for the PheWAS figures (patient_id + SNP columns)")
    report.add_argument("--recipient", default="", help="to whom the data goes (printed in the report)")
    report.add_argument(
        "--leave-out",
        action="append",
        default=[],
        metavar="NAME",
        help="a release not in this report and its bundle (repeatable; the app's 'Releases to leave out'): "
        "e.g. one going to another recipient. A public release left out is still judged with the others",
    )
    _data_options(report)
    report.set_defaults(
        func=report_study,
        **path_roles(
            ("STUDY:study", *DATA, "--genotypes"), folders=(("--out", (*REPORT_FILES, "report.html.sha256")),)
        ),
    )

    package = cmds.add_parser("package", help="the study file, with its input files (zip) when asked")
    package.add_argument("study", help="the study file (JSON)")
    package.add_argument("--out", required=True, help="the file to write (a zip with --with-inputs)")
    package.add_argument(
        "--with-inputs",
        action="store_true",
        help="include the input files (patient data!), given with --events, --cohort, --biobank, "
        "--genotypes, --labs; each is checked against the sha256 the study recorded",
    )
    package.add_argument("--events", help="the events file the study was made from")
    package.add_argument("--cohort", help="the cohort id list")
    package.add_argument("--biobank", help="the biobank id list")
    package.add_argument("--genotypes", help="genotypes to include")
    package.add_argument("--labs", help="lab orders to include")
    package.set_defaults(
        func=package_study,
        **path_roles(
            ("STUDY:study", "--events", "--cohort", "--biobank", "--genotypes", "--labs"), ("--out",)
        ),
    )

    crosswalk = cmds.add_parser(
        "crosswalk", help="a release's crosswalk, release id -> source id (IDENTIFYING: the steward's only)"
    )
    crosswalk.add_argument("study", help="the study file (JSON, or zip with its input files)")
    crosswalk.add_argument("name", help="the release's name")
    crosswalk.add_argument("--out", required=True, help="the crosswalk CSV to write (readable by you only)")
    _data_options(crosswalk)
    crosswalk.set_defaults(func=crosswalk_study, **path_roles(("STUDY:study", *DATA), ("--out",)))

    led = cmds.add_parser(
        "ledger", help="every pair of releases sharing patients, verified as one (issue 28's ledger)"
    )
    led.add_argument("study", help="the study file (JSON, or zip with its input files)")
    led.add_argument("others", nargs="*", help="other study files of the same data, on the same ledger")
    _data_options(led)
    led.set_defaults(func=ledger_study, **path_roles(("STUDY:study", *DATA)))


# ------------------------------------------------------------------------------------ files
def write_file(path: str | Path, data: bytes, *, private: bool = False) -> None:
    """Write `data` to `path` atomically (a temporary file in the same folder, then `os.replace`);
    `private`: readable by the owner only (mode 600), else as the umask allows. The temporaries a killed
    writer left are removed first (a study file's holds the pseudonym key; issue 40)."""
    from engine.io.export import sweep_temporaries

    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise UserError(f"{path}: the folder {folder} does not exist")
    if target.is_dir():
        raise UserError(f"{path}: is a folder; give a file name")
    sweep_temporaries(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if not private:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def audit_context(study: Study) -> dict:
    """The study's part of an audit entry: its fingerprint (never its key), adversary and k."""
    from engine.audit.log import study_fingerprint

    return {"study": study_fingerprint(study), "adversary": study.adversary.label, "k": study.k}


def _head(path: Path) -> bytes:
    with path.open("rb") as fh:
        return fh.read(4)


def _read(path_text: str) -> tuple[Study, dict[str, StudyInput]]:
    """A study file or package, its size checked before it is read (issue 25: a study.json padded
    with 1 GiB of spaces was read whole): a JSON study within the JSON limit, a package within the
    member limit (its members are then streamed and hashed by `read_study_file`)."""
    from engine.io.deployment import Limits, limits
    from engine.study.package import is_package, read_study_file

    path = Path(path_text)
    if not path.is_file():
        raise UserError(f"{path}: no such study file")
    size, lim = path.stat().st_size, limits()
    name, limit = (
        ("max_member_bytes", lim.max_member_bytes)
        if is_package(_head(path))
        else ("max_json_bytes", lim.max_json_bytes)
    )
    if size > limit:
        raise UserError(
            f"{path}: {size:,} bytes, more than {limit:,} (the limit {Limits.setting(name)}); not read"
        )
    return read_study_file(path.read_bytes(), str(path))


def _read_json_study(path_text: str) -> Study:
    from engine.study.package import is_package

    path = Path(path_text)
    if path.is_file() and is_package(_head(path)):
        raise UserError(f"{path}: a study package (zip); give the study file (JSON) itself")
    return _read(path_text)[0]


# ------------------------------------------------------------------------------------- data
def load_options_of(options: InputOptions) -> dict[str, str]:
    """The load options a study records for data read on the command line, under the names the app
    records (`ui.study.load_options`: unknown codes, duplicates; `engine.io.imports.ImportSpec`: source
    kind, mapping, sheet, schema, normalization, OMOP codes and domains)."""
    out = {"unknown_codes": options.unknown_codes, "drop_duplicates": "False"}
    if options.na_ids != "error":
        out["na_ids"] = options.na_ids
    for key, value in (
        ("source", "" if options.source == "auto" else options.source),
        ("mapping", options.mapping or ""),
        ("sheet", options.sheet or ""),
        ("schema", options.schema or ""),
        ("normalize_codes", "true" if options.normalize else ""),
        ("omop_codes", "" if options.codes == "source" else options.codes),
        ("domains", "" if tuple(options.domains) == ("condition",) else ",".join(options.domains)),
        ("drug_level", "" if options.drug_level == "ingredient" else options.drug_level),
    ):
        if value:
            out[key] = value
    return out


def cli_data_ref(
    name: str,
    g: GroupInputs,
    *,
    population: str,
    cohort: str,
    biobank: str | None,
    options: InputOptions | None = None,
) -> DataRef:
    """The `DataRef` of data read on the command line: what `study new` records and what `study
    run` compares (the key covers the events' content and every group's ids)."""
    from engine.study.runs import RunInputs
    from engine.study.study import data_ref

    return data_ref(
        name,
        g.events,
        RunInputs(g.population, g.cohort, g.biobank),
        population=population,
        cohort=cohort,
        biobank=biobank,
        sources=g.sources,
        load_options=None if options is None else load_options_of(options),
    )


def _of_dataset(ds, study: Study):
    """RunInputs, DataRef and spellings of a loaded Dataset, in the study's groups."""
    from engine.study.runs import RunInputs
    from engine.study.study import data_ref

    inputs = RunInputs(
        ds.group_records(study.data.population),
        ds.group_records(study.data.cohort),
        ds.group_records(study.data.biobank) if study.data.biobank else None,
        concepts=ds.concepts,
    )
    ref = data_ref(
        ds.name,
        ds.events,
        inputs,
        population=study.data.population,
        cohort=study.data.cohort,
        biobank=study.data.biobank,
        sources=ds.sources,
    )
    return ds.spellings, inputs, ref


def study_data(args: argparse.Namespace, study: Study, packaged) -> tuple[dict | None, RunInputs, DataRef]:
    """The codes' spellings (`Dataset.spellings`), RunInputs and DataRef of the study's data: the
    files a study package carries (read as the app reads uploads, with the study's load options), the
    files named on the command line, or the sample. Raises UserError when the data is not the study's."""
    from engine.study.runs import RunInputs

    if packaged and getattr(args, "events", None) is None:
        from engine.io.loaders import load_uploaded

        options = dict(study.data.load_options)

        def file(role: str) -> tuple[str, bytes] | None:
            got = packaged.get(role)
            return None if got is None else (got.name, got.data)

        events = file("events")
        if events is None:
            raise UserError(f"{args.study}: the study package holds no events file")
        ds = load_uploaded(
            events,
            biobank=file("biobank"),
            cohort=file("cohort"),
            genotypes=file("genotypes"),
            labs=file("labs"),
            unknown_codes="drop" if options.get("unknown_codes") == "drop" else "keep",
            drop_duplicates=options.get("drop_duplicates") == "True",
            na_ids="accept" if options.get("na_ids") == "accept" else "error",
            normalize=str(options.get("normalize_codes", "")).lower() == "true",
        ).data
        got = _of_dataset(ds, study)
    elif getattr(args, "events", None) is None:
        from engine.io.loaders import SAMPLE_NAME, load_sample

        if study.data.name != SAMPLE_NAME:
            raise UserError(
                f"{args.study}: the study was made on {study.data.name!r}; give its files with --events etc."
            )
        got = _of_dataset(load_sample(), study)
    else:
        from engine.commands.inputs import InputOptions, load_groups

        g = load_groups(
            args.events,
            population=args.population,
            cohort=args.cohort,
            biobank=args.biobank,
            options=InputOptions.of(args),
        )
        recorded = dict(study.data.inputs)
        for name, sha in g.sources.items():
            if name in recorded and recorded[name] != sha:
                raise UserError(f"{name}: sha256 {sha[:12]}… differs from the study's {recorded[name][:12]}…")
        ref = cli_data_ref(
            study.data.name,
            g,
            population=study.data.population,
            cohort=study.data.cohort,
            biobank=study.data.biobank,
        )
        got = g.spellings, RunInputs(g.population, g.cohort, g.biobank, concepts=g.concepts), ref
    if got[2].key != study.data.key:
        raise UserError(
            f"{args.study}: the data given is not the study's: events or groups differ (study events "
            f"{study.data.events_fingerprint[:12]}…, given {got[2].events_fingerprint[:12]}…; check --events, "
            "--cohort, --population, --biobank and the input options such as --normalize-codes)"
        )
    return got


def _rebuilt(args: argparse.Namespace, study: Study, packaged) -> tuple[list[RebuildCheck], RunInputs]:
    """Every current release of the study made again and re-verified at the study's adversary and k."""
    from engine.study.study import StudyError, rebuild

    spellings, inputs, data = study_data(args, study, packaged)
    try:
        return rebuild(study, inputs, data, spellings=spellings), inputs
    except StudyError as exc:
        raise UserError(str(exc)) from None


def _say_checks(study: Study, checks: list[RebuildCheck]) -> int:
    """Print each check (a failure with every reason) and return the number that passed."""
    if study.others():
        print(f"{len(study.others())} release(s) of other data in the study were not rebuilt")
    for c in checks:
        if c.passed:
            print(
                f"{c.name}: byte-identical ({len(c.recorded)} files) and re-verified: {c.verification.message()}"
            )
        else:
            print(f"{c.name}: FAILED")
            for line in c.differences():
                print(f"  {line}")
    return sum(c.passed for c in checks)


# -------------------------------------------------------------------------------- commands
def new_study(args: argparse.Namespace) -> int:
    from engine.adversary import MIN_RELEASE_K, Adversary
    from engine.commands.inputs import InputOptions, load_groups
    from engine.io.redact import redact
    from engine.study.study import Study

    path = Path(args.study)
    if path.exists():
        raise UserError(f"{path}: exists already; a new study needs a new file (study add adds releases)")
    if args.k < MIN_RELEASE_K:
        raise UserError(f"--k must be >= {MIN_RELEASE_K} for a study (k = 1 protects nobody), not {args.k}")
    options = InputOptions.of(args)
    g = load_groups(
        args.events, population=args.population, cohort=args.cohort, biobank=args.biobank, options=options
    )
    data = cli_data_ref(
        Path(redact(args.events)).name,  # a database URL's password never names the data (issue 25)
        g,
        population="population",
        cohort="cohort",
        biobank="biobank" if g.biobank is not None else None,
        options=options,
    )
    study = Study(data, Adversary(args.scope, args.knowledge), args.k, sensitive=rho_policy_of(args))
    write_file(path, study.to_json().encode("utf-8"), private=True)
    print(
        f"new study {path}: {data.name}, cohort of {g.cohort.n_patients} of {g.population.n_patients} patients; "
        f"attacker {study.adversary.label}, k = {study.k}; {_rho_text(study)}. "
        "The file holds the pseudonym key: keep it private."
    )
    return 0


def _rho_text(study: Study) -> str:
    p = study.sensitive
    if p is None:
        return "rho not checked (no sensitive categories stated)"
    return f"rho = {p.rho:g} for {', '.join(p.categories)}, up to {p.m} known codes ({p.reason})"


def set_study(args: argparse.Namespace) -> int:
    study = _read_json_study(args.study)
    policy = rho_policy_of(args)
    if args.no_rho == (policy is not None):
        raise UserError("give either --sensitive, --rho and --rho-reason, or --no-rho")
    updated = study.with_sensitive(policy)
    write_file(args.study, updated.to_json().encode("utf-8"), private=True)
    print(f"{args.study}: {_rho_text(updated)}; the releases are verified against it on the next add or run")
    return 0


def add_release(args: argparse.Namespace) -> int:
    from engine.study.study import StudyError, make_release

    study = _read_json_study(args.study)
    name = args.name.strip()
    if not name:
        raise UserError("--name: give the release a name")
    if any(r.name == name for r in study.releases):
        raise UserError(f"a release named {name!r} is already in {args.study}: choose another --name")
    if args.k is None:
        args.k = study.k
    spellings, inputs, _data = study_data(args, study, {})
    settings = args.settings_of(args, inputs)
    try:
        made = make_release(
            name,
            settings,
            inputs,
            study.data,
            study.adversary,
            study.k,
            spellings=spellings,
            pseudonyms=study.pseudonyms,
            rho=study.sensitive,
            suppress_rho=args.suppress_rho,
        )
        entry = dataclasses.replace(made.entry, recipient=args.recipient.strip(), public=args.public)
        updated = study.admit(entry)  # a release not verified never enters (issue 35, finding 6)
    except StudyError:
        raise
    except ValueError as exc:  # what the data lacks for these settings (e.g. no trajectory)
        raise UserError(f"study add {args.method}: {exc}") from None
    # the entry names the study's adversary and k, never the method's own --scope default (issue 40)
    args.audit = {**audit_context(updated), "release": name}
    write_file(args.study, updated.to_json().encode("utf-8"), private=True)
    print(f"{name} ({settings.method}): {made.entry.verdict_message()}")
    print(f"added to {args.study}: {len(made.files)} files verified ({', '.join(sorted(made.files))})")
    return 0


def remove_release(args: argparse.Namespace) -> int:
    from engine.study.study import StudyError

    study = _read_json_study(args.study)
    try:
        updated = study.remove(args.name)
    except StudyError as exc:
        raise UserError(f"{args.study}: {exc}") from None
    write_file(args.study, updated.to_json().encode("utf-8"), private=True)
    print(f"removed {args.name!r} from {args.study}")
    return 0


def public_release(args: argparse.Namespace) -> int:
    from engine.study.study import StudyError

    study = _read_json_study(args.study)
    try:
        updated = study.with_public(args.name, not args.off)
    except StudyError as exc:
        raise UserError(f"{args.study}: {exc}") from None
    write_file(args.study, updated.to_json().encode("utf-8"), private=True)
    print(f"{args.name!r} is {'not ' if args.off else ''}public in {args.study}")
    return 0


def run_study(args: argparse.Namespace) -> int:
    study, packaged = _read(args.study)
    if not study.current():
        print(
            f"{args.study}: no release of the study's data to rebuild"
            + (f" ({len(study.others())} of other data)" if study.others() else "")
        )
        return 1
    checks, _ = _rebuilt(args, study, packaged)
    passed = _say_checks(study, checks)
    print(
        f"{passed} of {len(checks)} releases rebuilt byte-identical and verified "
        f"({study.adversary.label}, k = {study.k})"
    )
    return 0 if checks and passed == len(checks) else 1


def _left_out(study: Study, names: Sequence[str]) -> set[str]:
    """The releases `--leave-out` names; a name the study does not hold is a UserError naming it."""
    held = {e.name for e in study.current()}
    unknown = sorted(set(names) - held)
    if unknown:
        raise UserError(
            f"--leave-out {', '.join(unknown)}: no such release in the study (it holds {', '.join(sorted(held)) or 'none'})"
        )
    return set(names)


def report_study(args: argparse.Namespace) -> int:
    from engine.commands.inputs import InputOptions, load_genotypes_checked
    from engine.io.export import write_release_files
    from engine.report.bundle import make_bundle
    from engine.report.report import ReleaseInput, build_report
    from engine.study.joint import JointRefused

    study, packaged = _read(args.study)
    args.audit = audit_context(study)  # the audit entries of the files written (engine/audit/log.py)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: is a file; give a folder")
    if not out.parent.is_dir():
        raise UserError(f"--out {out}: the folder {out.parent} does not exist")
    genotypes = None
    if args.genotypes:
        genotypes = load_genotypes_checked(args.genotypes, InputOptions.of(args)).data
    elif "genotypes" in packaged:
        from engine.io.loaders import load_genotypes

        g = packaged["genotypes"]
        genotypes = load_genotypes((g.name, g.data)).data
    checks, inputs = _rebuilt(args, study, packaged) if study.current() else ([], None)
    passed = _say_checks(study, checks)
    if inputs is None:
        _, inputs, _ = study_data(args, study, packaged)
    reverified = study.reverified(checks)
    left_out = _left_out(study, args.leave_out)
    releases = {
        c.name: ReleaseInput(c.made.release, c.made.verification, c.made.files)
        for c in checks
        if c.passed and c.made is not None and c.name not in left_out
    }
    public = {  # held by every recipient even when left out (issue 35), as the Report page passes them
        c.name: c.made.release
        for c in checks
        if c.passed and c.made is not None and c.name in left_out and study.get(c.name).public
    }
    report = build_report(
        reverified,
        releases,
        inputs.population,
        inputs.cohort,
        genotypes=genotypes,
        recipient=args.recipient,
        reproducible=True,
        biobank=inputs.biobank,
        concepts=inputs.concepts,  # a CDM's vocabulary: its names and hierarchy (issue 37)
        public=public,
    )
    out.mkdir(exist_ok=True)
    files = {
        "report.html": report.to_html(),
        "report.pdf": report.to_pdf(),
        "report.json": report.to_json(),
        "report.md": report.to_markdown(),
    }
    refused = None
    try:  # the joint gate (issue 35): no bundle of releases that fail together
        files["bundle.zip"] = make_bundle(report)
    except JointRefused as exc:
        refused = exc
        (out / "bundle.zip").unlink(missing_ok=True)  # never an earlier run's bundle beside this report
    # one set with its manifest (report.html.sha256), as the export gate writes a release: a kill
    # midway leaves no manifest, never a new report.html silently beside the old others (issue 40)
    write_release_files(files, {name: out / name for name in files})
    if refused is not None:
        raise UserError(f"wrote the report to {out}, not bundle.zip: {refused}")
    failed = [c.name for c in checks if not c.passed]
    print(f"wrote {', '.join(files)} to {out}: {len(releases)} release(s) in the report")
    if failed:
        print(
            f"not in the report: {', '.join(map(repr, failed))} (failed the rebuild or re-verification)",
            file=sys.stderr,
        )
    if not checks:
        print(f"{args.study}: no release of the study's data: the report has none", file=sys.stderr)
    return 0 if checks and passed == len(checks) else 1


def package_study(args: argparse.Namespace) -> int:
    from engine.study.package import StudyInput, write_package
    from engine.study.study import StudyError

    study = _read_json_study(args.study)
    args.audit = audit_context(study)  # the audit entry of the package (engine/audit/log.py)
    roles = {r: getattr(args, r) for r in ("events", "cohort", "biobank", "genotypes", "labs")}
    given = {r: p for r, p in roles.items() if p}
    if not args.with_inputs:
        if given:
            raise UserError("input files are included only with --with-inputs")
        write_file(args.out, study.to_json().encode("utf-8"), private=True)
        print(f"wrote the study file (no patient data, with its pseudonym key) to {args.out}")
        return 0
    inputs = {}
    for role, p in given.items():
        path = Path(p)
        if not path.is_file():
            raise UserError(f"--{role} {p}: no such file")
        inputs[role] = StudyInput(role, path.name, path.read_bytes())
    try:
        data = write_package(study, inputs)
    except StudyError as exc:
        raise UserError(
            f"{exc} (give each input file the study was made from with --events, --cohort, ...)"
        ) from None
    write_file(args.out, data, private=True)
    print(
        f"wrote {args.out}: the study with its input files {', '.join(i.name for i in inputs.values())} "
        "(patient data: keep it where the data may be)"
    )
    return 0


def crosswalk_study(args: argparse.Namespace) -> int:
    from engine.io.export import crosswalk_bytes

    study, packaged = _read(args.study)
    args.audit = audit_context(study)  # the audit entry of the crosswalk (engine/audit/log.py)
    entry = next((r for r in study.current() if r.name == args.name), None)
    if entry is None:
        where = " (it belongs to other data)" if any(r.name == args.name for r in study.others()) else ""
        raise UserError(f"{args.study}: no release named {args.name!r} of the study's data{where}")
    checks, _ = _rebuilt(args, dataclasses.replace(study, releases=(entry,)), packaged)
    check = checks[0]
    if not check.passed or check.made is None:
        reasons = "; ".join(check.differences())
        raise UserError(f"{args.name!r} did not rebuild byte-identical and verified: {reasons}")
    write_file(args.out, crosswalk_bytes(check.made.release, study.pseudonyms), private=True)
    print(
        f"IDENTIFYING: {args.out} maps the release ids of {args.name!r} to the source's patient ids; keep it "
        "with the steward, never with the release",
        file=sys.stderr,
    )
    return 0


def ledger_study(args: argparse.Namespace) -> int:
    """`study ledger STUDY [OTHER ...]`: every study's releases rebuilt and re-verified, then every
    pair sharing patients linked per source patient and verified as one under the first study's
    adversary and k (`engine.study.ledger`). Exit 0 when every pair is verified, 1 otherwise."""
    from engine.study.ledger import LedgerRelease, ledger

    first, population, held = None, None, []
    for path in [args.study, *args.others]:
        study, packaged = _read(path)
        checks, inputs = _rebuilt(argparse.Namespace(**{**vars(args), "study": path}), study, packaged)
        if first is None:
            first, population = study, inputs.population
        for c in checks:
            if c.made is None:
                continue
            if not c.passed:
                print(f"{Path(path).name} / {c.name}: not verified on rebuild; on the ledger all the same")
            entry = study.get(c.name)
            recipient = entry.recipient or study.determination.recipient
            held.append(LedgerRelease(Path(path).name, c.name, recipient, c.made.release))
    assert first is not None and population is not None
    pairs = ledger(held, first.adversary, first.k, population)
    print(f"{len(held)} release(s) on the ledger, {len(pairs)} pair(s) sharing patients")
    for pair in pairs:
        print(pair.message())
    return 0 if all(p.ok for p in pairs) else 1
