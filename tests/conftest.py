"""Shared fixtures: the fixture-file directory and the shipped sample dataset (loaded once)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import settings

from engine.dataset import Dataset
from engine.io.loaders import SAMPLE_DIR, SAMPLE_FILES

# Property tests are deterministic by default (CI and `make test`): the same examples every run, no
# example database. HYPOTHESIS_PROFILE=explore searches randomly with more examples; a counterexample
# it finds is kept in the test as an explicit @example. No deadline: a time on a shared machine is no
# test result (a 200 ms deadline failed test_report under load).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("explore", max_examples=500, derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def undeterministic_property_tests(items: list[pytest.Item]) -> list[str]:
    """The collected property tests whose settings search randomly or keep an example database: a test's
    own `@settings(...)` or `settings(parent=...)` can override the profile."""
    found = []
    for item in items:
        function = getattr(item, "function", None)
        own = getattr(function, "_hypothesis_internal_use_settings", None)
        if own is not None and (not own.derandomize or own.database is not None):
            found.append(item.nodeid)
    return found


# A test module that uses any of these runs the app (AppTest, a served app, a browser, an OIDC provider):
# its tests are marked `app` and left out of `make test-fast` (issue 38, finding 6).
APP_SUPPORT = (
    "streamlit.testing",
    *(
        f"{package}{support}"
        for package in ("", "tests.")
        for support in ("apptest_support", "browser_support", "oidc_support")
    ),
)


def runs_the_app(module: object) -> bool:
    """Whether a test module imports one of APP_SUPPORT (a module, or a name taken from one)."""
    for value in vars(module).values():
        name = (
            getattr(value, "__name__", "")
            if isinstance(value, type(os))
            else getattr(value, "__module__", "")
        )
        if isinstance(name, str) and name.startswith(APP_SUPPORT):
            return True
    return False


def mark_app_tests(items: list[pytest.Item]) -> None:
    """Mark `app` every test of a module that runs the app (APP_SUPPORT), every test function that imports
    one of them itself, and every browser test."""
    seen: dict[str, bool] = {}
    for item in items:
        module = getattr(item, "module", None)
        if module is None:
            continue
        if module.__name__ not in seen:
            seen[module.__name__] = runs_the_app(module)
        function = getattr(item, "function", None)
        code_names = getattr(getattr(function, "__code__", None), "co_names", ())
        imports_support = any(name.startswith(APP_SUPPORT) for name in code_names)  # a local import
        if seen[module.__name__] or imports_support or item.get_closest_marker("e2e") is not None:
            item.add_marker(pytest.mark.app)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under the "ci" profile every collected property test runs derandomized, without a database:
    `make test` gives the same result every time (issue 13). Tests that run the app are marked `app`."""
    mark_app_tests(items)
    if settings.get_current_profile_name() != "ci":  # HYPOTHESIS_PROFILE=explore searches on purpose
        return
    found = undeterministic_property_tests(items)
    if found:
        raise pytest.UsageError(
            "property tests not derandomized under the ci profile (drop their derandomize=/database= "
            f"settings): {', '.join(found)}"
        )


DATA_DIR = Path(__file__).resolve().parent / "data"


def sample_missing_reason() -> str | None:
    """Why the shipped sample cannot be used, or None when it is there."""
    missing = [f for f in SAMPLE_FILES.values() if not (SAMPLE_DIR / f).exists()]
    return (
        f"shipped sample not generated yet: {', '.join(missing)} missing in {SAMPLE_DIR}" if missing else None
    )


@pytest.fixture
def data_dir() -> Path:
    """tests/data: small good and bad input files."""
    return DATA_DIR


@pytest.fixture(scope="session")
def sample_dataset() -> Dataset:
    """The shipped sample (`engine.io.loaders.load_sample`), loaded and validated once per session."""
    reason = sample_missing_reason()
    if reason:
        pytest.skip(reason)
    from engine.io.loaders import load_sample

    return load_sample()


@pytest.fixture(scope="session")
def app_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One `streamlit run app.py` (tests/browser_support.py) for every browser test of the session: each
    test opens its own browser page, hence its own Streamlit session. The browser tests share the xdist
    group "browser", so under `make test` they run one after another on one worker beside one server."""
    from browser_support import streamlit_server

    with streamlit_server(tmp_path_factory.mktemp("streamlit")) as url:
        yield url


@contextmanager
def session_setting(name: str, value: str) -> Iterator[None]:
    """The environment variable `name` set to `value` for a test session (each xdist worker), and put
    back as it was afterwards; servers and CLIs the tests start inherit it."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


@pytest.fixture(scope="session", autouse=True)
def audit_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every test session writes its audit entries (engine/audit/log.py) to a log of its own, never to
    the checkout's `.cohortshield/audit.log`."""
    path = tmp_path_factory.mktemp("audit") / "audit.log"
    with session_setting("COHORTSHIELD_AUDIT_LOG", str(path)):
        yield path


@pytest.fixture(scope="session", autouse=True)
def study_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every test session saves its users' studies (engine/store, issue 25) to a store of its own, never
    to the checkout's `.cohortshield/store.sqlite3`, which a later session would offer back ("Resume");
    a test of the store itself sets its own."""
    path = tmp_path_factory.mktemp("store") / "store.sqlite3"
    with session_setting("COHORTSHIELD_STORE", str(path)):
        yield path


@pytest.fixture(scope="session", autouse=True)
def data_roots() -> Iterator[None]:
    """The app reads server paths only inside its data roots (engine/io/deployment.py, issue 25): for
    the tests, the shipped sample and the test data; a test of the roots themselves sets its own."""
    root = Path(__file__).resolve().parent.parent
    roots = (str(root / "sample_data"), str(root / "tests" / "data"), str(root / "data"))
    with session_setting("COHORTSHIELD_DATA_ROOTS", os.pathsep.join(roots)):
        yield


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server's SQLAlchemy URL: `COHORTSHIELD_TEST_POSTGRES_URL`, else a throwaway server of
    this session (each xdist worker its own) from Debian's package (tests/pg_support.py); skipped, saying
    why, only when neither is possible."""
    given = os.environ.get("COHORTSHIELD_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    from pg_support import postgres_server

    with postgres_server() as url:
        yield url
