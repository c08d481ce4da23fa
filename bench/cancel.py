"""Cancel a long run in the browser and check that the server stops working (issue 13, "Long work").

Starts `streamlit run app.py` on a free localhost port (bench/load.py's start-up), opens the Anonymize
page in Debian's Chromium, switches GCCens to "All codes" (a run of tens of seconds on the sample),
reads the progress bar, presses Cancel, and prints how long the "cancelled" notice took and the
server's CPU in the 8 s after it (a run left going would show as a busy core). Figures only.

    .venv/bin/python -m bench.cancel [runner.fastReruns=true]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from bench import load  # bench/load.py: the server start-up


def main(argv: list[str] | None = None) -> int:
    import psutil
    from playwright.sync_api import sync_playwright

    options = list(sys.argv[1:] if argv is None else argv)
    port = load.free_port()
    log = Path(tempfile.mkdtemp(prefix="cohortshield-cancel-")) / "server.log"
    server = load.start_server(port, options, log)
    proc = psutil.Process(server.pid)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=load.CHROMIUM, args=load.CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"http://localhost:{port}/anonymize", timeout=300_000)
            page.get_by_text("Censored (caps / loop)").first.wait_for(timeout=400_000)
            page.locator('[data-testid="stSelectbox"]').filter(has_text="Codes released").click()
            page.get_by_role("option", name="All codes").click()
            bar = page.get_by_text("GCCens (faithful)").first
            bar.wait_for(timeout=120_000)
            page.wait_for_timeout(8000)
            print("progress after 8 s:", bar.inner_text()[:150])
            t = time.monotonic()
            page.get_by_role("button", name="Cancel").click()
            page.get_by_text("cancelled").first.wait_for(timeout=120_000)
            print(f"'cancelled' shown {time.monotonic() - t:.1f} s after the click")
            c0, t0 = sum(proc.cpu_times()[:2]), time.monotonic()
            page.wait_for_timeout(8000)
            busy = (sum(proc.cpu_times()[:2]) - c0) / (time.monotonic() - t0)
            print(f"server CPU in the 8 s after the cancel: {busy:.0%} of a core")
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
