"""Release pseudonyms: what names a patient in a file that leaves (issue 23).

A release file never carries the source's patient ids (MRNs are a HIPAA identifier) nor the source's
visit labels (service dates). Every file a recipient receives names its patients by release ids
`R001`, `R002`, ...: the patients of the release are ordered by HMAC-SHA256(key, salt, source id),
which reveals nothing of the source id or of its order without the key, and numbered in that order;
rows are written in release-id order. The salt is the release's content fingerprint
(`Release.fingerprint`), so two different releases of one study number the same patient differently
and cannot be joined by id; the same study (same key) gives the same bytes (`study run` stays
byte-identical).

The key is a secret of the steward's: it lives in the study file only (`Study.pseudonym_key`), never
in the bundle, the report or a release file. The crosswalk (release id -> source id) is written only
when asked (`crosswalk`), and is identifying.

Visits kept in a release (`Release.shows_visits`) are numbered 1, 2, 3 ... per patient in the records'
visit order (by label: ISO dates chronologically, numbers numerically), never the source's labels.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from engine.io.errors import UserError

KEY_BYTES = 32
_KEY = re.compile(r"[0-9a-f]{64}")
RELEASE_ID_PREFIX = "R"
CROSSWALK_COLUMNS = ("release_id", "source_id")


class PseudonymKeyError(UserError, ValueError):
    """A pseudonym key that is not 64 lower-case hex digits."""


def new_key() -> str:
    """A fresh secret key: 32 random bytes as 64 hex digits."""
    return secrets.token_hex(KEY_BYTES)


def check_key(key: str) -> str:
    """The key if it has the form `new_key` gives; PseudonymKeyError otherwise (never echoes it)."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise PseudonymKeyError("a pseudonym key is 64 lower-case hexadecimal digits")
    return key


@dataclass(frozen=True, repr=False)
class Pseudonyms:
    """The steward's secret key; `mapping(ids, salt)` numbers a release's patients."""

    key: str

    def __post_init__(self) -> None:
        check_key(self.key)

    def __repr__(self) -> str:  # never print the secret
        return "Pseudonyms(<secret>)"

    def _token(self, salt: str, source_id: str) -> bytes:
        msg = salt.encode("utf-8") + b"\x1f" + source_id.encode("utf-8")
        return hmac.new(bytes.fromhex(self.key), msg, hashlib.sha256).digest()

    def mapping(
        self, source_ids: Iterable[str], salt: str, *, first: int = 1, width: int | None = None
    ) -> dict[str, str]:
        """Source id -> release id for the distinct `source_ids`: numbered `first`, `first` + 1, ... in
        the order of their keyed hash under `salt` (ties, which need a hash collision, by source id),
        zero-padded to `width` (default: the width of n, at least 3), prefixed `R`. `first` and
        `width` number patients after those of another mapping under the same salt (the recipient's
        dataset: released records with no row in the release file, `engine.io.dataset_export`)."""
        ids = sorted({str(x) for x in source_ids})
        order = sorted(ids, key=lambda s: (self._token(salt, s), s))
        if width is None:
            width = max(len(str(len(order))), 3)
        return {s: f"{RELEASE_ID_PREFIX}{i:0{width}d}" for i, s in enumerate(order, start=first)}


def relabel(frame: pd.DataFrame, mapping: dict[str, str]) -> pd.DataFrame:
    """A release file's rows with patients renamed by `mapping` and visits (when there is a `visit`
    column) numbered 1, 2, ... per patient in the order they first appear (the records' visit order);
    rows sorted by release id, the order within a patient kept. Raises KeyError naming no id when a
    patient is missing from the mapping (a bug: the mapping is made from the same rows)."""
    out = frame.copy()
    source = out["patient_id"].astype(str)
    rid = source.map(mapping)
    if rid.isna().any():
        raise KeyError(f"{int(rid.isna().sum())} row(s) of the release have no release id")
    if "visit" in out.columns:
        # dense rank of each visit within its patient, in order of first appearance
        key = pd.Series(list(zip(source, out["visit"].astype(str), strict=True)), index=out.index)
        first = ~key.duplicated()
        number = first.astype(np.int64).groupby(source).cumsum()
        visit_no = number.where(first).groupby(key).transform("first")
        out["visit"] = visit_no.astype(np.int64).to_numpy()
    out["patient_id"] = rid.to_numpy()
    order = np.argsort(out["patient_id"].to_numpy(dtype=str), kind="stable")
    return out.iloc[order].reset_index(drop=True)


def crosswalk_frame(mapping: dict[str, str]) -> pd.DataFrame:
    """The crosswalk table (`release_id`, `source_id`), sorted by release id. Identifying: for the
    steward only, never part of a bundle."""
    rows = sorted((r, s) for s, r in mapping.items())
    return pd.DataFrame(rows, columns=list(CROSSWALK_COLUMNS))
