"""Who is using the app (issue 25): one gate, called first by app.py on every run, so that no page is
drawn for a session without a user. Three modes, decided by the server's settings:

- `oidc`: `.streamlit/secrets.toml` has an `[auth]` section. Streamlit's `st.login` signs the user in
  at the OpenID Connect provider; until `st.user.is_logged_in`, the app shows only a sign-in button.
  Sign out puts the cookie's ID token on the store's revocation list (`token_id`) before `st.logout`,
  which only deletes the browser's cookie: a copy of the cookie then signs no one in (issue 40).
  A sign-in lasts `COHORTSHIELD_SIGNIN_SECONDS` (default 8 hours) from its ID token's `iat`, not the
  30 days of Streamlit's cookie (which has no setting): the gate asks for a new sign-in after that,
  and ui/media_guard.py sets the cookie's `Max-Age` to it.
- `header`: `server.trustedUserHeaders` maps a header of the reverse proxy that authenticated the user
  (e.g. `{"X-Forwarded-User" = "email"}`); the user is that `st.user` key (`st.context.headers` as a
  fallback). A session without the header gets no page. The proxy must strip the header from the
  client's requests (docs/deployment.md), and the header is believed only from the proxy (issue 40,
  finding 4): from a peer in `COHORTSHIELD_TRUSTED_PROXIES` (addresses or networks, comma-separated),
  or, without that setting, on a server bound to loopback only; on any other `server.address` the
  gate refuses every session until the setting is made.
- `local`: neither is set: single-user mode, for `make run` (bound to localhost by
  .streamlit/config.toml). A client connecting from another machine (`st.context.ip_address` not
  loopback) gets no page.

Every user has a key (`User.key`: the store's record and the audit log's user), namespaced by mode so
that no name claimed in one mode equals a key of another (issue 40, low finding):
`oidc:<iss>#<sub>` (the ID token's issuer and subject, never a claim the user can edit: finding 3),
`header:<value>` and `local:<OS user>`. The name shown is the token's `email` only when
`email_verified` is true (else the key), the header's value, or the OS user.

Administrators (`is_admin`): `COHORTSHIELD_ADMINS` (comma-separated) names them by key (exact), by a
verified e-mail address (OIDC) or by the header's value (case is ignored for those two); in local mode
the single user is one.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import streamlit as st

from engine.io.deployment import PROXIES_ENV, loopback_address, peer_is_proxy, trusted_proxies
from engine.io.download_grants import GRANTS, credential
from engine.io.errors import UserError
from engine.io.lifetimes import SIGNIN_ENV, signin_expired, signin_seconds
from ui import state
from ui.state import ABSENT

ADMINS_ENV = "COHORTSHIELD_ADMINS"
USER_KEY = "_auth_user"  # the run's User, for ui/downloads.py and the pages
state.declare(__name__, held={USER_KEY: ABSENT})


@dataclass(frozen=True)
class User:
    key: str  # `<mode>:...` (module docstring): the store's and the audit log's user
    name: str  # shown in the sidebar
    mode: str  # "oidc", "header" or "local"
    admin: bool


def admins() -> set[str]:
    return {a.strip() for a in os.environ.get(ADMINS_ENV, "").split(",") if a.strip()}


def _is_admin(key: str, name: str | None) -> bool:
    """Named in COHORTSHIELD_ADMINS by its key (exact) or by `name` (an attested e-mail or header
    value, case ignored)."""
    named = admins()
    return key in named or (name is not None and name.lower() in {a.lower() for a in named})


def mode() -> str:
    """`oidc`, `header` or `local` (module docstring)."""
    try:
        if st.secrets.get("auth"):
            return "oidc"
    except FileNotFoundError:  # no secrets.toml at all
        pass
    if st.config.get_option("server.trustedUserHeaders"):
        return "header"
    return "local"


# ------------------------------------------------------------------------------------ OIDC
def oidc_identity(claims: Mapping[str, Any]) -> tuple[str, str | None]:
    """(key, verified e-mail or None) of a signed-in user's ID-token claims (issue 40, finding 3): the
    key is `oidc:<iss>#<sub>`, the pair OIDC Core 1.0 section 5.7 names as the only stable identifier;
    `email` counts only with `email_verified` true, and `name` never. UserError without `iss`/`sub`."""
    iss, sub = claims.get("iss"), claims.get("sub")
    if not iss or not sub:
        raise UserError(
            "the identity provider's token names no issuer (iss) or subject (sub): no one is signed in"
        )
    email = claims.get("email")
    verified = claims.get("email_verified") is True or str(claims.get("email_verified")).lower() == "true"
    return f"oidc:{iss}#{sub}", (str(email) if email and verified else None)


def token_id(claims: Mapping[str, Any]) -> str:
    """The id of the ID token a sign-in cookie holds, for the store's revocation list (issue 40: a
    cookie replayed after sign-out): sha256 of its issuer, subject, issue time, nonce and `jti`, which
    differ at every sign-in. UserError without `iat` (OIDC Core 1.0 section 2 requires it)."""
    if claims.get("iat") is None:
        raise UserError("the identity provider's token has no issue time (iat): no one is signed in")
    fields = [claims.get(name) for name in ("iss", "sub", "iat", "nonce", "jti")]
    return hashlib.sha256(json.dumps(fields, default=str).encode()).hexdigest()


def cookie_revocation(credential: str) -> str:
    """The revocation list's entry for a sign-in cookie signed out through Streamlit's own
    `/auth/logout` (ui/media_guard.py sees only the cookie there, not its claims): its credential
    (`download_grants.credential`)."""
    return f"cookie:{credential}"


def _oidc_user() -> User | None:
    """The signed-in user, or None: not signed in, or signed in with a token revoked at sign-out."""
    info = st.user.to_dict()
    if not info.get("is_logged_in"):
        return None
    key, email = oidc_identity(info)
    from ui.server_store import shared_store

    store = shared_store()
    if store.revoked(token_id(info)) or store.revoked(cookie_revocation(session_credential())):
        return None
    if signin_expired(info.get("iat"), time.time()):  # issue 40: not Streamlit's 30 days
        return None
    return User(key, email or key, "oidc", _is_admin(key, email))


def _expired_note() -> str:
    hours, rest = divmod(int(signin_seconds()), 3600)
    return (
        f"Your last sign-in is older than {hours} h {rest // 60} min ({SIGNIN_ENV}) or was signed out: "
        "sign in again."
    )


def revoke_sign_in(entry: Callable[[], str], held: str) -> None:
    """A sign-out: `entry()` (the revocation list's entry of the sign-in: `token_id` of its claims, or
    `cookie_revocation` of its cookie) goes on the store's revocation list, and the downloads granted to
    its credential `held` are dropped (ui/media_guard.py). A revocation that cannot be written is
    logged; the sign-out goes on."""
    from ui.server_store import shared_store

    try:
        shared_store().revoke(entry())
    except UserError as exc:
        print(f"cohortshield: sign-out: the sign-in could not be revoked: {exc}", file=sys.stderr)
    GRANTS.revoke(held)


def _sign_out() -> None:
    """The sidebar's Sign out: the cookie's token goes on the revocation list (`revoke_sign_in`), then
    Streamlit signs out (which only deletes this browser's cookie)."""
    revoke_sign_in(lambda: token_id(st.user.to_dict()), session_credential())
    st.logout()


# ------------------------------------------------------------------------------------ header
def _peer() -> str | None:
    """The connection's peer (`st.context.ip_address`: None for loopback); None also without a
    client (AppTest), as Streamlit itself reports it."""
    ip = st.context.ip_address
    return ip if isinstance(ip, str) and ip else None


def _proxy_refusal(peer: str | None) -> str | None:
    """Why a header from `peer` (None: loopback) cannot be believed (module docstring), or None."""
    try:
        proxies = trusted_proxies()
    except UserError as exc:
        return str(exc)
    address = str(st.config.get_option("server.address") or "")
    if not proxies:
        if loopback_address(address):
            return None
        return (
            f"The server listens on {address or 'every address'} and takes the user from a proxy's header, "
            f"but {PROXIES_ENV} names no proxy: any client could send the header. Set it to the proxy's "
            "address (docs/deployment.md) or bind the server to localhost."
        )
    if peer_is_proxy(peer, proxies):
        return None
    return (
        f"This connection comes from {peer or 'this machine (loopback)'}, not from a proxy named by "
        f"{PROXIES_ENV}: its user header is not believed. Open the app through the proxy's address."
    )


def peer_refusal(peer: str | None) -> str | None:
    """Why a request from `peer` (None: loopback) is refused whoever it claims to be, or None: in local
    mode any peer but loopback, in header mode a peer that is not the trusted proxy (`_proxy_refusal`).
    The gate's rule, for the download guard too (ui/media_guard.py)."""
    how = mode()
    if how == "header":
        return _proxy_refusal(peer)
    if how == "local" and peer is not None:
        address = str(st.config.get_option("server.address") or "")
        return (
            f"Sign-in is not configured, and the server listens on {address or 'every address'}: "
            "single-user mode serves localhost only. Configure sign-in (docs/deployment.md) or bind "
            "the server to localhost."
        )
    return None


def user_headers() -> list[str]:
    """The headers `server.trustedUserHeaders` names (header mode)."""
    return list((st.config.get_option("server.trustedUserHeaders") or {}).keys())


def session_credential() -> str:
    """The running session's sign-in, as its websocket carried it (`download_grants.credential`):
    the owner of its downloads (ui/media_guard.py)."""
    return credential(dict(st.context.cookies), dict(st.context.headers), user_headers())


def _header_user() -> User | None:
    mapping: dict = st.config.get_option("server.trustedUserHeaders") or {}
    info = st.user.to_dict()
    for header, key in mapping.items():
        value = info.get(key) or st.context.headers.get(header)
        if value:
            return User(f"header:{value}", str(value), "header", _is_admin(f"header:{value}", str(value)))
    return None


def _local_user() -> User:
    from engine.audit.log import os_user

    key = f"local:{os_user()}"
    return User(key, key, "local", True)


_LOGGED: set[str] = set()


def _refuse(message: str, sign_out: bool = False) -> NoReturn:
    """The gate's refusal: on the page (with a sign-out button when asked), once per message in the
    server's log, and no page."""
    from ui import literal

    if message not in _LOGGED:
        _LOGGED.add(message)
        print(f"cohortshield: sign-in: {message}", file=sys.stderr)
    st.title("CohortShield")
    literal.error(message)
    if sign_out:
        st.button("Sign out", key="auth_sign_out", on_click=st.logout)
    _no_page()


def gate() -> User:
    """The session's user, shown in the sidebar; without one, a sign-in (or a refusal) and `st.stop()`."""
    how = mode()
    user: User | None
    if how == "oidc":
        try:
            user = _oidc_user()
        except UserError as exc:
            _refuse(str(exc), sign_out=True)
        if user is None:
            st.title("CohortShield")
            st.info("Sign in to use CohortShield: this server holds patient data and keeps an audit log.")
            if st.user.to_dict().get("is_logged_in"):  # a sign-in past its lifetime (or revoked)
                st.caption(_expired_note())
            st.button("Sign in", type="primary", key="auth_sign_in", on_click=st.login)
            _no_page()
    elif how == "header":
        refusal = _proxy_refusal(_peer())
        if refusal is not None:
            _refuse(refusal)
        user = _header_user()
        if user is None:
            st.title("CohortShield")
            st.error(
                "No signed-in user: this server takes the user from its reverse proxy's header, and the "
                "request carried none. Open the app through the proxy's address."
            )
            _no_page()
    else:
        refusal = peer_refusal(_peer())  # a client on another machine
        if refusal is not None:
            st.title("CohortShield")
            st.error(refusal)
            _no_page()
        user = _local_user()
    assert user is not None
    st.session_state[USER_KEY] = user
    _show(user)
    return user


def _signed_out() -> None:
    """The one page of a run without a user (`_no_page`); never run: the gate has drawn the refusal."""


def _no_page() -> NoReturn:
    """End a run without a user. Until some session's app.py has called `st.navigation`, Streamlit 1.67
    serves the app in its legacy `pages/` mode (ui/context.py), which lists every file of pages/ in the
    sidebar: replace that list by a hidden one-page navigation, so that the refusal is all that shows.
    Only then: once the legacy mode is off, a navigation here would answer a signed-out deep link
    (/risk) with Streamlit's "page not found" dialog."""
    from ui import navigation

    if not navigation.navigated():  # the app's own record of Streamlit's legacy mode (issue 38)
        navigation.navigation([st.Page(_signed_out, title="CohortShield", default=True)], position="hidden")
    st.stop()


def _show(user: User) -> None:
    side = st.sidebar.container(key="auth_who")
    if user.mode == "local":
        side.caption(f"Single-user mode, localhost ({user.name.removeprefix('local:')})")
    else:
        from ui.literal import md

        side.caption(md(f"Signed in as {user.name}" + (" (administrator)" if user.admin else "")))
        if user.mode == "oidc":
            side.button("Sign out", key="auth_sign_out", on_click=_sign_out)


def current_user() -> str:
    """The key of this run's user (`User.key`, set by `gate`): the store's record and the audit log's
    user; `local:<OS user>` when no gate ran (tests)."""
    user = st.session_state.get(USER_KEY)
    return user.key if isinstance(user, User) else _local_user().key
