"""The readers' errors: bad input files stop loading with a message naming file, rows and column.

Both are `engine.errors.UserError`s: the CLI prints them as one line (exit 2), the app as a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.errors import UserError

if TYPE_CHECKING:
    from engine.io.validation import ValidationReport


class DataError(UserError, ValueError):
    """Loading stopped on errors; the message names file, rows, column and what was expected.

    A `UserError` (the CLI prints it as one line, exit 2) and a `ValueError`. `.report` holds every
    finding, `.errors` the errors.
    """

    def __init__(self, report: ValidationReport) -> None:
        self.report = report
        self.errors = report.errors
        first = str(self.errors[0]) if self.errors else "invalid data"
        more = f" (+{len(self.errors) - 1} more error(s))" if len(self.errors) > 1 else ""
        super().__init__(first + more)


class InputFileError(UserError, OSError):
    """An input path that cannot be read as a file (a folder, no permission): one line naming it."""


class MissingFileError(InputFileError, FileNotFoundError):
    """An input path that does not exist (a `FileNotFoundError` too)."""
