"""One way to write a figure on the pages (issue 26, finding 3): shares as percentages, counts with
their unit, and a missing value as a dash with its reason, never a bare fraction beside a percentage
and never the word "None"."""

from __future__ import annotations

import math

import pandas as pd

DASH = "—"


def _missing(x: object) -> bool:
    if x is None:
        return True
    try:
        return bool(pd.isna(x))
    except (TypeError, ValueError):
        return False


def percent(x: float | None, digits: int = 1) -> str:
    """A share (0.8502) as a percentage ('85.0%'); a dash when there is none. Shares that are not 0
    or 1 but would round to them keep a sign of it ('< 0.1%', '> 99.9%')."""
    if _missing(x):
        return DASH
    v = float(x)  # type: ignore[arg-type]
    if math.isinf(v):
        return DASH
    step = 10.0**-digits
    if 0 < v * 100 < step:
        return f"< {step:.{digits}f}%"
    if 100 - step < v * 100 < 100:
        return f"> {100 - step:.{digits}f}%"
    return f"{v:.{digits}%}"


def count(n: int | float, unit: str = "") -> str:
    """'4,118' or '4,118 pairs' (a thousands separator, the unit after)."""
    text = f"{int(n):,}"
    return f"{text} {unit}" if unit else text


def of(part: int | float, whole: int | float, unit: str) -> str:
    """'4,118 of 45,947 (patient, code) pairs'."""
    return f"{int(part):,} of {int(whole):,} {unit}"


def missing(reason: str) -> str:
    """A value that is not there: '— (no test ran on the release)'."""
    return f"{DASH} ({reason})" if reason else DASH


def number(x: float | None, digits: int = 3) -> str:
    """A plain number (an r², a mean) to `digits` decimals; a dash when there is none."""
    if _missing(x):
        return DASH
    return f"{float(x):.{digits}f}"  # type: ignore[arg-type]


def shown_frame(frame: pd.DataFrame, digits: int = 1) -> pd.DataFrame:
    """A table for the page: missing cells as a dash (the browser's grid writes them 'None'). A column
    with a missing cell becomes text, its numbers written to `digits` decimals (a column of numbers
    and dashes is not one Arrow type)."""
    if not frame.isna().any().any():
        return frame
    out = frame.copy()
    for col in out.columns:
        if out[col].isna().any():
            out[col] = [DASH if _missing(v) else _text(v, digits) for v in out[col]]
    return out


def _text(v: object, digits: int) -> str:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    return f"{v:,}" if float(v).is_integer() and isinstance(v, int) else f"{float(v):,.{digits}f}"
