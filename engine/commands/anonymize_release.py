"""The one path of `anonymize METHOD` to a release (issue 38, finding 2): the method's settings (its
`settings_of`, which `study add ... METHOD` uses too) and the release they gave go to
`engine.study.study.make_release`, which verifies it under the settings' adversary and k against the
population and builds its files through the export gate, as `study add`, a reopened study and the
app do; `engine.commands.inputs.publish`, the command line's one writer, then writes exactly those
files; the method's report (`engine.commands.method_reports`) is written and printed last.
`outputs`, `load_inputs` and `refuse_without_visits`: the steps before the run every command shares."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.commands.inputs import GroupInputs
    from engine.commands.method_reports import MethodReport
    from engine.records import Records
    from engine.release import Release
    from engine.study.runs import MethodSettings, RunInputs
    from engine.study.study import MadeRelease


def anonymize(
    args: argparse.Namespace,
    settings: MethodSettings,
    inputs: GroupInputs,
    paths: Mapping[str, Path | str],
    release: Release,
    report: Callable[[MadeRelease], MethodReport],
    *,
    run_inputs: RunInputs | None = None,
    blocked: Callable[[MadeRelease], str | None] | None = None,
) -> int:
    """The end of every `anonymize METHOD`, from the `release` its `settings` gave on `run_inputs`
    (default: the groups of `inputs`): `--sensitive --rho` suppresses the sensitive codes first
    (`engine.commands.sensitive_option.rho_step`), `make_release` verifies it and builds its files
    through the gate, `publish` writes them unless `blocked` (the method's own reason to refuse the
    release made, e.g. a privacy policy not met) or the gate refuses; then the method's `report`
    (`engine.commands.method_reports`): REPORT.json (`--report`) written either way, a refused export
    a UserError stating the reason, the stale files removed and the report's hint; else its summary
    line printed."""
    import json

    from engine.commands.inputs import InputOptions, publish
    from engine.commands.release_options import pseudonyms_of
    from engine.commands.sensitive_option import rho_step
    from engine.commands.study import cli_data_ref
    from engine.io import export
    from engine.io.errors import UserError
    from engine.io.redact import redact
    from engine.study.study import make_release

    release, rho_record = rho_step(args, release, settings.adversary, settings.k, inputs.population)
    data = cli_data_ref(
        Path(redact(args.events)).name,
        inputs,
        population="population",
        cohort="cohort",
        biobank="biobank" if inputs.biobank is not None else None,
        options=InputOptions.of(args),
    )
    pseudonyms = pseudonyms_of(args)
    made = make_release(
        f"anonymize {settings.method}",
        settings,
        run_inputs or inputs.run_inputs,
        data,
        settings.adversary,
        settings.k,
        spellings=inputs.spellings,
        pseudonyms=pseudonyms,
        release=release,
    )
    refused = (None if blocked is None else blocked(made)) or (rho_record or {}).get("blocked")
    outcome = publish(inputs, made, paths, args=args, blocked=refused, pseudonyms=pseudonyms)
    if rho_record is not None:
        outcome["sensitive"] = rho_record
    out = report(made)
    if args.report:
        Path(args.report).write_text(
            json.dumps({**out.fields, "export": outcome}, indent=2, default=str) + "\n"
        )
    if not outcome["written"]:
        raise UserError(export.refusal_message(outcome) + out.hint)
    print(out.summary)
    return 0


def outputs(args: argparse.Namespace) -> dict[str, Path]:
    """The release files' paths (`--out`, `--codemap`, `--report`), checked before any work."""
    from engine.io import export

    return export.release_paths(args.out, codemap=args.codemap, report=args.report)


def load_inputs(args: argparse.Namespace) -> GroupInputs:
    """The events and the groups a method command names (`--population`, `--biobank` where it has them)."""
    from engine.commands.inputs import InputOptions, load_groups

    return load_groups(
        args.events,
        population=getattr(args, "population", None),
        cohort=args.cohort,
        biobank=getattr(args, "biobank", None),
        options=InputOptions.of(args),
    )


def refuse_without_visits(args: argparse.Namespace, paths: Mapping[str, Path | str], group: Records) -> None:
    """`--with-visits` on events without a visit column: refused, the stale release removed."""
    from engine.io import export
    from engine.io.errors import UserError

    if args.with_visits and not group.has_visits:
        reason = f"--with-visits: {args.events} has no visit column, so there are no visits to keep"
        raise UserError(export.refuse(paths, reason))
