"""Checks of public arguments shared by the subpackages, each failing with a teaching error.

Every check takes the argument's name as the learner wrote it (``what``) and the error class of
the calling subpackage (a :class:`~trnlab._errors.TrnlabError`), so a message always names the
argument, the value it got, what is allowed, and the nearest valid name where there is one.
Nothing is clamped, rounded or defaulted: a value is accepted as it is, or refused.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

from ._errors import TrnlabError

__all__ = ["choose", "flag", "number", "shape2", "short", "whole"]


def short(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (an array or a long list stays readable)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def flag(value: Any, what: str, error: type[TrnlabError] = TrnlabError) -> bool:
    """``value`` if it is a boolean (``True``/``False``, numpy's too), else a teaching error.

    A flag given as ``"no"``, ``0`` or ``None`` is refused rather than read by its truth value:
    ``bool("no")`` is True.
    """
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_":  # numpy.bool_, without importing numpy here
        return bool(value)
    raise error(f"{what} is a flag: give True or False, not {short(value)}")


def whole(
    value: Any,
    what: str,
    lo: int | None = 1,
    hi: int | None = None,
    error: type[TrnlabError] = TrnlabError,
    hint: str = "",
) -> int:
    """``value`` as an int if it is a whole number in ``lo .. hi`` (either bound optional).

    ``True``, ``2.0``, ``"4"`` and NaN are refused: a count is an integer.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise error(f"{what} must be a whole number{_range(lo, hi)}, not {short(value)}. {hint}")
    v = int(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise error(f"{what} = {v:,} is out of range: it must be{_range(lo, hi)}. {hint}")
    return v


def number(
    value: Any,
    what: str,
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    error: type[TrnlabError] = TrnlabError,
    unit: str = "",
    hint: str = "",
) -> float:
    """``value`` as a float if it is a finite real number within the bounds.

    ``lo_open`` excludes ``lo`` itself (a size or a bandwidth must be > 0). NaN, +-Inf, bools,
    strings and None are refused.
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    v = float(value) if ok else math.nan
    if not ok or not math.isfinite(v):
        raise error(
            f"{what} must be a finite number{_bounds(lo, hi, lo_open, unit)}, not {short(value)}. "
            f"{hint}".rstrip()
        )
    if (lo is not None and (v < lo or (lo_open and v == lo))) or (hi is not None and v > hi):
        raise error(
            f"{what} = {v:g}{(' ' + unit) if unit else ''} is out of range: it must be"
            f"{_bounds(lo, hi, lo_open, unit)}. {hint}".rstrip()
        )
    return v


def shape2(
    value: Any,
    what: str,
    error: type[TrnlabError] = TrnlabError,
    names: tuple[str, str] = ("rows", "cols"),
    max_size: int | None = None,
) -> tuple[int, int]:
    """``value`` as two positive whole numbers, or a teaching error (no 0, no 1-D or 3-D shape).

    ``max_size`` bounds the number of elements (a shape that would not fit in memory).
    """
    if (
        not isinstance(value, tuple | list)
        or len(value) != 2
        or not all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in value)
    ):
        raise error(
            f"{what} must be two whole numbers ({names[0]}, {names[1]}), e.g. (128, 512); "
            f"got {short(value)}"
        )
    p, f = int(value[0]), int(value[1])
    if p <= 0 or f <= 0:
        raise error(f"{what} {(p, f)} has a dimension of {min(p, f)}; both must be at least 1")
    if max_size is not None and p * f > max_size:
        raise error(
            f"{what} {(p, f)} holds {p * f:,} values; the limit here is {max_size:,}. "
            f"Use a smaller shape."
        )
    return p, f


def choose(
    value: Any,
    options: Iterable[str] | Mapping[str, Any],
    what: str,
    error: type[TrnlabError] = TrnlabError,
    aliases: Mapping[str, str] | None = None,
) -> str:
    """The option ``value`` names, matched without regard to case or surrounding spaces.

    ``aliases`` maps other spellings (lower case) to options. An unknown name is refused with
    the nearest option ("did you mean") and the full list.
    """
    names = list(options)
    if not isinstance(value, str):
        raise error(
            f"{what} is named by a string, such as {names[0]!r}, not {short(value)}; "
            f"choose from {', '.join(names)}"
        )
    key = value.strip().lower()
    lowered = {n.lower(): n for n in names}
    if key in lowered:
        return lowered[key]
    if aliases and key in aliases:
        return aliases[key]
    pool = list(lowered) + list(aliases or ())
    near = difflib.get_close_matches(key, pool, n=1, cutoff=0.6)
    hint = ""
    if near:
        guess = lowered.get(near[0]) or (aliases or {})[near[0]]
        hint = f" Did you mean {guess!r}?"
    raise error(f"unknown {what} {value!r}.{hint} Choose from: {', '.join(names)}.")


def _range(lo, hi) -> str:
    if lo is not None and hi is not None:
        return f" from {lo:,} to {hi:,}"
    if lo is not None:
        return f" >= {lo:,}"
    if hi is not None:
        return f" <= {hi:,}"
    return ""


def _bounds(lo, hi, lo_open, unit) -> str:
    u = f" {unit}" if unit else ""
    parts = []
    if lo == 0 and lo_open:
        parts.append(f"positive (> 0{u})")
    elif lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {lo:g}{u}")
    if hi is not None:
        parts.append(f"<= {hi:g}{u}")
    return (" " + " and ".join(parts)) if parts else ""
