"""A busy indicator whenever the Anonymize page works (issue 26, finding 2: "Anonymize sat at a heading for
seconds with no spinner").

In Chromium against the served app (tests/browser_support.py), a sampler installed before the page loads
records every 100 ms whether the main area shows a busy indicator (Streamlit's spinner, `stSpinner`,
which `ui.progress.busy` draws; a progress bar of `ui.progress.run`) or results (a metric, or the "Run"
button of a run that waits for the user), counting only elements of the current run (Streamlit marks the
previous run's `data-stale`). From the start of the run an action caused until the app has settled, the
longest stretch with neither is the gap. This is an assertion of feedback, not of speed: a slow page
with a spinner shown passes; `MAX_GAP_S` leaves room for Streamlit's half-second spinner delay on a
loaded machine. `python -m pytest tests/test_busy_indicator.py -s` prints every gap measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from browser_support import WAIT_MS, chromium, no_exception, runs, settle

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("browser")]

MAX_GAP_S = 1.5
# what the main area shows, sampled every 100 ms into window.__busy from the first byte of the page
SAMPLER_JS = r"""
window.__busy = [];
setInterval(() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const app = document.querySelector('[data-testid="stApp"]');
  const shown = (e) => e.getClientRects().length > 0 && !e.closest('[data-stale="true"]');
  const any = (sel) => !!main && [...main.querySelectorAll(sel)].some(shown);
  const runButton = !!main && [...main.querySelectorAll('[data-testid="stButton"] button')]
    .some((b) => shown(b) && /^Run\b/.test(b.innerText.trim()));
  window.__busy.push({
    t: performance.now(),
    state: app ? app.getAttribute('data-test-script-state') : null,
    busy: any('[data-testid="stSpinner"]') || any('[data-testid="stProgress"]'),
    results: any('[data-testid="stMetric"]') || runButton,
  });
}, 100);
"""


@dataclass(frozen=True)
class Opened:
    """What one action showed: seconds from its run's start until settled, and the longest stretch
    (seconds, and when it ended) with neither a busy indicator nor results."""

    name: str
    seconds: float
    gap: float
    gap_ends: float


def longest_gap(samples: list[dict], start: float, end: float) -> tuple[float, float]:
    """The longest stretch in [start, end] (ms) with a sample showing neither a busy indicator nor results,
    in seconds, and the time (s after `start`) it ended. A stretch runs from the last sample that showed
    something (or `start`) to the next one that does (or `end`): an upper bound, whatever the sampler's
    pace on a loaded machine."""
    longest, ends, since, empty = 0.0, 0.0, start, False
    for s in [*(s for s in samples if start <= s["t"] <= end), {"t": end, "busy": True, "results": True}]:
        if not (s["busy"] or s["results"]):
            empty = True
            continue
        if empty and s["t"] - since > longest:
            longest, ends = s["t"] - since, s["t"] - start
        since, empty = s["t"], False
    return longest / 1000, ends / 1000


def opened(page, name: str, action) -> Opened:
    """Do `action()` on a settled app, wait until settled again, and measure from the first sample of
    the run it started (the wait for the server to start the run is Streamlit's, before any page code)."""
    settle(page)
    clicked = page.evaluate("performance.now()")
    before = runs(page)
    action()
    settle(page, since=before)
    done = page.evaluate("performance.now()")
    no_exception(page)
    samples = page.evaluate("window.__busy")
    start = next((s["t"] for s in samples if s["t"] >= clicked and s["state"] == "running"), clicked)
    gap, ends = longest_gap(samples, start, done)
    result = Opened(name, (done - start) / 1000, gap, ends)
    print(
        f"{name}: run started {(start - clicked) / 1000:.2f} s after the action, settled {result.seconds:.2f} s "
        f"later; longest without indicator or results {gap:.2f} s (ending {ends:.2f} s into the run)"
    )
    return result


def test_the_gap_rule() -> None:
    """The measure itself: a stretch runs between samples that showed something, with one that did not."""
    s = [
        {"t": 0, "busy": False, "results": False},
        {"t": 100, "busy": True, "results": False},
        {"t": 1000, "busy": False, "results": False},
        {"t": 2000, "busy": False, "results": False},
        {"t": 2100, "busy": False, "results": True},
        {"t": 2800, "busy": True, "results": False},  # 700 ms without a sample: no evidence of a gap
        {"t": 2900, "busy": False, "results": False},
    ]
    assert longest_gap(s, 0, 3000) == (2.0, 2.1)
    assert longest_gap(s, 2100, 3000) == (0.2, 0.9)  # the trailing stretch ends at `end`
    assert longest_gap(s, 2100, 2850) == (0.0, 0.0)
    assert longest_gap([{"t": 50, "busy": False, "results": False}], 0, 1000) == (1.0, 1.0)


def test_anonymize_shows_a_busy_indicator_until_its_results(app_server: str) -> None:
    """Opening Anonymize (GCCens, the default method), then Heatherly and the LDA (the slow one): never
    more than `MAX_GAP_S` without a spinner, a progress bar or results."""
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.add_init_script(SAMPLER_JS)
        page.goto(app_server)
        expect(page.get_by_role("heading", name="Cohort").first).to_be_visible(timeout=WAIT_MS)
        nav = page.locator('[data-testid="stSidebarNav"]')
        seen = [opened(page, "Anonymize (GCCens)", nav.get_by_text("Anonymize", exact=True).click)]
        expect(page.get_by_role("heading", name="Anonymize").first).to_be_visible()
        picker = page.locator('[data-testid="stButtonGroup"]').first
        for method in ("Generalization (Heatherly)", "Trajectories (LDA)"):
            seen.append(opened(page, method, picker.get_by_text(method, exact=True).click))
    slow = [o for o in seen if o.gap > MAX_GAP_S]
    assert not slow, f"seconds with neither a busy indicator nor results: {slow}"
