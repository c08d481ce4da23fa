"""`python -m engine anonymize METHOD ...`: one module per method, `anonymize_<name>.py`, each with
`register(subparsers)` adding its method parser(s) under `anonymize`. Each makes its release on the
one path of `study add` (issue 38): its `settings_of`, then `anonymize_release.release_and_publish`
(`engine.study.study.make_release`, then the one writer, `engine.commands.inputs.publish`)."""

from __future__ import annotations

import importlib

METHOD_MODULES = ("anonymize_gccens", "anonymize_generalize", "anonymize_profiles", "anonymize_lda")


def register(sub) -> None:
    parser = sub.add_parser("anonymize", help="anonymize a cohort and write a verified release")
    methods = parser.add_subparsers(dest="method", required=True)
    for name in METHOD_MODULES:
        try:
            module = importlib.import_module(f"engine.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"engine.commands.{name}":
                raise
            continue
        module.register(methods)
