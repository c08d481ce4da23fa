"""Subcommands of `python -m engine`: each module defines `register(subparsers)`.

`cli` (run by `python -m engine`) builds the parser from the modules listed in `cli.COMMAND_MODULES`;
each module adds its parser(s) with `set_defaults(func=...)`, and `func(args) -> int` is the exit code.
"""
