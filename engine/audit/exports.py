"""Write-ahead auditing of an export (issue 40, finding 6): the one way the CLI's files and the app's
downloads leave.

`audited_export` appends a `begin:` entry per file about to leave (its name and the sha256 of its
bytes when they exist already; a CLI run's outputs are named before the command computes them), and
only when every one is durably in the log does it deliver (the app hands the bytes to the browser, the
CLI runs its command). Then a completion entry per file delivered, with the sha256 of what left; a
delivery that raises gets a `failed:` entry. When the log cannot take an entry (unwritable, full, a
short write, its key missing: `AuditLogUnavailable`, a `UserError`) nothing is delivered, and a
completion that cannot be written undoes the delivery (the CLI removes the files it wrote).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from engine.audit.log import AuditLogUnavailable, append

WHO = ("user", "study", "release", "adversary", "k")  # an entry's fields taken from the context


def audited_export(
    what: str,
    planned: Mapping[str, bytes | None],
    deliver: Callable[[], Mapping[str, bytes]],
    context: Mapping[str, Any] | Callable[[], Mapping[str, Any]],
    *,
    labels: Mapping[str, str] | None = None,
    undo: Callable[[], None] | None = None,
    path: Path | str | None = None,
) -> list[dict[str, Any]]:
    """Log `planned` (file name -> bytes, or None when not known yet), `deliver()`, then log what it
    delivered (file name -> bytes); returns the completion entries. `context`: the entries' `user`,
    `study`, `release`, `adversary` and `k` (a function: read again after the delivery, which may
    name the study). `labels`: a file's words after `what` (e.g. its CLI option). Raises
    `AuditLogUnavailable` before delivering when the log cannot take the begin entries; after
    `undo()` when it cannot take the completion."""
    names = dict(labels or {})

    def fields() -> dict[str, Any]:
        ctx = context() if callable(context) else context
        return {"path": path, "user": ctx["user"], **{k: ctx.get(k) for k in WHO[1:]}}

    def label(name: str) -> str:
        return f"{what} {names[name]}" if names.get(name) else what

    before = fields()
    for name, data in planned.items():
        append(f"begin: {label(name)}", name, data, **before)
    try:
        delivered = deliver()
    except BaseException as exc:
        for name in planned:
            try:
                append(f"failed: {label(name)} ({type(exc).__name__})", name, None, **before)
            except AuditLogUnavailable:
                break  # the delivery's own error is the one to report
        raise
    after = fields()
    try:
        return [append(label(name), name, data, **after) for name, data in delivered.items()]
    except AuditLogUnavailable:
        if undo is not None:
            undo()
        raise
