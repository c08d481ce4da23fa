"""A study file with its input files, for reopening without uploading them again (issue 13, "Save and
reopen": the study file holds no patient data unless the user includes it).

A package is a zip: `study.json` (the study, `Study.to_json`), the input files under `inputs/` and
`manifest.json` naming each input's role (events, biobank, cohort, genotypes, labs), file name and
sha256. Reading a package checks every input against the sha256 the study recorded for it
(`DataRef.inputs`), so a package whose files were changed, or that lacks a file the study was made
from, is refused with the file named. Zip member names are never used as paths: inputs are returned
as bytes under the names the manifest gives.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from engine.study.study import Study, StudyError

PACKAGE_FORMAT = "cohortshield-study-package/1"
ROLES = ("events", "biobank", "cohort", "genotypes", "labs")
_STUDY, _MANIFEST = "study.json", "manifest.json"
_ZIP_DATE = (2000, 1, 1, 0, 0, 0)  # fixed member dates: the same study and files give the same bytes


@dataclass(frozen=True)
class StudyInput:
    """One input file of a study, as uploaded: its role, file name and bytes."""

    role: str
    name: str
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def _check_inputs(study: Study, inputs: Mapping[str, StudyInput], source: str) -> None:
    """Every input is one the study was made from (name and sha256 as recorded), and every recorded
    input is there: the data loaded from the package is the study's data, or nothing is loaded."""
    recorded = dict(study.data.inputs)  # file name (or role:name) -> sha256
    given = {}
    for inp in inputs.values():
        if inp.role not in ROLES:
            raise StudyError(f"{source}: input role {inp.role!r} is not one of {', '.join(ROLES)}")
        key = inp.name if inp.name in recorded and inp.name not in given else f"{inp.role}:{inp.name}"
        if key not in recorded:
            raise StudyError(
                f"{source}: the input {inp.name!r} ({inp.role}) is not one the study was made from"
            )
        if recorded[key] != inp.sha256:
            raise StudyError(
                f"{source}: the input {inp.name!r} ({inp.role}) differs from the file the study was made "
                f"from (sha256 {inp.sha256[:12]}…, recorded {recorded[key][:12]}…)"
            )
        given[key] = inp.sha256
    missing = sorted(set(recorded) - set(given))
    if missing:
        raise StudyError(
            f"{source}: the study's input file(s) {', '.join(map(repr, missing))} are not included"
        )


def write_package(study: Study, inputs: Mapping[str, StudyInput]) -> bytes:
    """The study and its input files as one zip (deterministic bytes). Refuses inputs that are not
    the study's (see `_check_inputs`): a package always reopens on the data it names."""
    _check_inputs(study, inputs, "study package")
    ordered = sorted(inputs.values(), key=lambda x: ROLES.index(x.role))
    entries = [
        {"role": inp.role, "name": inp.name, "member": f"inputs/{i}", "sha256": inp.sha256}
        for i, inp in enumerate(ordered)
    ]
    manifest = {"format": PACKAGE_FORMAT, "inputs": entries}
    members = [
        (_STUDY, study.to_json().encode("utf-8")),
        (_MANIFEST, json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8")),
        *((f"inputs/{i}", inp.data) for i, inp in enumerate(ordered)),
    ]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, body in members:
            info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, body)
    return buf.getvalue()


def is_package(data: bytes) -> bool:
    return data[:4] == b"PK\x03\x04"


def _member_info(zf: zipfile.ZipFile, name: str, source: str, most: int, field: str) -> zipfile.ZipInfo:
    """A member that can be read safely: not encrypted, stored or deflated, no larger than `most`
    (the limit `field`) nor inflating more than `max_expansion` times (`engine.io.limits.check_member`;
    its recorded size bounds what zipfile inflates: a bomb is refused before it is inflated)."""
    from engine.io.deployment import LimitExceeded
    from engine.io.limits import check_member

    info = zf.getinfo(name)
    if info.flag_bits & 0x1:
        raise StudyError(f"{source}: the member {name!r} is encrypted; a study package is never encrypted")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise StudyError(
            f"{source}: the member {name!r} uses compression method {info.compress_type}; "
            "a study package is stored or deflated"
        )
    try:
        check_member(info, source, most, field)
    except LimitExceeded as exc:
        raise StudyError(str(exc)) from None
    return info


def _read_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, source: str, sha256: str | None = None, what: str = ""
) -> bytes:
    """A member's bytes, streamed. With `sha256` (what the study recorded), the member is hashed
    block by block first and refused on a mismatch without ever being held whole."""
    try:
        if sha256 is not None:
            h = hashlib.sha256()
            with zf.open(info) as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            if h.hexdigest() != sha256:
                raise StudyError(
                    f"{source}: the input {what or repr(info.filename)} differs from the file the study was made from "
                    f"(sha256 {h.hexdigest()[:12]}…, recorded {sha256[:12]}…)"
                )
        with zf.open(info) as fh:
            return fh.read()
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as exc:
        raise StudyError(
            f"{source}: the member {info.filename!r} is damaged ({type(exc).__name__}: {exc})"
        ) from None


def _manifest_inputs(manifest: object, source: str) -> list[tuple[str, str, str]]:
    """(role, name, member) of each input the manifest lists, every field checked for its type."""
    if not isinstance(manifest, dict):
        raise StudyError(f"{source}: {_MANIFEST} must be an object, not {type(manifest).__name__}")
    if manifest.get("format") != PACKAGE_FORMAT:
        raise StudyError(f"{source}: {_MANIFEST} is not of format {PACKAGE_FORMAT!r}")
    entries = manifest.get("inputs", [])
    if not isinstance(entries, list):
        raise StudyError(f"{source}: {_MANIFEST} inputs must be a list, not {type(entries).__name__}")
    out = []
    for m in entries:
        if not isinstance(m, dict) or not all(isinstance(m.get(f), str) for f in ("role", "name", "member")):
            raise StudyError(
                f"{source}: {_MANIFEST}: each input must be an object of role, name, member (text)"
            )
        out.append((m["role"], m["name"], m["member"]))
    return out


def read_study_file(data: bytes, source: str) -> tuple[Study, dict[str, StudyInput]]:
    """A study file (JSON) or a study package (zip): the study and the inputs it carries (none for
    JSON). Every input is checked against the study's recorded sha256; a damaged package is a
    `StudyError` naming `source` and the member.

    Bounded (`engine.io.deployment.limits`, `engine.io.limits`): the member count within
    `max_zip_members` from the zip's end record, before its directory is parsed; study.json and
    manifest.json are read only when their recorded sizes are within `max_json_bytes`, every input
    within `max_member_bytes` and `max_expansion`, and each input is hashed while it is streamed,
    refused on a mismatch before it is held whole. Duplicate member names (counted once each: issue
    40 found 100,000 members took 214 s), encrypted members, other compression methods and corrupt
    streams are refused, named."""
    from engine.io.deployment import LimitExceeded, limits
    from engine.io.limits import check_zip_entries

    if not is_package(data):
        return Study.from_json(data, source), {}
    lim = limits()
    try:
        check_zip_entries(data, source, lim)
    except LimitExceeded as exc:
        raise StudyError(str(exc)) from None
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        twice = sorted(n for n, times in Counter(zf.namelist()).items() if times > 1)
        if twice:
            raise StudyError(f"{source}: the package holds {', '.join(map(repr, twice))} more than once")
        names = set(zf.namelist())
        if _STUDY not in names or _MANIFEST not in names:
            raise StudyError(f"{source}: not a study package (it lacks {_STUDY} or {_MANIFEST})")
        study_info = _member_info(zf, _STUDY, source, lim.max_json_bytes, "max_json_bytes")
        study = Study.from_json(_read_member(zf, study_info, source), f"{source}: {_STUDY}")
        manifest_info = _member_info(zf, _MANIFEST, source, lim.max_json_bytes, "max_json_bytes")
        from engine.io.safejson import JSONRefused, loads

        try:
            manifest = loads(_read_member(zf, manifest_info, source), f"{source}: {_MANIFEST}")
        except JSONRefused as exc:
            raise StudyError(str(exc)) from None
        recorded = dict(study.data.inputs)
        inputs: dict[str, StudyInput] = {}
        for role, name, member in _manifest_inputs(manifest, source):
            if member not in names:
                raise StudyError(f"{source}: {_MANIFEST} names {member!r}, which the package lacks")
            if role in inputs:
                raise StudyError(f"{source}: two inputs for the role {role!r}")
            info = _member_info(zf, member, source, lim.max_member_bytes, "max_member_bytes")
            sha = recorded.get(name, recorded.get(f"{role}:{name}"))
            if sha is None:
                raise StudyError(f"{source}: the input {name!r} ({role}) is not one the study was made from")
            inputs[role] = StudyInput(role, name, _read_member(zf, info, source, sha, f"{name!r} ({role})"))
    except StudyError:
        raise
    except (zipfile.BadZipFile, KeyError, TypeError, ValueError) as exc:
        raise StudyError(f"{source}: a damaged study package ({type(exc).__name__}: {exc})") from exc
    _check_inputs(study, inputs, source)
    return study, inputs
