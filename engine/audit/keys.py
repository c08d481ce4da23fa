"""The audit log's two secrets, kept apart from the log (issue 40, finding 5).

- The chain key (`COHORTSHIELD_AUDIT_KEY`, a file of 64 hex digits): every entry's `mac` is
  HMAC-SHA256 under it of the previous entry's `mac` and the entry, so whoever may only read (or
  rewrite) the log cannot forge, rechain or append an entry that `verify` accepts.
- The signing key (`COHORTSHIELD_AUDIT_SIGNING_KEY`, an Ed25519 private key, PEM): it signs the
  head (count, last hash, last MAC) after every append. Its public key (`<signing key>.pub`, or any
  copy handed to an auditor: `audit verify --public-key`) alone checks the head, so a cut, emptied or
  rechained log is found without any secret.

Default: both in a folder of their own beside the log's folder (`<log folder>.keys/audit.key` and
`audit-signing.key`, mode 600, folder 700), created by the first append to an empty log. A log that
already holds keyed entries is never given fresh keys: a lost key refuses the append instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

KEY_ENV = "COHORTSHIELD_AUDIT_KEY"
SIGNING_ENV = "COHORTSHIELD_AUDIT_SIGNING_KEY"


def key_folder(log: Path) -> Path:
    """The default folder of the keys: beside the log's folder, not in it (`/srv/audit/cs.log` ->
    `/srv/audit.keys/`), so that access to the log's folder gives no key."""
    folder = log.resolve().parent
    return folder.with_name(folder.name + ".keys")


def _configured(env: str, log: Path, name: str) -> Path:
    value = os.environ.get(env, "").strip()
    return Path(value).expanduser() if value else key_folder(log) / name


def chain_key_path(log: Path) -> Path:
    """The chain key's file: `COHORTSHIELD_AUDIT_KEY`, else `<log folder>.keys/audit.key`."""
    return _configured(KEY_ENV, log, "audit.key")


def signing_key_path(log: Path) -> Path:
    """The signing key's file: `COHORTSHIELD_AUDIT_SIGNING_KEY`, else `<log folder>.keys/audit-signing.key`."""
    return _configured(SIGNING_ENV, log, "audit-signing.key")


def public_key_path(log: Path) -> Path:
    """The public key written beside the signing key (`<signing key>.pub`)."""
    signing = signing_key_path(log)
    return signing.with_name(signing.name + ".pub")


def create_file(path: Path, data: bytes, mode: int) -> None:
    """Write `path` once, whole, with `mode` (a temporary file linked into place: a concurrent creator's
    key wins); a missing folder is made mode 700. Also the office's bundle key (engine/report/signing.py)."""
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700)
        (path.parent / ".gitignore").write_text("*\n")  # the default folder may lie in a checkout
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: its key stands
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def create_keys(log: Path) -> None:
    """Make the chain key and the signing key (and its public key) where missing."""
    if not chain_key_path(log).exists():
        create_file(chain_key_path(log), secrets.token_hex(32).encode() + b"\n", 0o600)
    if not signing_key_path(log).exists():
        create_file(signing_key_path(log), new_private_pem(), 0o600)
    if not public_key_path(log).exists():
        create_file(public_key_path(log), public_pem(load_signing_key(log)), 0o644)


def load_chain_key(log: Path) -> bytes | None:
    """The chain key, or None when its file is missing or unreadable (a reader without it)."""
    try:
        return bytes.fromhex(chain_key_path(log).read_text("ascii").strip())
    except (OSError, ValueError):
        return None


def new_private_pem() -> bytes:
    """A fresh Ed25519 private key, PEM (PKCS8, unencrypted: the file's mode 600 guards it)."""
    private = Ed25519PrivateKey.generate()
    return private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def load_private_key(path: Path) -> Ed25519PrivateKey | None:
    """The Ed25519 private key in the PEM file `path`, or None when missing, unreadable or another kind."""
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    return key if isinstance(key, Ed25519PrivateKey) else None


def load_signing_key(log: Path) -> Ed25519PrivateKey | None:
    return load_private_key(signing_key_path(log))


def public_pem(key: Ed25519PrivateKey | None) -> bytes:
    if key is None:
        raise ValueError("no signing key")
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def load_public_key(path: Path) -> Ed25519PublicKey:
    """An Ed25519 public key from a PEM file; ValueError naming the file when it is not one."""
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise ValueError(f"{path}: not a readable Ed25519 public key (PEM): {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError(f"{path}: not an Ed25519 public key")
    return key


def fingerprint(public: Ed25519PublicKey) -> str:
    """`sha256:` and the sha256 (hex) of the public key's 32 raw bytes: how a key is named to a person."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def mac(key: bytes, prev_mac: str, message: str) -> str:
    """HMAC-SHA256 under the chain key of the previous entry's MAC followed by the entry (hex)."""
    return hmac.new(key, (prev_mac + message).encode("utf-8"), hashlib.sha256).hexdigest()


def signature_ok(public: Ed25519PublicKey, signature_hex: str, message: str) -> bool:
    try:
        public.verify(bytes.fromhex(signature_hex), message.encode("utf-8"))
    except (InvalidSignature, ValueError):
        return False
    return True
