"""JSON from a file the user hands in (a study file, a package's manifest), read within limits.

Before parsing: the size (`max_json_bytes`, 16 MiB by default) and the nesting depth of objects and
lists (`max_json_depth`, 64), counted outside strings with numpy (no recursion, no parse). While
parsing: whole numbers of at most 18 digits, finite decimals with at most 40 characters, no `NaN` or
`Infinity`. Anything else is a `JSONRefused` (a `UserError`) naming the source and the limit, never a
RecursionError, an OverflowError or a ValueError from deep inside the parser.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from engine.io.errors import UserError

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
MAX_INT_DIGITS = 18


class JSONRefused(UserError, ValueError):
    """A JSON file that is too large, too deep, malformed or holds a number out of range."""


def depth(data: bytes) -> int:
    """The deepest nesting of `[`/`{` outside strings (0 for a scalar)."""
    bare = _STRING.sub(b'""', data)
    arr = np.frombuffer(bare, dtype=np.uint8)
    step = np.zeros(len(arr), dtype=np.int8)
    step[(arr == ord("[")) | (arr == ord("{"))] = 1
    step[(arr == ord("]")) | (arr == ord("}"))] = -1
    return int(np.cumsum(step, dtype=np.int64).max(initial=0))


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise JSONRefused(f"a whole number of {len(text.lstrip('-')):,} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _float(text: str) -> float:
    value = float(text) if len(text) <= 40 else math.inf
    if not math.isfinite(value):
        raise JSONRefused(f"the number {text[:40]}{'…' if len(text) > 40 else ''} is out of range")
    return value


def _constant(name: str) -> Any:
    raise JSONRefused(f"{name} is not a number JSON allows")


def loads(data: str | bytes, source: str) -> Any:
    """The JSON value of `data`, or `JSONRefused` naming `source` (module docstring)."""
    from engine.io.deployment import Limits, limits

    lim = limits()
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(raw) > lim.max_json_bytes:
        raise JSONRefused(
            f"{source}: {len(raw):,} bytes, more than {lim.max_json_bytes:,} (the limit "
            f"{Limits.setting('max_json_bytes')}); not read"
        )
    deep = depth(raw)
    if deep > lim.max_json_depth:
        raise JSONRefused(
            f"{source}: objects and lists nested {deep:,} deep, more than {lim.max_json_depth} (the limit "
            f"{Limits.setting('max_json_depth')}); not read"
        )
    try:
        return json.loads(raw, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except JSONRefused as exc:
        raise JSONRefused(f"{source}: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise JSONRefused(f"{source}: invalid JSON ({exc})") from None
    except (RecursionError, ValueError) as exc:  # a last guard: the checks above should stop these
        raise JSONRefused(f"{source}: cannot be read ({type(exc).__name__})") from None


__all__ = ["JSONRefused", "depth", "loads"]
