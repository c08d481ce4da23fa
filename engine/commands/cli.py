"""`python -m engine ...`: the command-line face of the engine.

Each subcommand lives in its own module under `engine/commands/` with `register(subparsers)`.
Errors in the user's files or arguments (`engine.io.errors.UserError`) exit with status 2 and a one-line
message; any other exception is a bug and keeps its traceback.
Before a command runs, `engine.commands.paths.check_paths` refuses an output path that is one of its
inputs or another of its outputs (links resolved): every leaf parser declares its paths.
Every subcommand that reads patient data gets the input options of `engine.commands.inputs`
(`--keep-unknown` / `--drop-unknown`, `--accept-na-ids`); loader warnings go to stderr.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterator

from engine.commands.paths import check_paths
from engine.io.errors import UserError

# module name under engine.commands -> registered in this order
COMMAND_MODULES = (
    "sample",
    "risk",
    "anonymize",
    "phewas",
    "labs",
    "study",
    "shards",
    "audit",
    "verify",
    "dp",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description="CohortShield engine")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"engine.commands.{name}").register(sub)
    from engine.commands.inputs import add_input_options

    for leaf in _leaf_parsers(parser):
        add_input_options(leaf)
    return parser


def _leaf_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every parser that runs a command (no subcommands of its own), each once."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
        return
    for action in subs:
        for child in dict.fromkeys(action.choices.values()):
            yield from _leaf_parsers(child)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        check_paths(args)  # no output overwrites an input or another output, before any work
        from engine.commands.release_options import run_audited

        # its outputs logged before it runs and each file written after (engine/audit/exports.py)
        return run_audited(args, lambda: int(args.func(args) or 0))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
