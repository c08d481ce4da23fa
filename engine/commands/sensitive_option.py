"""`anonymize METHOD ... --sensitive CATS --rho R [--rho-m M]` (issue 39, the method option): after the
method and before the export gate, the codes that imply a sensitive category above rho are suppressed
from every record (`engine.anonymize.sensitive_suppress`) under the adversary the release is verified
against; the release `make_release` verifies at k and the gate sees is the suppressed one."""

from __future__ import annotations

import argparse
from typing import Any

from engine.adversary import Adversary
from engine.io.errors import UserError
from engine.records import Records
from engine.release import Release


def add_sensitive_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sensitive",
        help="suppress the codes that imply these sensitive categories above --rho before the export gate: "
        "'all' or comma-separated shipped categories (hiv, mental_health, substance_use, "
        "reproductive_health)",
    )
    parser.add_argument(
        "--rho", type=float, help="with --sensitive: the highest confidence allowed, 0 <= rho < 1"
    )
    parser.add_argument(
        "--rho-m", type=int, help="with --sensitive: the attacker knows up to M non-sensitive codes"
    )


def rho_step(
    args: argparse.Namespace,
    release: Release,
    adversary: Adversary,
    k: int,
    population: Records | None,
) -> tuple[Release, dict[str, Any] | None]:
    """The release and the step's record after `--sensitive --rho` (module docstring); unchanged
    (record None) without `--sensitive`. `engine.commands.anonymize_release.anonymize` then verifies
    the release returned (`make_release`) and passes it through the gate."""
    from engine.anonymize.sensitive_suppress import suppress_sensitive
    from engine.disclosure.sensitive import DEFAULT_M, check_m, check_rho, load_categories

    value = getattr(args, "sensitive", None)
    if value is None:
        for option in ("rho", "rho_m"):
            if getattr(args, option, None) is not None:
                raise UserError(f"--{option.replace('_', '-')} goes with --sensitive")
        return release, None
    if args.rho is None:
        raise UserError("--sensitive needs --rho: the highest confidence of an inference allowed")
    rho = check_rho(args.rho)
    m = check_m(DEFAULT_M if args.rho_m is None else args.rho_m)
    shipped = load_categories()
    names = [n.strip() for n in value.split(",") if n.strip()]
    categories = shipped if value.strip().lower() == "all" else shipped.select(names)
    done = suppress_sensitive(release, [adversary], categories, rho=rho, k=k, m=m, population=population)
    print(done.message())
    record = {
        "rho": rho,
        "m": m,
        "categories": list(done.after[adversary].categories),
        "suppressed codes": list(done.suppressed_items),
        "events suppressed": done.events_suppressed,
        "rho verified": done.rho_verified,
        "message": done.message(),
    }
    blocked = None if done.rho_verified else done.after[adversary].message()
    return done.release, record | {"blocked": blocked}
