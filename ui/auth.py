"""Who is using the app (issue 25): one gate, called first by app.py on every run, so that no page is
drawn for a session without a user. Three modes, decided by the server's settings:

- `oidc`: `.streamlit/secrets.toml` has an `[auth]` section. Streamlit's `st.login` signs the user in
  at the OpenID Connect provider; until `st.user.is_logged_in`, the app shows only a sign-in button.
  The user is `st.user.email` (else its name, else its subject).
- `header`: `server.trustedUserHeaders` maps a header of the reverse proxy that authenticated the user
  (e.g. `{"X-Forwarded-User" = "email"}`); the user is that `st.user` key (`st.context.headers` as a
  fallback). A session without the header gets no page. The proxy must strip the header from the
  client's requests (docs/deployment.md).
- `local`: neither is set: single-user mode, for `make run` (bound to localhost by
  .streamlit/config.toml). A client connecting from another machine (`st.context.ip_address` not
  loopback) gets no page. The user is `local:<OS user>`.

Administrators (`is_admin`): the users listed in `COHORTSHIELD_ADMINS` (comma-separated, as the user
appears: an e-mail address or the header's value); in local mode the single user is one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import streamlit as st

from ui import state
from ui.state import ABSENT

ADMINS_ENV = "COHORTSHIELD_ADMINS"
USER_KEY = "_auth_user"  # the run's User, for ui/downloads.py and the pages
state.declare(__name__, held={USER_KEY: ABSENT})


@dataclass(frozen=True)
class User:
    name: str
    mode: str  # "oidc", "header" or "local"
    admin: bool


def admins() -> set[str]:
    return {a.strip().lower() for a in os.environ.get(ADMINS_ENV, "").split(",") if a.strip()}


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


def _oidc_user() -> str | None:
    info = st.user.to_dict()
    if not info.get("is_logged_in"):
        return None
    return str(info.get("email") or info.get("name") or info.get("sub") or "signed-in user")


def _header_user() -> str | None:
    mapping: dict = st.config.get_option("server.trustedUserHeaders") or {}
    info = st.user.to_dict()
    for header, key in mapping.items():
        value = info.get(key) or st.context.headers.get(header)
        if value:
            return str(value)
    return None


def _local_user() -> str:
    from engine.audit.log import os_user

    return f"local:{os_user()}"


def gate() -> User:
    """The session's user, shown in the sidebar; without one, a sign-in (or a refusal) and `st.stop()`."""
    how = mode()
    if how == "oidc":
        name = _oidc_user()
        if name is None:
            st.title("CohortShield")
            st.info("Sign in to use CohortShield: this server holds patient data and keeps an audit log.")
            st.button("Sign in", type="primary", key="auth_sign_in", on_click=st.login)
            _no_page()
    elif how == "header":
        name = _header_user()
        if name is None:
            st.title("CohortShield")
            st.error(
                "No signed-in user: this server takes the user from its reverse proxy's header, and the "
                "request carried none. Open the app through the proxy's address."
            )
            _no_page()
    else:
        address = str(st.config.get_option("server.address") or "")
        ip = st.context.ip_address  # None for a loopback client
        if isinstance(ip, str) and ip:  # a client on another machine
            st.title("CohortShield")
            st.error(
                f"Sign-in is not configured, and the server listens on {address or 'every address'}: "
                "single-user mode serves localhost only. Configure sign-in (docs/deployment.md) or bind "
                "the server to localhost."
            )
            _no_page()
        name = _local_user()
    assert name is not None
    user = User(name, how, how == "local" or name.lower() in admins())
    st.session_state[USER_KEY] = user
    _show(user)
    return user


def _signed_out() -> None:
    """The one page of a run without a user (`_no_page`); never run: the gate has drawn the refusal."""


def _no_page() -> None:
    """End a run without a user. Until some session's app.py has called `st.navigation`, Streamlit 1.67
    serves the app in its legacy `pages/` mode (ui/context.py), which lists every file of pages/ in the
    sidebar: replace that list by a hidden one-page navigation, so that the refusal is all that shows.
    Only then: once the legacy mode is off, a navigation here would answer a signed-out deep link
    (/risk) with Streamlit's "page not found" dialog."""
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        st.navigation([st.Page(_signed_out, title="CohortShield", default=True)], position="hidden")
    st.stop()


def _show(user: User) -> None:
    side = st.sidebar.container(key="auth_who")
    if user.mode == "local":
        side.caption(f"Single-user mode, localhost ({user.name.removeprefix('local:')})")
    else:
        from ui.literal import md

        side.caption(md(f"Signed in as {user.name}" + (" (administrator)" if user.admin else "")))
        if user.mode == "oidc":
            side.button("Sign out", key="auth_sign_out", on_click=st.logout)


def current_user() -> str:
    """The name of this run's user (set by `gate`); `local:<OS user>` when no gate ran (tests)."""
    user = st.session_state.get(USER_KEY)
    return user.name if isinstance(user, User) else _local_user()
