"""`python -m engine anonymize METHOD ...`: one module per method, `anonymize_<name>.py`, each with
`register(subparsers)` adding its method parser(s) under `anonymize` and `run(args)`: the options
as the settings `study add ... METHOD` makes with the same `settings_of`, the method's run, then
`anonymize_release.anonymize` (issue 38): `engine.study.study.make_release` verifies the release under
the settings' adversary and k and builds its files through the export gate (engine/io/export.py),
`engine.commands.inputs.publish` writes them atomically (only when verified; a refused release
removes the one an earlier run left at these paths), and the method's REPORT.json (`--report`,
written either way: parameters, input hashes, the method's figures, the verification, the release
fingerprint and the sha256 of the files written) and summary line come from
`engine.commands.method_reports`. RELEASED.csv is long form (`patient_id`, [`visit`,] `code`: one row
per patient and item, the papers' form) in release ids; CODEMAP.csv maps each released item to its
original codes."""

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
