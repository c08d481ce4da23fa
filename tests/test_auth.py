"""Sign-in (issue 25, ui/auth.py): app.py draws no page without a user when sign-in is configured,
shows who is signed in, stays single-user on localhost; the administrators' audit page; the
downloads' audit wrapper (ui/downloads.py `audited`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from apptest_support import ROOT, full_app, shown
from streamlit import config
from streamlit.testing.v1 import AppTest

from engine.audit import log
from engine.audit import verify as audit_verify

AUTH = {
    "redirect_uri": "http://localhost:8501/oauth2callback",
    "cookie_secret": "test-secret-not-used",
    "client_id": "cohortshield",
    "client_secret": "x",
    "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration",
}

GATE_ONLY = """
import streamlit as st
from ui import auth
user = auth.gate()
st.write(f"page drawn for {user.name}, admin={user.admin}")
"""


def _signed_in(email: str, **claims: object) -> dict:
    """A signed-in user's claims (ui/auth.py keys them on iss and sub; the e-mail counts if verified)."""
    sub = "s-" + email.split("@")[0].lower()
    return {
        "is_logged_in": True,
        "iss": "https://login.hospital.example",
        "sub": sub,
        "iat": 1_800_000_000,
    } | {
        "email": email,
        "email_verified": True,
        **claims,
    }


def _captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.sidebar.caption)


@pytest.fixture
def header_mode() -> Iterator[None]:
    before = config.get_option("server.trustedUserHeaders")
    config.set_option("server.trustedUserHeaders", {"X-Forwarded-User": "email"})
    yield
    config.set_option("server.trustedUserHeaders", before)


def test_configured_and_not_signed_in_shows_no_page_only_a_sign_in_button() -> None:
    at = full_app(timeout=120)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": False}
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [b.label for b in at.button] == ["Sign in"]
    assert not at.sidebar.radio and not at.dataframe  # no sidebar, no page
    assert "Sign in to use CohortShield" in at.info[0].value


def test_signed_in_shows_the_user_and_the_page(monkeypatch) -> None:
    monkeypatch.delenv("COHORTSHIELD_ADMINS", raising=False)
    at = full_app(timeout=300)
    at.secrets["auth"] = AUTH
    at.user = _signed_in("ann@hospital.example", name="Ann")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Signed in as ann@hospital.example" in shown(_captions(at))
    assert "administrator" not in _captions(at)
    assert at.sidebar.radio(key="dataset_choice") is not None  # the app itself is drawn
    assert any(b.label == "Sign out" for b in at.sidebar.button)


def test_admins_are_named_by_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("COHORTSHIELD_ADMINS", "root@hospital.example, ann@hospital.example")
    at = AppTest.from_string(GATE_ONLY, default_timeout=60)
    at.secrets["auth"] = AUTH
    at.user = _signed_in("Ann@hospital.example")
    at.run()
    assert "admin=True" in at.markdown[0].value
    at.user = _signed_in("bob@hospital.example")
    at.run()
    assert "admin=False" in at.markdown[0].value


def test_local_mode_is_single_user_and_says_so() -> None:
    at = AppTest.from_string(GATE_ONLY, default_timeout=60)
    at.run()
    assert "Single-user mode, localhost" in _captions(at)
    assert f"page drawn for local:{log.os_user()}, admin=True" in at.markdown[0].value


def test_trusted_header_mode(header_mode) -> None:
    at = AppTest.from_string(GATE_ONLY, default_timeout=60)
    at.user = {"email": None}  # the proxy sent no header
    at.run()
    assert not at.markdown and "No signed-in user" in at.error[0].value
    at.user = {"email": "bob@hospital.example"}
    at.run()
    assert "page drawn for bob@hospital.example" in at.markdown[0].value
    assert "Signed in as bob@hospital.example" in shown(_captions(at))


def test_a_download_writes_its_entry_when_its_bytes_are_built(audit_log) -> None:
    from ui.downloads import audited

    session: list = []
    context = {"user": "ann", "study": "abc", "release": "r1", "adversary": "a", "k": 5, "session": session}
    built = audited(lambda: b"released,rows\n", "release file", "r1_release.csv", context)
    before = len(log.entries(audit_log))
    assert len(log.entries(audit_log)) == before  # nothing until clicked
    assert built() == b"released,rows\n"
    entry = log.entries(audit_log)[-1]
    assert entry == session[-1] and len(log.entries(audit_log)) == before + 2  # begin, then done
    assert entry["sha256"] == hashlib.sha256(b"released,rows\n").hexdigest()
    assert (entry["user"], entry["what"], entry["file_name"], entry["release"], entry["k"]) == (
        "ann",
        "release file",
        "r1_release.csv",
        "r1",
        5,
    )
    assert audit_verify.verify(audit_log).ok


def test_the_audit_page_lists_every_entry_and_verifies_the_chain(audit_log) -> None:
    log.append("bundle", "cohortshield_release.zip", b"zip", user="ann", k=5)
    text = (
        "import streamlit as st\nfrom ui import auth\nfrom ui.context import SIDEBAR_RAN\nuser = auth.gate()\n"
        "st.session_state[SIDEBAR_RAN] = True\n"  # as app.py's sidebar marks it: no deep-link recovery
        f"st.navigation([st.Page({str(ROOT / 'pages/audit.py')!r})]).run()\n"
    )
    at = AppTest.from_string(text, default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    frame = at.dataframe[0].value
    assert "cohortshield_release.zip" in set(frame["file_name"])
    at.button(key="audit_verify").click().run()
    assert "audit log intact" in at.success[0].value
