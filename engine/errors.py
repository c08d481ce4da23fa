"""The one error type for a problem the user can fix: their files, arguments or settings.

`UserError` is what the CLI (`engine/cli.py`) prints as one line with exit status 2 and the app shows
as a message. Anything else raised is a bug and keeps its traceback. Input errors of the readers
(`engine.io.errors.DataError`, `InputFileError`) are UserErrors too.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input (a file, an argument, a setting), named in one line."""
