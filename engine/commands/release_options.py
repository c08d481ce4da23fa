"""The options the method commands share (issue 23): the key of the release ids (`--key-file`) and
the identifying crosswalk (`--crosswalk`) with the `Pseudonyms` they give, the recipient's dataset
(`--genotypes G --dataset DIR`, issue #35: `engine.io.dataset_export`), and the definitions both
`anonymize METHOD` and `study add ... METHOD` use (data options, `--k`, the code selection
`--codes paper|all|C1,C2,...` / `--top-codes N` as `engine.study.runs.CodeSelection`), so that no
parser code is copied between the two."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from engine.io.errors import UserError
from engine.io.pseudonyms import PseudonymKeyError, Pseudonyms, new_key


def add_release_options(parser: argparse.ArgumentParser) -> None:
    """The options of every command that writes a release: the pseudonym key, the crosswalk and the
    recipient's dataset (`--genotypes`, `--dataset`)."""
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
    parser.add_argument(
        "--genotypes", help="genotype file of the data (patient_id + one column per SNP), for --dataset"
    )
    parser.add_argument(
        "--dataset",
        metavar="DIR",
        help="also write the recipient's dataset into this folder (created when missing): subjects, the "
        "released codes, code map, the released patients' genotypes (--genotypes) and a data dictionary, "
        "all in the release's ids (issue #35)",
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


# ------------------------------------------------------------------------ method options (shared)
def add_code_options(parser: argparse.ArgumentParser) -> None:
    """`--codes paper|all|C1,C2,...` and `--top-codes N`: which codes a method releases
    (`engine.study.runs.CodeSelection`, the app's code selection); default all codes."""
    codes = parser.add_mutually_exclusive_group()
    codes.add_argument(
        "--codes",
        help="paper (Tamersoy's four codes 250, 272, 401, 724 as 3-digit categories; E11, E78, I10, M54 on "
        "ICD-10-CM data), all (default), or the codes to keep, comma-separated (e.g. 250.00,401.1)",
    )
    codes.add_argument("--top-codes", type=int, help="keep the N codes held by most cohort patients")


def code_selection_of(args: argparse.Namespace):
    """The `CodeSelection` of `--codes` / `--top-codes`."""
    from engine.study.runs import CodeSelection

    if getattr(args, "top_codes", None) is not None:
        if args.top_codes < 1:
            raise UserError(f"--top-codes must be >= 1, not {args.top_codes}")
        return CodeSelection("top", top_n=args.top_codes)
    text = (getattr(args, "codes", None) or "all").strip()
    if text in ("paper", "all"):
        return CodeSelection(text)
    chosen = tuple(dict.fromkeys(c.strip() for c in text.split(",") if c.strip()))
    if not chosen:
        raise UserError("--codes is empty: give paper, all, or codes separated by commas")
    return CodeSelection("chosen", chosen=chosen)


def add_k_option(parser: argparse.ArgumentParser, *, study: bool) -> None:
    """`--k`: required for `anonymize`; for `study add` it defaults to the study's k."""
    if study:
        parser.add_argument("--k", type=int, help="the method's k (default: the study's k)")
    else:
        parser.add_argument("--k", type=int, required=True, help="privacy parameter k (>= 2)")


def check_release_k(k: int) -> None:
    if k < 2:
        raise UserError(f"--k must be >= 2 for a release (k = 1 protects nobody), not {k}")


def add_data_options(
    parser: argparse.ArgumentParser,
    *,
    study: bool,
    population: bool = True,
    biobank: bool = False,
    events_help: str = "events file (CSV or Parquet): patient_id, code[, visit]",
    cohort_help: str = "patient ids of the cohort (the sample to release)",
) -> None:
    """The data options of a method: `--events`, `--cohort` and, where the method uses them,
    `--population` and `--biobank`. For `study add` every one is optional and all four are offered:
    the data is the study's (its package's files, the sample, or these files, checked against it)."""
    need = not study
    parser.add_argument(
        "--events",
        required=need,
        help=events_help + (" (study add: default the study's sample)" if study else ""),
    )
    if population or study:
        parser.add_argument(
            "--population", help="patient ids of the population (default: every patient in EVENTS)"
        )
    if biobank or study:
        parser.add_argument("--biobank", help="patient ids of the biobank (needed for a biobank scope)")
    parser.add_argument("--cohort", required=need, help=cohort_help)


DATA_INPUTS = ("--events", "--population", "--cohort", "--biobank", "--genotypes")
RELEASE_OUTPUTS = ("--out", "--codemap", "--report", "--crosswalk", "--key-file")
# the recipient's dataset folder and the files written into it (engine.io.dataset_export)
RELEASE_FOLDERS = (
    (
        "--dataset",
        (
            "subjects.csv",
            "phenotypes.csv",
            "code_map.csv",
            "genotypes.csv",
            "data_dictionary.csv",
            "subjects.csv.sha256",
        ),
    ),
)


def dataset_folder_of(args: argparse.Namespace) -> Path | None:
    """`--dataset DIR` checked (a folder or a new one in an existing folder; `--genotypes` given), or
    None without it."""
    folder = getattr(args, "dataset", None)
    if not folder:
        return None
    if not getattr(args, "genotypes", None):
        raise UserError("--dataset needs --genotypes: the dataset holds the released patients' genotypes")
    p = Path(folder)
    if p.exists() and not p.is_dir():
        raise UserError(f"--dataset {folder}: is a file; give a folder")
    parent = p.parent if str(p.parent) else Path(".")
    if not p.exists() and not parent.is_dir():
        raise UserError(f"--dataset {folder}: the folder {parent} does not exist")
    return p


# ------------------------------------------------------------------------ the audit trail (issue 25)
NOT_AUDITED = ("--key-file",)  # a secret, not an export


def audit_outputs(args: argparse.Namespace, started_ns: int) -> list[dict]:
    """One audit entry (`engine.audit.log.append`, user = the OS user) for every file the command
    declares as an output (`path_roles`: options, manifests, files in output folders) and wrote since
    `started_ns` (`time.time_ns()` before it ran). A command may name its study, release, adversary
    and k in `args.audit` (a dict); else `--k`, `--scope`/`--knowledge` are used."""
    from engine.audit.log import append, os_user
    from engine.commands.paths import _given

    roles = getattr(args, "path_roles", None)
    if roles is None:
        return []
    found: dict[str, str] = {}
    for label, p in _given(args, tuple(o for o in roles.outputs if o not in NOT_AUDITED)):
        found.setdefault(p, label)
    if roles.manifest_of is not None:
        from engine.io.export import manifest_path

        for label, p in _given(args, (roles.manifest_of,)):
            found.setdefault(str(manifest_path({"f": p})), f"the manifest of {label}")
    for entry, patterns in roles.folders:
        for label, folder in _given(args, (entry,)):
            for pattern in patterns:
                for f in sorted(Path(folder).glob(pattern)):
                    found.setdefault(str(f), label)
    context = dict(getattr(args, "audit", None) or {})
    scope, knowledge = getattr(args, "scope", None), getattr(args, "knowledge", None)
    adversary = context.get("adversary") or (
        "/".join(str(x) for x in (scope, knowledge) if x) if scope or knowledge else None
    )
    command = " ".join(
        str(v)
        for k, v in vars(args).items()
        if (k == "command" or k.endswith("_command") or k == "method") and v
    )
    written = []
    for p, label in found.items():
        path = Path(p)
        try:
            if not path.is_file() or path.stat().st_mtime_ns < started_ns:
                continue  # not written by this run
            data = path.read_bytes()
        except OSError:
            continue
        written.append(
            append(
                f"cli {command} {label}",
                str(path.resolve()),
                data,
                user=os_user(),
                study=context.get("study"),
                release=context.get("release") or getattr(args, "name", None),
                adversary=adversary,
                k=context.get("k", getattr(args, "k", None)),
            )
        )
    return written
