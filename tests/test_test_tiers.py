"""The fast tier (issue 38, finding 6): which test modules run the app, and so leave `make test-fast`."""

from __future__ import annotations

import types

from conftest import runs_the_app


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
