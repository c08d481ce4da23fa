"""The browser tests' shared harness: `streamlit run serve.py` (app.py as `make run` serves it) on a
free port, Playwright driving Debian's Chromium (/usr/bin/chromium, never a downloaded browser).

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
from contextlib import contextmanager
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
# How long to wait for the app: a first load of the sample took over 60 s beside CPU-heavy tests on 2 cores
# (2026-11-23, 3 busy loops: "Loading and validating the shipped sample..." still shown at 60 s).
# Generous on purpose: these are waits for a condition, never a timed assertion.
WAIT_MS = 240_000


def require_browser() -> None:
    """Skip without Debian's Chromium; on CI, fail instead."""
    if CHROMIUM.exists():
        return
    reason = (
        f"{CHROMIUM} not found: install Debian's chromium (apt-get install chromium) to run the browser test"
    )
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {reason}")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def app_pages() -> list[str]:
    """The page files app.py names, in its order."""
    return re.findall(r'navigation\.page\(\s*"([^"]+)"', (ROOT / "app.py").read_text())


def _wait_healthy(port: int, proc: subprocess.Popen, log: Path, timeout: float = 180.0) -> None:
    url = f"http://localhost:{port}/_stcore/health"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"streamlit exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"no health response from {url} within {timeout:.0f} s: {log.read_text()[-2000:]}")


@contextmanager
def streamlit_server(tmp: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """The app served on a free localhost port (its log in `tmp`); yields the base URL. Skips when the
    sample or the browser is missing. `env`: settings for this server over the test's environment
    (e.g. its own `COHORTSHIELD_STORE`)."""
    reason = sample_missing_reason()
    if reason:
        pytest.skip(reason)
    require_browser()
    with served_app(free_port(), tmp / "streamlit.log", env={**os.environ, **(env or {})}) as url:
        yield url


@contextmanager
def served_app(
    port: int,
    log: Path,
    *,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    script: Path = ROOT / "serve.py",
    address: str = "localhost",
) -> Iterator[str]:
    """`streamlit run <checkout>/serve.py` (app.py behind the download guard, as `make run` serves it; or
    `script`) on `port` of `address` from `cwd` with the
    environment `env` (this process's when None), its output in `log`; yields the base URL (on
    localhost) once healthy, stops the server on exit.
    The shipped sample's lab orders are not read ahead (`COHORTSHIELD_WARM_LABS=0`, unless `env` says):
    a production server's head start, which in the tests would have every server read 6.9 M orders
    beside the browsers on two cores (tests/test_labs_first_open.py serves one that does)."""
    env = {"COHORTSHIELD_WARM_LABS": "0", **(os.environ if env is None else env)}
    cmd = [
        sys.executable, "-m", "streamlit", "run", str(script),
        "--server.port", str(port), "--server.headless", "true",
        "--server.address", address, "--browser.gatherUsageStats", "false",
    ]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_healthy(port, proc, log)
        yield f"http://localhost:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextmanager
def chromium() -> Iterator:
    """A headless Chromium (Playwright's `Browser`), closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def no_exception(page) -> None:
    """Fail with the text of the first exception element the page shows."""
    shown = page.locator(EXCEPTION)
    assert shown.count() == 0, shown.first.inner_text()


# Streamlit marks its root with the run state (`data-test-script-state`: initial, running,
# rerunRequested, notRunning, ...). The status widget ("Running...") is no signal: it is drawn only after a
# run has lasted 500 ms, so a check soon after an action on a loaded machine saw no widget and went on
# while the rerun was still starting. A MutationObserver counts the runs that started (window.__csRuns)
# and when the state last changed; it is installed on first use in each loaded page.
_WATCH_JS = """() => {
  if (!window.__csWatch) {
    window.__csWatch = {runs: 0, changed: performance.now(), mark: performance.now()};
    new MutationObserver((records) => {
      for (const r of records) {
        const state = r.target.getAttribute('data-test-script-state');
        if (state === r.oldValue) continue;
        if (state === 'running') window.__csWatch.runs += 1;
        window.__csWatch.changed = performance.now();
      }
    }).observe(document, {subtree: true, attributes: true, attributeOldValue: true,
                          attributeFilter: ['data-test-script-state']});
  }
  window.__csWatch.mark = performance.now();
  return window.__csWatch.runs;
}"""
_SETTLED_JS = """([since, quiet, grace]) => {
  const w = window.__csWatch;
  const app = document.querySelector('[data-testid="stApp"]');
  if (!w || !app) return false;
  if (app.getAttribute('data-test-connection-state') !== 'CONNECTED') return false;
  if (app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  // a run that ends within one frame may never be drawn as running (1 of 8 reruns of a two-line app
  // under load): after `grace` ms a settled app counts
  if (since !== null && w.runs <= since && performance.now() - w.mark < grace) return false;
  return performance.now() - w.changed >= quiet;
}"""


def runs(page) -> int:
    """How many script runs this page has started since the watch was installed (installs it)."""
    return int(page.evaluate(_WATCH_JS))


def settle(
    page, timeout: float = WAIT_MS, since: int | None = None, quiet_ms: int = 500, grace_ms: int = 8_000
) -> None:
    """Wait until Streamlit has finished running: connected, the script not running and no state change
    for `quiet_ms` (an `st.rerun()` starts the next run at once). With `since` (a `runs(page)` taken
    before an action), also wait until a run started after it: the action's own rerun, not the calm
    before it (or, when none is seen, `grace_ms` after the action)."""
    if since is None:
        runs(page)
    page.wait_for_function(_SETTLED_JS, arg=[since, quiet_ms, grace_ms], timeout=timeout, polling=100)


def act(page, action, timeout: float = WAIT_MS) -> None:
    """Do `action()` (a click, a fill, an upload: anything that reruns the app) on a settled app, then
    wait for the rerun it caused to finish."""
    settle(page, timeout)
    before = runs(page)
    action()
    settle(page, timeout, since=before)


def enter_number(page, field, value: int, attempts: int = 3) -> None:
    """Type `value` in a Streamlit number input and press Enter, again until the field still shows it
    after the rerun: under load (a `make test` run at load average 7-8, 2026-11-24) an entry made while a
    run was starting was lost, the rerun drew the server's old value back, and the study walk's checks
    for "k = 6" each waited out their timeout."""

    def enter() -> None:
        field.fill(str(value))
        field.press("Enter")

    for _ in range(attempts):
        act(page, enter)
        settle(page)
        if field.input_value() == str(value):
            return
    raise AssertionError(f"the number input did not keep {value} after {attempts} entries")


def choose(page, selectbox, option: str, attempts: int = 4) -> None:
    """Pick `option` (its exact label) in the Streamlit selectbox `selectbox`.

    The list is opened only once the app has settled, and opened again when a rerun closed it before the
    option showed: on CI (2026-11-23) a click during a rerun left the list closed and the test waited 30 s
    for an option that was never drawn.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    target = page.get_by_role("option", name=option, exact=True)
    for _ in range(attempts):
        settle(page)
        selectbox.get_by_role("combobox").click()
        try:
            target.wait_for(state="visible", timeout=10_000)
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
            continue
        before = runs(page)
        target.click()
        settle(page, since=before)
        return
    raise AssertionError(f"option {option!r} was not shown in {attempts} openings of the selectbox")


# a launcher as serve.py: `page.py` of its folder behind the download guard (ui/media_guard.py), which
# also sees Streamlit's own routes (/media, /oauth2callback, /auth/logout)
GUARDED_LAUNCHER = (
    "import streamlit as st\nfrom ui import media_guard\n"
    'app = st.App("page.py", middleware=media_guard.middleware())\n'
)
