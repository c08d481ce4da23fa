"""The download guard's parts (ui/media_guard.py, issue 40 finding 6), without a server:
tests/test_e2e_media.py serves them for real."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from engine.io import download_grants, lifetimes
from engine.io.download_grants import FETCHES_PER_CLICK, Grants
from engine.io.errors import UserError
from ui import media_guard
from ui.media_guard import Holder, MediaGuard

ALICE = {"_streamlit_user": "alice-signed", "_streamlit_user_tokens": "t", "_streamlit_xsrf": "x1"}
DATA = b"patient\np-001\n"
DIGEST = hashlib.sha256(DATA).hexdigest()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def guarded(monkeypatch):
    """A guard installed in this process (as serve.py does), uninstalled after; fresh grants."""
    monkeypatch.setattr(media_guard, "GRANTS", Grants())
    monkeypatch.setattr(download_grants, "GRANTS", media_guard.GRANTS)
    yield
    media_guard._INSTALLED.clear()


def test_a_grant_is_for_its_credential_its_bytes_its_fetches_and_its_time() -> None:
    clock = Clock()
    grants = Grants(clock)
    grants.grant("alice", DIGEST, 300)
    assert not grants.take("mallory", DIGEST) and not grants.take("alice", "other bytes")
    assert [grants.take("alice", DIGEST) for _ in range(FETCHES_PER_CLICK + 1)] == [
        True
    ] * FETCHES_PER_CLICK + [False]
    grants.grant("alice", DIGEST, 300)
    clock.now += 300
    assert not grants.take("alice", DIGEST)  # at the limit: gone
    grants.grant("alice", DIGEST, 300)
    grants.revoke("alice")  # sign-out
    assert not grants.take("alice", DIGEST)


def test_the_time_limit_is_a_setting(monkeypatch) -> None:
    monkeypatch.delenv(lifetimes.DOWNLOAD_ENV, raising=False)
    assert lifetimes.download_seconds() == 300
    monkeypatch.setenv(lifetimes.DOWNLOAD_ENV, "30")
    assert lifetimes.download_seconds() == 30
    for bad in ("soon", "0", "-5"):
        monkeypatch.setenv(lifetimes.DOWNLOAD_ENV, bad)
        with pytest.raises(UserError, match=lifetimes.DOWNLOAD_ENV):
            lifetimes.download_seconds()


def test_the_credential_is_the_sign_in_cookies_and_user_headers() -> None:
    cred = download_grants.credential
    alice = cred(ALICE, {}, [])
    assert cred({**ALICE, "_streamlit_xsrf": "x2", "other": "1"}, {}, []) == alice  # not a sign-in
    assert cred({**ALICE, "_streamlit_user": "bob-signed"}, {}, []) != alice
    assert cred({}, {}, []) != alice
    header = cred({}, {"X-Forwarded-User": "ann"}, ["X-Forwarded-User"])
    assert cred({}, {"x-forwarded-user": "ann"}, ["X-Forwarded-User"]) == header
    assert cred({}, {"x-forwarded-user": "bob"}, ["X-Forwarded-User"]) != header


def test_a_deferred_download_is_built_only_for_the_session_that_drew_it(guarded) -> None:
    owner = Holder(download_grants.credential(ALICE, {}, []), "socket-1", None)
    media_guard.admit(owner)  # no guard served yet: no requester to check (AppTest, unit tests)
    MediaGuard(None)
    for asker in (None, Holder("someone else", "socket-1", None), Holder(owner.credential, "socket-2", None)):
        token = media_guard.REQUESTER.set(asker)
        try:
            with pytest.raises(media_guard.DownloadRefused):
                media_guard.admit(owner)
        finally:
            media_guard.REQUESTER.reset(token)
    token = media_guard.REQUESTER.set(owner)
    try:
        media_guard.admit(owner)
        with pytest.raises(media_guard.DownloadRefused):
            media_guard.admit(None)  # a button drawn without an owner
    finally:
        media_guard.REQUESTER.reset(token)


def test_audited_builds_nothing_and_logs_nothing_for_another_session(guarded, tmp_path, monkeypatch) -> None:
    from engine.audit import log
    from ui.downloads import audited

    monkeypatch.setenv(log.ENV, str(tmp_path / "audit.log"))
    owner = Holder("alice", "socket-1", None)
    context = {
        "user": "oidc:x#alice",
        "study": None,
        "release": "r1",
        "adversary": "a",
        "k": 5,
        "session": [],
    }
    built: list[int] = []

    def data() -> bytes:
        built.append(1)
        return DATA

    build = audited(data, "release file", "r1_release.csv", {**context, "owner": owner})
    MediaGuard(None)
    token = media_guard.REQUESTER.set(Holder("", "socket-9", None))  # never signed in
    try:
        with pytest.raises(media_guard.DownloadRefused):
            build()
    finally:
        media_guard.REQUESTER.reset(token)
    assert not built and log.entries(tmp_path / "audit.log") == []
    token = media_guard.REQUESTER.set(owner)
    try:
        assert build() == DATA
    finally:
        media_guard.REQUESTER.reset(token)
    assert len(log.entries(tmp_path / "audit.log")) == 2 and media_guard.GRANTS.take("alice", DIGEST)


def _scope(path: str, cookies: dict[str, str], host: str = "127.0.0.1") -> dict:
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items()).encode()
    headers = [(b"cookie", cookie), (b"accept-encoding", b"gzip")]
    return {"type": "http", "path": path, "headers": headers, "client": (host, 5555), "method": "GET"}


def _serve(
    scope: dict, disposition: bytes | None = b'attachment; filename="t.csv"'
) -> tuple[int, bytes, dict]:
    """One request through MediaGuard in front of a media route answering DATA."""
    seen: dict = {}

    async def media(scope, receive, send) -> None:
        seen["headers"] = dict(scope["headers"])
        headers = [(b"content-type", b"text/csv")] + (
            [(b"content-disposition", disposition)] if disposition else []
        )
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": DATA[:5], "more_body": True})
        await send({"type": "http.response.body", "body": DATA[5:]})

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.request", "body": b""}

    asyncio.run(MediaGuard(media)(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]), seen


def test_a_download_is_served_to_its_credential_only_within_its_grant(guarded) -> None:
    alice = download_grants.credential(ALICE, {}, [])
    assert _serve(_scope("/media/abc.csv", ALICE))[:2] == (403, media_guard.REFUSED)  # no grant
    media_guard.GRANTS.grant(alice, DIGEST, 300)
    assert _serve(_scope("/media/abc.csv", {}))[0] == 403  # no cookie
    assert _serve(_scope("/media/abc.csv", {**ALICE, "_streamlit_user": "bob"}))[0] == 403
    status, body, seen = _serve(_scope("/media/abc.csv", ALICE))
    assert (status, body) == (200, DATA) and b"accept-encoding" not in seen["headers"]  # hashed as stored
    assert _serve(_scope("/media/abc.csv", ALICE))[0] == 200  # the click's second fetch
    assert _serve(_scope("/media/abc.csv", ALICE))[0] == 403  # spent


def test_inline_media_and_other_routes_pass(guarded) -> None:
    assert _serve(_scope("/media/img.png", {}), disposition=None)[:2] == (200, DATA)
    assert _serve(_scope("/_stcore/health", {}))[:2] == (200, DATA)  # not a media route: not guarded


def test_single_user_mode_serves_loopback_only(guarded) -> None:
    media_guard.GRANTS.grant(download_grants.credential({}, {}, []), DIGEST, 300)
    assert _serve(_scope("/media/abc.csv", {}, host="10.1.2.3"))[0] == 403
    assert _serve(_scope("/media/abc.csv", {}, host="127.0.0.1"))[0] == 200


def test_header_mode_serves_the_header_only_from_the_trusted_proxy(guarded, monkeypatch) -> None:
    from streamlit import config

    before = config.get_option("server.trustedUserHeaders")
    config.set_option("server.trustedUserHeaders", {"X-Forwarded-User": "email"})
    monkeypatch.setenv("COHORTSHIELD_TRUSTED_PROXIES", "10.0.0.5")
    try:
        ann = download_grants.credential({}, {"x-forwarded-user": "ann"}, ["X-Forwarded-User"])
        media_guard.GRANTS.grant(ann, DIGEST, 300)

        def request(host: str, user: str) -> int:
            scope = _scope("/media/abc.csv", {}, host=host)
            scope["headers"].append((b"x-forwarded-user", user.encode()))
            return _serve(scope)[0]

        assert request("10.9.9.9", "ann") == 403  # around the proxy: the header is not believed
        assert request("10.0.0.5", "bob") == 403  # through the proxy, another user
        assert request("10.0.0.5", "ann") == 200
    finally:
        config.set_option("server.trustedUserHeaders", before)
