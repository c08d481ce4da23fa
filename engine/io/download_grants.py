"""Who may fetch a built download, how many times and for how long (issue 40, finding 6): the plain
part of the app's download guard (ui/media_guard.py), which grants a session's credential the fetches
of exactly the bytes it built, for `COHORTSHIELD_DOWNLOAD_SECONDS` (engine/io/lifetimes.py)."""

from __future__ import annotations

import hashlib
import ipaddress
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

SIGN_IN_COOKIE = "_streamlit_user"  # Streamlit's sign-in cookie, its chunks (`__1`, ...) and `_tokens`


def credential(cookies: Mapping[str, str], headers: Mapping[str, str], user_headers: Iterable[str]) -> str:
    """sha256 of the sign-in cookies (`_streamlit_user*`, by name) and of the values of the headers
    `server.trustedUserHeaders` names: the same for a session's websocket and its browser's requests,
    different for another sign-in or none."""
    lower = {k.lower(): v for k, v in headers.items()}
    parts = sorted((k, v) for k, v in cookies.items() if k.startswith(SIGN_IN_COOKIE))
    parts += [(f"header:{h.lower()}", lower.get(h.lower(), "")) for h in sorted(user_headers)]
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def loopback_none(host: str | None) -> str | None:
    """A peer address as Streamlit reports it: None for loopback (and for no address)."""
    if not host:
        return None
    try:
        return None if ipaddress.ip_address(host).is_loopback else host
    except ValueError:
        return host


# Streamlit 1.67's download button fetches its file twice per click: `fetch(url)` to check the answer
# while its link downloads it (DownloadButton -> checkSourceUrlResponse): a click's grant is for both.
FETCHES_PER_CLICK = 2


@dataclass
class Grants:
    """The fetches a built download's bytes may have (`FETCHES_PER_CLICK`), by the credential it was
    built for, within `seconds` of its building (the issue's done-when: "once, for a short time")."""

    clock: Callable[[], float] = time.monotonic
    _items: list[list] = field(default_factory=list)  # [credential, sha256, expiry, fetches left]
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _live(self) -> None:
        now = self.clock()
        self._items = [g for g in self._items if g[2] > now and g[3] > 0]

    def grant(self, who: str, digest: str, seconds: float, fetches: int = FETCHES_PER_CLICK) -> None:
        with self._lock:
            self._live()
            self._items.append([who, digest, self.clock() + seconds, fetches])

    def take(self, who: str, digest: str) -> bool:
        """Whether `who` holds a fresh grant of `digest`; one of its fetches is spent."""
        with self._lock:
            self._live()
            for g in self._items:
                if g[0] == who and g[1] == digest:
                    g[3] -= 1
                    return True
        return False

    def revoke(self, who: str) -> None:
        """Drop every grant of `who` (sign-out)."""
        with self._lock:
            self._items = [g for g in self._items if g[0] != who]


GRANTS = Grants()
