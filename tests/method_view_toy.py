"""A toy method view on the view protocol (`ui.method_view`), for tests/test_method_view.py: its
settings are one number x; its run doubles it; x = 13 is a user's error, x = 66 a bug in the result."""

from __future__ import annotations

import streamlit as st

from engine.io.errors import UserError
from ui import cache
from ui.context import Context
from ui.method_view import Run, Shown, drive

WHY_NOT = "Toy results cannot be recorded in a study."


class Toy:
    key = "toy"

    def settings(self, ctx: Context) -> int | None:
        x = int(st.number_input("x", value=1, key="toy_x"))
        if x == 13:
            raise UserError("x = 13 is refused: choose another x")
        return x if x > 0 else None

    def runs(self, ctx: Context, settings: int) -> dict[str, Run[int]]:
        double = lambda step: cache.memo("toy doubles", settings, lambda: 2 * settings, size=4)  # noqa: E731
        return {"toy_run": Run("Doubling", double, ask=True)}

    def stale_caption(self, settings: int) -> str:
        return f"Results of the previous parameters (x = {settings}): press Run to update"

    def results(self, ctx: Context, settings: int, outcomes: dict[str, int], shown: Shown) -> None:
        if settings == 66:
            raise KeyError("patient P-0066")  # a bug: its text may quote the data
        st.metric("double", outcomes["toy_run"])
        shown.add(None, f"toy x={settings}", "toy_study", why_not=WHY_NOT)


def render(ctx: Context) -> None:
    drive(Toy(), ctx)
