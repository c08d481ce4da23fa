"""Issue 39, "Releases a recipient can verify": every release bundle carries the office's Ed25519
signature of its manifest (`MANIFEST.sig`), and `python -m engine verify BUNDLE --key OFFICE.pub`
checks it offline: exit 0 naming the key's fingerprint and the number of files; exit 1 naming a
changed, added or missing file, a missing signature, or a manifest signed by another key. The private
key is in no member of the bundle.

The bundle is made the way an officer makes it on the command line (`study new`, `study add`,
`study report`), once for the module; each case changes a copy of its bytes."""

from __future__ import annotations

import base64
import io
import json
import stat
import struct
import zipfile
from hashlib import sha256
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engine.audit.keys import fingerprint, load_public_key
from engine.commands.cli import main
from engine.report.bundle import (
    BUNDLE_ROOT,
    MANIFEST_JSON,
    MANIFEST_SHA256,
    MANIFEST_SIG,
    bundle_files,
    sha256_listing,
    verify_bundle,
    zip_bytes,
)
from engine.report.signing import (
    OFFICE_KEY_ENV,
    OfficeKeyError,
    office_key,
    office_key_path,
    office_public_key_path,
    signature_file,
)
from tests.test_study_cli import _add, _new, _rows


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(bundle.zip, the office's public key) from `study report` on a one-release study."""
    import pandas as pd

    tmp = tmp_path_factory.mktemp("signed")
    ev, co = tmp / "events.csv", tmp / "cohort.csv"
    pd.DataFrame(_rows(), columns=["patient_id", "visit", "code", "age"]).to_csv(ev, index=False)
    pd.DataFrame({"patient_id": sorted({r[0] for r in _rows()})}).to_csv(co, index=False)
    study = tmp / "study.json"
    _new(study, ev, co, 2)
    assert _add(study, ev, co, "G", "gccens", "--scope", "cohort") == 0
    out = tmp / "report"
    args = ["study", "report", str(study), "--out", str(out), "--events", str(ev), "--cohort", str(co)]
    assert main(args) == 0
    return out / "bundle.zip", office_public_key_path()


def _files(bundle: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(bundle)) as zf:
        return {n.removeprefix(f"{BUNDLE_ROOT}/"): zf.read(n) for n in zf.namelist()}


def _release_file(files: dict[str, bytes], name: str) -> str:
    """The bundle path of the release's file `name` (its folder, from the manifest)."""
    folder = json.loads(files[MANIFEST_JSON])["releases"][0]["folder"]
    return f"{folder}/{name}"


def _verify(tmp_path: Path, files: dict[str, bytes], key: Path, capsys) -> tuple[int, str]:
    """`python -m engine verify` on a bundle of `files`: exit status and everything it printed."""
    bundle = tmp_path / "received.zip"
    bundle.write_bytes(zip_bytes(files))
    code = main(["verify", str(bundle), "--key", str(key)])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_a_signed_bundle_verifies_with_the_offices_public_key(made, tmp_path, capsys) -> None:
    bundle, key = made
    files = _files(bundle.read_bytes())
    assert MANIFEST_SIG in files and _release_file(files, "release.csv") in files
    code = main(["verify", str(bundle), "--key", str(key)])
    out = capsys.readouterr().out
    office = fingerprint(load_public_key(key))
    assert code == 0, out
    assert f"verified: signed by the key {office}" in out
    assert f"{len(files)} files, each as signed" in out
    sig = json.loads(files[MANIFEST_SIG])
    assert sig["key fingerprint"] == office and sig["signs"] == MANIFEST_JSON


def test_a_changed_file_is_named(made, tmp_path, capsys) -> None:
    files = _files(made[0].read_bytes())
    changed = _release_file(files, "release.csv")
    files[changed] += b"R999,401.1\n"
    code, out = _verify(tmp_path, files, made[1], capsys)
    assert code == 1
    assert "NOT verified (1 problem(s))" in out
    assert f"{changed}: changed (sha256" in out


def test_a_changed_file_with_a_rewritten_manifest_breaks_the_signature(made, tmp_path, capsys) -> None:
    """A forger who also rewrites manifest.json (and MANIFEST.sha256) to match keeps no valid signature."""
    files = _files(made[0].read_bytes())
    files["report.html"] = b"<p>all fine</p>"
    manifest = json.loads(files[MANIFEST_JSON])
    entry = next(f for f in manifest["files"] if f["path"] == "report.html")
    entry["sha256"] = sha256(files["report.html"]).hexdigest()
    files[MANIFEST_JSON] = json.dumps(manifest).encode()
    del files[MANIFEST_SHA256]
    files[MANIFEST_SHA256] = sha256_listing({p: sha256(b).hexdigest() for p, b in files.items()})
    code, out = _verify(tmp_path, files, made[1], capsys)
    assert code == 1
    assert f"{MANIFEST_SIG}: the signature does not match the manifest under the given key" in out
    assert "report.html" not in out  # the files match the (forged) manifest: the signature refuses it


def test_an_added_file_is_named(made, tmp_path, capsys) -> None:
    files = _files(made[0].read_bytes())
    added = _release_file(files, "extra.csv")
    files[added] = b"patient_id\nP001\n"
    code, out = _verify(tmp_path, files, made[1], capsys)
    assert code == 1
    assert f"{added}: added (not in the manifest)" in out


def test_a_file_added_outside_the_bundle_folder_is_named(made, tmp_path, capsys) -> None:
    buf = io.BytesIO(made[0].read_bytes())
    with zipfile.ZipFile(buf, "a") as zf:
        zf.writestr("README.txt", "read me first")
    bundle = tmp_path / "received.zip"
    bundle.write_bytes(buf.getvalue())
    assert main(["verify", str(bundle), "--key", str(made[1])]) == 1
    assert f"README.txt: added (outside the bundle's folder {BUNDLE_ROOT}/)" in capsys.readouterr().err


def test_a_removed_file_is_named(made, tmp_path, capsys) -> None:
    files = _files(made[0].read_bytes())
    removed = _release_file(files, "code_map.csv")
    del files[removed]
    code, out = _verify(tmp_path, files, made[1], capsys)
    assert code == 1
    assert f"{removed}: missing (listed in the manifest)" in out


def test_a_manifest_resigned_by_another_key_is_refused(made, tmp_path, capsys) -> None:
    files = _files(made[0].read_bytes())
    other = Ed25519PrivateKey.generate()
    files[MANIFEST_SIG] = signature_file(files[MANIFEST_JSON], other, MANIFEST_JSON)
    del files[MANIFEST_SHA256]
    files[MANIFEST_SHA256] = sha256_listing({p: sha256(b).hexdigest() for p, b in files.items()})
    code, out = _verify(tmp_path, files, made[1], capsys)
    office = fingerprint(load_public_key(made[1]))
    assert code == 1
    assert (
        f"{MANIFEST_SIG}: signed by another key ({fingerprint(other.public_key())}), not the given key "
        f"({office})"
    ) in out
    other_pub = tmp_path / "other.pub"  # with the other key's public half it verifies: the check is the key
    other_pub.write_bytes(
        other.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    assert _verify(tmp_path, files, other_pub, capsys)[0] == 0


def test_a_missing_signature_is_refused(made, tmp_path, capsys) -> None:
    files = _files(made[0].read_bytes())
    del files[MANIFEST_SIG]
    code, out = _verify(tmp_path, files, made[1], capsys)
    assert code == 1
    assert "NOT verified (1 problem(s))" in out  # not MANIFEST.sha256 again for its line of the signature
    assert f"{MANIFEST_SIG}: missing: the bundle is not signed" in out


def test_a_changed_sha256_listing_is_named(made, tmp_path, capsys) -> None:
    files = _files(made[0].read_bytes())
    files[MANIFEST_SHA256] += b"0" * 64 + b"  nothing.csv\n"
    code, out = _verify(tmp_path, files, made[1], capsys)
    assert code == 1
    assert f"{MANIFEST_SHA256}: changed (not the listing of the signed manifest's files)" in out


def test_an_unreadable_key_or_bundle_exits_2(made, tmp_path, capsys) -> None:
    bundle, key = made
    assert main(["verify", str(bundle), "--key", str(office_key_path())]) == 2  # the private key's PEM
    assert "not a readable Ed25519 public key" in capsys.readouterr().err
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"not a zip")
    assert main(["verify", str(junk), "--key", str(key)]) == 2
    assert "junk.zip: not a zip file" in capsys.readouterr().err


def test_the_private_key_is_in_no_member(made) -> None:
    private = office_key()
    raw = private.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    pem = office_key_path().read_bytes()
    body = b"".join(line for line in pem.splitlines() if not line.startswith(b"-----"))
    forms = {"raw": raw, "hex": raw.hex().encode(), "base64": base64.b64encode(raw), "pem body": body}
    with zipfile.ZipFile(io.BytesIO(made[0].read_bytes())) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    assert len(members) > 5
    leaks = [(n, form) for n, data in members.items() for form, secret in forms.items() if secret in data]
    assert leaks == []
    assert b"PRIVATE KEY" not in b"".join(members.values())


def test_the_manifest_holds_inputs_version_attacker_and_joint_verdict(made) -> None:
    """What the signature covers: the inputs' hashes, code version, adversary, k and the joint verdict
    of the releases handed over together (report.json's "joint", issue 35)."""
    files = _files(made[0].read_bytes())
    manifest, report = json.loads(files[MANIFEST_JSON]), json.loads(files["report.json"])
    assert set(manifest["inputs"]) == {"input files sha256", "events fingerprint", "group fingerprints"}
    assert manifest["inputs"]["input files sha256"] == report["records"]["input files sha256"] != {}
    assert manifest["cohortshield version"] and "commit" in manifest
    assert manifest["attacker"]["k"] == 2 and manifest["attacker"]["adversary"]
    assert manifest["joint verdict"] == report["joint"] and manifest["joint verdict"]["verified"] is True


def _report_data(bundle: Path) -> dict:
    return json.loads(_files(bundle.read_bytes())["report.json"])


def test_the_same_report_gives_the_same_signed_bytes(made) -> None:
    from engine.report.report import Report

    report = Report(_report_data(made[0]), {}, {})
    key = Ed25519PrivateKey.generate()
    first, second = bundle_files(report, key), bundle_files(report, key)
    assert first[MANIFEST_SIG] == second[MANIFEST_SIG] and zip_bytes(first) == zip_bytes(second)
    assert verify_bundle(zip_bytes(first), key.public_key()).ok


def test_the_office_key_is_made_mode_600_once_and_a_bad_one_is_refused(tmp_path, monkeypatch) -> None:
    path = tmp_path / "keys" / "office.key"
    monkeypatch.setenv(OFFICE_KEY_ENV, str(path))
    first = office_key()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert office_public_key_path() == tmp_path / "keys" / "office.key.pub"
    assert fingerprint(load_public_key(office_public_key_path())) == fingerprint(first.public_key())
    assert fingerprint(office_key().public_key()) == fingerprint(first.public_key())  # not made again
    path.write_text("not a key\n")
    with pytest.raises(OfficeKeyError, match=r"office\.key: not a readable Ed25519 private key"):
        office_key()
    assert path.read_text() == "not a key\n"  # never replaced: recipients hold its public key


def test_a_missing_manifest_or_listing_is_named(made, tmp_path, capsys) -> None:
    files = _files(made[0].read_bytes())
    no_listing = {p: b for p, b in files.items() if p != MANIFEST_SHA256}
    code, out = _verify(tmp_path, no_listing, made[1], capsys)
    assert code == 1 and "NOT verified (1 problem(s))" in out and f"{MANIFEST_SHA256}: missing" in out
    no_manifest = {p: b for p, b in files.items() if p != MANIFEST_JSON}
    code, out = _verify(tmp_path, no_manifest, made[1], capsys)
    assert code == 1 and f"{MANIFEST_JSON}: missing: nothing to check the files against" in out


def test_a_member_inflating_past_the_limit_is_refused_before_it_is_read(made, tmp_path, capsys, monkeypatch):
    """A received bundle is untrusted: a member of zeros that inflates past `max_member_bytes`
    (engine/io/limits.py) is refused by name (exit 2), not inflated into memory."""
    files = _files(made[0].read_bytes())
    files["appendix/zeros.bin"] = bytes(2 << 20)
    monkeypatch.setenv("COHORTSHIELD_MAX_MEMBER_BYTES", str(1 << 20))
    code, out = _verify(tmp_path, files, made[1], capsys)
    assert code == 2
    assert (
        f"the member '{BUNDLE_ROOT}/appendix/zeros.bin' inflates to 2,097,152 bytes, more than 1,048,576 "
        "(the limit COHORTSHIELD_MAX_MEMBER_BYTES); not read"
    ) in out


def test_an_added_file_is_named_literally(made, tmp_path, capsys) -> None:
    """A member's name is untrusted: a terminal escape in it is printed as text, not sent to the terminal."""
    files = _files(made[0].read_bytes())
    files["appendix/\x1b[2Jok.csv"] = b"x\n"
    code, out = _verify(tmp_path, files, made[1], capsys)
    assert code == 1 and "\x1b" not in out
    assert "appendix/\\x1b[2Jok.csv: added (not in the manifest)" in out


def test_a_damaged_member_is_named_once(made, tmp_path, capsys) -> None:
    """A byte of a member's compressed data changed in the zip: the member fails its CRC (or inflating)
    and is named unreadable, not also as missing."""
    files = _files(made[0].read_bytes())
    damaged = _release_file(files, "release.csv")
    data = bytearray(zip_bytes(files))
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        info = zf.getinfo(f"{BUNDLE_ROOT}/{damaged}")
    name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)  # local file header
    at = info.header_offset + 30 + name_len + extra_len + info.compress_size // 2
    data[at] ^= 0xFF
    bundle = tmp_path / "damaged.zip"
    bundle.write_bytes(bytes(data))
    assert main(["verify", str(bundle), "--key", str(made[1])]) == 1
    err = capsys.readouterr().err
    assert "NOT verified (1 problem(s))" in err, err
    assert f"{damaged}: unreadable (a damaged zip entry:" in err


def test_the_signed_manifest_states_rho_and_the_privacy_budgets(made) -> None:
    """Issue 39: the signature covers "inputs' hashes, code version, adversary, k, rho, epsilon, the joint
    verdict": rho (or that the study checks none) and the recipients' DP budgets are in the manifest."""
    bundle, _key = made
    files = _files(bundle.read_bytes())
    manifest = json.loads(files[MANIFEST_JSON])
    report = json.loads(files["report.json"])
    assert manifest["rho"] == report["sensitive"]
    assert manifest["rho"]["checked"] is False
    study = json.loads(files["study.json"])
    assert manifest["privacy budgets"] == study["dp_budget"]
