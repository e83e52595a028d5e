"""Answers as a person writes them: ``"20.8 PF"``, ``"16%"``, ``"1.5 TB/s"``, ``"96 GiB"``.

An exercise asks for a number in one unit (its ``unit``, such as ``"PFLOP/s"``). A learner may
answer with a bare number (read in that unit) or with a number and a unit of their own; an answer
in a unit of the same kind is converted, and one of another kind ("1.5 TB/s" for a memory size)
is refused with a sentence that says what kind of figure the question wants.

>>> to_unit("20.8 PF", "PFLOP/s")
20.8
>>> to_unit("1.5 TB/s", "GB/s")
1500.0
>>> to_unit("16%", "")
0.16
>>> to_unit("96 GiB", "GiB")
96.0
>>> to_unit("96 GiB", "B/s")
Traceback (most recent call last):
...
trnlab.exercises._units.UnitMismatch: '96 GiB' is an amount of memory (bytes), but the question asks for a bandwidth (bytes per second), in B/s
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Unit", "UnitMismatch", "parse_unit", "split_answer", "to_unit"]


class UnitMismatch(ValueError):
    """An answer whose unit measures something else than the question asks (or is unreadable)."""


@dataclass(frozen=True)
class Unit:
    """A unit as a kind of quantity and a scale to that kind's base unit.

    Attributes
    ----------
    kind : str
        What it measures: ``"FLOP/s"``, ``"FLOP"``, ``"B"``, ``"B/s"``, ``"bit"``, ``"bit/s"``,
        ``"s"``, ``"Hz"``, ``"FLOP/B"``, ``"W"`` or ``"1"`` (a plain number: count, ratio,
        fraction).
    scale : float
        Base units per one of this unit (``GiB`` -> 2**30).
    symbol : str
        How it is written.
    """

    kind: str
    scale: float
    symbol: str


# What each kind of quantity is, in words a learner reads in a message.
KIND_WORDS = {
    "FLOP/s": "a compute rate (FLOP per second)",
    "FLOP": "a number of operations (FLOPs)",
    "B": "an amount of memory (bytes)",
    "B/s": "a bandwidth (bytes per second)",
    "bit": "an amount in bits",
    "bit/s": "a network rate (bits per second)",
    "s": "a time",
    "Hz": "a clock frequency",
    "FLOP/B": "an arithmetic intensity (FLOP per byte)",
    "W": "a power (watts)",
    "1": "a plain number (a count, a ratio or a fraction)",
}

_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
_SMALL = {"": 1.0, "m": 1e-3, "u": 1e-6, "µ": 1e-6, "μ": 1e-6, "n": 1e-9, "p": 1e-12}


def _table() -> dict[str, Unit]:
    units: dict[str, Unit] = {}

    def add(symbol: str, kind: str, scale: float) -> None:
        units.setdefault(symbol, Unit(kind, scale, symbol))

    for p, f in _DECIMAL.items():
        for base in ("FLOP/s", "FLOPS", "FLOP/sec", "OP/s", "OPS"):
            add(p + base, "FLOP/s", f)
        if p:
            add(p + "F", "FLOP/s", f)  # vendor shorthand: "20.8 PF"
        for base in ("FLOP", "FLOPs"):
            add(p + base, "FLOP", f)
        add(p + "B", "B", f)
        add(p + "B/s", "B/s", f)
        add(p + "Bps", "B/s", f)
        add(p + "b", "bit", f)
        add(p + "bit", "bit", f)
        add(p + "bit/s", "bit/s", f)
        add(p + "b/s", "bit/s", f)
        add(p + "bps", "bit/s", f)
        add(p + "Hz", "Hz", f)
        add(p + "W", "W", f)
    for p, f in _BINARY.items():
        add(p + "B", "B", f)
        add(p + "B/s", "B/s", f)
    for p, f in _SMALL.items():
        add(p + "s", "s", f)
    for word in ("byte", "bytes"):
        add(word, "B", 1.0)
    for word, f in (("sec", 1.0), ("second", 1.0), ("seconds", 1.0), ("min", 60.0)):
        add(word, "s", f)
    for word in ("FLOP/B", "FLOP/byte", "FLOPs/byte", "FLOP per byte", "FLOP/Byte"):
        add(word, "FLOP/B", 1.0)
    add("x", "1", 1.0)
    add("×", "1", 1.0)
    add("%", "1", 0.01)
    add("percent", "1", 0.01)
    add("", "1", 1.0)
    return units


_UNITS = _table()


def _folded() -> dict[str, Unit]:
    """Case-insensitive spellings ("gib", "tflops"), kept only where they are unambiguous:
    "gb" could be Gb (bits) or GB (bytes) and "mw" mW or MW, so those are not read."""
    folded: dict[str, Unit] = {}
    ambiguous: set[str] = set()
    for symbol, unit in _UNITS.items():
        key = symbol.lower()
        prev = folded.get(key)
        # FLOPs and FLOPS (a count, a rate) convert into each other: not an ambiguity.
        if (
            prev is not None
            and prev.scale == unit.scale
            and {prev.kind, unit.kind} <= {"FLOP", "FLOP/s"}
        ):
            continue
        if prev is not None and prev != unit:
            ambiguous.add(key)
        folded.setdefault(key, unit)
    for key in ambiguous:
        folded.pop(key)
    # no one writes megaseconds or megabits in lower case for these
    for key, symbol in (("ms", "ms"), ("mib", "MiB"), ("mib/s", "MiB/s")):
        folded[key] = _UNITS[symbol]
    return folded


_FOLDED = _folded()
_AMBIGUOUS = {s.lower() for s in _UNITS} - set(_FOLDED)

_NUMBER = re.compile(
    r"""^\s*(?:~|≈|about|approximately|approx\.?)?\s*
    (?P<num>[-+−]?(?:\d{1,3}(?:,\d{3})+|\d[\d_]*)?(?:\.\d+)?(?:[eE][-+]?\d+)?)
    (?:\s*/\s*(?P<den>\d+(?:\.\d+)?))?
    (?:\s*(?:x|×|\*)\s*10\s*(?:\^|\*\*)\s*(?P<exp>[-+−]?\d+))?
    \s*(?P<unit>.*?)\s*$""",
    re.VERBOSE,
)


def parse_unit(symbol: str) -> Unit:
    """The :class:`Unit` written ``symbol`` (``"TB/s"``, ``"GiB"``, ``"%"``, ``"tiles"``).

    A word that is no unit (``"tiles"``, ``"NeuronCores"``, ``"bytes per parameter"``) is read
    as a plain count, so a question may name what it counts.
    """
    s = symbol.strip()
    if s in _UNITS:
        return _UNITS[s]
    folded = _FOLDED.get(s.lower())
    if folded is not None:
        return folded
    if s.lower() in _AMBIGUOUS:  # known, but ambiguous without its case
        readings = sorted(
            {
                f"{u.symbol} ({KIND_WORDS[u.kind].split(' (')[0].removeprefix('a ').removeprefix('an ')})"
                for u in _UNITS.values()
                if u.symbol.lower() == s.lower()
            }
        )
        raise UnitMismatch(
            f"'{symbol}' could be {' or '.join(readings)}: write it with its capitals"
        )
    if re.fullmatch(r"[A-Za-z][A-Za-z ]*", s) and not _looks_like_unit(s):
        return Unit("1", 1.0, s)  # a counted noun: "tiles", "chips", "loads"
    raise UnitMismatch(f"'{symbol}' is not a unit this check knows")


def _looks_like_unit(word: str) -> bool:
    """Short letter groups that look like a unit with a typo ("GFLOPs/s" is fine, "Gbs" is not)."""
    return len(word) <= 4 and word not in {"x", "times", "one", "tile", "tiles", "lab"}


def split_answer(text: str) -> tuple[float, str]:
    """``"1,299 TFLOP/s"`` -> ``(1299.0, "TFLOP/s")``; raises :class:`UnitMismatch` if unreadable."""
    m = _NUMBER.match(text)
    if not m or not m["num"] or m["num"] in {"-", "+", "."}:
        raise UnitMismatch(f"'{text}' does not start with a number")
    raw = m["num"].replace(",", "").replace("_", "").replace("−", "-")
    try:
        value = float(raw)
    except ValueError:  # an exponent with no digits before it: "E0", "-e5"
        raise UnitMismatch(f"'{text}' does not start with a number") from None
    if m["den"]:
        den = float(m["den"])
        if den == 0:
            raise UnitMismatch(f"'{text}' divides by zero")
        value /= den
    if m["exp"]:
        # through float's own parsing: beyond its range it gives inf or 0, never an error
        value = float(f"{value!r}e{int(m['exp'].replace('−', '-'))}")
    return value, m["unit"]


def kind_words(unit: str) -> str:
    """``"PFLOP/s"`` -> ``"a compute rate (FLOP per second)"``."""
    try:
        return KIND_WORDS[parse_unit(unit).kind]
    except UnitMismatch:
        return f"a number in {unit}"


def to_unit(answer: Any, unit: str) -> float:
    """``answer`` as a number in ``unit``: a number is taken as already in ``unit``; a string
    may carry its own unit of the same kind, which is converted.

    Raises
    ------
    UnitMismatch
        If a string's unit measures another kind of quantity, or the string is unreadable;
        the message says what the question asks for.
    TypeError
        If ``answer`` is neither a number nor a string.
    """
    if isinstance(answer, bool):
        raise TypeError("a number, not True/False")
    if isinstance(answer, str):
        value, written = split_answer(answer)
        if not written:
            return value
        want = parse_unit(unit) if unit else _UNITS[""]
        try:
            got = parse_unit(written)
        except UnitMismatch as err:
            raise UnitMismatch(f"{err}; the question asks for {_asks(unit)}") from None
        if got.kind == "1" and want.kind == "1":
            # "25%" for a fraction, "13x" for a ratio, "176 tiles" for a count.
            return value * got.scale / want.scale
        if {got.kind, want.kind} == {"FLOP", "FLOP/s"}:
            # "20.8 PFLOPs" is commonly written for a rate, "268 MFLOPS" for a count.
            return value * got.scale / want.scale
        if got.kind != want.kind:
            hint = _bits_hint(got, want)
            raise UnitMismatch(
                f"'{answer}' is {KIND_WORDS[got.kind]}, but the question asks for "
                f"{_asks(unit)}{hint}"
            )
        return value * got.scale / want.scale
    try:
        value = float(answer)
    except (TypeError, ValueError):
        raise TypeError(f"a number, not {type(answer).__name__}") from None
    return value


def _asks(unit: str) -> str:
    if not unit:
        return "a plain number"
    try:
        u = parse_unit(unit)
    except UnitMismatch:
        return f"a number in {unit}"
    if u.kind == "1":
        return f"a plain number ({unit})" if unit.strip() not in {"", "x"} else "a plain number"
    return f"{KIND_WORDS[u.kind]}, in {unit}"


def _bits_hint(got: Unit, want: Unit) -> str:
    pairs = {("bit", "B"), ("bit/s", "B/s"), ("B", "bit"), ("B/s", "bit/s")}
    if (got.kind, want.kind) in pairs:
        return " (a lower-case b is a bit, an upper-case B a byte: 8 bits)"
    return ""


def decimal_digits(value: float, sig: int) -> str:
    """``value`` rounded to ``sig`` significant figures, written plainly with separators."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if not 1e-3 <= abs(value) < 1e9:  # no strings of zeros: 3.53e-20, 2.08e+16
        return f"{value:.{sig}g}"
    decimals = max(0, sig - 1 - math.floor(math.log10(abs(value))))
    rounded = round(value, decimals)
    return f"{rounded:,.{decimals}f}"
