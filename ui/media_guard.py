"""Downloads served only to the session that made them, once, for a short time (issue 40, finding 6).

Streamlit 1.67 serves a download button's file at `/media/<id>` to any request, with no cookie, for as
long as the file is stored (finding 1), and builds a deferred download (a button whose data is a
function: every button of ui/downloads.py) for any websocket session that names its id, the requester
never checked (finding 2). `serve.py` serves app.py through `st.App(..., middleware=middleware())`,
which puts `MediaGuard` in front of every request:

- the websocket of a session: its `Holder` (the sign-in cookies and user headers it carried, its
  handshake key, its peer) is the requester of every deferred download it asks for (`REQUESTER`, a
  context variable the session's tasks and their threads inherit). `ui.downloads.audited` builds the
  file only for the holder that drew the button (`admit`), then grants that credential the click's
  fetches of exactly those bytes (`engine.io.download_grants.GRANTS`, keyed by their sha256) for
  `COHORTSHIELD_DOWNLOAD_SECONDS` (default 300).
- `/media/<id>` answered as an attachment (a download): served only when the request carries the same
  credential, from a peer the sign-in mode admits (`ui.auth.peer_refusal`), within the time and once
  (`Grants.take`: `FETCHES_PER_CLICK` fetches); else 403. Images and other inline media pass untouched.

Sign-out drops the signed-out credential's grants (`Grants.revoke`). The sign-in cookie Streamlit sets
at `/oauth2callback` for 30 days is set for `COHORTSHIELD_SIGNIN_SECONDS` (`_short_cookies`; the gate
refuses an older sign-in whatever the browser keeps: ui/auth.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import sys
import threading
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from engine.io.download_grants import GRANTS, SIGN_IN_COOKIE, credential, loopback_none
from engine.io.errors import UserError
from engine.io.lifetimes import download_seconds, signin_seconds
from ui.auth import peer_refusal, session_credential, user_headers

SOCKET_KEY = "sec-websocket-key"  # RFC 6455: a fresh random nonce per connection (browser tab)
MEDIA_PATH = re.compile(r"(^|/)media/[^/]+$")
SIGN_IN_PATH = "/oauth2callback"  # Streamlit's OIDC callback: where it sets the sign-in cookie
LOGOUT_PATH = "/auth/logout"  # Streamlit's own sign-out route: deletes the browser's cookie, nothing more
MAX_AGE = re.compile(rb"Max-Age=(\d+)", re.IGNORECASE)
REFUSED = (
    b"This download is not yours, was already served, or is older than its time limit: "
    b"click its button in the app again."
)


class DownloadRefused(UserError):
    """A deferred download asked for by a session other than the one that drew its button."""


@dataclass(frozen=True)
class Holder:
    """Who a connection or request is: `credential` (sha256 of its sign-in cookies and trusted user
    headers, `credential`), `connection` (its websocket handshake key; "" for plain HTTP) and `peer`
    (None for loopback, as `st.context.ip_address` reports it)."""

    credential: str
    connection: str
    peer: str | None


REQUESTER: ContextVar[Holder | None] = ContextVar("cohortshield_download_requester", default=None)
_INSTALLED = threading.Event()  # a MediaGuard serves this process (serve.py)


def installed() -> bool:
    return _INSTALLED.is_set()


UNGUARDED = (
    "CohortShield is served by `make run` (`streamlit run serve.py`), which puts the download guard in "
    "front of every request. This server was started another way (`streamlit run app.py`?): its "
    "downloads would be served to anyone who has their address, so it shows nothing. Stop it and start "
    "`make run`."
)


def require_guard() -> None:
    """Stop the script run, saying why, when a browser is served by a server without the guard (issue
    40: `streamlit run app.py` served every download to anyone holding its URL). AppTest and other
    runs without a browser connection (no request headers) are not served pages: they pass."""
    import streamlit as st

    if installed() or not st.context.headers:
        return
    st.error(UNGUARDED)
    st.stop()


def admit(owner: Holder | None) -> None:
    """Refuse (`DownloadRefused`) to build a deferred download for any requester but `owner`, the
    session that drew its button (finding 2). Without a guard in this process (AppTest, a unit test)
    there is no requester to check."""
    if not installed():
        return
    asker = REQUESTER.get()
    if (
        owner is None
        or asker is None
        or (asker.credential, asker.connection) != (owner.credential, owner.connection)
    ):
        print("cohortshield: download: refused a deferred download to another session", file=sys.stderr)
        raise DownloadRefused("this download belongs to another session: nothing was built")


def hand_over(owner: Holder | None, data: bytes) -> None:
    """Grant `owner`'s credential the click's fetches of `data` (`GRANTS`), when a guard serves this
    process."""
    if owner is not None and installed():
        GRANTS.grant(owner.credential, hashlib.sha256(data).hexdigest(), download_seconds())


# ------------------------------------------------------------------------------ the ASGI middleware
def _headers(scope: Mapping[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _cookies(headers: Mapping[str, str]) -> dict[str, str]:
    """The request's cookies, parsed as Starlette parses them for `st.context.cookies`."""
    from starlette.requests import cookie_parser

    return cookie_parser(headers.get("cookie", ""))


def holder_of(scope: Mapping[str, Any]) -> Holder:
    """The `Holder` of an ASGI connection (websocket or HTTP request)."""
    headers = _headers(scope)
    client = scope.get("client") or (None, None)
    return Holder(
        credential(_cookies(headers), headers, user_headers()),
        headers.get(SOCKET_KEY, ""),
        loopback_none(client[0]),
    )


def this_session() -> Holder:
    """The `Holder` of the running session (its websocket's handshake, as `st.context` keeps it): the
    owner of the downloads it draws."""
    import streamlit as st

    ip = st.context.ip_address
    return Holder(
        session_credential(),
        {k.lower(): v for k, v in st.context.headers.items()}.get(SOCKET_KEY, ""),
        ip if isinstance(ip, str) and ip else None,
    )


class MediaGuard:
    """The ASGI middleware (module docstring). `serve.py` installs it (`middleware()`)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        _INSTALLED.set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            token = REQUESTER.set(holder_of(scope))
            try:
                await self.app(scope, receive, send)
            finally:
                REQUESTER.reset(token)
        elif scope["type"] == "http" and MEDIA_PATH.search(scope.get("path", "")):
            await self._media(scope, receive, send)
        elif scope["type"] == "http" and scope.get("path", "").endswith(LOGOUT_PATH):
            await _revoke_cookie(scope)
            await self.app(scope, receive, send)
        elif scope["type"] == "http" and scope.get("path", "").endswith(SIGN_IN_PATH):
            await self.app(scope, receive, _short_cookies(send))
        else:
            await self.app(scope, receive, send)

    async def _media(self, scope: Any, receive: Any, send: Any) -> None:
        # identity bytes: the body is hashed as stored, so no gzip from the server's own middleware
        scope = dict(scope, headers=[(k, v) for k, v in scope["headers"] if k.lower() != b"accept-encoding"])
        start: dict | None = None
        body: list[bytes] = []

        async def capture(message: dict) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                disposition = dict(message.get("headers", [])).get(b"content-disposition", b"")
                if not disposition.lower().startswith(b"attachment"):
                    await send(message)  # inline media (an image): not a download
                    return
                start = message
            elif start is None:
                await send(message)
            else:
                body.append(message.get("body", b""))
                if not message.get("more_body", False):
                    await self._release(scope, start, b"".join(body), send)

        await self.app(scope, receive, capture)

    async def _release(self, scope: Any, start: dict, data: bytes, send: Any) -> None:
        who = holder_of(scope)
        ok = start["status"] == 200 and peer_refusal(who.peer) is None
        # off the event loop: 0.4 s for 100 MiB would hold every session's websocket
        digest = (await asyncio.to_thread(hashlib.sha256, data)).hexdigest() if ok else ""
        if ok and GRANTS.take(who.credential, digest):
            await send(start)
            await send({"type": "http.response.body", "body": data})
            return
        print(
            f"cohortshield: download: refused {scope.get('path')!r} to {who.peer or 'loopback'}",
            file=sys.stderr,
        )
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(REFUSED)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": REFUSED})


async def _revoke_cookie(scope: Mapping[str, Any]) -> None:
    """A sign-out through Streamlit's `/auth/logout` (typed, or a bookmark): the request's sign-in
    cookie is revoked as the app's Sign out revokes the token (`ui.auth.revoke_sign_in` of
    `cookie_revocation`; issue 40: this route revoked nothing, so a copy of the cookie kept signing in
    until its 8 hours ended)."""
    from ui.auth import cookie_revocation, revoke_sign_in

    headers = _headers(scope)
    cookies = _cookies(headers)
    if not any(name.startswith(SIGN_IN_COOKIE) for name in cookies):
        return
    held = credential(cookies, headers, user_headers())
    await asyncio.to_thread(revoke_sign_in, lambda: cookie_revocation(held), held)


def _short_cookies(send: Any) -> Any:
    """`send` with the sign-in cookies Streamlit sets for 30 days set for `signin_seconds()` instead
    (issue 40, low finding); their deletions (Max-Age=0) and other cookies untouched."""
    seconds = int(signin_seconds())

    def shorter(value: bytes) -> bytes:
        if not value.startswith(SIGN_IN_COOKIE.encode()):
            return value
        return MAX_AGE.sub(lambda m: b"Max-Age=%d" % min(int(m.group(1)), seconds), value)

    async def wrapped(message: dict) -> None:
        if message["type"] == "http.response.start":
            headers = [
                (k, shorter(v) if k.lower() == b"set-cookie" else v) for k, v in message.get("headers", [])
            ]
            message = dict(message, headers=headers)
        await send(message)

    return wrapped


def middleware() -> list:
    """`st.App(middleware=...)` of serve.py."""
    from starlette.middleware import Middleware

    return [Middleware(MediaGuard)]
