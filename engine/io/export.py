"""The export gate: the one way a release leaves the tool (CLI `--out`, UI downloads).

A release is written only when the risk engine's verification belongs to exactly the files being
written (`Verification.release_fingerprint == Release.fingerprint`), under the adversary and k the
caller names, and k >= 2 (k = 1 protects nobody). Files are written atomically (a temporary file in
the same folder, then `os.replace`), and a refused run removes the release a previous run left.

Every text cell that a spreadsheet would evaluate is neutralized (`NEUTRALIZE_RULE`, OWASP "CSV
injection"): codes, ids and labels are untrusted text. The code map states the rule in its `note`
column, so that whoever opens the files knows how to read them back (`read_release_bytes`).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from engine.adversary import Adversary
from engine.io.errors import UserError
from engine.io.pseudonyms import Pseudonyms, crosswalk_frame, relabel
from engine.release import Release, release_from_frames
from engine.risk import Verification

RELEASE_FILE = "release.csv"
CODE_MAP_FILE = "code_map.csv"
CROSSWALK_FILE = "crosswalk.csv"  # identifying: written only when asked, never in a bundle
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
NEUTRALIZE_RULE = (
    "A text cell that begins with = + - @ a tab, a carriage return or an apostrophe is written with one "
    "extra leading apostrophe, so that no spreadsheet evaluates it; remove that one apostrophe to read the value."
)


class ExportRefused(Exception):
    """The gate refused to write a release (plain-language reason)."""


class OutputPathError(UserError, ValueError):
    """An output path the tool cannot write to (checked before any work is done)."""


# ---------------------------------------------------------------------------- neutralization
def _needs_apostrophe(text: pd.Series) -> pd.Series:
    first = text.str[:1]
    return first.isin(FORMULA_START) | (first == "'")


def neutralize_column(values: pd.Series) -> pd.Series:
    """Text cells of a column with the spreadsheet rule applied (`NEUTRALIZE_RULE`); numeric and
    boolean columns are returned unchanged, missing values stay missing."""
    if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return values
    missing = values.isna()
    text = values.astype(object).where(missing, values.astype(str))
    mask = _needs_apostrophe(text.where(~missing, "")) & ~missing
    if mask.any():
        text = text.where(~mask, "'" + text.where(mask, "").astype(str))
    return text


def unneutralize_column(values: pd.Series) -> pd.Series:
    """The inverse of `neutralize_column` for text read back as strings."""
    text = values.astype(str)
    mask = text.str.startswith("'") & values.notna()
    return values.where(~mask, text.str[1:])


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of `frame` with every text cell neutralized (column names too)."""
    out = pd.DataFrame({i: neutralize_column(frame[c]) for i, c in enumerate(frame.columns)})
    out.columns = neutralize_column(pd.Series([str(c) for c in frame.columns], dtype=object)).tolist()
    return out


def safe_csv_bytes(frame: pd.DataFrame) -> bytes:
    """CSV (UTF-8, `\\n` line ends, no index) of any table, every text cell neutralized."""
    buf = io.StringIO()
    safe_frame(frame).to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue().encode("utf-8")


def write_table_csv(path: str | Path, frame: pd.DataFrame) -> None:
    """Write a table the command line produces (risk per patient, explanations, PheWAS, lab tables) as
    spreadsheet-safe CSV (`safe_csv_bytes`: an id `=HYPERLINK(...)` is written `'=HYPERLINK(...)`,
    issue 40); a file that cannot be written is a UserError naming it."""
    try:
        Path(path).write_bytes(safe_csv_bytes(frame))
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from None


# ------------------------------------------------------------------------------------- gate
def gate(release: Release, verification: Verification | None, adversary: Adversary, k: int) -> None:
    """Raise ExportRefused unless `verification` verified exactly this release (same fingerprint)
    under `adversary` and `k`, every record meets k, and k >= 2."""
    if k < 2:
        raise ExportRefused(f"k = {k} protects nobody: a release needs k >= 2.")
    if verification is None:
        raise ExportRefused("This release has not been verified by the risk engine; nothing is written.")
    if verification.release_fingerprint != release.fingerprint:
        raise ExportRefused(
            "The verification belongs to another release (different rows, structure or code map); "
            "verify this release before writing it."
        )
    if verification.adversary != adversary:
        raise ExportRefused(
            f"The release was verified against the {verification.adversary.label} adversary, "
            f"not the {adversary.label} adversary named here."
        )
    if verification.k != k:
        raise ExportRefused(f"The release was verified at k = {verification.k}, not at k = {k}.")
    if not verification.ok:
        raise ExportRefused(verification.message() + " Nothing is written.")


def release_ids(release: Release, pseudonyms: Pseudonyms) -> dict[str, str]:
    """Source id -> release id of every patient with a row in the release file, salted by the
    release's content (`engine.io.pseudonyms`): two releases cannot be joined by id."""
    return pseudonyms.mapping(release.exported_frame()["patient_id"], release.fingerprint)


def subject_ids(release: Release, pseudonyms: Pseudonyms) -> dict[str, str]:
    """Source id -> release id of every released record's patient: the release file's ids
    (`release_ids`), then the records with no row in the file (every code censored or suppressed)
    numbered after them in the order of the same keyed hash, at the file's width (issue #35: the
    recipient's dataset names them, `engine.io.dataset_export`; the crosswalk maps them back)."""
    shown = release_ids(release, pseudonyms)
    rest = [str(p) for p in release.records.patient_ids if str(p) not in shown]
    if not rest:
        return shown
    width = len(next(iter(shown.values()))) - 1 if shown else None
    return shown | pseudonyms.mapping(rest, release.fingerprint, first=len(shown) + 1, width=width)


def pseudonymous_frame(release: Release, pseudonyms: Pseudonyms) -> pd.DataFrame:
    """Exactly the rows of the release file as they leave: `Release.exported_frame` with release ids
    for patients, visits numbered per patient, rows in release-id order."""
    return relabel(release.exported_frame(), release_ids(release, pseudonyms))


def crosswalk(release: Release, pseudonyms: Pseudonyms) -> pd.DataFrame:
    """Release id -> source id for every released record's patient (`subject_ids`: the release
    file's, then those without a row, whom the recipient's dataset names). Identifying: the steward's
    only."""
    return crosswalk_frame(subject_ids(release, pseudonyms))


def crosswalk_bytes(release: Release, pseudonyms: Pseudonyms) -> bytes:
    """The crosswalk as a spreadsheet-safe CSV (`CROSSWALK_FILE`)."""
    return safe_csv_bytes(crosswalk(release, pseudonyms))


def release_files(
    release: Release,
    verification: Verification | None,
    adversary: Adversary,
    k: int,
    spellings: Mapping[str, Sequence[str]] | None = None,
    *,
    pseudonyms: Pseudonyms,
    names: Mapping[str, str] | None = None,
) -> dict[str, bytes]:
    """After `gate`: the bytes of `release.csv` (`pseudonymous_frame`: release ids, visits numbered)
    and `code_map.csv` (`released_item`, `original_code` for the items present, `source_spelling` when
    `spellings` is given (`Dataset.spellings`: the codes' spellings in the source, kept after
    normalization), `description` when `names` is given (an OMOP CDM's concept names,
    `ConceptParents.names`, through `engine.vocab.describe`; issue 37), and `note` stating the
    neutralization rule on its first row), every text cell neutralized. Relabelling changes no count:
    the verification holds for the file as written."""
    from engine.vocab import describe

    gate(release, verification, adversary, k)
    cmap = release.exported_code_map(spellings)
    if names:
        cmap["description"] = [describe(c, names=names) for c in cmap["original_code"]]
    cmap["note"] = [NEUTRALIZE_RULE] + [""] * (len(cmap) - 1) if len(cmap) else []
    return {
        RELEASE_FILE: safe_csv_bytes(pseudonymous_frame(release, pseudonyms)),
        CODE_MAP_FILE: safe_csv_bytes(cmap),
    }


def read_text_csv(data: bytes) -> pd.DataFrame:
    """A CSV the gate wrote, as text cells with the apostrophes of `NEUTRALIZE_RULE` removed."""
    frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, na_filter=False)
    frame.columns = unneutralize_column(pd.Series(frame.columns, dtype=object)).tolist()
    return frame.apply(unneutralize_column)


_read_text_csv = read_text_csv  # its earlier name, which tests/pseudonym_support.py reads


def read_release_bytes(
    release_csv: bytes, code_map_csv: bytes | None = None, method: str = "imported"
) -> Release:
    """A release read back from the bytes `release_files` wrote (apostrophes removed; a `visit`
    column whose every value is a plain integer is read as integers, so visits keep their order)."""
    frame = read_text_csv(release_csv)
    if "visit" in frame.columns:
        as_int = pd.to_numeric(frame["visit"], errors="coerce")
        if as_int.notna().all() and (as_int.astype("Int64").astype(str) == frame["visit"]).all():
            frame["visit"] = as_int.astype(np.int64)
    cmap = read_text_csv(code_map_csv) if code_map_csv is not None else None
    return release_from_frames(frame, cmap, method)


# ------------------------------------------------------------------------------------ files
def check_output_path(path: str | Path, option: str) -> Path:
    """The path, if a file can be written there: its folder exists and it is not a folder itself.
    Raises OutputPathError naming the option and the path (checked before any work)."""
    p = Path(path)
    if p.is_dir():
        raise OutputPathError(f"{option} {path}: is a folder; give a file name, e.g. {p / 'release.csv'}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise OutputPathError(f"{option} {path}: the folder {parent} does not exist")
    return p


def release_paths(
    out: str | Path, *, codemap: str | Path | None = None, report: str | Path | None = None
) -> dict[str, Path]:
    """The CLI's release files (`--out`, `--codemap`) keyed by file name, every path (and `--report`)
    checked by `check_output_path` before any work is done."""
    paths = {RELEASE_FILE: check_output_path(out, "--out")}
    if codemap:
        paths[CODE_MAP_FILE] = check_output_path(codemap, "--codemap")
    if report:
        check_output_path(report, "--report")
    return paths


def _encoded(data: bytes, path: Path) -> bytes:
    """gzip-compressed (deterministic: no time stamp) when the path ends with .gz."""
    return gzip.compress(data, compresslevel=9, mtime=0) if path.name.endswith(".gz") else data


MANIFEST_SUFFIX = ".sha256"  # the set's manifest beside the first file: `release.csv.sha256`


def manifest_path(paths: Mapping[str, Path | str]) -> Path:
    """Where the manifest of a set of files is written: beside the first, `<name>.sha256`."""
    first = Path(next(iter(paths.values())))
    return first.with_name(first.name + MANIFEST_SUFFIX)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _temp_name(target: Path) -> str:
    return f".{target.name}.{os.getpid()}."


def sweep_temporaries(target: Path) -> list[Path]:
    """Remove the temporary files an earlier writer of `target` left when it was killed (their
    names carry the writer's process id; a living writer's files are left alone)."""
    removed = []
    folder = target.parent if str(target.parent) else Path(".")
    prefix = f".{target.name}."
    for tmp in folder.glob(f"{glob_escape(prefix)}*.tmp"):
        pid_text = tmp.name[len(prefix) :].split(".", 1)[0]
        if pid_text.isdigit() and not _pid_alive(int(pid_text)) and tmp.is_file():
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def glob_escape(text: str) -> str:
    """`text` with the glob metacharacters `*?[` taken literally."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _stage(data: bytes, target: Path) -> str:
    fd, tmp = tempfile.mkstemp(prefix=_temp_name(target), suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def write_release_files(files: Mapping[str, bytes], paths: Mapping[str, Path | str]) -> dict[str, str]:
    """Write `files[name]` to `paths[name]` for every name in `paths` (a name without a path is not
    written), as one set: every file is staged in a temporary file in its target folder, the set's
    manifest (`manifest_path`, `sha256sum` format) is removed, each file is moved into place with
    `os.replace`, and the manifest is written last. A kill at any point leaves either the old set or
    the new one with its manifest, or files without a manifest (an incomplete set, which
    `sha256sum -c` and `check_manifest` find); temporary files are removed on any error, and those of
    a killed writer by the next write to the same path. Returns the sha256 of the bytes per path."""
    unknown = sorted(set(paths) - set(files))
    if unknown:
        raise KeyError(f"no file named {', '.join(unknown)} to write (files: {', '.join(sorted(files))})")
    if not paths:
        return {}
    targets = {name: Path(p) for name, p in paths.items()}
    manifest = manifest_path(targets)
    for target in [*targets.values(), manifest]:
        sweep_temporaries(target)
    staged: list[tuple[str, Path]] = []
    digests: dict[str, str] = {}
    try:
        for name, target in targets.items():
            data = _encoded(files[name], target)
            staged.append((_stage(data, target), target))
            digests[str(target)] = hashlib.sha256(data).hexdigest()
        lines = manifest_text({_relative(t, manifest.parent): digests[str(t)] for t in targets.values()})
        staged_manifest = _stage(lines.encode("utf-8"), manifest)
        staged.append((staged_manifest, manifest))
        manifest.unlink(missing_ok=True)
        for tmp, target in staged[:-1]:
            os.replace(tmp, target)
        os.replace(staged_manifest, manifest)
        staged = []
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
    return digests


def manifest_text(digests: Mapping[str, str]) -> str:
    """A manifest in `sha256sum` format: one line `<sha256>  <name>` per file, in the given order."""
    return "".join(f"{sha}  {name}\n" for name, sha in digests.items())


def _relative(path: Path, folder: Path) -> str:
    try:
        return str(path.resolve().relative_to(folder.resolve()))
    except ValueError:
        return str(path.resolve())


def check_manifest(paths: Mapping[str, Path | str]) -> list[str]:
    """What is wrong with a written set (empty when whole): no manifest, or a file whose sha256 is
    not the manifest's."""
    targets = {name: Path(p) for name, p in paths.items()}
    manifest = manifest_path(targets)
    if not manifest.is_file():
        return [f"{manifest}: no manifest; the set of files is incomplete"]
    recorded = {}
    for line in manifest.read_text("utf-8").splitlines():
        sha, _, name = line.partition("  ")
        recorded[name] = sha
    problems = []
    for target in targets.values():
        got = hashlib.sha256(target.read_bytes()).hexdigest() if target.is_file() else None
        if recorded.get(_relative(target, manifest.parent)) != got:
            problems.append(f"{target}: not the file the manifest names")
    return problems


def remove_stale(paths: Mapping[str, Path | str] | list[Path | str]) -> list[Path]:
    """Delete the release files a refused run would otherwise leave at these paths (from an earlier
    run); returns the paths removed."""
    removed = []
    listed = list(paths.values() if isinstance(paths, Mapping) else paths)
    if listed:
        listed.append(manifest_path({str(i): p for i, p in enumerate(listed)}))
    for p in listed:
        p = Path(p)
        if p.is_file():
            p.unlink()
            removed.append(p)
    return removed


def publish(
    release: Release,
    verification: Verification | None,
    adversary: Adversary,
    k: int,
    paths: Mapping[str, Path | str],
    *,
    blocked: str | None = None,
    spellings: Mapping[str, Sequence[str]] | None = None,
    pseudonyms: Pseudonyms,
    crosswalk_path: Path | str | None = None,
    names: Mapping[str, str] | None = None,
    gated: Mapping[str, bytes] | None = None,
) -> dict:
    """Write the release files through the gate, or refuse and remove the stale files an earlier
    run left at `paths` (`RELEASE_FILE` / `CODE_MAP_FILE` -> path). `blocked` is a reason from the
    method's own checks that refuses the export too. Returns the JSON-ready record for a report:
    `release_fingerprint`, `shows_visits`, `written`, `files` (path -> sha256 of the bytes written),
    `refused` (the reason, or None) and `removed_stale` (paths deleted). `crosswalk_path`: also write
    the crosswalk (release id -> source id) there, with the release files as one set. `names`: a CDM's
    concept names, the code map's descriptions (`release_files`). `gated`: the files `release_files`
    made of this release already (`engine.study.study.make_release`'s), written as they are once
    `gate` passes again: the files are built once (issue 38)."""
    out: dict = {
        "release_fingerprint": release.fingerprint,
        "shows_visits": release.shows_visits,
        "written": False,
        "files": {},
        "refused": None,
        "removed_stale": [],
    }
    try:
        if blocked:
            raise ExportRefused(blocked)
        if gated is None:
            files = release_files(
                release, verification, adversary, k, spellings, pseudonyms=pseudonyms, names=names
            )
        else:
            gate(release, verification, adversary, k)
            files = dict(gated)
    except ExportRefused as exc:
        out["refused"] = str(exc)
        stale = {**paths, **({CROSSWALK_FILE: crosswalk_path} if crosswalk_path else {})}
        out["removed_stale"] = [str(p) for p in remove_stale(stale)]
        return out
    if crosswalk_path:
        files[CROSSWALK_FILE] = crosswalk_bytes(release, pseudonyms)
        paths = {**paths, CROSSWALK_FILE: crosswalk_path}
    out["files"] = write_release_files(files, paths)
    out["written"] = True
    return out


def structure_note(release: Release) -> str:
    """Which export structure a release has, and how it was therefore verified (one phrase)."""
    if release.shows_visits:
        return "written with the visit grouping (candidates matched within one visit)"
    return (
        "written without visit grouping, one set of items per patient (candidates matched on whole records)"
    )


def refusal_message(outcome: dict) -> str:
    """One line for a refused `publish`: the reason, and the stale files removed."""
    msg = f"{outcome['refused']} No release written."
    if outcome["removed_stale"]:
        msg += f" Removed the release an earlier run left: {', '.join(outcome['removed_stale'])}."
    return msg


def refuse(paths: Mapping[str, Path | str], reason: str) -> str:
    """A release refused before it was made (e.g. k larger than the cohort): remove the stale files
    at `paths` and return the one-line message (`refusal_message`)."""
    removed = [str(p) for p in remove_stale(paths)]
    return refusal_message({"refused": reason, "removed_stale": removed})
