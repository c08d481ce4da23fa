"""Identities that cannot be claimed (issue 40, findings 3, 4 and a low one; ui/auth.py).

- OIDC: the user is the token's issuer and subject (`oidc:<iss>#<sub>`); the e-mail names the user
  (and matches COHORTSHIELD_ADMINS) only when `email_verified`; a `name` claim never does.
- Header mode: the proxy's header is believed only from COHORTSHIELD_TRUSTED_PROXIES, and the app
  serves no page in header mode on a non-loopback `server.address` without that setting.
- Users are namespaced by mode: a header user named `local:<OS user>` is not the single user.
- Sign out revokes the cookie's ID token (the store's revocation list): the same token signs no one
  in again (tests/test_e2e_signout_replay.py replays the cookie in a browser).

Each AppTest runs the gate and reports the user and whether the study store (ui/resume.py's key)
holds a record for them; `peer` fakes the connection's address as Streamlit reports it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from apptest_support import shown
from streamlit import config
from streamlit.testing.v1 import AppTest

from engine.audit.log import os_user
from engine.io import deployment
from engine.io.errors import UserError
from ui import auth

PROXIES = "COHORTSHIELD_TRUSTED_PROXIES"
ISSUER = "https://login.hospital.example"
AUTH = {
    "redirect_uri": "http://localhost:8501/oauth2callback",
    "cookie_secret": "test-secret-not-used",
    "client_id": "cohortshield",
    "client_secret": "x",
    "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration",
}
IAT = 1_800_000_000  # the token's issue time (ui.auth.token_id needs one)
ADMIN = {"is_logged_in": True, "iss": ISSUER, "iat": IAT, "sub": "s-admin", "email": "admin@hospital.example"}
ADMIN_VERIFIED = ADMIN | {"email_verified": True}

GATE = """
import streamlit as st
from unittest import mock
import streamlit.runtime.context as context
from ui import auth, resume

peer = {peer!r}
with mock.patch.object(context, "_get_client_context", return_value=mock.Mock(remote_ip=peer, cookies={{}}, headers={{}})):
    user = auth.gate()
st.write(f"key={{auth.current_user()}} admin={{user.admin}}")
if st.session_state.get("save"):
    resume._store().save(resume._user(), None, {{"dataset_choice": "Upload"}}, {{"cohort": ("c.csv", b"x")}})
stored = resume._store().summary(resume._user())
st.write(f"stored={{stored is not None}}")
"""


def _app(peer: str | None = None) -> AppTest:
    return AppTest.from_string(GATE.format(peer=peer), default_timeout=60)


def _said(at: AppTest) -> str:
    assert not at.exception, [e.value for e in at.exception]
    return shown(
        "\n".join(m.value for m in at.markdown) + "\n" + "\n".join(c.value for c in at.sidebar.caption)
    )


def _oidc(user: dict, *, save: bool = False) -> AppTest:
    at = _app()
    at.secrets["auth"] = AUTH
    at.user = user
    at.session_state["save"] = save
    at.run()
    return at


@pytest.fixture
def own_store(tmp_path, monkeypatch) -> None:
    """A store of this test's own (ui/resume.py opens one per location)."""
    monkeypatch.setenv("COHORTSHIELD_STORE", str(tmp_path / "store.sqlite3"))


@pytest.fixture
def header_mode() -> Iterator[None]:
    before = config.get_option("server.trustedUserHeaders"), config.get_option("server.address")
    config.set_option("server.trustedUserHeaders", {"X-Forwarded-User": "email"})
    yield
    config.set_option("server.trustedUserHeaders", before[0])
    config.set_option("server.address", before[1])


# ------------------------------------------------------------------------------------ finding 3: OIDC
def test_a_name_claim_equal_to_the_admins_address_is_neither_the_admin_nor_their_study(
    own_store, monkeypatch
) -> None:
    monkeypatch.setenv("COHORTSHIELD_ADMINS", "admin@hospital.example")
    admin = _oidc(ADMIN_VERIFIED, save=True)
    assert "admin=True" in _said(admin) and "stored=True" in _said(admin)

    mallory = _oidc(
        {
            "is_logged_in": True,
            "iss": ISSUER,
            "iat": IAT,
            "sub": "s-mallory",
            "name": "admin@hospital.example",
        }
    )
    said = _said(mallory)
    assert "admin=False" in said
    assert "stored=False" in said  # not offered the administrator's study
    assert "admin@" not in said and "administrator" not in said
    assert f"key=oidc:{ISSUER}#s-mallory" in said


@pytest.mark.parametrize("verified", [False, None, "false"])
def test_an_unverified_email_is_not_the_user(own_store, monkeypatch, verified) -> None:
    monkeypatch.setenv("COHORTSHIELD_ADMINS", "admin@hospital.example")
    _oidc(ADMIN_VERIFIED, save=True)
    claims = {
        "is_logged_in": True,
        "iss": ISSUER,
        "iat": IAT,
        "sub": "s-mallory",
        "email": "admin@hospital.example",
    }
    if verified is not None:
        claims["email_verified"] = verified
    said = _said(_oidc(claims))
    assert "admin=False" in said and "stored=False" in said
    assert "Signed in as admin@" not in said


def test_the_verified_email_names_the_user_and_the_key_stays_issuer_and_subject(
    own_store, monkeypatch
) -> None:
    monkeypatch.setenv("COHORTSHIELD_ADMINS", "Admin@Hospital.example")
    at = _oidc(ADMIN_VERIFIED, save=True)
    said = _said(at)
    assert f"key=oidc:{ISSUER}#s-admin admin=True" in said
    assert "Signed in as admin@hospital.example (administrator)" in said
    # the same e-mail address at another issuer is another user: another key, another study
    other = _said(_oidc(ADMIN_VERIFIED | {"iss": "https://other.example"}))
    assert "key=oidc:https://other.example#s-admin" in other and "stored=False" in other
    # a changed e-mail keeps the subject's study
    assert "stored=True" in _said(_oidc(ADMIN_VERIFIED | {"email": "renamed@hospital.example"}))


def test_administrators_can_be_named_by_their_key(monkeypatch) -> None:
    monkeypatch.setenv("COHORTSHIELD_ADMINS", f"oidc:{ISSUER}#s-root")
    assert "admin=True" in _said(_oidc({"is_logged_in": True, "iss": ISSUER, "iat": IAT, "sub": "s-root"}))
    assert "admin=False" in _said(_oidc({"is_logged_in": True, "iss": ISSUER, "iat": IAT, "sub": "S-ROOT"}))


def test_a_token_without_issuer_or_subject_signs_no_one_in() -> None:
    at = _oidc({"is_logged_in": True, "iat": IAT, "email": "ann@hospital.example", "email_verified": True})
    assert not at.markdown
    assert "issuer" in shown(at.error[0].value) and "subject" in shown(at.error[0].value)
    at = _oidc({"is_logged_in": True, "iss": ISSUER, "sub": "s-ann"})
    assert not at.markdown and "issue time (iat)" in shown(at.error[0].value)


# ------------------------------------------------------------------------------------ low: namespaces
def test_a_header_user_named_like_the_local_user_is_not_the_local_user(own_store, header_mode) -> None:
    config.set_option("server.trustedUserHeaders", {})
    local = _app()
    local.session_state["save"] = True
    local.run()
    assert "stored=True" in _said(local)

    config.set_option("server.trustedUserHeaders", {"X-Forwarded-User": "email"})
    at = _app()
    at.user = {"email": f"local:{os_user()}"}
    at.run()
    said = _said(at)
    assert f"key=header:local:{os_user()}" in said and "stored=False" in said and "admin=False" in said


# ------------------------------------------------------------------------------------ finding 4: header
def _header(peer: str | None, name: str = "admin@hospital.example") -> AppTest:
    at = _app(peer)
    at.user = {"email": name}
    at.run()
    return at


def test_a_forged_header_sent_around_the_proxy_is_refused(header_mode, monkeypatch, capsys) -> None:
    monkeypatch.setenv("COHORTSHIELD_ADMINS", "admin@hospital.example")
    monkeypatch.delenv(PROXIES, raising=False)
    monkeypatch.setattr(auth, "_LOGGED", set())
    config.set_option("server.address", "0.0.0.0")
    at = _header("198.51.100.7")
    assert not at.markdown  # no page
    assert PROXIES in shown(at.error[0].value) and "0.0.0.0" in shown(at.error[0].value)
    logged = capsys.readouterr().err
    assert "cohortshield: sign-in: The server listens on 0.0.0.0" in logged and PROXIES in logged
    _header("198.51.100.7")
    assert "cohortshield: sign-in:" not in capsys.readouterr().err  # once per message

    monkeypatch.setenv(PROXIES, "192.0.2.10, 2001:db8::/64")
    at = _header("198.51.100.7")
    assert not at.markdown and "198.51.100.7" in shown(at.error[0].value)
    assert "key=header:admin@hospital.example admin=True" in _said(_header("192.0.2.10"))
    assert "admin=True" in _said(_header("2001:db8::5"))
    assert not _header(None).markdown  # a loopback client is not the proxy 192.0.2.10


def test_a_proxy_on_loopback(header_mode, monkeypatch) -> None:
    """Streamlit reports a loopback peer (127.0.0.1, ::1) as None."""
    config.set_option("server.address", "0.0.0.0")
    monkeypatch.setenv(PROXIES, "127.0.0.1")
    assert "key=header:bob" in _said(_header(None, "bob"))
    assert not _header("192.0.2.2", "bob").markdown
    # a server on localhost only: every client is on this machine, as before
    monkeypatch.delenv(PROXIES)
    config.set_option("server.address", "localhost")
    assert "key=header:bob" in _said(_header(None, "bob"))


def test_a_misspelt_proxy_address_is_named(header_mode, monkeypatch) -> None:
    monkeypatch.setenv(PROXIES, "192.0.2.10,proxy.hospital")
    at = _header(None)
    assert not at.markdown and "'proxy.hospital'" in shown(at.error[0].value)
    with pytest.raises(UserError, match=r"proxy\.hospital"):
        deployment.trusted_proxies()


@pytest.mark.parametrize(
    ("peer", "proxies", "trusted"),
    [
        ("192.0.2.10", "192.0.2.10", True),
        ("192.0.2.11", "192.0.2.10", False),
        ("192.0.2.11", "192.0.2.0/24", True),
        ("::ffff:192.0.2.11", "192.0.2.0/24", True),  # an IPv4 peer on a dual-stack socket
        (None, "127.0.0.1", True),
        (None, "::1", True),
        (None, "192.0.2.10", False),
        ("127.0.0.2", "127.0.0.1", False),
        ("not an address", "0.0.0.0/0", False),
    ],
)
def test_peer_is_proxy(peer, proxies, trusted) -> None:
    assert deployment.peer_is_proxy(peer, deployment.parse_proxies(proxies)) is trusted


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("::1", True),
        ("", False),
        ("0.0.0.0", False),
        ("::", False),
        ("192.0.2.2", False),
        ("cohortshield.hospital.example", False),
    ],
)
def test_loopback_server_address(address, loopback) -> None:
    assert deployment.loopback_address(address) is loopback


# ------------------------------------------------------------------------------------ sign-out
def test_sign_out_revokes_the_token_and_a_new_sign_in_is_another_token(own_store) -> None:
    alice = {"is_logged_in": True, "iss": ISSUER, "sub": "s-alice", "iat": IAT, "nonce": "n1"}
    at = _oidc(alice)
    assert "key=oidc:" in _said(at)
    at.sidebar.button(key="auth_sign_out").click().run()
    at.run()  # the same cookie (its token) again
    assert not at.markdown and [b.label for b in at.button] == ["Sign in"]
    assert "key=oidc:" in _said(_oidc(alice | {"iat": IAT + 60, "nonce": "n2"}))  # signed in again
    assert auth.token_id(alice) != auth.token_id(alice | {"nonce": "n2"})


def test_an_unreadable_revocation_list_signs_no_one_in(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "open"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)  # the store refuses a folder others can read
    monkeypatch.setenv("COHORTSHIELD_STORE", str(folder / "store.sqlite3"))
    at = _oidc({"is_logged_in": True, "iss": ISSUER, "sub": "s-alice", "iat": IAT})
    assert not at.markdown and "readable by others" in shown(at.error[0].value)
