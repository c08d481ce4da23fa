"""Browser end-to-end: a reload offers the study back (issue 25, "Work that survives a reload").

Its own `streamlit run app.py` (tests/browser_support.py) with `COHORTSHIELD_STORE` in a temporary
folder, so that no other test's study is offered: on the shipped sample, add a GCCens release on the
Anonymize page ("Add to study"), change k in the sidebar, reload the page (a real F5: a new Streamlit
session of the same user), see "Resume your study ...: 1 release", click Resume, and see the release
rebuilt and verified again, listed on the Report page, and k back in the sidebar.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import WAIT_MS, act, chromium, enter_number, no_exception, runs, settle

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("browser")]

RELEASE = "GCCens k=5"
K = 7


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A server of this test's own, its study store in a temporary folder (never the session's)."""
    from browser_support import streamlit_server

    tmp = tmp_path_factory.mktemp("resume")
    store = tmp / "store.sqlite3"
    with streamlit_server(tmp, env={"COHORTSHIELD_STORE": str(store)}) as url:
        yield url, store


def _ok(page) -> None:
    settle(page, WAIT_MS)
    no_exception(page)


def _open(page, title: str) -> None:
    """Open a page from the sidebar's navigation (clicked again when a click during a run was lost)."""
    from playwright.sync_api import expect

    heading = page.get_by_role("heading", name=title).first
    nav = page.locator('[data-testid="stSidebarNav"]')
    for _ in range(3):
        _ok(page)
        before = runs(page)
        nav.get_by_text(title, exact=True).click()
        try:
            expect(heading).to_be_visible(timeout=WAIT_MS // 4)
            settle(page, WAIT_MS, since=before)
            break
        except AssertionError:
            continue
    expect(heading).to_be_visible(timeout=WAIT_MS)
    _ok(page)


def test_a_reload_offers_the_study_back(server: tuple[str, Path]) -> None:
    from playwright.sync_api import expect

    url, store = server
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1440, "height": 1400})
        context.set_default_timeout(WAIT_MS)
        page = context.new_page()
        page.goto(url)
        expect(page.get_by_role("heading", name="Cohort").first).to_be_visible(timeout=WAIT_MS)
        _ok(page)
        # a fresh store: nothing to resume
        assert page.get_by_text("Resume your study", exact=False).count() == 0

        _open(page, "Anonymize")
        act(page, page.locator(".st-key-gcc_study_add button").click)
        expect(page.get_by_text(f"Added '{RELEASE}' to the study", exact=False)).to_be_visible(
            timeout=WAIT_MS
        )
        _ok(page)
        sidebar = page.locator('[data-testid="stSidebar"]')
        k_field = sidebar.get_by_test_id("stNumberInputField")
        enter_number(page, k_field, K)
        expect(page.get_by_text(re.compile(rf"k = {K}\b")).first).to_be_visible(timeout=WAIT_MS)
        _ok(page)
        assert store.is_file() and store.stat().st_size > 0  # saved on the server

        page.reload()  # F5: a new session of the same user
        offer = page.locator(".st-key-resume_offer")
        expect(offer).to_be_visible(timeout=WAIT_MS)
        expect(offer.get_by_text(re.compile(r"Resume your study from .*: 1 release\b"))).to_be_visible()
        _ok(page)
        # before the answer the session is the default one: k is not yet the stored k
        assert k_field.input_value() != str(K)

        act(page, page.locator(".st-key-resume_yes button").click)
        expect(
            page.get_by_text("Resumed your study: 1 of 1 release(s) rebuilt byte-identical", exact=False)
        ).to_be_visible(timeout=WAIT_MS)
        _ok(page)
        expect(page.locator(".st-key-resume_offer")).to_have_count(0)
        expect(k_field).to_have_value(str(K), timeout=WAIT_MS)

        _open(page, "Report")
        expect(page.get_by_text(RELEASE, exact=False).first).to_be_visible(timeout=WAIT_MS)
        expect(k_field).to_have_value(str(K))
        _ok(page)
