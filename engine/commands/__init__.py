"""Subcommands of `python -m engine`: each module defines `register(subparsers)`.

`cli` (run by `python -m engine`) builds the parser from the modules listed in `cli.COMMAND_MODULES`;
each module adds its parser(s) with `set_defaults(func=..., **paths.path_roles(...))` (the files it
reads and writes, checked before it runs), and `func(args) -> int` is the exit code. The method
modules `anonymize_<m>.py` each have one `settings_of(args, inputs)`, used by `anonymize <m>` and by
`study add ... <m>`, and `register(methods, study=...)` builds the same options under either.
"""
