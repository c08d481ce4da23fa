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


def read_study_file(data: bytes, source: str) -> tuple[Study, dict[str, StudyInput]]:
    """A study file (JSON) or a study package (zip): the study and the inputs it carries (none for
    JSON). Every input is checked against the study's recorded sha256; a damaged package is a
    `StudyError` naming `source` and the member."""
    if not is_package(data):
        return Study.from_json(data, source), {}
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        names = set(zf.namelist())
        if _STUDY not in names or _MANIFEST not in names:
            raise StudyError(f"{source}: not a study package (it lacks {_STUDY} or {_MANIFEST})")
        study = Study.from_json(zf.read(_STUDY), f"{source}: {_STUDY}")
        manifest = json.loads(zf.read(_MANIFEST))
        if manifest.get("format") != PACKAGE_FORMAT:
            raise StudyError(f"{source}: {_MANIFEST} is not of format {PACKAGE_FORMAT!r}")
        inputs: dict[str, StudyInput] = {}
        for m in manifest.get("inputs", []):
            role, name, member = str(m["role"]), str(m["name"]), str(m["member"])
            if member not in names:
                raise StudyError(f"{source}: {_MANIFEST} names {member!r}, which the package lacks")
            if role in inputs:
                raise StudyError(f"{source}: two inputs for the role {role!r}")
            inputs[role] = StudyInput(role, name, zf.read(member))
    except StudyError:
        raise
    except (zipfile.BadZipFile, KeyError, TypeError, ValueError) as exc:
        raise StudyError(f"{source}: a damaged study package ({type(exc).__name__}: {exc})") from exc
    _check_inputs(study, inputs, source)
    return study, inputs
