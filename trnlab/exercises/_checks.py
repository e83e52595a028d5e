"""Ready-made checks: each returns None for a right answer, else what is specifically wrong."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["choice", "close_to", "is_true"]

# Factors a learner commonly slips by, and what they usually mean.
_UNIT_SLIPS = {
    1e3: "a factor of 1,000 - check your prefixes (G vs T, GB vs TB)",
    1e6: "a factor of a million - check your prefixes",
    1e9: "a factor of 10^9 - did you mix Hz and GHz, or FLOP/s and GFLOP/s?",
    1e12: "a factor of 10^12 - did you mix FLOP/s and TFLOP/s?",
    2**30 / 1e9: "a factor of 1.074 - GiB (2^30) versus GB (10^9)",
    2.0: "a factor of 2 - a multiply-accumulate counts as 2 FLOPs",
    4.0: "a factor of 4 - fp32 runs at a quarter of the bf16 rate; or a 4x sparsity/MX factor",
    8.0: "a factor of 8 - bytes versus bits, or one core versus eight",
}


def close_to(
    expected: float,
    *,
    rtol: float = 0.01,
    what: str = "your answer",
    unit: str = "",
    slips: Mapping[float, str] | None = None,
) -> Callable[[Any], str | None]:
    """Check a number against ``expected`` within relative tolerance ``rtol``.

    A wrong answer gets a specific message: a common factor slip (units, 2 FLOP per MAC, GiB
    versus GB) if the ratio matches one, otherwise how far off and in which direction.
    """
    table = {**_UNIT_SLIPS, **(slips or {})}

    def check(answer: Any) -> str | None:
        if isinstance(answer, bool) or not isinstance(answer, int | float):
            try:
                answer = float(answer)
            except (TypeError, ValueError):
                return f"{what} should be a number, not {type(answer).__name__}"
        if not math.isfinite(answer):
            return f"{what} is {answer}; expected a finite number"
        if math.isclose(answer, expected, rel_tol=rtol):
            return None
        if answer != 0 and expected != 0:
            ratio = answer / expected
            for factor, meaning in table.items():
                for r, word in ((factor, "too large"), (1 / factor, "too small")):
                    if math.isclose(ratio, r, rel_tol=max(rtol, 0.02)):
                        return f"{what} is {word} by {meaning}"
            direction = "high" if ratio > 1 else "low"
            return f"{what} is {abs(ratio - 1):.0%} too {direction} (tolerance {rtol * 100:g}%){' in ' + unit if unit else ''}"
        return f"{what} is {answer:g}{' ' + unit if unit else ''}, which is not it"

    return check


def choice(correct: Any, options: Iterable[Any], explain: Mapping[Any, str] | None = None):
    """Check a pick among ``options``; ``explain`` maps wrong options to why they are wrong."""
    options = list(options)
    explain = dict(explain or {})

    def norm(x: Any) -> Any:
        return x.strip().lower() if isinstance(x, str) else x

    def check(answer: Any) -> str | None:
        if norm(answer) == norm(correct):
            return None
        if norm(answer) not in [norm(o) for o in options]:
            return f"pick one of {options}, not {answer!r}"
        for k, v in explain.items():
            if norm(k) == norm(answer):
                return v
        return f"{answer!r} is not it; think again about what the figures say"

    return check


def is_true(predicate: Callable[[Any], bool], message: str) -> Callable[[Any], str | None]:
    """Check with any predicate; ``message`` explains a failure."""

    def check(answer: Any) -> str | None:
        return None if predicate(answer) else message

    return check
