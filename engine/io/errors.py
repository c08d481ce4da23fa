"""Errors the user can fix: their files, arguments or settings (`UserError`), and the readers' errors.

`UserError` is what the CLI (`engine/commands/cli.py`) prints as one line with exit status 2 and the
app shows as a message. Anything else raised is a bug and keeps its traceback. Bad input files stop
loading with a message naming file, rows and column (`DataError`, `InputFileError`): UserErrors too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class FindingsReport(Protocol):
    """What `DataError` reads of its report: its errors (an `engine.io.validation.ValidationReport`,
    named structurally so that this module, which validation imports, imports nothing of it)."""

    @property
    def errors(self) -> Sequence[object]: ...


class UserError(Exception):
    """A problem with the user's input (a file, an argument, a setting), named in one line."""


class DataError(UserError, ValueError):
    """Loading stopped on errors; the message names file, rows, column and what was expected.

    A `UserError` (the CLI prints it as one line, exit 2) and a `ValueError`. `.report` holds every
    finding, `.errors` the errors.
    """

    def __init__(self, report: FindingsReport) -> None:
        self.report = report
        self.errors = report.errors
        first = str(self.errors[0]) if self.errors else "invalid data"
        more = f" (+{len(self.errors) - 1} more error(s))" if len(self.errors) > 1 else ""
        super().__init__(first + more)


class InputFileError(UserError, OSError):
    """An input path that cannot be read as a file (a folder, no permission): one line naming it."""


class MissingFileError(InputFileError, FileNotFoundError):
    """An input path that does not exist (a `FileNotFoundError` too)."""
