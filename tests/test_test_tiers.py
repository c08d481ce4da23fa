"""The fast tier (issue 38, finding 6): which test modules run the app, and which tests are slow, and so
leave `make test-fast`."""

from __future__ import annotations

import types
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import SLOW_MODULES, SLOW_TESTS, imports_the_app, mark_slow_tests, runs_the_app

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


def test_a_test_that_imports_a_test_module_running_the_app_runs_the_app() -> None:
    """tests/test_kmap_selection.py's Risk page test imports `_risk_page` from test_page_risk (an
    AppTest): it was left in the fast tier."""
    import test_page_risk

    assert imports_the_app(test_page_risk.__name__)
    assert imports_the_app("apptest_support")
    assert not imports_the_app("test_test_tiers")  # a test module that runs no app
    assert not imports_the_app("numpy") and not imports_the_app("test_not_imported")


def _marks(*nodeids: str, fixtures: tuple[str, ...] = ()) -> list[list[str]]:
    items = [
        SimpleNamespace(nodeid=nodeid, own_markers=[], fixturenames=list(fixtures)) for nodeid in nodeids
    ]
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


def test_a_test_using_a_slow_fixture_is_marked_slow() -> None:
    assert _marks("tests/test_risk.py::test_on_the_sample", fixtures=("tmp_path", "sample_dataset")) == [
        ["slow"]
    ]
    assert _marks("tests/test_store.py::test_nothing_stored[postgresql]", fixtures=("postgres_url",)) == [
        ["slow"]
    ]
    assert _marks("tests/test_risk.py::test_paper_example", fixtures=("tmp_path",)) == [[]]


@pytest.mark.parametrize("entry", [*SLOW_MODULES, *SLOW_TESTS])
def test_every_slow_entry_names_a_test_that_exists(entry: str) -> None:
    file, _, name = entry.partition("::")
    assert (TESTS / file).is_file(), f"{file} is not in tests/"
    if name:
        assert f"def {name}(" in (TESTS / file).read_text(), f"no test {name} in {file}"


# A property test per method's guarantee (its release meets k as engine/risk.py measures it), kept in the
# fast tier (issue 38: "at least one property test per guarantee").
GUARANTEES = {
    "GCCens (Tamersoy 2010)": "test_censor_properties.py::test_every_release_meets_k_under_the_risk_engine",
    "Heatherly 2013": "test_population_properties.py::test_release_meets_single_visit_k_or_reports_residuals",
    "UGACLIP / ACLIP (Loukides 2010)": (
        "test_profiles.py::test_every_release_satisfies_its_policy_and_risk_agrees"
    ),
    "LDA (Tamersoy 2011)": "test_trajectories.py::test_every_release_is_k_anonymous",
    "every method's file, read back": (
        "test_exports_brute_force.py::test_verified_release_meets_k_when_read_back"
    ),
}


@pytest.mark.parametrize("method", GUARANTEES)
def test_the_fast_tier_keeps_a_property_test_of_each_guarantee(method: str) -> None:
    file, name = GUARANTEES[method].split("::")
    source = (TESTS / file).read_text()
    assert f"def {name}(" in source and "@given" in source
    assert _marks(f"tests/{file}::{name}[any]") == [[]], f"{method}: its property test is marked slow"
    assert not runs_the_app(__import__(file.removesuffix(".py"))), f"{method}: its test module runs the app"
