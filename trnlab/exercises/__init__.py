"""Exercises for the labs: checks that name the slip, hints, predictions, published results.

>>> from trnlab.exercises import Exercise, close_to
>>> ex = Exercise("demo", "What is 6 x 7?", close_to(42), hints=["multiply"], solution=lambda: 42)
>>> ex.check(None).status
'not attempted'
>>> ex.check(42).status
'passed'
>>> ex.check("42.0").status
'passed'
"""

from . import _slips as slips
from ._checks import NumericCheck, choice, close_to, is_true
from ._exercise import (
    FAILED,
    NOT_ATTEMPTED,
    PASSED,
    Exercise,
    ExerciseFailed,
    Result,
    configure,
    results,
    settings,
)
from ._predict import Prediction
from ._publish import MIME_TYPE, publish, read_published
from ._slips import Slip, how_far

__all__ = [
    "FAILED",
    "MIME_TYPE",
    "NOT_ATTEMPTED",
    "PASSED",
    "Exercise",
    "ExerciseFailed",
    "NumericCheck",
    "Prediction",
    "Result",
    "Slip",
    "choice",
    "close_to",
    "configure",
    "how_far",
    "is_true",
    "publish",
    "read_published",
    "results",
    "settings",
    "slips",
]
