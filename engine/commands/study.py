"""`python -m engine study run STUDY.json`: rebuild every release of a saved study, headless, and say
whether each is byte-identical to what was recorded (or name what differs). Exit 0 when all are
identical, 1 when any differs, 2 for a problem with the inputs.

The data is the input files of a study package (a zip saved with "Include the input files"), the
shipped sample when the study was made on it, else the files given with --events,
--cohort, --biobank, --population (their sha256 and content fingerprints must match the study's),
read with the input options given (e.g. `--normalize-codes` when the study's data was normalized;
the code maps are then rebuilt with the codes' original spellings, as recorded).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.io.errors import UserError


def register(sub) -> None:
    parser = sub.add_parser("study", help="saved studies: rebuild every release and compare its files")
    study_sub = parser.add_subparsers(dest="study_command", required=True)
    run = study_sub.add_parser("run", help="rebuild every release of STUDY and compare sha256 of its files")
    run.add_argument(
        "study", help="the study file saved from the app or by the engine (JSON, or zip with its input files)"
    )
    run.add_argument("--events", help="events file the study was made from (default: the sample, if it was)")
    run.add_argument("--population", help="population id list (default: every patient with events)")
    run.add_argument("--cohort", help="cohort id list")
    run.add_argument("--biobank", help="biobank id list")
    run.set_defaults(func=run_study)


def _study_ref(study, name: str, events, inputs, sources):
    """The DataRef of loaded data in the study's groups (compared with the study's own)."""
    from engine.study.study import data_ref

    return data_ref(
        name,
        events,
        inputs,
        population=study.data.population,
        cohort=study.data.cohort,
        biobank=study.data.biobank,
        sources=sources,
    )


def _of_dataset(ds, study):
    """RunInputs, DataRef and spellings of a loaded Dataset, in the study's groups."""
    from engine.study.runs import RunInputs

    inputs = RunInputs(
        ds.group_records(study.data.population),
        ds.group_records(study.data.cohort),
        ds.group_records(study.data.biobank) if study.data.biobank else None,
    )
    return ds.spellings, inputs, _study_ref(study, ds.name, ds.events, inputs, ds.sources)


def _inputs(args: argparse.Namespace, study, packaged):
    """RunInputs, DataRef and the codes' spellings (`Dataset.spellings`) of the data: the files a study
    package carries (read as the app reads uploads, with the study's load options), the files named on
    the command line, or the sample."""
    from engine.study.runs import RunInputs

    if packaged and args.events is None:
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
        ).data
        return _of_dataset(ds, study)
    if args.events is None:
        from engine.io.loaders import SAMPLE_NAME, load_sample

        if study.data.name != SAMPLE_NAME:
            raise UserError(
                f"{args.study}: the study was made on {study.data.name!r}; give its files with --events etc."
            )

        return _of_dataset(load_sample(), study)
    from engine.commands.inputs import InputOptions, load_groups

    g = load_groups(
        args.events,
        population=args.population,
        cohort=args.cohort,
        biobank=args.biobank,
        options=InputOptions.of(args),
    )
    inputs = RunInputs(g.population, g.cohort, g.biobank)
    recorded = dict(study.data.inputs)
    for name, sha in g.sources.items():
        if name in recorded and recorded[name] != sha:
            raise UserError(f"{name}: sha256 {sha[:12]}… differs from the study's {recorded[name][:12]}…")
    return g.spellings, inputs, _study_ref(study, study.data.name, g.events, inputs, g.sources)


def run_study(args: argparse.Namespace) -> int:
    from engine.study.package import read_study_file
    from engine.study.study import StudyError, rebuild

    path = Path(args.study)
    if not path.is_file():
        raise UserError(f"{path}: no such study file")
    try:
        study, packaged = read_study_file(path.read_bytes(), str(path))
        spellings, inputs, data = _inputs(args, study, packaged)
        checks = rebuild(study, inputs, data, spellings=spellings)
    except StudyError as exc:
        raise UserError(str(exc)) from None
    if study.others():
        print(f"{len(study.others())} release(s) of other data in the study were not rebuilt")
    for c in checks:
        if c.identical:
            print(f"{c.name}: byte-identical ({len(c.recorded)} files; {c.verification.message()})")
        else:
            print(f"{c.name}: DIFFERS")
            for line in c.differences():
                print(f"  {line}")
    same = sum(c.identical for c in checks)
    print(f"{same} of {len(checks)} releases rebuilt byte-identical")
    return 0 if same == len(checks) else 1
