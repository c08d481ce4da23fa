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
  and size; the inputs' hashes, code version, adversary, k, the joint verdict where the report
  has one, rho as the study states it and the recipients' DP budgets), and `MANIFEST.sha256`: every other file's sha256 in `sha256sum` format, so that
  `sha256sum -c MANIFEST.sha256` inside the folder checks the whole bundle;
- `MANIFEST.sig`: the office's Ed25519 signature of `manifest.json` and its key's fingerprint
  (engine/report/signing.py; issue 39), which `python -m engine verify BUNDLE --key OFFICE.pub`
  checks offline (`verify_bundle`). The private key is never in the bundle.

The zip is deterministic: entries in a fixed order, fixed time stamps (1980-01-01, the earliest a zip
can hold), fixed permissions and compression level, so the same report gives the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from engine.audit.keys import fingerprint
from engine.io.dataset_export import dataset_paths
from engine.io.deployment import limits
from engine.io.errors import UserError
from engine.io.export import manifest_path
from engine.io.limits import check_member, check_zip_entries
from engine.report.report import Report, release_folder_files
from engine.report.signing import office_key, signature_file, signature_problem
from engine.study.joint import refuse_unless_verified
from engine.study.study import sha256_of

BUNDLE_FORMAT = "cohortshield-bundle/1"
BUNDLE_ROOT = "cohortshield-release"
MANIFEST_JSON = "manifest.json"
MANIFEST_SHA256 = "MANIFEST.sha256"
MANIFEST_SIG = "MANIFEST.sig"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class BundleError(UserError, ValueError):
    """A bundle whose files do not match its manifest (the message names the files)."""


def bundle_files(report: Report, key: Ed25519PrivateKey | None = None) -> dict[str, bytes]:
    """Every file of the bundle by its path inside `BUNDLE_ROOT`, in the bundle's order; the manifest
    signed with `key` (default: the office key, `engine.report.signing.office_key`)."""
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
        # issue 39: what the releases were made from, under the signature (report.json: "records")
        "inputs": {
            name: d["records"][name]
            for name in ("input files sha256", "events fingerprint", "group fingerprints")
            if name in d["records"]
        },
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
    if "joint" in d:  # the releases judged together (issue 35), where the report has the verdict
        manifest["joint verdict"] = d["joint"]
    # issue 39: rho (or that the study checks none) and the recipients' DP budgets, under the signature
    if "sensitive" in d:
        manifest["rho"] = d["sensitive"]
    if report.study_json:
        manifest["privacy budgets"] = json.loads(report.study_json).get("dp_budget")
    files[MANIFEST_JSON] = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    files[MANIFEST_SIG] = signature_file(files[MANIFEST_JSON], key or office_key(), MANIFEST_JSON)
    files[MANIFEST_SHA256] = sha256_listing({p: sha256_of(b) for p, b in files.items()})
    return files


def sha256_listing(hashes: dict[str, str]) -> bytes:
    """`MANIFEST.sha256`: every file's sha256 and path (path -> sha256), `sha256sum` format, in order."""
    return "".join(f"{sha}  {p}\n" for p, sha in hashes.items()).encode("utf-8")


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


MANIFESTS = (MANIFEST_JSON, MANIFEST_SIG, MANIFEST_SHA256)  # the members read whole; others only hashed
UNREADABLE = ""  # the sha256 of a member that could not be inflated


def _members(data: bytes, where: str = "the bundle") -> tuple[dict[str, str], dict[str, bytes], list[str]]:
    """A bundle's files by their path inside `BUNDLE_ROOT`: every file's sha256 (read in chunks), the
    bytes of its manifests, and the members that cannot count as a file (outside the folder, a second
    entry of one name, unreadable). Each member's recorded size is checked before it is inflated
    (engine/io/limits.py, refusals naming `where`: a received bundle is untrusted). BundleError when it
    is no zip."""
    check_zip_entries(data, where)
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise BundleError("not a zip file") from None
    hashes: dict[str, str] = {}
    manifests: dict[str, bytes] = {}
    problems: list[str] = []
    lim = limits()
    with zf:
        for info in zf.infolist():
            name = info.filename
            if name.endswith("/"):
                continue
            path = name.removeprefix(f"{BUNDLE_ROOT}/")
            if path == name:
                problems.append(f"{name}: added (outside the bundle's folder {BUNDLE_ROOT}/)")
                continue
            if path in hashes:
                problems.append(f"{path}: added (a second entry of the same name)")
                continue
            check_member(info, where, lim.max_member_bytes, "max_member_bytes", lim)
            digest = hashlib.sha256()
            kept = bytearray()
            try:
                with zf.open(info) as member:
                    while chunk := member.read(1 << 20):
                        digest.update(chunk)
                        if path in MANIFESTS:
                            kept += chunk
            except (zipfile.BadZipFile, zlib.error, OSError) as exc:
                problems.append(f"{path}: unreadable (a damaged zip entry: {exc})")
                hashes[path] = UNREADABLE  # there, but with no sha256: named once, above
                continue
            hashes[path] = digest.hexdigest()
            if path in MANIFESTS:
                manifests[path] = bytes(kept)
    return hashes, manifests, problems


def _file_problems(hashes: dict[str, str], listed: dict[str, str], also: tuple[str, ...]) -> list[str]:
    """Every listed file that is missing or whose sha256 differs, and every file neither listed nor in
    `also`, each named."""
    problems = [f"{p}: missing (listed in the manifest)" for p in listed if p not in hashes]
    problems += [f"{p}: added (not in the manifest)" for p in hashes if p not in listed and p not in also]
    problems += [
        f"{p}: changed (sha256 {hashes[p][:12]}… differs from the listed {sha[:12]}…)"
        for p, sha in listed.items()
        if p in hashes and hashes[p] not in (sha, UNREADABLE)
    ]
    return problems


def _read_listing(listing: bytes) -> dict[str, str]:
    """path -> sha256 of a `MANIFEST.sha256`."""
    out: dict[str, str] = {}
    for line in listing.decode("utf-8", errors="replace").splitlines():
        sha, _, path = line.partition("  ")
        out[path] = sha
    return out


def check_bundle(data: bytes) -> dict[str, str]:
    """Read a bundle and check every file against `MANIFEST.sha256` (and that nothing is unlisted);
    returns path -> sha256. Raises BundleError naming the files that differ, are missing or extra."""
    hashes, manifests, problems = _members(data)
    if MANIFEST_SHA256 not in manifests:
        raise BundleError(f"no {MANIFEST_SHA256} in the bundle")
    listed = _read_listing(manifests[MANIFEST_SHA256])
    problems += _file_problems(hashes, listed, (MANIFEST_SHA256,))
    if problems:
        raise BundleError("; ".join(problems))
    return listed


@dataclass(frozen=True)
class BundleVerification:
    """What `verify_bundle` found: the key it checked with, the files the signed manifest vouches for,
    and every problem (none: the bundle is exactly what the key's owner signed)."""

    key_fingerprint: str
    files: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _signed_listing(manifest: bytes) -> dict[str, str] | None:
    """path -> sha256 of every file `manifest.json` lists, or None when it is not a bundle manifest."""
    try:
        body = json.loads(manifest.decode("utf-8"))
        if body.get("format") != BUNDLE_FORMAT:
            return None
        return {str(f["path"]): str(f["sha256"]) for f in body["files"]}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def verify_bundle(data: bytes, public: Ed25519PublicKey, where: str = "the bundle") -> BundleVerification:
    """Check a bundle offline against the office's public key (issue 39): `MANIFEST.sig` is `public`'s
    signature of `manifest.json`, every file the manifest lists is there with its sha256, no other file
    is (but `MANIFEST.sig` and `MANIFEST.sha256`, which must be the listing of exactly those files).
    `where` (the bundle's file name) is named by a refusal of engine/io/limits.py."""
    hashes, manifests, problems = _members(data, where)
    manifest = manifests.get(MANIFEST_JSON)
    sig = manifests.get(MANIFEST_SIG)
    if sig is None:
        problems.append(f"{MANIFEST_SIG}: missing: the bundle is not signed")
    elif manifest is not None:
        why = signature_problem(manifest, sig, public)
        if why:
            problems.append(f"{MANIFEST_SIG}: {why}")
    if manifest is None:
        problems.append(f"{MANIFEST_JSON}: missing: nothing to check the files against")
        return BundleVerification(fingerprint(public), 0, problems)
    listed = _signed_listing(manifest)
    if listed is None:
        problems.append(f"{MANIFEST_JSON}: not a {BUNDLE_FORMAT} manifest")
        return BundleVerification(fingerprint(public), 0, problems)
    problems += _file_problems(hashes, listed, (MANIFEST_JSON, MANIFEST_SIG, MANIFEST_SHA256))
    listing = manifests.get(MANIFEST_SHA256)
    if listing is None:
        problems.append(f"{MANIFEST_SHA256}: missing")
        return BundleVerification(fingerprint(public), len(hashes), problems)
    # the listing the signed manifest implies (a changed or missing file is named above, not here again)
    expected = listed | {MANIFEST_JSON: sha256_of(manifest)}
    given = _read_listing(listing)
    if sig is not None:
        expected[MANIFEST_SIG] = sha256_of(sig)
    elif MANIFEST_SIG in given:
        expected[MANIFEST_SIG] = given[MANIFEST_SIG]
    if listing != sha256_listing(expected):
        problems.append(f"{MANIFEST_SHA256}: changed (not the listing of the signed manifest's files)")
    return BundleVerification(fingerprint(public), len(hashes), problems)


# ------------------------------------------------------------------------------ a dataset folder
def sign_dataset(folder: Path, key: Ed25519PrivateKey | None = None) -> Path:
    """Sign the recipient's dataset written in `folder` (`engine.io.dataset_export.write_dataset`): its
    manifest's bytes, with the office key (default), into `MANIFEST.sig` beside it (issue 39: "Every
    bundle or dataset is signed"). Returns the signature file's path."""
    manifest = manifest_path(dataset_paths(folder))
    sig = folder / MANIFEST_SIG
    sig.write_bytes(signature_file(manifest.read_bytes(), key or office_key(), manifest.name))
    return sig


def verify_dataset(folder: Path, public: Ed25519PublicKey) -> BundleVerification:
    """A recipient's check of a dataset folder: the office's signature of its manifest, then every file
    the manifest names (changed or missing) and every file it does not (added)."""
    manifest = manifest_path(dataset_paths(folder))
    sig = folder / MANIFEST_SIG
    problems: list[str] = []
    if not manifest.is_file():
        raise BundleError(f"no {manifest.name}: not a dataset folder CohortShield wrote")
    if not sig.is_file():
        problems.append(f"{MANIFEST_SIG}: missing; the dataset is not signed")
    else:
        problem = signature_problem(manifest.read_bytes(), sig.read_bytes(), public)
        if problem:
            problems.append(f"{MANIFEST_SIG}: {problem}")
    listed: dict[str, str] = {}
    for line in manifest.read_text("utf-8").splitlines():
        sha, _, name = line.partition("  ")
        listed[name] = sha
    for name, sha in listed.items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif sha256_of(path.read_bytes()) != sha:
            problems.append(f"{name}: changed since it was signed")
    present = {p.name for p in folder.iterdir() if p.is_file()} - {manifest.name, MANIFEST_SIG}
    problems += [
        f"{name}: added; the signed manifest does not name it" for name in sorted(present - set(listed))
    ]
    return BundleVerification(fingerprint(public), len(listed), problems)
