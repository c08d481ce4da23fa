"""A declared parameter as a widget's arguments (issue 38, "A method registry").

The bounds, options, default and help of the sidebar's and the method views' inputs are those of the
parameter's declaration (`engine.study.parameters.Parameter`), so no widget is narrower or wider than the
study file, the command line and `validate`: a value one layer takes, every layer can show (issue 38,
finding 1: the sidebar's k stopped at 100 and reset a study's k = 150 to 2).
"""

from __future__ import annotations

from typing import Any

from engine.study.parameters import Parameter


def widget_kwargs(parameter: Parameter, **overrides: Any) -> dict[str, Any]:
    """`min_value` / `max_value` (of the parameter's type, as Streamlit wants them) and `help` of a
    number input or slider; `overrides` (a richer help, a step) win."""
    out: dict[str, Any] = {}
    if parameter.bounds is not None:
        lo, hi = parameter.bounds
        out.update(min_value=parameter.kind(lo), max_value=parameter.kind(hi))
    if parameter.help:
        out["help"] = parameter.help
    return {**out, **overrides}


def choices_of(parameter: Parameter) -> list[Any]:
    """The choices of a select box or radio, in the declaration's order."""
    allowed = parameter.allowed
    if allowed is None:
        raise ValueError(f"{parameter.name} declares no choices")
    return list(allowed)
