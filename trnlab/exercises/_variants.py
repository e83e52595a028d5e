"""Per-student variants of exercises: checking a variant parameter against its declared space.

A lab's exercise module declares ``VARIANTS`` (notebook parameter name -> allowed values) and
``DEFAULTS`` (the values the committed lab uses), and has ``setup(**values)``, called from the
lab's setup cell, which rebuilds the variant-aware exercises for the values given.
``python -m trnlab.course variants`` picks one value per parameter for each student.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["check_variant"]


def check_variant(lab: str, name: str, value: Any, variants: Mapping[str, Sequence[Any]]) -> Any:
    """``value`` if it is one of the allowed values of parameter ``name``, else a teaching error.

    Parameters
    ----------
    lab : str
        The lab, for the message (``"lab01"``).
    name : str
        The notebook parameter (``"CLOCK_CHIP"``).
    value : object
        The value set in the lab's parameters cell.
    variants : mapping
        The lab's declared variant space (its exercise module's ``VARIANTS``).

    Raises
    ------
    ValueError
        If ``value`` is not in the declared space; the message lists what is allowed.
    """
    allowed = list(variants[name])
    for a in allowed:
        # "256" is not 256, and True is not 1: a parameter must have the declared type.
        same_kind = isinstance(a, str) == isinstance(value, str) and not isinstance(value, bool)
        if same_kind and value == a:
            return a
    shown = ", ".join(repr(a) for a in allowed)
    raise ValueError(
        f"{name} = {value!r} is not a variant of {lab}'s exercises: the questions, checks and "
        f"solutions exist for {shown}. Set {name} to one of these in the parameters cell "
        f"(python -m trnlab.course variants picks one per student)."
    )
