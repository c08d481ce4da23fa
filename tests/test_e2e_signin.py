"""Sign-in in a browser (issue 25): `st.login` against an OpenID Connect provider this test starts on
127.0.0.1 (`oidc-provider-mock`, tests/oidc_support.py), Debian's Chromium driven by Playwright.

Without a session the app shows only the sign-in button; the provider's form signs "alice" in; back in
the app, the pages and "Signed in as <her e-mail>" are shown; a fresh browser context (no session
cookie) sees no page again; signing out ends the session.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from browser_support import WAIT_MS, act, chromium, no_exception, settle
from oidc_support import oidc_provider, signin_server

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("browser")]

ALICE = ("alice", {"email": "alice@hospital.example", "email_verified": True, "name": "Alice Example"})
# the caption as drawn: ui.literal.md puts a word joiner after "@" (no autolink)
SIGNED_IN = re.compile(r"Signed in as alice@\u2060?hospital\.example")


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    with oidc_provider([ALICE]) as issuer:
        yield issuer


@pytest.fixture(scope="module")
def server(provider: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with signin_server(tmp_path_factory.mktemp("signin"), provider) as url:
        yield url


def _shows_only_the_sign_in(page) -> None:
    """The gate's sign-in: its button and note, no navigation, no sidebar, no page."""
    from playwright.sync_api import expect

    expect(page.get_by_role("button", name="Sign in")).to_be_visible(timeout=WAIT_MS)
    settle(page)
    no_exception(page)
    expect(page.get_by_text("Sign in to use CohortShield")).to_be_visible()
    assert page.locator('[data-testid="stSidebarNav"]').count() == 0
    assert page.locator('[data-testid="stSidebar"]').count() == 0
    assert page.get_by_role("heading", name="Cohort", exact=True).count() == 0
    assert page.locator('[data-testid="stMetric"]').count() == 0
    assert page.get_by_text("Signed in as").count() == 0


def test_sign_in_at_the_provider_shows_the_pages_and_the_user(server: str, provider: str) -> None:
    from playwright.sync_api import expect

    with chromium() as browser:
        context = browser.new_context()
        page = context.new_page()
        page.goto(server)
        _shows_only_the_sign_in(page)

        # the provider's login form, on its own address
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(re.compile(re.escape(provider) + r"/oauth2/authorize\?"), timeout=WAIT_MS)
        page.get_by_placeholder("sub").fill("alice")
        page.get_by_role("button", name="Authorize").click()

        # back in the app, signed in: the pages and who
        page.wait_for_url(re.compile(re.escape(server) + r"/?(\?.*)?$"), timeout=WAIT_MS)
        sidebar = page.locator('[data-testid="stSidebar"]')
        expect(sidebar.get_by_text(SIGNED_IN)).to_be_visible(timeout=WAIT_MS)
        expect(page.get_by_role("heading", name="Cohort").first).to_be_visible(timeout=WAIT_MS)
        nav = page.locator('[data-testid="stSidebarNav"]')
        expect(nav.get_by_text("Risk", exact=True)).to_be_visible()
        assert nav.get_by_text("Audit log", exact=True).count() == 0  # alice is no administrator
        settle(page)
        no_exception(page)
        assert "_streamlit_user" in {c["name"] for c in context.cookies()}

        # another page of the app keeps the user
        act(page, nav.get_by_text("Risk", exact=True).click)
        expect(page.get_by_role("heading", name="Risk").first).to_be_visible(timeout=WAIT_MS)
        expect(sidebar.get_by_text(SIGNED_IN)).to_be_visible()
        no_exception(page)

        # a fresh context, without the session cookie, sees no page (nor by a page's own address)
        stranger = browser.new_context()
        other = stranger.new_page()
        other.goto(server)
        _shows_only_the_sign_in(other)
        other.goto(f"{server}/risk")
        _shows_only_the_sign_in(other)
        stranger.close()

        # signing out ends the session (Streamlit ends it at the provider too: its end-session form)
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url(re.compile(re.escape(provider) + r"/oauth2/end_session\?"), timeout=WAIT_MS)
        page.get_by_role("button", name="End session").click()
        _shows_only_the_sign_in(page)
        assert "_streamlit_user" not in {c["name"] for c in context.cookies()}
        page.goto(server)
        _shows_only_the_sign_in(page)
        context.close()
