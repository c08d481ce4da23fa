"""Issue 26, finding 8: set-up and assets.

Before: `make run` installed the test tools too (2.1 GB, silently: `pip --quiet`), and the favicon was a
material icon, which the browser fetches from fonts.gstatic.com although nothing may be fetched at run
time. Now requirements.txt is the runtime only, requirements-dev.txt (`-r requirements.txt` + the test
and development tools) is what `make test` installs, pip's progress is shown, and the page icon is
assets/favicon.svg, sent inline.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from test_architecture import top_level_imports

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "requirements.txt"
DEV = ROOT / "requirements-dev.txt"
# packages only the checks use (tests/, bench/, make test's tools): never installed by `make run`
DEV_ONLY = {
    "pytest",
    "hypothesis",
    "pytest-xdist",
    "ruff",
    "mypy",
    "playwright",
    "pypdf",
    "oidc-provider-mock",
}
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lines(path: Path) -> list[str]:
    """The requirements, one per line, without comments and their `--hash` options (issue 38: the lock)."""
    text = re.sub(r"\\\n", " ", path.read_text())  # a pin's `\`-continued hashes: one line
    lines = (ln.split("#", 1)[0].split(" --hash=", 1)[0].strip() for ln in text.splitlines())
    return [ln for ln in lines if ln]


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for line in _lines(path):
        if line.startswith("-r "):
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"{path.name}: {line!r} is not pinned (name==version)"
        out[_norm(re.sub(r"\[.*\]", "", name))] = version
    return out


def test_runtime_requirements_hold_no_test_tool() -> None:
    runtime = _pins(RUNTIME)
    assert not DEV_ONLY & set(runtime), sorted(DEV_ONLY & set(runtime))
    assert {"streamlit", "torch", "duckdb", "psycopg", "sqlalchemy", "simple-icd-10-cm"} <= set(runtime)


def _pulled_by(names: set[str]) -> set[str]:
    """These installed distributions and everything they require (extras left out), transitively."""
    from importlib.metadata import PackageNotFoundError, requires

    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            continue
        todo += [_norm(re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0]) for r in reqs if "extra ==" not in r]
    return seen


def test_dev_requirements_are_the_runtime_and_the_tools() -> None:
    assert _lines(DEV)[0] == "-r requirements.txt"
    dev = _pins(DEV)
    assert set(dev) >= DEV_ONLY, sorted(DEV_ONLY - set(dev))
    assert not set(dev) & set(_pins(RUNTIME))  # one pin per package
    # anything else pinned there is what a tool pulls (e.g. oidc-provider-mock's Flask)
    assert set(dev) <= _pulled_by(DEV_ONLY), sorted(set(dev) - _pulled_by(DEV_ONLY))


def test_the_app_and_engine_import_no_dev_only_package() -> None:
    dists = packages_distributions()
    used = {_norm(d) for m in top_level_imports() for d in dists.get(m, [])}
    assert not used & DEV_ONLY, sorted(used & DEV_ONLY)


def _make(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    if shutil.which("make") is None:
        pytest.skip("make not installed")
    return subprocess.run(["make", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_make_run_installs_the_runtime_only_and_shows_progress() -> None:
    shown = _make("-n", "-B", "run").stdout  # -n: print the commands, run none
    installs = [ln for ln in shown.splitlines() if "pip install" in ln and " -r " in ln]
    assert installs and all("-r requirements.txt" in ln for ln in installs), installs
    assert all("--quiet" not in ln and "-q " not in ln for ln in installs), installs
    # serve.py: app.py behind the download guard (ui/media_guard.py)
    assert "requirements-dev.txt" not in shown and "streamlit run serve.py" in shown


def test_make_test_installs_the_dev_requirements() -> None:
    shown = _make("-n", "-B", "test").stdout
    assert "-r requirements-dev.txt" in shown and "-r requirements.txt" in shown
    assert "pytest" in shown and "mypy" in shown


def test_the_stamps_follow_both_requirement_files(tmp_path: Path) -> None:
    """`make -q` (up to date?) on a copy: a changed requirements.txt re-runs both set-ups, a changed
    requirements-dev.txt only `make test`'s."""
    for name in ("Makefile", "requirements.txt", "requirements-dev.txt", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    stamps = [
        tmp_path / ".venv" / ".requirements-installed",
        tmp_path / ".venv" / ".requirements-dev-installed",
    ]
    stamps[0].parent.mkdir()

    def fresh_stamps() -> None:
        past = time.time() - 100
        for name in ("requirements.txt", "requirements-dev.txt", "pyproject.toml"):
            os.utime(tmp_path / name, (past, past))
        for i, stamp in enumerate(stamps):
            stamp.touch()
            os.utime(stamp, (past + 10 + i, past + 10 + i))

    def up_to_date(target: str) -> bool:
        return _make("-q", target, cwd=tmp_path).returncode == 0

    fresh_stamps()
    assert up_to_date("setup") and up_to_date("setup-dev")
    os.utime(tmp_path / "requirements.txt")
    assert not up_to_date("setup") and not up_to_date("setup-dev")
    fresh_stamps()
    os.utime(tmp_path / "requirements-dev.txt")
    assert up_to_date("setup") and not up_to_date("setup-dev")


def _is_local(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in ("", "data", "blob") or (parts.hostname or "") in LOCAL_HOSTS


def test_page_icon_is_sent_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The favicon app.py sets reaches the browser as a data URL (no material icon, no remote host)."""
    from apptest_support import full_app
    from streamlit.commands import page_config

    sent: list[str] = []
    original = page_config._get_favicon_string

    def record(page_icon):  # type: ignore[no-untyped-def]
        sent.append(original(page_icon))
        return sent[-1]

    monkeypatch.setattr(page_config, "_get_favicon_string", record)
    at = full_app()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert sent, "app.py sets no page icon"
    assert all(s.startswith("data:image/") for s in sent), [s[:80] for s in sent]
    assert (ROOT / "assets" / "favicon.svg").is_file()


@pytest.mark.e2e
@pytest.mark.xdist_group("browser")
def test_the_served_page_fetches_nothing_from_another_host(app_server: str) -> None:
    """The index's links and scripts are the server's own, and a browser loading the app asks no other
    host for anything (the favicon included)."""
    from browser_support import WAIT_MS, chromium, settle
    from playwright.sync_api import expect

    with urllib.request.urlopen(app_server, timeout=30) as r:
        index = r.read().decode()
    refs = re.findall(r"""(?:href|src)=["']([^"']+)["']""", index)
    assert refs and all(_is_local(u) for u in refs), [u for u in refs if not _is_local(u)]

    with chromium() as browser:
        page = browser.new_page()
        asked: list[str] = []
        page.on("request", lambda req: asked.append(req.url))
        page.goto(app_server)
        expect(page.get_by_role("heading", name="Cohort").first).to_be_visible(timeout=WAIT_MS)
        settle(page)
        icons = page.eval_on_selector_all("link[rel~='icon']", "els => els.map(e => e.href)")
        assert icons and all(i.startswith("data:image/") for i in icons), [i[:80] for i in icons]
    remote = sorted({u for u in asked if not _is_local(u)})
    assert not remote, remote
