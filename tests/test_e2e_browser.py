"""Browser end-to-end: `streamlit run app.py` on a free port, Playwright drives Debian's Chromium.

Sees the Cohort page with the sample data, switches the adversary's knowledge and k in the sidebar
and sees the page follow, opens the Risk page, and fails on any exception element.
Skipped (with the reason) when /usr/bin/chromium is missing, except on CI (env CI set): then it fails.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import sample_missing_reason

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
EXCEPTION = '[data-testid="stException"]'
WAIT_MS = 60_000

pytestmark = pytest.mark.e2e


def _require_browser() -> None:
    if CHROMIUM.exists():
        return
    reason = (
        f"{CHROMIUM} not found: install Debian's chromium (apt-get install chromium) to run the browser test"
    )
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(port: int, proc: subprocess.Popen, log: Path, timeout: float = 45.0) -> None:
    url = f"http://localhost:{port}/_stcore/health"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"streamlit exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"no health response from {url} within {timeout:.0f} s: {log.read_text()[-2000:]}")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    reason = sample_missing_reason()
    if reason:
        pytest.skip(reason)
    _require_browser()
    port = _free_port()
    log = tmp_path / "streamlit.log"
    cmd = [
        sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
        "--server.port", str(port), "--server.headless", "true",
        "--server.address", "localhost", "--browser.gatherUsageStats", "false",
    ]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_healthy(port, proc, log)
        yield f"http://localhost:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _no_exception(page) -> None:
    shown = page.locator(EXCEPTION)
    assert shown.count() == 0, shown.first.inner_text()


def _settle(page) -> None:
    """Wait until Streamlit has finished the current run (its status widget is gone)."""
    page.wait_for_timeout(300)
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=WAIT_MS)


def test_cohort_page_follows_the_sidebar(server: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(server)
            expect(page.get_by_role("heading", name="Cohort").first).to_be_visible(timeout=WAIT_MS)
            metrics = page.locator('[data-testid="stMetric"]')
            expect(metrics.first).to_be_visible(timeout=WAIT_MS)
            expect(page.get_by_role("heading", name="population: population")).to_be_visible()
            expect(page.get_by_role("heading", name="cohort: cohort")).to_be_visible()
            _no_exception(page)
            patients = metrics.filter(has_text="Patients").locator('[data-testid="stMetricValue"]')
            cohort_before = patients.nth(1).inner_text()

            sidebar = page.locator('[data-testid="stSidebar"]')
            sidebar.locator('[data-testid="stSelectbox"]').nth(1).click()
            page.get_by_role("option", name="biobank").click()
            expect(page.get_by_role("heading", name="cohort: biobank")).to_be_visible(timeout=WAIT_MS)
            _settle(page)
            assert patients.nth(1).inner_text() != cohort_before  # the figures follow the choice
            _no_exception(page)

            sidebar.get_by_text("all visits", exact=True).click()
            expect(page.get_by_text("every code in their record").first).to_be_visible(timeout=WAIT_MS)
            _settle(page)
            _no_exception(page)

            k_input = sidebar.get_by_test_id("stNumberInputField")
            k_input.fill("7")
            k_input.press("Enter")
            expect(page.get_by_text(re.compile(r"k = 7\b")).first).to_be_visible(timeout=WAIT_MS)
            _settle(page)
            _no_exception(page)

            page.locator('[data-testid="stSidebarNav"]').get_by_text("Risk", exact=True).click()
            expect(page.get_by_role("heading", name="Risk").first).to_be_visible(timeout=WAIT_MS)
            _settle(page)
            _no_exception(page)
            assert (
                sidebar.get_by_test_id("stNumberInputField").input_value() == "7"
            )  # the choice survived the switch
        finally:
            browser.close()


def test_untrusted_text_fetches_nothing(server: str) -> None:
    """Issue 12, finding 7: a code `![x](http://127.0.0.1:PORT/leak.png)` in an uploaded events file
    (and in its file name) is shown as text; the browser requests nothing from that address."""
    from playwright.sync_api import expect, sync_playwright

    leak_port = _free_port()
    leak = f"![x](http://127.0.0.1:{leak_port}/leak.png)"
    name = f"![y](http://127.0.0.1:{leak_port}/name.png).csv"
    events = f"patient_id,visit,code\nP1,1,401.1\nP2,1,{leak}\nP3,1,250.00\n".encode()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            fetched: list[str] = []
            page.on("request", lambda r: fetched.append(r.url) if f":{leak_port}" in r.url else None)
            page.goto(server)
            expect(page.get_by_role("heading", name="Cohort").first).to_be_visible(timeout=WAIT_MS)
            sidebar = page.locator('[data-testid="stSidebar"]')
            sidebar.get_by_text("Upload files", exact=True).click()
            _settle(page)
            sidebar.locator('input[type="file"]').first.set_input_files(
                files=[{"name": name, "mimeType": "text/csv", "buffer": events}]
            )
            alert = sidebar.locator('[data-testid="stAlert"]').filter(
                has_text="neither ICD-9-CM nor ICD-10-CM codes"
            )
            expect(alert.first).to_be_visible(timeout=WAIT_MS)
            _settle(page)
            page.wait_for_timeout(1500)
            text = alert.first.inner_text().replace("\u2060", "")  # invisible word joiners
            assert leak in text and name in text  # shown, as the characters it is made of
            found = page.locator(f'img[src*=":{leak_port}"], a[href*=":{leak_port}"]')
            assert found.count() == 0, [
                found.nth(i).evaluate("e => e.parentElement.outerHTML") for i in range(found.count())
            ]
            assert fetched == []
            _no_exception(page)
        finally:
            browser.close()
