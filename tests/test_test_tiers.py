"""The fast tier (issue 38, finding 6): which test modules run the app, and which tests are slow, and so
leave `make test-fast`."""

from __future__ import annotations

import types
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import SLOW_MODULES, SLOW_TESTS, mark_slow_tests, runs_the_app

TESTS = Path(__file__).resolve().parent


def _module(**names: object) -> types.ModuleType:
    module = types.ModuleType("test_something")
    vars(module).update(names)
    return module


def test_a_module_that_imports_apptest_runs_the_app() -> None:
    from streamlit.testing.v1 import AppTest

    assert runs_the_app(_module(AppTest=AppTest))


def test_a_module_that_imports_the_support_module_runs_the_app() -> None:
    import apptest_support

    assert runs_the_app(_module(apptest_support=apptest_support))
    assert runs_the_app(_module(page_app=apptest_support.page_app))


def test_an_engine_test_module_does_not_run_the_app() -> None:
    import numpy as np

    from engine import risk

    assert not runs_the_app(_module(np=np, risk=risk, distinguishability=risk.distinguishability))


def _marks(*nodeids: str) -> list[list[str]]:
    items = [SimpleNamespace(nodeid=nodeid, own_markers=[]) for nodeid in nodeids]
    for item in items:
        item.add_marker = lambda mark, item=item: item.own_markers.append(mark.name)
    mark_slow_tests(items)  # type: ignore[arg-type]
    return [item.own_markers for item in items]


def test_the_tests_of_a_slow_module_and_a_slow_test_are_marked_slow() -> None:
    module = next(iter(SLOW_MODULES))
    test = next(iter(SLOW_TESTS))
    file, name = test.split("::")
    assert _marks(
        f"tests/{module}::test_anything[1-True]",
        f"tests/{test}",
        f"tests/{test}[a-param]",
        f"tests/{file}::{name}_and_more",  # another test of the same file
        "tests/test_risk.py::test_paper_example",
    ) == [["slow"], ["slow"], ["slow"], [], []]


@pytest.mark.parametrize("entry", [*SLOW_MODULES, *SLOW_TESTS])
def test_every_slow_entry_names_a_test_that_exists(entry: str) -> None:
    file, _, name = entry.partition("::")
    assert (TESTS / file).is_file(), f"{file} is not in tests/"
    if name:
        assert f"def {name}(" in (TESTS / file).read_text(), f"no test {name} in {file}"
