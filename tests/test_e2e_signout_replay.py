"""A sign-in cookie replayed after sign-out signs no one in (issue 40; ui/auth.py, engine/store).

Streamlit 1.67's `st.logout` only deletes the browser's `_streamlit_user` cookie: the cookie is signed
but holds no server state, so a copy taken before the sign-out (another tab, a stolen cookie) kept
signing in for 30 days. The app's Sign out now puts the cookie's ID token on the store's revocation
list first, and the gate refuses a revoked token.

A one-line page behind `ui.auth.gate()` with sign-in at `oidc-provider-mock` on 127.0.0.1
(tests/oidc_support.py): "alice" signs in, her cookies are copied, she signs out; a fresh browser
context holding the copied cookies gets only the sign-in button.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from browser_support import GUARDED_LAUNCHER, ROOT, WAIT_MS, chromium, free_port, require_browser, served_app
from oidc_support import oidc_provider, signin_folder

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("browser")]

PAGE = "import streamlit as st\nfrom ui import auth\nauth.gate()\nst.write(f'page drawn for {auth.current_user()}')\n"


def _signed_in_as_alice(page) -> None:
    from playwright.sync_api import expect

    expect(page.get_by_text(re.compile(r"page drawn for oidc:.*#alice"))).to_be_visible(timeout=WAIT_MS)


def _only_the_sign_in(page) -> None:
    from playwright.sync_api import expect

    shown = page.get_by_role("button", name="Sign in").or_(page.get_by_text("page drawn for")).first
    expect(shown).to_be_visible(timeout=WAIT_MS)
    body = page.locator("body").inner_text()
    assert "page drawn for" not in body and "Sign in" in body, body


def _alice_signs_in(browser, url: str, issuer: str):
    """(context, page, her sign-in cookies) once "alice" signed in at the provider `issuer`."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(url)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(re.escape(issuer) + r"/oauth2/authorize\?"), timeout=WAIT_MS)
    page.get_by_placeholder("sub").fill("alice")
    page.get_by_role("button", name="Authorize").click()
    _signed_in_as_alice(page)
    copied = [c for c in context.cookies() if c["name"].startswith("_streamlit_user")]
    assert copied
    return context, page, copied


def _replayed_signs_no_one_in(browser, url: str, copied: list) -> None:
    """A fresh browser context holding the copied cookies gets only the sign-in button."""
    replay = browser.new_context()
    replay.add_cookies(copied)
    again = replay.new_page()
    again.goto(url)
    _only_the_sign_in(again)
    replay.close()


def test_a_cookie_replayed_after_sign_out_signs_no_one_in(tmp_path: Path) -> None:
    require_browser()
    alice = ("alice", {"email": "alice@hospital.example", "email_verified": True})
    with oidc_provider([alice]) as issuer:
        port = free_port()
        folder = signin_folder(tmp_path / "app", port, issuer)
        (folder / "page.py").write_text(PAGE)
        env = {k: v for k, v in os.environ.items() if k != "COHORTSHIELD_ADMINS"} | {"PYTHONPATH": str(ROOT)}
        log = tmp_path / "streamlit.log"
        with (
            served_app(port, log, cwd=folder, env=env, script=folder / "page.py") as url,
            chromium() as browser,
        ):
            context, page, copied = _alice_signs_in(browser, url, issuer)

            # the copy signs in while alice is signed in (another tab, the same cookie)
            other = browser.new_context()
            other.add_cookies(copied)
            tab = other.new_page()
            tab.goto(url)
            _signed_in_as_alice(tab)
            other.close()

            page.get_by_role("button", name="Sign out").click()
            page.wait_for_url(re.compile(re.escape(issuer) + r"/oauth2/end_session\?"), timeout=WAIT_MS)
            page.get_by_role("button", name="End session").click()
            _only_the_sign_in(page)
            context.close()

            _replayed_signs_no_one_in(browser, url, copied)


def test_a_cookie_replayed_after_streamlits_own_logout_route_signs_no_one_in(tmp_path: Path) -> None:
    """Issue 40: leaving through Streamlit's own `/auth/logout` (typed, a bookmark) only deleted the
    browser's cookie, and a copy kept signing in for the sign-in's 8 hours. The guard now puts the
    cookie on the revocation list as the request passes."""
    require_browser()
    alice = ("alice", {"email": "alice@hospital.example", "email_verified": True})
    with oidc_provider([alice]) as issuer:
        port = free_port()
        folder = signin_folder(tmp_path / "app", port, issuer)
        (folder / "page.py").write_text(PAGE)
        (folder / "launcher.py").write_text(GUARDED_LAUNCHER)
        env = {k: v for k, v in os.environ.items() if k != "COHORTSHIELD_ADMINS"} | {"PYTHONPATH": str(ROOT)}
        with (
            served_app(
                port, tmp_path / "streamlit.log", cwd=folder, env=env, script=folder / "launcher.py"
            ) as url,
            chromium() as browser,
        ):
            context, page, copied = _alice_signs_in(browser, url, issuer)

            page.goto(url + "/auth/logout")
            page.wait_for_load_state()
            context.close()

            _replayed_signs_no_one_in(browser, url, copied)
