"""Errors of :mod:`trnlab.formats`: an unknown format, a bad option, values it cannot take."""

from __future__ import annotations

from trnlab._errors import TrnlabError, TrnlabTypeError

__all__ = ["FormatError", "FormatTypeError"]


class FormatError(TrnlabError):
    """A format request that cannot be answered (unknown name, bad option, NaN into a format
    without NaN...); the message lists what exists or says what to do."""


class FormatTypeError(FormatError, TrnlabTypeError):
    """Values of the wrong kind for a format operation (integers where floats belong, a seed
    that is not an integer...); also a ``TypeError``."""
