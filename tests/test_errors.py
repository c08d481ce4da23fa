"""The app shows a UserError's message and nothing of any other exception (issue 24, "Errors"): a bug
(`ReleaseInvariantError`, ...) is logged with its traceback under a reference id and the page says
only "Something went wrong (reference ...)". No page or view catches a bare ValueError any more."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pytest
from apptest_support import page_app, patch_in_workers, shown

from engine.disclosure.cells import SmallCellError
from engine.io.errors import UserError
from engine.io.pseudonyms import PseudonymKeyError
from engine.release import ReleaseInvariantError
from engine.report.report import ReportError
from engine.study import runs
from engine.study.study import StudyError

ROOT = Path(__file__).resolve().parent.parent
SECRET = "patient P-0042 holds item 250.01 outside the cohort"
_GENERIC = re.compile(
    r"Something went wrong \(reference ([0-9a-f]{8})\); the details are in the server log\."
)


def test_user_errors_are_user_errors_and_a_broken_invariant_is_not():
    for cls in (StudyError, runs.SettingsError, ReportError, SmallCellError, PseudonymKeyError):
        assert issubclass(cls, UserError), cls
    assert not issubclass(ReleaseInvariantError, UserError)


@pytest.mark.shows_a_bug
def test_message_of_a_user_error_and_of_a_bug(caplog):
    from ui import errors

    assert errors.message(runs.SettingsError("k must be a whole number")) == "k must be a whole number"
    with caplog.at_level(logging.ERROR, logger="cohortshield.ui"):
        text = errors.message(ReleaseInvariantError(SECRET))
    found = _GENERIC.fullmatch(text)
    assert found and SECRET not in text
    record = next(r for r in caplog.records if found.group(1) in r.getMessage())
    assert record.exc_info and record.exc_info[1].args == (SECRET,), "logged with its traceback"


def _raise(exc: Exception, *args, **kwargs):
    raise exc


@contextmanager
def _raising(monkeypatch, exc: Exception) -> Iterator[None]:
    """The LDA's run raises `exc`, here and in the app's workers (`apptest_support.patch_in_workers`)."""
    from ui import cache

    cache.clear()  # the sample's LDA runs are shared by sessions: another test's would show
    yield from patch_in_workers(
        monkeypatch, {"engine.study.runs:LDASettings.run_result": partial(_raise, exc)}
    )


@pytest.mark.shows_a_bug
@pytest.mark.skipif(not (ROOT / "sample_data" / "events.parquet").exists(), reason="no shipped sample")
def test_a_bug_in_a_view_shows_a_reference_and_not_its_text(monkeypatch):
    with _raising(monkeypatch, ReleaseInvariantError(SECRET)):
        at = page_app(view=("ui.views.lda", "render_anonymize"))
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [shown(e.value) for e in at.error]
    assert any(_GENERIC.fullmatch(e) for e in errors), errors
    assert not any("P-0042" in e for e in errors)


@pytest.mark.skipif(not (ROOT / "sample_data" / "events.parquet").exists(), reason="no shipped sample")
def test_a_user_error_in_a_view_shows_its_text(monkeypatch):
    with _raising(monkeypatch, runs.SettingsError("the ages must run from low to high, not 80 to 20")):
        at = page_app(view=("ui.views.lda", "render_anonymize"))
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [shown(e.value) for e in at.error]
    assert "the ages must run from low to high, not 80 to 20" in errors
    assert not any(_GENERIC.fullmatch(e) for e in errors)


_BARE = re.compile(r"except\s*(\(([^)]*\b(ValueError|KeyError)\b[^)]*)\)|(ValueError|KeyError))")


def bare_value_error_sites() -> list[str]:
    """`except ValueError` / `except KeyError` (alone or in a tuple) in the UI's pages and views."""
    found = []
    for path in sorted([*(ROOT / "ui").rglob("*.py"), *(ROOT / "pages").glob("*.py"), ROOT / "app.py"]):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if _BARE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}")
    return found


# catches of a ValueError that never reach the user: the Arrow hashing fallback of a fingerprint,
# the missing-value probe of a figure's formatting
_NOT_SHOWN = {"ui/fingerprints.py", "ui/format.py"}


def test_no_page_or_view_catches_a_bare_value_error():
    left = [s for s in bare_value_error_sites() if s.split(":")[0] not in _NOT_SHOWN]
    assert left == []
