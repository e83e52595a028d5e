"""Readable numbers with units: ``si(1.299e15, "FLOP/s") -> "1.30 PFLOP/s"``.

Bytes of memory capacity are shown with binary prefixes (GiB), as the hardware is built;
rates (B/s, FLOP/s, bit/s) with decimal prefixes, as vendors print them.
"""

from __future__ import annotations

import math
import numbers

from ._checks import flag, short, whole
from ._errors import TrnlabError

__all__ = ["binary", "si"]

_SI = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
_BIN = [(2**60, "Ei"), (2**50, "Pi"), (2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")]


def _digits(x: float, sig: int) -> str:
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    if float(x).is_integer() and abs(x) < 10**sig:
        return f"{int(x):,}"
    decimals = max(0, sig - 1 - math.floor(math.log10(abs(x))))
    return f"{x:,.{decimals}f}"


def si(value: float, unit: str = "", sig: int = 3, binary_bytes: bool = True) -> str:
    """``value`` with a decimal prefix and ``sig`` significant digits.

    Bytes (unit ``"B"``) use binary prefixes (:func:`binary`) unless ``binary_bytes=False``,
    for totals printed the vendors' way ("1.5 TB").
    """
    sig = whole(sig, "sig (significant digits)", 1, 15)
    flag(binary_bytes, "binary_bytes")
    if not isinstance(unit, str):
        raise TrnlabError(f"unit is a string such as 'B/s' or 'FLOP/s', not {short(unit)}")
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"{value} {unit}".rstrip()  # text figures (a fabric's name) pass through
    if unit == "B" and binary_bytes:
        return binary(value, sig)
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{_digits(value / scale, sig)} {prefix}{unit}".rstrip()
    return f"{_digits(value, sig)} {unit}".rstrip()


def binary(nbytes: float, sig: int = 3) -> str:
    """A byte count with a binary prefix: ``binary(96 * 2**30) -> "96.0 GiB"``."""
    sig = whole(sig, "sig (significant digits)", 1, 15)
    if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Real):
        raise TrnlabError(f"binary() formats a byte count (a number), not {short(nbytes)}")
    for scale, prefix in _BIN:
        if abs(nbytes) >= scale:
            return f"{_digits(nbytes / scale, sig)} {prefix}B"
    return f"{nbytes:g} B"
