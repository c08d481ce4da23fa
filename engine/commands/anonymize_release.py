"""The one path of `anonymize METHOD` to a release (issue 38, finding 2): the method's settings (its
`settings_of`, which `study add ... METHOD` uses too) go to `engine.study.study.make_release`, which
runs them (or takes the release the command ran for its report), verifies the release under the
settings' adversary and k against the population and passes it through the export gate, as `study
add`, a reopened study and the app do; `engine.commands.inputs.publish`, the command line's one writer,
then writes exactly that release with the same release-id key."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.commands.inputs import GroupInputs
    from engine.release import Release
    from engine.study.runs import MethodSettings, RunInputs
    from engine.study.study import MadeRelease


def release_and_publish(
    args: argparse.Namespace,
    settings: MethodSettings,
    inputs: GroupInputs,
    paths: Mapping[str, Path | str],
    *,
    run_inputs: RunInputs | None = None,
    release: Release | None = None,
    blocked: Callable[[MadeRelease], str | None] | None = None,
) -> tuple[MadeRelease, dict]:
    """`make_release` of `settings` on `run_inputs` (default: the population and cohort of `inputs`)
    and the export record of `publish` (`blocked`: the method's own reason to refuse the release made,
    e.g. a privacy policy not met). `release`: what `settings` gave already, when the command needed the run's
    figures for its report; it is verified here all the same. `--sensitive --rho` suppresses the
    sensitive codes before (`engine.commands.sensitive_option.rho_step`): the release verified and
    written is the suppressed one, its files built once."""
    from engine.commands.inputs import InputOptions, publish
    from engine.commands.release_options import pseudonyms_of
    from engine.commands.sensitive_option import rho_step
    from engine.commands.study import cli_data_ref
    from engine.io.redact import redact
    from engine.study.runs import RunInputs
    from engine.study.study import make_release

    if run_inputs is None:
        run_inputs = RunInputs(inputs.population, inputs.cohort, inputs.biobank, concepts=inputs.concepts)
    if release is None:
        release = settings.run(run_inputs)
    release, _, rho_record = rho_step(args, release, None, settings.adversary, settings.k, inputs.population)
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
        run_inputs,
        data,
        settings.adversary,
        settings.k,
        spellings=inputs.spellings,
        pseudonyms=pseudonyms,
        release=release,
    )
    refused = None if blocked is None else blocked(made)
    if rho_record is not None:
        refused = refused or rho_record["blocked"]
    outcome = publish(inputs, made, paths, args=args, blocked=refused, pseudonyms=pseudonyms)
    if rho_record is not None:
        outcome["sensitive"] = rho_record
    return made, outcome


def write_report(args: argparse.Namespace, report: dict, outcome: dict, *, hint: str = "") -> None:
    """REPORT.json (`--report`) written either way; then a refused export is a UserError stating the
    gate's reason, the stale files removed and `hint` (what the user may change)."""
    import json

    from engine.io import export

    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2, default=str) + "\n")
    if not outcome["written"]:
        from engine.io.errors import UserError

        raise UserError(export.refusal_message(outcome) + hint)
