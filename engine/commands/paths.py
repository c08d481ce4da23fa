"""The files a command reads and writes, checked before any work (issue 23): no output may be an
input of the same command or another of its outputs.

Every leaf parser of `python -m engine` declares its path options with `set_defaults(**path_roles(...))`
(inputs, outputs, folders written into, and whether the release set's manifest `<--out>.sha256` is
written too); `engine.commands.cli.main` calls `check_paths(args)` before the command runs. Two paths
are the same file when they resolve to the same path (symbolic links followed, `Path.resolve`) or,
when both exist, when `os.path.samefile` says so (hard links). A clash is a `UserError` (exit 2)
naming both options and the path: `--out events.csv` beside `--events events.csv` no longer replaces
the events file, `--report` equal to `--cohort` no longer turns the cohort list into JSON.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.io.errors import UserError


@dataclass(frozen=True)
class PathRoles:
    """What a command reads and writes, by option: `inputs` and `outputs` hold option strings
    (`--events`) or, for positionals, `LABEL:dest` (`STUDY:study`); `folders` the output folders
    with the file names (glob patterns) the command writes into them; `manifest_of` the option
    whose path gets the release set's manifest beside it (`engine.io.export.manifest_path`)."""

    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    folders: tuple[tuple[str, tuple[str, ...]], ...] = ()
    manifest_of: str | None = None


def path_roles(
    inputs: tuple[str, ...] = (),
    outputs: tuple[str, ...] = (),
    folders: tuple[tuple[str, tuple[str, ...]], ...] = (),
    manifest_of: str | None = None,
) -> dict[str, PathRoles]:
    """The `set_defaults` keyword of a parser's path roles."""
    return {"path_roles": PathRoles(tuple(inputs), tuple(outputs), tuple(folders), manifest_of)}


def _label_dest(entry: str) -> tuple[str, str]:
    if ":" in entry:
        label, dest = entry.split(":", 1)
        return label, dest
    return entry, entry.lstrip("-").replace("-", "_")


def _given(args: argparse.Namespace, entries: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """(label, path) of every option of `entries` given a value (a list option gives each value)."""
    for entry in entries:
        label, dest = _label_dest(entry)
        value = getattr(args, dest, None)
        if value is None or value == "":
            continue
        for v in value if isinstance(value, list | tuple) else (value,):
            yield label, str(v)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file: equal once resolved (links followed), or, when both exist,
    `os.path.samefile` (hard links, bind mounts)."""
    pa, pb = Path(a), Path(b)
    try:
        if pa.resolve() == pb.resolve():
            return True
        return pa.exists() and pb.exists() and os.path.samefile(pa, pb)
    except (OSError, RuntimeError):  # a link loop, an unreadable folder: not provably one file
        return False


def _inside(path: str, folder: str, patterns: tuple[str, ...]) -> bool:
    p = Path(path)
    try:
        parent = p.resolve().parent
        in_folder = parent == Path(folder).resolve() or (
            p.exists() and Path(folder).exists() and os.path.samefile(p.parent, folder)
        )
    except (OSError, RuntimeError):
        return False
    return in_folder and any(fnmatch.fnmatch(p.name, pat) for pat in patterns)


def _writable_folder(label: str, path: str, folder: Path) -> None:
    """Refuse (UserError) an output whose folder cannot take a new file: a probe file is created and
    removed, so a read-only folder or file system, a full disk's quota or a path under /proc is named
    before any work (issue 40: a read-only output folder ended in an OSError traceback). A folder that
    does not exist yet is left to the command (some create it)."""
    if not folder.is_dir():
        return
    try:
        fd, probe = tempfile.mkstemp(prefix=".cohortshield-probe-", dir=folder)
    except OSError as exc:
        raise UserError(
            f"{label} {path}: cannot write in the folder {str(folder)!r} ({exc.strerror or exc}); "
            "choose a folder you can write to"
        ) from None
    os.close(fd)
    os.unlink(probe)


def _no_nul(label: str, path: str) -> None:
    if "\x00" in path:
        raise UserError(f"{label}: the path {path!r} holds a NUL byte, which no file name can hold")


def check_paths(args: argparse.Namespace) -> None:
    """Refuse (UserError) an output of the command that is one of its inputs or another output, a path
    holding a NUL byte, or an output whose folder cannot be written, before any work. Commands without
    declared roles are not checked."""
    roles: PathRoles | None = getattr(args, "path_roles", None)
    if roles is None:
        return
    inputs = list(_given(args, roles.inputs))
    outputs = list(_given(args, roles.outputs))
    folders = [(label, f) for entry, _ in roles.folders for label, f in _given(args, (entry,))]
    for label, p in [*inputs, *outputs, *folders]:
        _no_nul(label, p)
    for label, p in outputs:
        _writable_folder(label, p, Path(p).parent)
    for label, f in folders:
        _writable_folder(label, f, Path(f))
    if roles.manifest_of is not None:
        from engine.io.export import manifest_path

        for label, p in _given(args, (roles.manifest_of,)):
            outputs.append((f"the manifest of {label}", str(manifest_path({"f": p}))))
    for i, (out_label, out) in enumerate(outputs):
        for in_label, inp in inputs:
            if same_file(out, inp):
                raise UserError(
                    f"{out_label} {out} is the file given as {in_label} ({inp}): writing it would overwrite "
                    "an input; choose another output path"
                )
        for other_label, other in outputs[:i]:
            if same_file(out, other):
                raise UserError(
                    f"{out_label} {out} is the file given as {other_label} ({other}): two outputs cannot "
                    "share a path; choose another"
                )
    for entry, patterns in roles.folders:
        for label, folder in _given(args, (entry,)):
            for in_label, inp in inputs:
                if same_file(folder, inp) and not Path(inp).is_dir():
                    raise UserError(
                        f"{label} {folder} is the file given as {in_label} ({inp}); give a folder"
                    )
                if _inside(inp, folder, patterns):
                    raise UserError(
                        f"{in_label} {inp} lies in {label} {folder} under a name this command writes "
                        f"({', '.join(patterns)}): it would be overwritten; move it or choose another folder"
                    )
