"""A toy method view on the view protocol (`ui.method_view`), for tests/test_method_view.py: its
settings are one number x; its run doubles it; x = 13 is a user's error, x = 66 a bug in the result."""

from __future__ import annotations

import streamlit as st

from engine.io.errors import UserError
from ui import cache
from ui.context import Context
from ui.method_view import MethodView, Run, Shown

WHY_NOT = "Toy results cannot be recorded in a study."


def _settings(ctx: Context) -> int | None:
    x = int(st.number_input("x", value=1, key="toy_x"))
    if x == 13:
        raise UserError("x = 13 is refused: choose another x")
    return x if x > 0 else None


def _runs(ctx: Context, x: int) -> dict[str, Run[int]]:
    double = lambda step: cache.memo("toy doubles", x, lambda: 2 * x, size=4)  # noqa: E731
    return {"toy_run": Run("Doubling", double, ask=True)}


def _stale_caption(x: int) -> str:
    return f"Results of the previous parameters (x = {x}): press Run to update"


def _results(ctx: Context, x: int, outcomes: dict[str, int], shown: Shown) -> None:
    if x == 66:
        raise KeyError("patient P-0066")  # a bug: its text may quote the data
    st.metric("double", outcomes["toy_run"])
    shown.add(None, f"toy x={x}", "toy_study", why_not=WHY_NOT)


render = MethodView("toy", _settings, _runs, _results, _stale_caption)
