"""Issue 13: `make test` is deterministic. Property tests run under the derandomized "ci" profile (loaded
by tests/conftest.py before any test module), and the collection refuses a property test whose own
settings would search randomly or keep an example database."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from conftest import undeterministic_property_tests
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.mark.skipif(
    os.environ.get("HYPOTHESIS_PROFILE", "ci") != "ci", reason="another Hypothesis profile was asked for"
)
def test_the_ci_profile_is_loaded_and_derandomized() -> None:
    assert settings.get_current_profile_name() == "ci"
    assert settings.default.derandomize is True
    assert settings.default.database is None
    assert settings.default.deadline is None  # a time on a shared machine is no test result


def test_a_property_test_that_searches_randomly_is_named() -> None:
    @settings(max_examples=3)
    @given(st.integers())
    def follows_the_profile(x: int) -> None: ...

    @settings(max_examples=3, derandomize=False)
    @given(st.integers())
    def random_search(x: int) -> None: ...

    def plain() -> None: ...

    items = [
        SimpleNamespace(function=follows_the_profile, nodeid="t::follows_the_profile"),
        SimpleNamespace(function=random_search, nodeid="t::random_search"),
        SimpleNamespace(function=plain, nodeid="t::plain"),
        SimpleNamespace(nodeid="t::no_function"),  # e.g. a doctest item
    ]
    assert undeterministic_property_tests(items) == ["t::random_search"]
