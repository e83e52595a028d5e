"""Predict, then run: the learner writes down a figure before a cell runs the model.

A :class:`Prediction` is an exercise whose right answer is what trnlab's model computes. Its
check runs the model, compares, and explains the gap by its mechanism (the ``explain``
function of the exercise, which sees the prediction and the model's figure), whether the
prediction was close or not: a prediction within ``within`` (relative) passes.

>>> p = Prediction(
...     "demo.speedup", "Predict the speed-up.", lambda: 1.4, what="the speed-up", unit="x",
...     explain=lambda pred, model: "the loads do not overlap", within=0.2)
>>> p.check(1.5).message
'a good prediction: you said 1.50x, the model gives 1.40x (yours is about 7.1% too high). Why: the loads do not overlap'
>>> p.check(3).status
'failed'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ._checks import close_to, read_number
from ._exercise import FAILED, PASSED, Exercise
from ._slips import best_fit, how_far
from ._units import decimal_digits

__all__ = ["Prediction"]


def _shown(value: float, unit: str) -> str:
    if unit == "%" and abs(value) >= 1000:  # a share of 10 or more: no 5-digit percentages
        return f"{decimal_digits(value / 100, 2)} times the whole"
    text = decimal_digits(value, 3)
    if unit in {"x", "%"}:
        return f"{text}{unit}"
    return f"{text} {unit}".rstrip()


class Prediction(Exercise):
    """An exercise where the learner predicts what a cell is about to compute.

    Parameters
    ----------
    key, question : str
        As for :class:`Exercise`.
    model : callable
        Returns the model's figure, in ``unit`` (runs the model on first call; cache it).
    what : str
        The figure in words ("the latency").
    unit : str
        The unit the prediction is written in.
    explain : callable
        ``explain(prediction, model_figure) -> str``: why the model's figure is what it is, and
        what a prediction on that side of it missed: the mechanism, not the number.
    within : float
        Relative distance within which a prediction counts as good.
    sig : int
        Significant figures that count (as for :func:`close_to`): 4 for an exact result.
    slips : sequence of Slip
        Slips of notation to point out before comparing (a fraction for a percentage): the
        check then says the slip and not the model's figure, so the learner can re-state it.
    hints : sequence of str
        What to reason from (never the model's figure).
    solution_text : str
        How to estimate it, and where the estimate and the model part.
    """

    def __init__(
        self,
        key: str,
        question: str,
        model: Callable[[], float],
        *,
        what: str,
        unit: str,
        explain: Callable[[float, float], str],
        within: float = 0.25,
        sig: int = 3,
        slips: tuple = (),
        hints: tuple[str, ...] | list[str] = (),
        solution_text: str = "",
    ) -> None:
        check = close_to(model, rtol=within, sig=sig, what=what, unit=unit, slips=slips)
        super().__init__(
            key, question, check, hints=hints, solution=model, solution_text=solution_text
        )
        self._explain = explain
        self.within = within

    def _verdict(self, answer: Any) -> tuple[str, str]:
        check = self._check
        got = read_number(answer, check.unit, check.what)
        if isinstance(got, str):
            return FAILED, got
        model = check.value()
        said = _shown(got, check.unit)
        gives = _shown(model, check.unit)
        if got > 0 and abs(got - model) <= check.tolerance(model):
            gap = how_far(got / model) if got != model else "exactly right"
            return PASSED, (
                f"a good prediction: you said {said}, the model gives {gives} (yours is {gap}). "
                f"Why: {self._explain(got, model)}"
            )
        if got != 0 and model != 0:
            # A unit slip is named when the answer, read in the right unit, would have been a
            # good prediction (0.42 for 42%): the prediction's own tolerance, not the slip's.
            units = [
                replace(s, rtol=max(s.rtol, self.within))
                for s in check.expected_slips()
                if s.kind == "unit"
            ]
            fit = best_fit(got / model, units)
            if fit is not None:
                return FAILED, f"your prediction {said}: {fit[0]}"
        why = self._explain(got, model)
        if got <= 0 < model:
            return FAILED, f"{check.what} cannot be {said}; the model gives {gives}. Why: {why}"
        gap = how_far(got / model)
        return FAILED, (
            f"you predicted {said}; the model gives {gives}, so your prediction is {gap}. "
            f"Why: {why}"
        )
