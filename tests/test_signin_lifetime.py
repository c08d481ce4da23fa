"""A sign-in lasts `COHORTSHIELD_SIGNIN_SECONDS` (default 8 hours), not Streamlit's 30 days (issue 40,
low finding: a sign-in cookie never signed out stayed valid 30 days).

Streamlit 1.67 has no setting for its cookie's lifetime (`[auth]` takes redirect_uri, cookie_secret,
client_id, client_secret, server_metadata_url, client_kwargs, expose_tokens; the 30 days are the
constant `AUTH_COOKIE_MAX_AGE_SECONDS`). So the gate refuses a sign-in whose ID token was issued
(`iat`) longer ago than the setting, and the download guard's middleware sets the sign-in cookie's
`Max-Age` to it when Streamlit sets the cookie (ui/media_guard.py)."""

from __future__ import annotations

import asyncio
import time

import pytest
from streamlit.testing.v1 import AppTest
from test_auth import AUTH, GATE_ONLY, _signed_in
from test_media_guard import guarded  # noqa: F401  (uninstalls the guard after the test)

from engine.io import lifetimes
from engine.io.errors import UserError
from ui.media_guard import MediaGuard


def _gate(iat: float) -> AppTest:
    at = AppTest.from_string(GATE_ONLY, default_timeout=60)
    at.secrets["auth"] = AUTH
    at.user = _signed_in("ann@hospital.example", iat=int(iat))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_sign_in_older_than_its_lifetime_signs_no_one_in(monkeypatch) -> None:
    monkeypatch.delenv(lifetimes.SIGNIN_ENV, raising=False)
    now = time.time()
    assert "page drawn for ann@hospital.example" in _gate(now - 3600).markdown[0].value
    old = _gate(now - 9 * 3600)  # a cookie from yesterday's shift, never signed out
    assert not old.markdown and [b.label for b in old.button] == ["Sign in"]
    assert "older than 8 h" in old.caption[0].value
    monkeypatch.setenv(lifetimes.SIGNIN_ENV, "600")
    assert not _gate(now - 3600).markdown


def test_the_lifetime_is_a_setting(monkeypatch) -> None:
    monkeypatch.delenv(lifetimes.SIGNIN_ENV, raising=False)
    assert lifetimes.signin_seconds() == 8 * 3600
    for bad in ("a day", "0", "-1", "nan"):
        monkeypatch.setenv(lifetimes.SIGNIN_ENV, bad)
        with pytest.raises(UserError, match=lifetimes.SIGNIN_ENV):
            lifetimes.signin_seconds()
    assert lifetimes.signin_expired(None, 1e9)  # no issue time: not believed


def test_the_sign_in_cookie_is_set_for_the_lifetime_only(guarded, monkeypatch) -> None:  # noqa: F811
    monkeypatch.setenv(lifetimes.SIGNIN_ENV, "3600")
    cookies = [
        b"_streamlit_user=abc; HttpOnly; Max-Age=2592000; Path=/; SameSite=lax",
        b"_streamlit_user_tokens=def; HttpOnly; Max-Age=2592000; Path=/; SameSite=lax",
        b"_streamlit_xsrf=x; Max-Age=2592000; Path=/",
        b"_streamlit_user__1=; Max-Age=0; Path=/",  # a deletion stays one
    ]

    async def callback(scope, receive, send) -> None:
        headers = [(b"set-cookie", c) for c in cookies] + [(b"location", b"/")]
        await send({"type": "http.response.start", "status": 302, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.request", "body": b""}

    scope = {
        "type": "http",
        "path": "/oauth2callback",
        "headers": [],
        "client": ("127.0.0.1", 1),
        "method": "GET",
    }
    asyncio.run(MediaGuard(callback)(scope, receive, send))
    got = [v for k, v in sent[0]["headers"] if k == b"set-cookie"]
    assert got == [
        b"_streamlit_user=abc; HttpOnly; Max-Age=3600; Path=/; SameSite=lax",
        b"_streamlit_user_tokens=def; HttpOnly; Max-Age=3600; Path=/; SameSite=lax",
        b"_streamlit_xsrf=x; Max-Age=2592000; Path=/",
        b"_streamlit_user__1=; Max-Age=0; Path=/",
    ]
