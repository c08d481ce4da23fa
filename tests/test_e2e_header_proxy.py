"""Header sign-in on a real server (issue 40, finding 4; ui/auth.py): a forged `X-Forwarded-User` sent
straight to a server bound to every address (not through the proxy) signs no one in.

The server runs a one-line page behind `ui.auth.gate()` from a folder holding the checkout's
.streamlit/config.toml with `server.trustedUserHeaders`; Chromium sends the header on every request
(the websocket's included). The client reaches the server on this machine's own non-loopback address
(Streamlit's peer: that address) and on 127.0.0.1 (Streamlit's peer: None).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from browser_support import EXCEPTION, ROOT, WAIT_MS, chromium, free_port, require_browser, served_app

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("browser")]

FORGED = {"X-Forwarded-User": "admin@hospital.example"}
PAGE = "import streamlit as st\nfrom ui import auth\nuser = auth.gate()\nst.write(f'page drawn for {auth.current_user()}')\n"


def _own_address() -> str:
    """This machine's address on its default route (no packet is sent); skips without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
        except OSError:
            pytest.skip("no non-loopback IPv4 address on this machine")
        address = str(s.getsockname()[0])
    if address.startswith("127."):
        pytest.skip("no non-loopback IPv4 address on this machine")
    return address


@contextmanager
def header_server(tmp: Path, proxies: str | None) -> Iterator[int]:
    """The gate's page in header mode on 0.0.0.0, COHORTSHIELD_TRUSTED_PROXIES = `proxies`; its port."""
    require_browser()
    settings = tmp / ".streamlit"
    settings.mkdir(parents=True)
    shipped = (ROOT / ".streamlit" / "config.toml").read_text()
    assert "\n[server]\n" in shipped
    header = '[server]\ntrustedUserHeaders = { "X-Forwarded-User" = "email" }\n'
    (settings / "config.toml").write_text(shipped.replace("[server]\n", header, 1))
    (tmp / "page.py").write_text(PAGE)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"COHORTSHIELD_TRUSTED_PROXIES", "COHORTSHIELD_ADMINS"}
    }
    env |= {"PYTHONPATH": str(ROOT), "COHORTSHIELD_ADMINS": "admin@hospital.example"}
    if proxies is not None:
        env["COHORTSHIELD_TRUSTED_PROXIES"] = proxies
    port = free_port()
    with served_app(port, tmp / "streamlit.log", cwd=tmp, env=env, script=tmp / "page.py", address="0.0.0.0"):
        yield port


def _shown(browser, url: str, expected: str) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(extra_http_headers=FORGED)
    try:
        page = context.new_page()
        page.goto(url)
        drawn, refused = page.get_by_text("page drawn for"), page.locator('[data-testid="stAlert"]')
        failed = page.locator(EXCEPTION)
        expect(drawn.or_(refused).or_(failed).first).to_be_visible(timeout=WAIT_MS)  # the gate has answered
        body = page.locator("body").inner_text()
        assert expected in body, body
    finally:
        context.close()


def test_a_forged_header_around_the_proxy_signs_no_one_in(tmp_path: Path) -> None:
    own = _own_address()
    with header_server(tmp_path / "unset", None) as port, chromium() as browser:
        # no proxy named, server on every address: no page, for anyone
        _shown(browser, f"http://{own}:{port}", "names no proxy")
        _shown(browser, f"http://127.0.0.1:{port}", "names no proxy")
    with header_server(tmp_path / "loopback-proxy", "127.0.0.1") as port, chromium() as browser:
        # the proxy is on this machine: the header counts from 127.0.0.1 only
        _shown(browser, f"http://{own}:{port}", f"This connection comes from {own}")
        _shown(browser, f"http://127.0.0.1:{port}", "page drawn for header:admin@hospital.example")
