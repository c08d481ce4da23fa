"""`python -m engine ...`: the command-line face of the engine.

Each subcommand lives in its own module under `engine/commands/` with `register(subparsers)`.
Errors in the user's files or arguments exit with status 2 and a one-line message, never a traceback.
Every subcommand that reads patient data gets the input options of `engine.commands.inputs`
(`--keep-unknown` / `--drop-unknown`, `--accept-na-ids`); loader warnings go to stderr.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterator

from engine.errors import UserError

# module name under engine.commands -> registered in this order
COMMAND_MODULES = ("sample", "risk", "anonymize", "phewas", "labs", "study")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description="CohortShield engine")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"engine.commands.{name}")
        except ModuleNotFoundError as exc:  # a command whose module is not written yet
            if exc.name != f"engine.commands.{name}":
                raise
            continue
        module.register(sub)
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
        return int(args.func(args) or 0)
    except (UserError, FileNotFoundError, ValueError, KeyError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {msg}", file=sys.stderr)
        return 2
