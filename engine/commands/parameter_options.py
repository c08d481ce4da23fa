"""Command-line options made from the parameters' declarations (issue 38, "A method registry").

`add_parameter_options(parser, Settings, names)` adds one option per declared parameter
(`engine.study.parameters`): its flag, type, choices, default and help, so that `anonymize METHOD`,
`study add METHOD` and `study new` offer what a study file and the app's widgets take. A bool is a
switch (`store_true`, off unless given); a choice of "" (none) is the option left out. Bounds are not
argparse's: the settings' `validate` checks them and names the parameter (exit 2, one line). A
parameter declared without a flag (`flag=""`: the LDA's ICD levels, the age domain, the code
selection) keeps its own hand-written option.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from engine.io.errors import UserError
from engine.study.parameters import Parameter, SettingsError, parameter_of, parameters_of


class _Choices(Sequence):
    """A parameter's choices, read when argparse first asks (parsing or --help), so that building
    the parser imports no module that holds them (numpy behind the methods' modules)."""

    def __init__(self, parameter: Parameter) -> None:
        self.parameter = parameter

    def _items(self) -> tuple[Any, ...]:
        return tuple(c for c in self.parameter.allowed or () if c != "")

    def __getitem__(self, i):
        return self._items()[i]

    def __len__(self) -> int:
        return len(self._items())

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items())

    def __contains__(self, value: object) -> bool:
        return value in self._items()


def add_parameter_options(
    parser: Any,
    source: type | Iterable[Parameter],
    names: Iterable[str] | None = None,
    *,
    required: Iterable[str] = (),
) -> None:
    """An option per declared parameter of `source` (a settings class, or parameters), in the order
    of `names` (default: every parameter with a flag). `parser`: a parser or an argument group;
    `required`: names whose option must be given (no default)."""
    declared = {p.name: p for p in (parameters_of(source) if isinstance(source, type) else source)}
    wanted = list(names) if names is not None else [n for n, p in declared.items() if p.option]
    must = set(required)
    for name in wanted:
        p = declared[name]
        if not p.option:
            raise ValueError(f"{name} declares no command-line flag")
        parser.add_argument(p.option, **_argument(p, required=name in must))


def _argument(p: Parameter, *, required: bool) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"help": p.help} if p.help else {}
    if p.kind is bool:
        return {**kwargs, "action": "store_true"}
    if p.choices is not None:
        kwargs["choices"] = _Choices(p)
    elif p.kind is not str:
        kwargs["type"] = p.kind
    if required:
        kwargs["required"] = True
    elif p.default != "":  # a choice of none: the option left out (None)
        kwargs["default"] = p.default
    return kwargs


def checked_option(settings: Any, name: str, value: object) -> Any:
    """`value` of the option that `settings`' parameter `name` declares, checked by that declaration
    (before any data are read); else a UserError naming the option, in the one phrasing
    ("--w-icd must be a number from 0 to 1, not 1.5")."""
    parameter = parameter_of(settings, name)
    try:
        return parameter.check(value)
    except SettingsError:
        raise UserError(f"{parameter.option} must be {parameter.rule()}, not {value!r}") from None
