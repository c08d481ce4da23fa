"""The office's signature on every release bundle (issue 39, "Releases a recipient can verify").

The office key is an Ed25519 private key (PEM) at `COHORTSHIELD_OFFICE_KEY`, else
`office-signing.key` in the deployment's key folder beside the audit log's folder (`<log folder>.keys/`,
engine/audit/keys.py), created mode 600 (folder 700) on first use, with its public key beside it
(`<key>.pub`, mode 644): the file the office hands to recipients. The key itself never enters a bundle:
the bundle holds `MANIFEST.sig`, the signature of `manifest.json`'s bytes and the key's fingerprint.
Ed25519 signatures are deterministic (RFC 8032), so the same manifest gives the same signature bytes.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from engine.audit import keys
from engine.audit.log import log_path
from engine.io.errors import UserError

OFFICE_KEY_ENV = "COHORTSHIELD_OFFICE_KEY"
OFFICE_KEY_NAME = "office-signing.key"
SIGNATURE_FORMAT = "cohortshield-signature/1"


class OfficeKeyError(UserError, ValueError):
    """The configured office key file exists but holds no Ed25519 private key (never replaced silently:
    recipients hold its public key)."""


def office_key_path() -> Path:
    """`COHORTSHIELD_OFFICE_KEY`, else `<audit log folder>.keys/office-signing.key`."""
    value = os.environ.get(OFFICE_KEY_ENV, "").strip()
    return Path(value).expanduser() if value else keys.key_folder(log_path()) / OFFICE_KEY_NAME


def office_public_key_path() -> Path:
    """The public key written beside the office key (`<key>.pub`), the file recipients are given."""
    path = office_key_path()
    return path.with_name(path.name + ".pub")


def office_key() -> Ed25519PrivateKey:
    """The office's signing key, made (with its `.pub`) on first use; OfficeKeyError when the file is
    there but is not an Ed25519 private key."""
    path = office_key_path()
    if not path.exists():
        keys.create_file(path, keys.new_private_pem(), 0o600)
    key = keys.load_private_key(path)
    if key is None:
        raise OfficeKeyError(f"{OFFICE_KEY_ENV} {path}: not a readable Ed25519 private key (PEM)")
    public = office_public_key_path()
    if not public.exists():
        keys.create_file(public, keys.public_pem(key), 0o644)
    return key


def office_public_pem() -> bytes:
    """The office's public key (PEM), for a recipient's `verify --key`."""
    return keys.public_pem(office_key())


def signature_file(manifest: bytes, key: Ed25519PrivateKey, signs: str) -> bytes:
    """`MANIFEST.sig`: the Ed25519 signature of the file `signs` (its bytes `manifest`) and the
    fingerprint of the key's public half (JSON). Nothing of the private key."""
    body = {
        "format": SIGNATURE_FORMAT,
        "algorithm": "Ed25519",
        "signs": signs,
        "key fingerprint": keys.fingerprint(key.public_key()),
        "signature": base64.b64encode(key.sign(manifest)).decode("ascii"),
    }
    return (json.dumps(body, indent=2) + "\n").encode("utf-8")


def signature_problem(manifest: bytes, sig_file: bytes, public: Ed25519PublicKey) -> str | None:
    """Why `sig_file` (a `MANIFEST.sig`) does not prove that `public`'s owner signed `manifest`, or
    None when it does: unreadable, signed by another key (by fingerprint), or not matching."""
    expected = keys.fingerprint(public)
    try:
        body = json.loads(sig_file.decode("utf-8"))
        signature = base64.b64decode(body["signature"], validate=True)
        claimed = str(body.get("key fingerprint", ""))
    except (ValueError, KeyError, TypeError, binascii.Error):
        return "not a readable signature file"
    try:
        public.verify(signature, manifest)
    except InvalidSignature:
        if claimed != expected:
            return f"signed by another key ({claimed or 'no fingerprint'}), not the given key ({expected})"
        return f"the signature does not match the manifest under the given key ({expected})"
    return None
