"""Exercises for self-paced labs: check an answer, reveal hints one by one, show the solution.

An exercise whose answer is still ``None`` (or ``...``) reports "not attempted" instead of
failing, so a learner can run a lab top to bottom before trying anything. Tests switch on
``configure(strict=True)`` (a failed check raises) and ``configure(solutions=True)`` (an
untouched answer is replaced by the exercise's reference solution, which must then pass).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FAILED",
    "NOT_ATTEMPTED",
    "PASSED",
    "Exercise",
    "ExerciseFailed",
    "Result",
    "configure",
    "settings",
]

PASSED, FAILED, NOT_ATTEMPTED = "passed", "failed", "not attempted"
_SETTINGS = {"strict": False, "solutions": False}


class ExerciseFailed(AssertionError):
    """Raised in strict mode when a check fails."""


def configure(*, strict: bool | None = None, solutions: bool | None = None) -> dict[str, bool]:
    """Set how checks behave; returns the settings now in force.

    Parameters
    ----------
    strict : bool, optional
        A failed check raises :class:`ExerciseFailed` (used by tests).
    solutions : bool, optional
        An untouched answer is replaced by the reference solution (instructor runs, tests).
    """
    if strict is not None:
        _SETTINGS["strict"] = bool(strict)
    if solutions is not None:
        _SETTINGS["solutions"] = bool(solutions)
    return dict(_SETTINGS)


def settings() -> dict[str, bool]:
    return dict(_SETTINGS)


@dataclass(frozen=True)
class Result:
    """The outcome of one check, shown as a coloured line in a notebook."""

    exercise: str
    status: str
    message: str

    def __bool__(self) -> bool:
        return self.status == PASSED

    @property
    def mark(self) -> str:
        """The mark the labs name: PASSED, NOT YET or NOT ATTEMPTED."""
        return {PASSED: "PASSED", FAILED: "NOT YET", NOT_ATTEMPTED: "NOT ATTEMPTED"}[self.status]

    def __repr__(self) -> str:
        return f"[{self.mark}] {self.exercise}: {self.message}"

    def _repr_html_(self) -> str:
        # Colour-blind-safe pair (Okabe-Ito bluish green / vermillion) plus a symbol, never colour alone.
        colour, symbol = {
            PASSED: ("#009E73", "&#10004;"),
            FAILED: ("#D55E00", "&#10008;"),
            NOT_ATTEMPTED: ("#666666", "&#8230;"),
        }[self.status]
        return (
            f'<div style="border-left:4px solid {colour};padding:4px 8px">'
            f"<b>{symbol} {self.mark}</b> {html.escape(self.exercise)}: "
            f"{html.escape(self.message)}</div>"
        )


Check = Callable[[Any], "str | None"]


class Exercise:
    """One exercise: a question, a check that explains what is wrong, hints and a solution.

    Parameters
    ----------
    key : str
        Short identifier, unique within a lab (``"lab01.clock"``).
    question : str
        What the learner is asked.
    check : callable
        ``check(answer)`` returns None when the answer is right, else a message saying
        specifically what is wrong (see :mod:`trnlab.exercises` for ready-made checks).
    hints : sequence of str
        Revealed one at a time by :meth:`hint`.
    solution : callable
        Returns the reference answer; used by :meth:`solution` and in solutions mode.
    solution_text : str
        The worked solution as a learner would write it (shown by :meth:`solution`).
    giveaways : sequence of str
        For a pick among options, the figures or phrases that decide it (the page must not
        show them before the exercise; tests scan the learner edition for them). A numeric
        exercise's own answer is scanned for without being listed.
    """

    def __init__(
        self,
        key: str,
        question: str,
        check: Check,
        *,
        hints: tuple[str, ...] | list[str] = (),
        solution: Callable[[], Any] | None = None,
        solution_text: str = "",
        giveaways: tuple[str, ...] | list[str] = (),
    ) -> None:
        self.key = key
        self.question = question
        self._check = check
        self.hints = tuple(hints)
        self._solution = solution
        self.solution_text = solution_text
        self.giveaways = tuple(giveaways)
        self._hints_shown = 0
        self.last: Result = Result(
            key, NOT_ATTEMPTED, "run the check cell after writing your answer"
        )

    def __repr__(self) -> str:
        return f"Exercise({self.key!r}): {self.question}"

    @property
    def unit(self) -> str:
        """The unit the question asks for ("" for a plain number or a pick)."""
        return getattr(self._check, "unit", "")

    @property
    def numeric(self) -> bool:
        """True when the answer is a number (checked by :func:`close_to` or a prediction)."""
        return hasattr(self._check, "value")

    @property
    def sig(self) -> int:
        """Significant figures a numeric answer needs (3 unless the question asks more)."""
        return getattr(self._check, "sig", 3)

    def check(self, answer: Any = None) -> Result:
        """Check ``answer``; returns a :class:`Result` (and raises in strict mode on failure)."""
        if _untouched(answer) and _SETTINGS["solutions"] and self._solution is not None:
            answer = self._solution()
        if _untouched(answer):
            result = Result(self.key, NOT_ATTEMPTED, "replace None with your answer, then re-run")
        else:
            try:
                status, message = self._verdict(answer)
            except Exception as exc:  # a learner's odd answer must not crash the lab
                status = FAILED
                message = f"the check could not read your answer ({type(exc).__name__}: {exc})"
            result = Result(self.key, status, message)
        self.last = result
        _record(result)
        if result.status == FAILED and _SETTINGS["strict"]:
            raise ExerciseFailed(repr(result))
        return result

    def _verdict(self, answer: Any) -> tuple[str, str]:
        """(status, message) for an answer the learner gave."""
        problem = self._check(answer)
        return (PASSED, "correct") if problem is None else (FAILED, problem)

    def hint(self) -> str:
        """The next hint (all of them, in turn; then the solution is the way on)."""
        if not self.hints:
            return "No hints for this one: try solution()."
        i = min(self._hints_shown, len(self.hints) - 1)
        self._hints_shown += 1
        more = "" if i + 1 < len(self.hints) else " (last hint; solution() shows the answer)"
        return f"Hint {i + 1} of {len(self.hints)}: {self.hints[i]}{more}"

    def solution(self) -> str:
        """The worked solution and the reference answer."""
        value = self._solution() if self._solution is not None else None
        text = self.solution_text or "(no worked text)"
        return f"{text}\nReference answer: {value!r}" if value is not None else text

    def reference(self) -> Any:
        """The reference answer (what :meth:`solution` reports)."""
        if self._solution is None:
            raise ValueError(f"exercise {self.key!r} has no reference solution")
        return self._solution()


def _untouched(answer: Any) -> bool:
    return answer is None or answer is Ellipsis


_RESULTS: dict[str, Result] = {}


def _record(result: Result) -> None:
    _RESULTS[result.exercise] = result


def results() -> dict[str, Result]:
    """The latest result of every exercise checked in this kernel, by key."""
    return dict(_RESULTS)
