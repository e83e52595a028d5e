"""Ready-made checks: each returns None for a right answer, else what is specifically wrong.

>>> from trnlab.exercises import close_to, slips
>>> check = close_to(20.784, what="the peak", unit="PFLOP/s", slips=slips.si_prefixes("PFLOP/s"))
>>> check(20.8) is None, check("20.8 PF") is None, check("20,784 TFLOP/s") is None
(True, True, True)
>>> check(20784)
'the peak is about 1,000x too high: it looks like TFLOP/s; the question asks for PFLOP/s'
>>> check(62)
'the peak is about 3x too high'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._slips import Slip, best_fit, how_far
from ._units import UnitMismatch, to_unit

__all__ = ["NumericCheck", "choice", "close_to", "is_true", "read_number"]


def read_number(answer: Any, unit: str, what: str) -> float | str:
    """``answer`` as a number in ``unit``, or a sentence saying why it cannot be read."""
    try:
        value = to_unit(answer, unit)
    except UnitMismatch as err:
        return str(err)
    except TypeError:
        kind = type(answer).__name__
        return f"{what} should be a number{f' (in {unit})' if unit else ''}, not a {kind}"
    if not math.isfinite(value):
        return f"{what} is {value}; the answer is a finite number"
    return value


@dataclass(frozen=True)
class NumericCheck:
    """A check of a number against a right answer, naming the slip that explains a miss.

    Made by :func:`close_to`; its attributes let tests and editions read what it checks.
    """

    expected: float | Callable[[], float]
    rtol: float = 0.0
    sig: int = 3
    what: str = "your answer"
    unit: str = ""
    slips: tuple[Slip, ...] | Callable[[], Iterable[Slip]] = field(default=())
    known: Callable[[], Mapping[float, str]] | Mapping[float, str] = field(default_factory=dict)

    def value(self) -> float:
        """The right answer (computed on first use when ``expected`` is a function)."""
        e = self.expected() if callable(self.expected) else self.expected
        return float(e)

    def tolerance(self, expected: float | None = None) -> float:
        """The absolute tolerance: ``rtol`` of the answer, and never less than half a unit of
        its ``sig``-th significant figure (so the answer rounded to ``sig`` figures passes)."""
        e = self.value() if expected is None else expected
        if e == 0:
            return self.rtol
        half_unit = 0.5 * 10.0 ** (math.floor(math.log10(abs(e))) - self.sig + 1)
        # a hair of slack for binary floating point: 20.8 - 20.784 is 0.016000000000000014
        return max(self.rtol * abs(e), half_unit) * (1 + 1e-9)

    def expected_slips(self) -> tuple[Slip, ...]:
        return tuple(self.slips() if callable(self.slips) else self.slips)

    def __call__(self, answer: Any) -> str | None:
        got = read_number(answer, self.unit, self.what)
        if isinstance(got, str):
            return got
        expected = self.value()
        if abs(got - expected) <= self.tolerance(expected):
            return None
        return self.diagnose(got, expected)

    def _known(self, got: float) -> str | None:
        known = self.known() if callable(self.known) else self.known
        for value, says in known.items():
            if abs(got - value) <= self.tolerance(value):
                return says
        return None

    def diagnose(self, got: float, expected: float) -> str:
        """What is wrong with ``got`` (a number in the question's unit) against ``expected``."""
        says = self._known(got)
        if says is not None:
            return f"{self.what} is not {got:g}: {says}"
        if expected == 0:
            return f"{self.what} is {got:g}, which is not it"
        if got == 0:
            return f"{self.what} is 0, which is not it"
        ratio = got / expected
        if ratio < 0:
            fixed = best_fit(-ratio, self.expected_slips())
            extra = f", and {fixed[0]}" if fixed else ""
            return f"{self.what} has the wrong sign{extra}"
        fit = best_fit(ratio, self.expected_slips())
        if fit is not None:
            return f"{self.what} is {how_far(ratio)}: {fit[0]}"
        return f"{self.what} is {how_far(ratio)}"


def close_to(
    expected: float | Callable[[], float],
    *,
    rtol: float = 0.0,
    sig: int = 3,
    what: str = "your answer",
    unit: str = "",
    slips: Iterable[Slip] | Callable[[], Iterable[Slip]] = (),
    known: Mapping[float, str] | Callable[[], Mapping[float, str]] | None = None,
) -> NumericCheck:
    """Check a number against ``expected``.

    Parameters
    ----------
    expected : float or callable
        The right answer, or a function computing it on first use (keeps imports light).
    rtol : float
        Relative tolerance, for questions whose answer is an estimate.
    sig : int
        Significant figures an answer needs: the right answer rounded to ``sig`` figures passes
        (3 unless the question asks for more).
    what : str
        The answer in words, for messages ("the clock").
    unit : str
        The unit the question asks for (``"PFLOP/s"``, ``"GiB"``, ``""`` for a plain number);
        string answers with a unit of the same kind ("20.8 PF") are converted into it.
    slips : sequence of Slip, or a callable returning them
        The mistakes the question invites (see :mod:`trnlab.exercises.slips`); a wrong answer
        whose factor fits one is told that slip, any other how far off it is.
    known : mapping of float to str, or a callable returning one
        Particular wrong answers (not a factor off: an exponent for a scale, a documented
        figure for a derived one) and what each one is.
    """
    if not callable(slips):
        slips = tuple(slips)
    return NumericCheck(expected, rtol, sig, what, unit, slips, known or {})


def choice(correct: Any, options: Iterable[Any], explain: Mapping[Any, str] | None = None):
    """Check a pick among ``options``; ``explain`` maps wrong options to why they are wrong."""
    options = list(options)
    explain = dict(explain or {})

    def norm(x: Any) -> Any:
        return x.strip().strip("'\"").lower() if isinstance(x, str) else x

    def check(answer: Any) -> str | None:
        if norm(answer) == norm(correct):
            return None
        if norm(answer) not in [norm(o) for o in options]:
            shown = ", ".join(repr(o) for o in options)
            return f"pick one of {shown} (as a string), not {answer!r}"
        for k, v in explain.items():
            if norm(k) == norm(answer) and v:
                return v
        return f"{answer!r} is not it; think again about what the figures say"

    check.options = options  # type: ignore[attr-defined]
    return check


def is_true(predicate: Callable[[Any], bool], message: str) -> Callable[[Any], str | None]:
    """Check with any predicate; ``message`` explains a failure."""

    def check(answer: Any) -> str | None:
        return None if predicate(answer) else message

    return check
