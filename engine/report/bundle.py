"""The release bundle: the one download an officer hands over (issue 13).

A zip holding, under one folder (`BUNDLE_ROOT`):

- `report.pdf`, `report.html`, `report.json`: the IRB report (engine.report.report);
- `releases/<folder>/release.csv` and `code_map.csv`: the files the export gate wrote for every
  release verified under the study's attacker (an unverified release has no files: the report
  lists it as not verified, with its figures);
- `appendix/<folder>/...`: long method outputs kept out of the report (e.g. UGACLIP's trace);
- `study.json`: the study file (settings, input hashes, release manifests; no patient data), which
  `python -m engine study run` rebuilds;
- (no bundle at all when the releases it would hand over fail jointly under linkage: issue 35,
  `engine.study.joint`; the report states why)
- `manifest.json`: what the bundle holds (releases, their folders and verdicts, every file's sha256
  and size), and `MANIFEST.sha256`: every other file's sha256 in `sha256sum` format, so that
  `sha256sum -c MANIFEST.sha256` inside the folder checks the whole bundle.

The zip is deterministic: entries in a fixed order, fixed time stamps (1980-01-01, the earliest a zip
can hold), fixed permissions and compression level, so the same report gives the same bytes.
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

from engine.io.errors import UserError
from engine.report.report import Report, release_folder_files
from engine.study.joint import refuse_unless_verified
from engine.study.study import sha256_of

BUNDLE_FORMAT = "cohortshield-bundle/1"
BUNDLE_ROOT = "cohortshield-release"
MANIFEST_JSON = "manifest.json"
MANIFEST_SHA256 = "MANIFEST.sha256"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class BundleError(UserError, ValueError):
    """A bundle whose files do not match its manifest (the message names the files)."""


def bundle_files(report: Report) -> dict[str, bytes]:
    """Every file of the bundle by its path inside `BUNDLE_ROOT`, in the bundle's order."""
    files: dict[str, bytes] = {
        "report.pdf": report.to_pdf(),
        "report.html": report.to_html(),
        "report.json": report.to_json(),
    }
    files |= release_folder_files(report)
    files |= report.appendix
    if report.study_json:
        files["study.json"] = report.study_json.encode("utf-8")
    d = report.data
    manifest: dict[str, Any] = {
        "format": BUNDLE_FORMAT,
        "title": d["title"],
        "cohortshield version": d["records"]["cohortshield version"],
        "commit": d["records"]["commit"],
    }
    if "generated at" in d["records"]:
        manifest["generated at"] = d["records"]["generated at"]
    manifest |= {
        "attacker": {"adversary": d["attacker"]["label"], "k": d["attacker"]["k"]},
        # issue 28: the policy every aggregate table of the bundle is under (report.json: "small cells")
        "small cells": d["small cells"]["description"] if "small cells" in d else None,
        "releases": [
            {
                "name": r["name"],
                "verified": r["verification"]["verified"],
                "folder": f"releases/{r['folder']}" if r["files"] else None,
                "files": {f"releases/{r['folder']}/{n}": sha for n, sha in r["files"].items()},
            }
            for r in d["releases"]
        ],
        "files": [{"path": p, "sha256": sha256_of(b), "bytes": len(b)} for p, b in files.items()],
    }
    files[MANIFEST_JSON] = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    files[MANIFEST_SHA256] = "".join(f"{sha256_of(b)}  {p}\n" for p, b in files.items()).encode("utf-8")
    return files


def zip_bytes(files: dict[str, bytes], root: str = BUNDLE_ROOT) -> bytes:
    """A deterministic zip of `files` (path -> bytes) under the folder `root`, in the given order."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, data in files.items():
            info = zipfile.ZipInfo(f"{root}/{path}", date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # unix, whatever the machine
            info.external_attr = 0o644 << 16
            zf.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    return buf.getvalue()


def make_bundle(report: Report) -> bytes:
    """The release bundle of a report, as zip bytes (module docstring). Refused
    (`engine.study.joint.JointRefused`) when the releases it would hand over fail jointly under
    linkage (issue 35: `Report.joint`, the joint gate)."""
    refuse_unless_verified(report.joint, "The release bundle")
    return zip_bytes(bundle_files(report))


def check_bundle(data: bytes) -> dict[str, str]:
    """Read a bundle and check every file against `MANIFEST.sha256` (and that nothing is unlisted);
    returns path -> sha256. Raises BundleError naming the files that differ, are missing or extra."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        contents = {
            name.removeprefix(f"{BUNDLE_ROOT}/"): zf.read(name)
            for name in zf.namelist()
            if not name.endswith("/")
        }
    if MANIFEST_SHA256 not in contents:
        raise BundleError(f"no {MANIFEST_SHA256} in the bundle")
    listed: dict[str, str] = {}
    for line in contents[MANIFEST_SHA256].decode("utf-8").splitlines():
        sha, _, path = line.partition("  ")
        listed[path] = sha
    problems = [f"{p}: listed but missing" for p in listed if p not in contents]
    problems += [
        f"{p}: in the bundle but not listed" for p in contents if p not in listed and p != MANIFEST_SHA256
    ]
    problems += [
        f"{p}: sha256 {sha256_of(contents[p])[:12]}… differs from the listed {sha[:12]}…"
        for p, sha in listed.items()
        if p in contents and sha256_of(contents[p]) != sha
    ]
    if problems:
        raise BundleError("; ".join(problems))
    return listed
