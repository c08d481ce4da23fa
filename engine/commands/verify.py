"""`python -m engine verify BUNDLE --key OFFICE.pub`: a recipient checks a release bundle, or a dataset
folder (`anonymize ... --dataset DIR`), offline (issue 39, `engine.report.bundle.verify_bundle`,
`verify_dataset`).

Exit 0 naming the signer's key fingerprint and the number of files when the bundle is exactly what
the office signed; exit 1 naming every changed, added or missing file and a missing, bad or other
key's signature; exit 2 for an unreadable bundle or key (a UserError).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.commands.paths import path_roles
from engine.io.errors import UserError


def register(sub) -> None:
    p = sub.add_parser(
        "verify",
        help="check a release bundle against the office's public key: its signature and every file",
    )
    p.add_argument("bundle", help="the release bundle (zip), or the recipient's dataset folder, as received")
    p.add_argument(
        "--key",
        required=True,
        help="the office's Ed25519 public key (PEM), as the office handed it over (the .pub beside "
        "COHORTSHIELD_OFFICE_KEY)",
    )
    p.set_defaults(func=verify_bundle_file, **path_roles(("BUNDLE:bundle", "--key")))


def verify_bundle_file(args: argparse.Namespace) -> int:
    from engine.audit.keys import load_public_key
    from engine.commands.inputs import literal
    from engine.report.bundle import BundleError, verify_bundle, verify_dataset

    try:
        public = load_public_key(Path(args.key))
    except ValueError as exc:
        raise UserError(f"--key {exc}") from None
    try:
        if Path(args.bundle).is_dir():  # a recipient's dataset folder (`anonymize ... --dataset DIR`)
            result = verify_dataset(Path(args.bundle), public)
        else:
            result = verify_bundle(Path(args.bundle).read_bytes(), public, args.bundle)
    except OSError as exc:
        raise UserError(f"{args.bundle}: cannot read the bundle: {exc.strerror or exc}") from None
    except BundleError as exc:
        raise UserError(f"{args.bundle}: {exc}") from None
    if result.ok:
        print(
            f"{args.bundle}: verified: signed by the key {result.key_fingerprint} ({args.key}); "
            f"{result.files} files, each as signed, none added or missing"
        )
        return 0
    print(f"{args.bundle}: NOT verified ({len(result.problems)} problem(s)):", file=sys.stderr)
    for problem in result.problems:
        print(f"  {literal(problem)}", file=sys.stderr)
    return 1
