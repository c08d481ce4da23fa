"""`python -m engine audit verify [--public-key PEM] LOG`: check the audit log (`engine.audit.verify`):
its sha256 chain, its MAC chain (with the chain key) and its required signed head (with the public key
alone).

Exit 0 with the number of entries and the chain's last hash when every line is intact; exit 1 naming
each changed, removed, reordered, inserted, forged or appended line by its line number, and a missing
or unsigned head; exit 2 for an unreadable public key.
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
        help="check the audit log's chains and its signed head; name every changed, removed, reordered, "
        "inserted, forged or appended line",
    )
    verify.add_argument(
        "log", nargs="?", help="the audit log (default: COHORTSHIELD_AUDIT_LOG, else .cohortshield/audit.log)"
    )
    verify.add_argument(
        "--public-key",
        help="the Ed25519 public key (PEM) that checks the signed head (default: <signing key>.pub beside "
        "COHORTSHIELD_AUDIT_SIGNING_KEY); an auditor needs no other key",
    )
    verify.set_defaults(func=verify_log, **path_roles(("LOG:log", "--public-key")))


def verify_log(args: argparse.Namespace) -> int:
    from engine.audit.log import log_path
    from engine.audit.verify import verify

    path = args.log or str(log_path())
    result = verify(path, public_key=args.public_key)
    if result.ok:
        print(f"{path}: {result.message()}")
        return 0
    print(f"{path}: the audit log cannot be proven ({len(result.problems)} problem(s)):", file=sys.stderr)
    print(result.message(), file=sys.stderr)
    return 1
