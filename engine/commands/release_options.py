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
import time
from collections.abc import Callable
from pathlib import Path

from engine.adversary import MIN_RELEASE_K, K, k_argument
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
    from engine.commands.sensitive_option import add_sensitive_options

    add_sensitive_options(parser)  # issue 39: `--sensitive CATS --rho R`, applied before the gate


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
    from engine.study.parameters import parameter_of
    from engine.study.runs import CodeSelection

    top = parameter_of(CodeSelection, "top_n")  # its flag and help; no default: --codes' alternative
    codes.add_argument(top.option, type=int, help=top.help)


def code_selection_of(args: argparse.Namespace):
    """The `CodeSelection` of `--codes` / `--top-codes`."""
    from engine.commands.parameter_options import checked_option
    from engine.study.runs import CodeSelection

    if getattr(args, "top_codes", None) is not None:
        checked_option(CodeSelection, "top_n", args.top_codes)  # the declaration's rule (issue 38)
        return CodeSelection("top", top_n=args.top_codes)
    text = (getattr(args, "codes", None) or "all").strip()
    if text in ("paper", "all"):
        return CodeSelection(text)
    chosen = tuple(dict.fromkeys(c.strip() for c in text.split(",") if c.strip()))
    if not chosen:
        raise UserError("--codes is empty: give paper, all, or codes separated by commas")
    return CodeSelection("chosen", chosen=chosen)


def add_k_option(parser: argparse.ArgumentParser, *, study: bool) -> None:
    """`--k` (the declaration `engine.adversary.K`, its range through `k_argument`): required for
    `anonymize`; for `study add` it defaults to the study's k."""
    if study:
        parser.add_argument(K.option, type=k_argument, help="the method's k (default: the study's k)")
    else:
        parser.add_argument(K.option, type=k_argument, required=True, help=K.help)


def check_release_k(k: int) -> None:
    if k < MIN_RELEASE_K:
        raise UserError(f"--k must be >= {MIN_RELEASE_K} for a release (k = 1 protects nobody), not {k}")


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


def _outputs(args: argparse.Namespace) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """The command's declared outputs (`path_roles`): {path: label} of its options and manifests, and
    (label, folder, pattern) of the files it writes into output folders."""
    from engine.commands.paths import _given

    roles = getattr(args, "path_roles", None)
    if roles is None:
        return {}, []
    files: dict[str, str] = {}
    for label, p in _given(args, tuple(o for o in roles.outputs if o not in NOT_AUDITED)):
        files.setdefault(p, label)
    if roles.manifest_of is not None:
        from engine.io.export import manifest_path

        for label, p in _given(args, (roles.manifest_of,)):
            files.setdefault(str(manifest_path({"f": p})), f"the manifest of {label}")
    folders = [
        (label, folder, pattern)
        for entry, patterns in roles.folders
        for label, folder in _given(args, (entry,))
        for pattern in patterns
    ]
    return files, folders


def _written(args: argparse.Namespace, started_ns: int) -> dict[str, tuple[str, bytes]]:
    """{path: (label, bytes)} of the declared outputs written since `started_ns`."""
    files, folders = _outputs(args)
    found = dict(files)
    for label, folder, pattern in folders:
        for f in sorted(Path(folder).glob(pattern)):
            found.setdefault(str(f), label)
    written = {}
    for p, label in found.items():
        path = Path(p)
        try:
            if not path.is_file() or path.stat().st_mtime_ns < started_ns:
                continue  # not written by this run
            written[str(path.resolve())] = (label, path.read_bytes())
        except OSError:
            continue
    return written


def run_audited(args: argparse.Namespace, run: Callable[[], int]) -> int:
    """Run a command whose declared outputs (`path_roles`) leave only through the audit log
    (`engine.audit.exports.audited_export`, user = the OS user): a `begin` entry naming every output
    before the command runs, so an unwritable or full log refuses the run before any file is written
    (`AuditLogUnavailable`, exit 2); then one entry per file written, with its sha256, and when those
    cannot be written the files are removed. A command may name its study, release, adversary and k
    in `args.audit` (a dict); else `--k`, `--scope`/`--knowledge` are used. Issue 40, finding 6."""
    files, folders = _outputs(args)
    if not files and not folders:
        return run()
    from engine.audit.exports import audited_export
    from engine.audit.log import os_user

    planned = {str(Path(p).resolve()): label for p, label in files.items()}
    planned.update({str(Path(folder).resolve() / pattern): label for label, folder, pattern in folders})

    def context() -> dict:  # read again after the run: a study command names its study then
        given = dict(getattr(args, "audit", None) or {})
        scope, knowledge = getattr(args, "scope", None), getattr(args, "knowledge", None)
        adversary = given.get("adversary") or (
            "/".join(str(x) for x in (scope, knowledge) if x) if scope or knowledge else None
        )
        return {
            "user": os_user(),
            "study": given.get("study"),
            "release": given.get("release") or getattr(args, "name", None),
            "adversary": adversary,
            "k": given.get("k", getattr(args, "k", None)),
        }

    command = " ".join(
        str(v)
        for k, v in vars(args).items()
        if (k == "command" or k.endswith("_command") or k == "method") and v
    )
    started = time.time_ns() - 50_000_000  # file times run on a coarser clock
    status = 0
    labels = dict(planned)

    def deliver() -> dict[str, bytes]:
        nonlocal status
        status = int(run() or 0)
        written = _written(args, started)
        labels.update({p: label for p, (label, _) in written.items()})
        return {p: data for p, (_, data) in written.items()}

    def undo() -> None:
        for p in _written(args, started):
            Path(p).unlink(missing_ok=True)

    audited_export(
        f"cli {command}",
        dict.fromkeys(planned),
        deliver,
        context,
        labels=labels,
        undo=undo,
    )
    return status
