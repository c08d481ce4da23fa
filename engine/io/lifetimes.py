"""How long a sign-in and a built download last (issue 40): settings in seconds, from the environment.

- `COHORTSHIELD_SIGNIN_SECONDS` (default 8 hours): a sign-in's ID token issued (`iat`) longer ago signs
  no one in, and the sign-in cookie is set for that long (ui/auth.py, ui/media_guard.py). Streamlit
  1.67's own cookie lasts 30 days and has no setting.
- `COHORTSHIELD_DOWNLOAD_SECONDS` (default 300): how long a built download may be fetched
  (engine/io/download_grants.py).
"""

from __future__ import annotations

import math
import os
from typing import Any

from engine.io.errors import UserError

SIGNIN_ENV = "COHORTSHIELD_SIGNIN_SECONDS"
DOWNLOAD_ENV = "COHORTSHIELD_DOWNLOAD_SECONDS"


def seconds_setting(name: str, default: float) -> float:
    """The environment's `name` as a number of seconds (more than 0), else `default`; UserError naming
    the setting for anything else."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return float(default)
    try:
        value = float(raw)
    except ValueError:
        raise UserError(f"{name}: a number of seconds is needed, not {raw!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise UserError(f"{name}: a number of seconds more than 0 is needed, not {raw}")
    return value


def signin_seconds() -> float:
    """How long a sign-in lasts (`COHORTSHIELD_SIGNIN_SECONDS`, default 8 hours)."""
    return seconds_setting(SIGNIN_ENV, 8 * 3600)


def download_seconds() -> float:
    """How long a built download may be fetched (`COHORTSHIELD_DOWNLOAD_SECONDS`, default 300)."""
    return seconds_setting(DOWNLOAD_ENV, 300)


def signin_expired(iat: Any, now: float) -> bool:
    """Whether a sign-in whose ID token was issued at `iat` (seconds since the epoch, OIDC Core 1.0
    section 2) is over at `now`; a token without a readable issue time is."""
    try:
        issued = float(iat)
    except (TypeError, ValueError):
        return True
    return not math.isfinite(issued) or now - issued > signin_seconds()
