"""The slips an exercise expects, and words for how far off an answer is.

A :class:`Slip` is a factor a learner's answer is off by when they make one particular mistake
(``ratio`` = their answer / the right one) and a sentence that names the mistake. Each exercise
declares the slips its question invites, from the factories below; a check names the slip whose
factor fits the answer, and otherwise says how far off it is (:func:`how_far`).

>>> how_far(3.1)
'about 3.1x too high'
>>> how_far(0.6)
'about 40% too low'
>>> how_far(1e17)
'about 10^17 times too high'
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ._units import UnitMismatch, parse_unit

__all__ = [
    "Slip",
    "binary_prefixes",
    "bytes_per_value",
    "chip_vs_core",
    "fraction_vs_percent",
    "how_far",
    "mac_flops",
    "per_direction",
    "si_prefixes",
    "usable_vs_physical",
]


@dataclass(frozen=True)
class Slip:
    """One mistake an exercise expects.

    Attributes
    ----------
    ratio : float
        The learner's answer over the right one when they make this mistake.
    says : str
        What they most likely did, in a sentence addressed to them.
    rtol : float
        How close the answer's ratio must be to ``ratio`` for the slip to fit.
    kind : str
        ``"unit"`` for slips of notation (prefixes, percent), ``"concept"`` for the rest; a
        check also tries one unit slip on top of one concept slip.
    """

    ratio: float
    says: str
    rtol: float = 0.02
    kind: str = "concept"

    def fits(self, ratio: float) -> float | None:
        """How far ``ratio`` is from this slip's (relative), or None if it does not fit."""
        off = abs(ratio / self.ratio - 1)
        return off if off <= self.rtol else None


def _times(r: float) -> str:
    """A factor in words: 3.1 -> '3.1x', 12 -> '12x', 1500 -> '1,500x', 1e17 -> '10^17 times'."""
    if r < 10:
        text = f"{r:.1f}".removesuffix(".0")
        return f"{text}x"
    if r < 9.5e4:
        return f"{round(r, 1 - math.floor(math.log10(r))):,.0f}x"
    return f"10^{round(math.log10(r))} times"


def how_far(ratio: float) -> str:
    """How far an answer is from the right one, as a person says it.

    ``ratio`` is the answer over the right answer (positive). Within a factor of two it is a
    percentage ("about 40% too low"), never 0% (a tiny miss is "slightly too high (0.3%)");
    beyond, a factor ("about 3x too high"): never a percentage of 10,000% or more.
    """
    if not ratio > 0 or not math.isfinite(ratio):
        raise ValueError(f"how_far needs a positive finite ratio, not {ratio!r}")
    high = ratio > 1
    word = "too high" if high else "too low"
    factor = ratio if high else 1 / ratio
    if factor >= 1.95:
        return f"about {_times(factor)} {word}"
    share = (ratio - 1) if high else (1 - ratio)  # under 100% high, under 50% low
    pct = share * 100
    if pct >= 10:
        return f"about {pct:.0f}% {word}"
    if pct >= 1:
        return f"about {pct:.1f}% {word}".replace(".0%", "%")
    digits = f"{pct:.1g}" if pct >= 1e-6 else "less than 0.000001"
    return f"slightly {word}, by {digits}%"


def _prefix_names(unit: str) -> tuple[float, str] | None:
    """``"PFLOP/s"`` -> ``(1e15, "FLOP/s")``: the unit's decimal scale and its base symbol."""
    try:
        u = parse_unit(unit)
    except UnitMismatch:
        return None
    if u.kind == "1" or u.scale <= 0:
        return None
    base = {"FLOP/s": "FLOP/s", "FLOP": "FLOP", "B": "B", "B/s": "B/s", "bit/s": "bit/s"}
    base.update({"s": "s", "Hz": "Hz", "W": "W", "FLOP/B": "FLOP/B", "bit": "bit"})
    return u.scale, base[u.kind]


_NAMES = {
    1e-12: "p",
    1e-9: "n",
    1e-6: "u",
    1e-3: "m",
    1.0: "",
    1e3: "k",
    1e6: "M",
    1e9: "G",
    1e12: "T",
    1e15: "P",
    1e18: "E",
}


def _named(scale: float, base: str) -> str | None:
    for s, p in _NAMES.items():
        if math.isclose(scale, s, rel_tol=1e-9):
            if base in {"s"} and s > 1:
                return None
            if base not in {"s"} and s < 1:
                return None
            return "bytes" if f"{p}{base}" == "B" else f"{p}{base}"
    return None


def si_prefixes(unit: str = "", lo: int = 3, hi: int = 15) -> tuple[Slip, ...]:
    """Answers off by a power of 1,000 (10^lo ... 10^hi): a unit prefix slip.

    With the question's ``unit`` the message names the unit the answer seems to be in
    ("it looks like TFLOP/s; the question asks for PFLOP/s").
    """
    known = _prefix_names(unit)
    slips = []
    for e in range(lo, hi + 1, 3):
        for sign in (1, -1):
            ratio = 10.0 ** (sign * e)
            looks = None
            if known is not None:
                looks = _named(known[0] / ratio, known[1])
            word = f"{10**e:,}" if e <= 6 else f"10^{e}"
            if looks:
                says = f"it looks like {looks}; the question asks for {unit}"
            else:
                says = f"a factor of {word}: check the unit prefixes (k, M, G, T, P)"
            slips.append(Slip(ratio, says, kind="unit"))
    return tuple(slips)


_BINARY_NAMES = {0: "bytes", 10: "KiB", 20: "MiB", 30: "GiB", 40: "TiB", 50: "PiB"}


def binary_prefixes(unit: str = "") -> tuple[Slip, ...]:
    """Binary against decimal prefixes: GiB (2^30) for GB (10^9) and the like, and a step of
    2^10 between binary prefixes (MiB for GiB)."""
    slips = []
    names = {1: ("KiB", "kB"), 2: ("MiB", "MB"), 3: ("GiB", "GB")}
    try:
        u = parse_unit(unit)
        known = u.scale if u.kind in {"B", "B/s"} else None
    except UnitMismatch:
        known = None
    for k in (1, 2, 3):
        b, d = names[k]
        r = 2.0 ** (10 * k) / 10.0 ** (3 * k)
        mix = f"that mixes {b} (2^{10 * k} bytes) and {d} (10^{3 * k} bytes)"
        slips.append(Slip(1 / r, mix, 0.004, "unit"))
        slips.append(Slip(r, mix, 0.004, "unit"))
        step = 2.0 ** (10 * k)
        text = f"{int(step):,}" if k < 3 else "2^30"
        for sign in (1, -1):
            looks = _BINARY_NAMES.get(round(math.log2(known / step**sign))) if known else None
            says = (
                f"it looks like {looks}; the question asks for {unit}"
                if looks
                else f"a factor of {text}: KiB, MiB and GiB are 2^10 apart"
            )
            slips.append(Slip(step**sign, says, 0.004, "unit"))
    return tuple(slips)


def chip_vs_core(cores: int, asks: str = "chip") -> tuple[Slip, ...]:
    """A per-core figure for a per-chip one (``asks="chip"``), or the other way round."""
    if asks == "chip":
        return (
            Slip(1 / cores, f"that is one NeuronCore's figure; the chip has {cores} NeuronCores"),
        )
    return (Slip(float(cores), f"that is the whole chip's figure; it has {cores} NeuronCores"),)


def usable_vs_physical(physical: float, usable: float, what: str = "SBUF") -> tuple[Slip, ...]:
    """The physical size where the usable one is asked (the runtime keeps the difference)."""
    return (
        Slip(
            physical / usable,
            f"that counts the physical {what}; the runtime keeps part of it, so a kernel has "
            "only the usable figure",
            0.005,
        ),
    )


def fraction_vs_percent(asks: str = "fraction") -> tuple[Slip, ...]:
    """A percentage written where a fraction is asked (25 for 0.25), or the other way round."""
    if asks == "fraction":
        return (
            Slip(
                100.0,
                "that looks like a percentage; the question asks for a fraction (0.25, or "
                "the string '25%')",
                0.001,
                "unit",
            ),
        )
    return (
        Slip(
            0.01,
            "that looks like a fraction; the question asks for a percentage",
            0.001,
            "unit",
        ),
    )


def per_direction(asks: str = "each way") -> tuple[Slip, ...]:
    """Both directions of a link added up where one direction is asked, or the reverse."""
    if asks == "each way":
        return (Slip(2.0, "that counts both directions of the link; the question asks for one"),)
    return (Slip(0.5, "that is one direction of the link; the question counts both"),)


def bytes_per_value(ratio: float, used: str, right: str) -> tuple[Slip, ...]:
    """Counted with the wrong data type's size: ``used`` bytes per value instead of ``right``.

    ``ratio`` is the answer over the right one when the slip is made (2.0 for bytes counted in
    fp32 instead of bf16; 0.5 for tiles that fit counted with fp32 sizes).
    """
    return (Slip(ratio, f"that counts {used} per value; the question's values are {right}"),)


def mac_flops(ratio: float = 0.5) -> tuple[Slip, ...]:
    """A multiply-accumulate counted as one FLOP (``ratio`` = answer / right when it happens:
    0.5 for a FLOP count, 2 for a clock derived from a FLOP/s rating)."""
    return (
        Slip(
            ratio,
            "a multiply-accumulate is 2 FLOPs (a multiply and an add), and peak FLOP/s "
            "ratings count both",
        ),
    )


def best_fit(ratio: float, slips: Iterable[Slip]) -> tuple[str, float] | None:
    """The message of the slip (or unit slip on top of a concept slip) that fits ``ratio``
    best, with how far off it is; None if none fits."""
    slips = tuple(slips)
    found = [(off, s.says) for s in slips if (off := s.fits(ratio)) is not None]
    if found:
        off, says = min(found)
        same = sorted({m for o, m in found if math.isclose(o, off, abs_tol=1e-6)})
        return ("; or ".join(same) if len(same) > 1 else says), off
    units = [s for s in slips if s.kind == "unit"]
    concepts = [s for s in slips if s.kind == "concept"]
    pairs = []
    for u in units:
        for c in concepts:
            both = Slip(u.ratio * c.ratio, "", min(u.rtol, c.rtol))
            off = both.fits(ratio)
            if off is not None:
                pairs.append((off, f"two slips at once: {c.says}; and {u.says}"))
    if pairs:
        off, says = min(pairs)
        return says, off
    return None
