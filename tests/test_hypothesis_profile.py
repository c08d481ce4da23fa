"""Issue 13: `make test` is deterministic. Property tests run under the derandomized "ci" profile (loaded
by tests/conftest.py before any test module), and the collection refuses a property test whose own
settings would search randomly or keep an example database."""

from __future__ import annotations

import os
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import (
    FAST_EXAMPLES,
    cap_examples,
    leaves_out_slow,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st


@pytest.mark.skipif(
    os.environ.get("HYPOTHESIS_PROFILE", "ci") != "ci", reason="another Hypothesis profile was asked for"
)
def test_the_ci_profile_is_loaded_and_derandomized(request: pytest.FixtureRequest) -> None:
    fast_tier = leaves_out_slow(request.config.option.markexpr)
    assert settings.get_current_profile_name() == ("fast" if fast_tier else "ci")
    assert settings.default.derandomize is True
    assert settings.default.database is None
    assert settings.default.deadline is None  # a time on a shared machine is no test result
    assert settings.default.max_examples == (FAST_EXAMPLES if fast_tier else 100)


def test_importing_the_conftest_again_keeps_the_profile(request: pytest.FixtureRequest) -> None:
    """tests/test_recipient_dataset.py imported it as `tests.conftest`: that reloaded "ci" over "fast",
    with the fast tier's 10 examples as its own."""
    before = settings.get_current_profile_name()
    runpy.run_path(str(Path(__file__).with_name("conftest.py")))
    assert settings.get_current_profile_name() == before
    assert settings.get_profile("ci").max_examples == 100
    assert settings.get_profile("fast").max_examples == FAST_EXAMPLES


def test_the_fast_profile_is_the_ci_profile_with_fewer_examples() -> None:
    fast, ci = settings.get_profile("fast"), settings.get_profile("ci")
    assert fast.derandomize and fast.database is None and fast.deadline is None
    assert fast.max_examples == FAST_EXAMPLES < ci.max_examples


@pytest.mark.parametrize(
    ("markexpr", "fast_tier"),
    [
        ("not app and not slow", True),
        ("not slow", True),
        ("not slow or app", True),  # a test marked only slow is left out
        ("", False),
        ("not app", False),
        ("slow", False),
        ("not (app or slow)", True),
    ],
)
def test_the_fast_tier_is_a_mark_expression_that_leaves_out_slow(markexpr: str, fast_tier: bool) -> None:
    assert leaves_out_slow(markexpr) is fast_tier


def test_the_fast_tier_caps_a_property_tests_examples_and_keeps_the_rest_of_its_settings() -> None:
    @settings(max_examples=60, derandomize=True, database=None, deadline=None)
    @given(st.integers())
    def many(x: int) -> None: ...

    @settings(max_examples=3)
    @given(st.integers())
    def few(x: int) -> None: ...

    seen: list[int] = []

    @example(-7)
    @settings(max_examples=40)
    @given(st.integers())
    def with_an_example(x: int) -> None:
        seen.append(x)

    items = [SimpleNamespace(function=f) for f in (many, few, with_an_example)]
    cap_examples(items, 10)  # type: ignore[arg-type]
    assert [f._hypothesis_internal_use_settings.max_examples for f in (many, few, with_an_example)] == [
        10,
        3,
        10,
    ]
    assert many._hypothesis_internal_use_settings.derandomize is True
    assert many._hypothesis_internal_use_settings.database is None
    with_an_example()
    assert seen[0] == -7 and 1 < len(seen) <= 11  # the explicit example, then at most 10 generated
