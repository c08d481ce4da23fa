"""Every parameter declared once, with one validator (issue 38, "A method registry").

A `Parameter` states a setting's type, default, bounds or choices, help and command-line flag, as
scikit-learn's `_parameter_constraints` do. A method's settings declare theirs on their fields
(`declared`, read back by `parameters_of`); the study-level ones (k, scope, knowledge, the release
context) are declared beside what they set. The validation (`Parameter.check`, `check_declared`),
the study file's reader (`read_declared`), the command line's options
(`engine.commands.parameter_options`) and the app's widgets (`ui.parameter_widgets`) are made from
these declarations, and every refusal is phrased one way: "<owner>: <name> must be <rule>, not
<value>" (the owner: a method's name, or none).
A value a layer cannot hold is refused by name, never changed (issue 38, finding 1: k = 150).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.io.errors import UserError

PARAMETER = "parameter"  # the key of a field's declaration in its metadata (`declared`)


class SettingsError(UserError, ValueError):
    """A parameter outside its declaration; the message names the owner, the parameter and the value."""


@dataclass(frozen=True)
class Parameter:
    """One setting: `kind` int, float, bool or str; `bounds` (low, high) inclusive for numbers;
    `choices` (a tuple, or a function giving it, so that a module holding them is imported only
    when asked); `optional`: None is allowed (a JSON null, a flag left out); `flag`: the CLI option
    (default `--name` with dashes; "" for none). `name` is the field's when declared on one."""

    name: str
    kind: type
    default: Any
    bounds: tuple[float, float] | None = None
    choices: tuple[Any, ...] | Callable[[], tuple[Any, ...]] | None = None
    help: str = ""
    flag: str | None = None
    optional: bool = False

    @property
    def allowed(self) -> tuple[Any, ...] | None:
        """The choices, None when the parameter has none."""
        return self.choices() if callable(self.choices) else self.choices

    @property
    def option(self) -> str:
        """The command-line flag ("" for none)."""
        return "--" + self.name.replace("_", "-") if self.flag is None else self.flag

    def rule(self) -> str:
        """What the parameter must be, in words (the one phrasing of every refusal)."""
        allowed = self.allowed
        if allowed is not None:
            rule = "one of " + ", ".join("'' (none)" if c == "" else str(c) for c in allowed)
        elif self.kind is bool:
            rule = "true or false"
        elif self.kind is str:
            rule = "text"
        elif self.bounds is None:
            rule = "a whole number" if self.kind is int else "a number"
        else:
            lo, hi = self.bounds
            unit = "a whole number" if self.kind is int else "a number"
            rule = (
                f"{unit} from {lo:,g} to {hi:,g}" if self.kind is float else f"{unit} from {lo:,} to {hi:,}"
            )
        return rule + (" or none" if self.optional else "")

    def refusal(self, value: object, owner: str = "") -> SettingsError:
        """The one message: owner, parameter, rule and the value refused."""
        where = f"{owner}: " if owner else ""
        return SettingsError(f"{where}{self.name} must be {self.rule()}, not {value!r}")

    def check(self, value: object, owner: str = "") -> Any:
        """`value` when the declaration allows it (of its kind, never coerced: "7", 5.9 or true for a
        whole number are refused; a whole number is taken for a number), else `refusal`."""
        if value is None and self.optional:
            return None
        if not self._of_kind(value):
            raise self.refusal(value, owner)
        allowed = self.allowed
        if allowed is not None and value not in allowed:
            raise self.refusal(value, owner)
        if self.bounds is not None and not self.bounds[0] <= value <= self.bounds[1]:  # type: ignore[operator]
            raise self.refusal(value, owner)
        return value

    def _of_kind(self, value: object) -> bool:
        if self.kind is bool:
            return isinstance(value, bool)
        if isinstance(value, bool):
            return False
        if self.kind is int:
            return isinstance(value, numbers.Integral)
        if self.kind is float:
            return isinstance(value, numbers.Real) and math.isfinite(value)
        return isinstance(value, self.kind)

    def between(self, low: float, high: float) -> Parameter:
        """The same parameter within other bounds (`risk --k` takes k = 1)."""
        return dataclasses.replace(self, bounds=(low, high))


def declared(parameter: Parameter) -> Any:
    """A dataclass field declared by `parameter`: its default, and the declaration in its metadata."""
    return dataclasses.field(default=parameter.default, metadata={PARAMETER: parameter})


def parameters_of(settings: Any) -> tuple[Parameter, ...]:
    """The declared parameters of a settings class (or instance), in field order, each named as its field."""
    return _declarations(settings if isinstance(settings, type) else type(settings))


@functools.cache
def _declarations(cls: type) -> tuple[Parameter, ...]:
    """A class's declarations, read once: a class's fields do not change, and a Parameter is frozen
    (the GCCens view checks each of 12,081 codes' caps through `parameter_of`, issue 36)."""
    return tuple(
        dataclasses.replace(f.metadata[PARAMETER], name=f.name)
        for f in dataclasses.fields(cls)
        if PARAMETER in f.metadata
    )


@functools.cache
def _by_name(cls: type) -> dict[str, Parameter]:
    return {p.name: p for p in _declarations(cls)}


def parameter_of(settings: Any, name: str) -> Parameter:
    """One declared parameter of a settings class by name."""
    return _by_name(settings if isinstance(settings, type) else type(settings))[name]


def check_declared(settings: Any, owner: str) -> None:
    """Every declared parameter of `settings` checked (`Parameter.check`), named with `owner`."""
    for p in parameters_of(settings):
        p.check(getattr(settings, p.name), owner)


def read_declared(
    cls: type, data: Mapping[str, Any], owner: str, *, others: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The declared parameters of `cls` read from a study file's object, each checked: an unknown
    name (not declared, not in `others`, which the caller reads) is refused by name, as is a value
    the declaration does not allow. Names left out keep their defaults (a study written before the
    parameter existed)."""
    declared_ = {p.name: p for p in parameters_of(cls)}
    unknown = sorted(set(data) - set(declared_) - others)
    if unknown:
        raise SettingsError(
            f"{owner}: unknown parameter(s) {', '.join(map(repr, unknown))}; "
            f"known: {', '.join([*declared_, *sorted(others)])}"
        )
    out = {}
    for name, value in data.items():
        if name in declared_:
            p = declared_[name]
            value = p.check(value, owner)
            out[name] = float(value) if p.kind is float and value is not None else value
    return out
