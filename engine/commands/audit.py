"""`python -m engine audit verify LOG`: check the audit log's hash chain (`engine.audit.log`).

Exit 0 with the number of entries and the chain's last hash when every line is intact; exit 1 naming
each changed, removed, reordered or inserted line by its line number.
"""

from __future__ import annotations

import argparse
import sys

from engine.commands.paths import path_roles


def register(sub) -> None:
    p = sub.add_parser("audit", help="the audit log of exports and downloads")
    cmds = p.add_subparsers(dest="audit_command", required=True)
    verify = cmds.add_parser(
        "verify",
        help="check the audit log's hash chain; name every changed, removed, reordered or inserted line",
    )
    verify.add_argument(
        "log", nargs="?", help="the audit log (default: COHORTSHIELD_AUDIT_LOG, else .cohortshield/audit.log)"
    )
    verify.set_defaults(func=verify_log, **path_roles(("LOG:log",)))


def verify_log(args: argparse.Namespace) -> int:
    from engine.audit.log import log_path, verify

    path = args.log or str(log_path())
    result = verify(path)
    if result.ok:
        print(f"{path}: {result.message()}")
        return 0
    print(f"{path}: the audit chain is broken ({len(result.problems)} problem(s)):", file=sys.stderr)
    print(result.message(), file=sys.stderr)
    return 1
