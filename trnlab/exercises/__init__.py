"""Exercises for the labs: checks with specific hints, step-by-step help, published results.

>>> from trnlab.exercises import Exercise, close_to
>>> ex = Exercise("demo", "What is 6 x 7?", close_to(42), hints=["multiply"], solution=lambda: 42)
>>> ex.check(None).status
'not attempted'
>>> ex.check(42).status
'passed'
"""

from ._checks import choice, close_to, is_true
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
from ._publish import MIME_TYPE, publish, read_published

__all__ = [
    "FAILED",
    "MIME_TYPE",
    "NOT_ATTEMPTED",
    "PASSED",
    "Exercise",
    "ExerciseFailed",
    "Result",
    "choice",
    "close_to",
    "configure",
    "is_true",
    "publish",
    "read_published",
    "results",
    "settings",
]
