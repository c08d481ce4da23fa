"""The options of every command that writes a release (issue 23): the key of the release ids
(`--key-file`) and the identifying crosswalk (`--crosswalk`), and the `Pseudonyms` they give."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from engine.io.errors import UserError
from engine.io.pseudonyms import PseudonymKeyError, Pseudonyms, new_key


def add_release_options(parser: argparse.ArgumentParser) -> None:
    """The options of every command that writes a release: the pseudonym key and the crosswalk."""
    parser.add_argument(
        "--key-file",
        help="file holding the secret key of the release ids (64 hex digits; created with a fresh key "
        "when missing, readable by you only). Without it a fresh key is used and not kept: the same "
        "run then gives other release ids",
    )
    parser.add_argument(
        "--crosswalk",
        help="also write the crosswalk (release id -> source id) here. IDENTIFYING: keep it with the "
        "steward, never with the release",
    )


def pseudonyms_of(args: argparse.Namespace) -> Pseudonyms:
    """The release ids' key: read from `--key-file` (created when missing), else a fresh one."""
    path = getattr(args, "key_file", None)
    if not path:
        return Pseudonyms(new_key())
    p = Path(path)
    if not p.exists():
        key = new_key()
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(key + "\n")
        print(f"note: a new release-id key was written to {p} (keep it secret)", file=sys.stderr)
        return Pseudonyms(key)
    try:
        return Pseudonyms(p.read_text("ascii", errors="replace").strip())
    except PseudonymKeyError as exc:
        raise UserError(f"--key-file {path}: {exc}") from None
