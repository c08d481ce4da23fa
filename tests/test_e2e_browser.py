"""Browser end-to-end: `streamlit run app.py` on a free port, Playwright drives Debian's Chromium.

Sees the Cohort page with the sample data, switches the adversary's knowledge and k in the sidebar
and sees the page follow, opens the Risk page, and fails on any exception element.
The server and browser harness (skip without Chromium, fail on CI) is tests/browser_support.py.
"""

from __future__ import annotations

import re

import pytest
from browser_support import (
    WAIT_MS,
    act,
    choose,
    chromium,
    enter_number,
    free_port,
)
from browser_support import no_exception as _no_exception
from browser_support import settle as _settle

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("browser")]


@pytest.fixture
def server(app_server: str) -> str:
    """The session's app server (tests/conftest.py), shared with the study walk."""
    return app_server


def test_cohort_page_follows_the_sidebar(server: str) -> None:
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page()
        page.goto(server)
        expect(page.get_by_role("heading", name="Cohort").first).to_be_visible(timeout=WAIT_MS)
        metrics = page.locator('[data-testid="stMetric"]')
        expect(metrics.first).to_be_visible(timeout=WAIT_MS)
        expect(page.get_by_role("heading", name="population: population")).to_be_visible()
        expect(page.get_by_role("heading", name="cohort: cohort")).to_be_visible()
        _settle(page)
        _no_exception(page)
        patients = metrics.filter(has_text="Patients").locator('[data-testid="stMetricValue"]')
        cohort_before = patients.nth(1).inner_text()

        sidebar = page.locator('[data-testid="stSidebar"]')
        # the cohort picker by its label (the sidebar also has the sample-variant and population pickers)
        picker = sidebar.locator('[data-testid="stSelectbox"]').filter(has_text="Cohort (the data to share)")
        choose(page, picker, "biobank")
        expect(page.get_by_role("heading", name="cohort: biobank")).to_be_visible(timeout=WAIT_MS)
        # the figures follow the choice (waited for: the rerun may still be drawing them)
        expect(patients.nth(1)).not_to_have_text(cohort_before, timeout=WAIT_MS)
        _settle(page)
        _no_exception(page)

        act(page, sidebar.get_by_text("all visits", exact=True).click)
        expect(page.get_by_text("every code in their record").first).to_be_visible(timeout=WAIT_MS)
        _settle(page)
        _no_exception(page)

        enter_number(page, sidebar.get_by_test_id("stNumberInputField"), 7)
        expect(page.get_by_text(re.compile(r"k = 7\b")).first).to_be_visible(timeout=WAIT_MS)
        _settle(page)
        _no_exception(page)

        act(page, page.locator('[data-testid="stSidebarNav"]').get_by_text("Risk", exact=True).click)
        expect(page.get_by_role("heading", name="Risk").first).to_be_visible(timeout=WAIT_MS)
        _settle(page)
        _no_exception(page)
        # the choice survived the switch
        expect(sidebar.get_by_test_id("stNumberInputField")).to_have_value("7", timeout=WAIT_MS)


def test_untrusted_text_fetches_nothing(server: str) -> None:
    """Issue 12, finding 7: a code `![x](http://127.0.0.1:PORT/leak.png)` in an uploaded events file
    (and in its file name) is shown as text; the browser requests nothing from that address."""
    from playwright.sync_api import expect

    leak_port = free_port()
    leak = f"![x](http://127.0.0.1:{leak_port}/leak.png)"
    name = f"![y](http://127.0.0.1:{leak_port}/name.png).csv"
    events = f"patient_id,visit,code\nP1,1,401.1\nP2,1,{leak}\nP3,1,250.00\n".encode()
    with chromium() as browser:
        page = browser.new_page()
        fetched: list[str] = []
        page.on("request", lambda r: fetched.append(r.url) if f":{leak_port}" in r.url else None)
        page.goto(server)
        expect(page.get_by_role("heading", name="Cohort").first).to_be_visible(timeout=WAIT_MS)
        sidebar = page.locator('[data-testid="stSidebar"]')
        act(page, sidebar.get_by_text("Upload files", exact=True).click)
        act(
            page,
            lambda: sidebar.locator('input[type="file"]').first.set_input_files(
                files=[{"name": name, "mimeType": "text/csv", "buffer": events}]
            ),
        )
        alert = sidebar.locator('[data-testid="stAlert"]').filter(
            has_text="neither ICD-9-CM nor ICD-10-CM codes"
        )
        expect(alert.first).to_be_visible(timeout=WAIT_MS)
        _settle(page)
        # nothing to wait for when the test passes (no request): give a fetch the drawn page would
        # start the time to show up
        page.wait_for_timeout(1500)
        text = alert.first.inner_text().replace("\u2060", "")  # invisible word joiners
        assert leak in text and name in text  # shown, as the characters it is made of
        found = page.locator(f'img[src*=":{leak_port}"], a[href*=":{leak_port}"]')
        assert found.count() == 0, [
            found.nth(i).evaluate("e => e.parentElement.outerHTML") for i in range(found.count())
        ]
        assert fetched == []
        _no_exception(page)
