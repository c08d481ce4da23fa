"""The sign-in browser test's harness (issue 25): a mock OpenID Connect provider on this machine
(`oidc-provider-mock`, PyPI, pinned in requirements-dev.txt) and `streamlit run app.py` with an `[auth]`
section pointing at it.

Streamlit reads `.streamlit/secrets.toml` and `.streamlit/config.toml` from its working directory, so
the server runs in a temporary folder holding the checkout's config.toml and a secrets.toml written for
this run; app.py is given by its absolute path (its pages and the sample are found from there). No
secret is ever written into the checkout.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from browser_support import ROOT, free_port, require_browser, served_app
from conftest import sample_missing_reason

CLIENT_ID = "cohortshield-test"


@contextmanager
def oidc_provider(users: Sequence[tuple[str, dict[str, object]]] = ()) -> Iterator[str]:
    """`oidc-provider-mock` on 127.0.0.1, a free port, in a thread; yields its issuer URL. `users`:
    (subject, claims) the provider knows; any other subject typed in its form gets `{"email": sub}`.
    Any client ID and secret are accepted."""
    import oidc_provider_mock
    import werkzeug.serving

    app = oidc_provider_mock.app(
        user_claims=[oidc_provider_mock.User(sub=sub, claims=dict(claims)) for sub, claims in users]
    )
    server = werkzeug.serving.make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def signin_folder(folder: Path, port: int, issuer: str) -> Path:
    """`folder` as the server's working directory: the checkout's .streamlit/config.toml and a
    secrets.toml whose `[auth]` signs in at `issuer`, returning to `http://localhost:PORT`."""
    settings = folder / ".streamlit"
    settings.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / ".streamlit" / "config.toml", settings / "config.toml")
    secrets = settings / "secrets.toml"
    secrets.write_text(
        "[auth]\n"
        f'redirect_uri = "http://localhost:{port}/oauth2callback"\n'
        f'cookie_secret = "{os.urandom(32).hex()}"\n'
        f'client_id = "{CLIENT_ID}"\n'
        'client_secret = "not-a-secret"\n'
        f'server_metadata_url = "{issuer}/.well-known/openid-configuration"\n'
    )
    secrets.chmod(0o600)
    return folder


@contextmanager
def signin_server(tmp: Path, issuer: str) -> Iterator[str]:
    """`streamlit run <checkout>/app.py` with sign-in at `issuer`, on a free localhost port, working
    directory `tmp/app` (its log in `tmp`); yields the base URL. Skips when the sample or the browser
    is missing."""
    reason = sample_missing_reason()
    if reason:
        pytest.skip(reason)
    require_browser()
    port = free_port()
    cwd = signin_folder(tmp / "app", port, issuer)
    env = {k: v for k, v in os.environ.items() if k != "COHORTSHIELD_ADMINS"}
    with served_app(port, tmp / "streamlit-signin.log", cwd=cwd, env=env) as url:
        yield url
