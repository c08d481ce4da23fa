"""Downloads are served only to the session that made them, once, for a short time (issue 40, finding
6's last parts; ui/media_guard.py, served through `st.App` as serve.py serves app.py).

A one-button page behind `ui.auth.gate()` with sign-in at `oidc-provider-mock` (tests/oidc_support.py),
served by a launcher like serve.py. "alice" signs in and clicks the download; her browser's own fetch
of the file is held back, so that the test fetches its URL itself:

- finding 1: Streamlit 1.67 served `/media/<id>` to any request, no cookie needed, for as long as the
  file was stored. Now: no cookie -> 403; alice's cookies -> the file, once; again -> 403; a fresh
  click's file fetched after `COHORTSHIELD_DOWNLOAD_SECONDS` -> 403.
- the low finding: the sign-in cookie is set for 8 hours (COHORTSHIELD_SIGNIN_SECONDS), not 30 days.
- finding 2: a session that never signed in asked for alice's deferred download by its id (taken from
  the frame her browser sent): the file was built and the audit log named alice. Now: nothing built,
  no audit entry.
"""

from __future__ import annotations

import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import GUARDED_LAUNCHER, ROOT, WAIT_MS, chromium, free_port, require_browser, served_app
from oidc_support import oidc_provider, signin_folder

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("browser")]

SECONDS = 6  # COHORTSHIELD_DOWNLOAD_SECONDS of this server
ROWS = ["p-001", "p-002", "=HYPERLINK(1)"]
PAGE = (
    "import pandas as pd\nimport streamlit as st\nfrom ui import auth\nfrom ui.downloads import table_download\n"
    "auth.gate()\nst.write(f'page drawn for {auth.current_user()}')\n"
    f"table_download(pd.DataFrame({{'patient': {ROWS!r}}}), 'Download the table', 'patients.csv', 'patients')\n"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, str, Path]]:
    """(app URL, issuer URL, audit log) of a served launcher of the one-button page."""
    require_browser()
    tmp = tmp_path_factory.mktemp("media")
    alice = ("alice", {"email": "alice@hospital.example", "email_verified": True})
    with oidc_provider([alice]) as issuer:
        port = free_port()
        folder = signin_folder(tmp / "app", port, issuer)
        (folder / "page.py").write_text(PAGE)
        (folder / "launcher.py").write_text(GUARDED_LAUNCHER)
        audit = tmp / "audit" / "audit.log"
        env = {k: v for k, v in os.environ.items() if k != "COHORTSHIELD_ADMINS"} | {
            "PYTHONPATH": str(ROOT),
            "COHORTSHIELD_DOWNLOAD_SECONDS": str(SECONDS),
            "COHORTSHIELD_AUDIT_LOG": str(audit),
            "COHORTSHIELD_STORE": str(tmp / "store.sqlite"),
        }
        with served_app(
            port, tmp / "streamlit.log", cwd=folder, env=env, script=folder / "launcher.py"
        ) as url:
            yield url, issuer, audit


def _sign_in(browser, url: str, issuer: str):
    """A browser context signed in as alice, its page showing the one-button page."""
    from playwright.sync_api import expect

    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.goto(url)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(re.escape(issuer) + r"/oauth2/authorize\?"), timeout=WAIT_MS)
    page.get_by_placeholder("sub").fill("alice")
    page.get_by_role("button", name="Authorize").click()
    expect(page.get_by_text(re.compile(r"page drawn for oidc:.*#alice"))).to_be_visible(timeout=WAIT_MS)
    return context, page


def _fetch(url: str, cookies: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Cookie": cookies} if cookies else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _rows(data: bytes) -> list[str]:
    return [line.strip() for line in data.decode().splitlines()[1:]]


def _click_for_url(page) -> str:
    """Click the download with the browser's check of its URL held back (Streamlit's frontend fetches
    the file to check it while its link downloads it: ui.media_guard.FETCHES_PER_CLICK), wait until
    the browser has the file (its rows checked); the URL."""
    page.context.route("**/media/**", lambda route: route.abort())  # the check; the download escapes routes
    try:
        with page.expect_download(timeout=WAIT_MS) as caught:
            page.get_by_role("button", name="Download the table").click()
        download = caught.value
        assert _rows(Path(download.path()).read_bytes()) == ["p-001", "p-002", "'=HYPERLINK(1)"]
    finally:
        page.context.unroute("**/media/**")
    return download.url


def test_a_download_url_serves_only_its_session_once_and_briefly(server) -> None:
    url, issuer, _ = server
    with chromium() as browser:
        context, page = _sign_in(browser, url, issuer)
        cookies = "; ".join(f"{c['name']}={c['value']}" for c in context.cookies())
        signin = [c["expires"] for c in context.cookies() if c["name"].startswith("_streamlit_user")]
        assert signin and max(signin) <= time.time() + 8 * 3600 + 60  # not Streamlit's 30 days
        media = _click_for_url(page)  # the browser downloaded it: one of the click's two fetches

        status, body = _fetch(media)  # anyone who learnt the URL, no cookie
        assert status == 403, (status, body[:200])
        status, body = _fetch(media, cookies)  # alice's session: the click's other fetch
        assert status == 200 and _rows(body) == ["p-001", "p-002", "'=HYPERLINK(1)"], body
        assert _fetch(media, cookies)[0] == 403  # once more: refused

        again = _click_for_url(page)  # a fresh click: a fresh grant of the same file
        time.sleep(SECONDS + 1)
        assert _fetch(again, cookies)[0] == 403  # past the time limit
        context.close()


def _exchange(tab, message, open_at: str = "", seconds: float = 5) -> list:
    """Send `message` (a BackMsg) on the tab's own websocket (opened to `open_at` first), return the
    ForwardMsgs that came within `seconds`."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    frames = tab.evaluate(
        """async ([path, bytes, ms]) => {
            if (path) {
                window.socket = new WebSocket(path, ["streamlit"]);
                window.socket.binaryType = "arraybuffer";
                await new Promise((ok) => { window.socket.onopen = ok; });
            }
            const frames = [];
            window.socket.onmessage = (e) => { frames.push(Array.from(new Uint8Array(e.data))); };
            window.socket.send(new Uint8Array(bytes));
            await new Promise((ok) => setTimeout(ok, ms));
            return frames;
        }""",
        [open_at, list(message.SerializeToString()), int(seconds * 1000)],
    )
    out = []
    for frame in frames:
        msg = ForwardMsg()
        msg.ParseFromString(bytes(frame))
        out.append(msg)
    return out


def test_another_session_cannot_have_a_deferred_download_built(server) -> None:
    from streamlit.proto.BackMsg_pb2 import BackMsg

    from engine.audit import log

    url, issuer, audit = server
    with chromium() as browser:
        context, page = _sign_in(browser, url, issuer)
        asked: list[str] = []

        def sent(payload) -> None:
            msg = BackMsg()
            msg.ParseFromString(payload if isinstance(payload, bytes) else payload.encode("latin-1"))
            if msg.WhichOneof("type") == "backend_operation_request":
                asked.append(msg.backend_operation_request.deferred_file.file_id)

        page.on("websocket", lambda ws: ws.on("framesent", sent))
        page.reload()
        page.get_by_text(re.compile(r"page drawn for oidc:.*#alice")).wait_for(timeout=WAIT_MS)
        _click_for_url(page)
        assert asked and asked[0]
        entries = len(log.entries(audit))

        # a browser that never signed in: the sign-in page's origin, its own websocket to the server
        stranger = browser.new_context()
        tab = stranger.new_page()
        tab.goto(url)
        tab.get_by_role("button", name="Sign in").wait_for(timeout=WAIT_MS)
        stream = url.replace("http", "ws") + "/_stcore/stream"
        rerun = BackMsg()
        rerun.rerun_script.SetInParent()
        session_id = ""
        for msg in _exchange(tab, rerun, open_at=stream):  # its own session (it learns its id)
            if msg.WhichOneof("type") == "new_session":
                session_id = msg.new_session.initialize.session_id
        assert session_id
        request = BackMsg()
        request.backend_operation_request.request_id = "stranger-1"
        request.backend_operation_request.session_id = session_id
        request.backend_operation_request.deferred_file.file_id = asked[0]
        answers = [
            msg.backend_operation_response
            for msg in _exchange(tab, request)
            if msg.WhichOneof("type") == "backend_operation_response"
        ]
        assert len(answers) == 1, answers
        assert not answers[0].deferred_file.url and answers[0].error_msg, answers[0]
        assert len(log.entries(audit)) == entries  # nothing built, no entry naming alice
        stranger.close()
        context.close()


def test_a_server_started_without_the_guard_serves_no_page(tmp_path: Path) -> None:
    """Issue 40: `streamlit run app.py` still served the whole app, every download to anyone holding its
    URL (the guard is in serve.py, which `make run` starts). Such a server now draws only the refusal,
    naming `make run`: no sidebar, no page."""
    require_browser()
    port = free_port()
    with served_app(port, tmp_path / "unguarded.log", script=ROOT / "app.py") as url, chromium() as browser:
        page = browser.new_page()
        page.goto(url)
        page.get_by_text("make run", exact=False).first.wait_for(timeout=WAIT_MS)
        assert "download guard" in page.inner_text("body")
        assert page.locator('[data-testid="stSidebar"] [data-testid="stNumberInputField"]').count() == 0
