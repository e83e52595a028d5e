"""Numeric format facts as data: widths, bias, range, specials, and the value of every code.

Three kinds of format, each a frozen record:

- :class:`FloatFormat` - sign, exponent and mantissa fields (fp32 down to fp4). ``specials`` says
  how the format spends its top codes:

  ``"ieee"``    all-ones exponent holds +-Inf (mantissa 0) and NaN (otherwise): fp32, tf32, bf16,
                fp16, fp8_e5m2, and the IEEE-like fp8_e4m3 and fp8_e3m4.
  ``"fn"``      finite + NaN: only S.1111.111 is NaN, the rest of the top binade is finite
                (OCP fp8_e4m3fn, max 448).
  ``"fnuz"``    finite + NaN, unsigned zero: 0x80 (the would-be -0) is the single NaN and there
                is no -0 (fp8_e4m3fnuz, fp8_e5m2fnuz).
  ``"finite"``  no Inf, no NaN: every code is a number (the MX element types fp6 and fp4).

- :class:`IntFormat` - symmetric two's-complement integers times a scale: ``int8`` with a
  per-tensor scale, and the MXINT8 element (an implied scale of 2^-6).

- :class:`MXFormat` - OCP Microscaling v1.0: blocks of 32 elements of an element format sharing
  one E8M0 scale (a power of two, 2^-127 .. 2^127, code 0xFF = NaN).

Sources: IEEE 754-2019 (binary32/16); Google bfloat16; NVIDIA TF32; OCP 8-bit Floating Point
Specification (OFP8) rev 1.0 for e4m3fn/e5m2; Graphcore/AMD FNUZ (as in ml_dtypes); OCP
Microscaling Formats (MX) v1.0, sections 5.3-5.4 for E8M0, FP6, FP4 and INT8 elements.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from functools import cache
from typing import ClassVar

import numpy as np

from ._errors import FormatError, FormatTypeError

__all__ = [
    "E8M0_BIAS",
    "E8M0_NAN",
    "FloatFormat",
    "Format",
    "IntFormat",
    "MXFormat",
    "decode_table",
    "facts",
    "formats",
    "grid",
    "spec",
]

IEEE, FN, FNUZ, FINITE = "ieee", "fn", "fnuz", "finite"
_SPECIALS = (IEEE, FN, FNUZ, FINITE)

#: E8M0 scale of OCP MX v1.0 (section 5.4.1): unsigned exponent, bias 127, 0xFF is NaN.
E8M0_BIAS = 127
E8M0_NAN = 0xFF


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format with sign, exponent and mantissa fields.

    Attributes
    ----------
    name : str
        trnlab's name, e.g. ``"fp8_e4m3fn"``.
    exp_bits, man_bits : int
        Widths of the exponent and (stored) mantissa fields.
    bias : int
        Exponent bias: a normal number is ``(1 + M / 2**man_bits) * 2**(E - bias)``.
    specials : str
        ``"ieee"``, ``"fn"``, ``"fnuz"`` or ``"finite"`` (see the module docstring).
    storage_bits : int
        Bits one value occupies in memory (tf32 is 19 bits of information stored in 32).
    source : str
        Where the definition comes from.
    """

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    specials: str
    storage_bits: int
    source: str
    kind: ClassVar[str] = "float"

    def __post_init__(self) -> None:
        if self.specials not in _SPECIALS:
            raise FormatError(f"specials must be one of {_SPECIALS}, not {self.specials!r}")

    @property
    def bits(self) -> int:
        """Bits of information per value: sign + exponent + mantissa."""
        return 1 + self.exp_bits + self.man_bits

    @property
    def bits_per_value(self) -> float:
        """Memory per value in bits (storage, so 32 for tf32)."""
        return float(self.storage_bits)

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number, 1 - bias."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Exponent of the largest finite number (IEEE formats reserve the top binade)."""
        top = (1 << self.exp_bits) - 1
        return top - 1 - self.bias if self.specials == IEEE else top - self.bias

    @property
    def max_code(self) -> int:
        """Code magnitude (code without the sign bit) of the largest finite value."""
        m, e = self.man_bits, self.exp_bits
        if self.specials == IEEE:
            return (((1 << e) - 1) << m) - 1
        if self.specials == FN:
            return (1 << (e + m)) - 2  # S.1111.111 is NaN, S.1111.110 the max (OFP8 table 1)
        return (1 << (e + m)) - 1

    @property
    def max(self) -> float:
        """Largest finite value."""
        m = self.man_bits
        frac = self.max_code & ((1 << m) - 1)
        return math.ldexp(1.0 + frac / (1 << m), self.emax)

    @property
    def min_normal(self) -> float:
        """Smallest positive normal value, 2**emin."""
        return math.ldexp(1.0, self.emin)

    @property
    def min_subnormal(self) -> float:
        """Smallest positive value, 2**(emin - man_bits)."""
        return math.ldexp(1.0, self.emin - self.man_bits)

    @property
    def epsilon(self) -> float:
        """Machine epsilon: the gap between 1 and the next value, 2**-man_bits."""
        return math.ldexp(1.0, -self.man_bits)

    @property
    def has_inf(self) -> bool:
        return self.specials == IEEE

    @property
    def has_nan(self) -> bool:
        return self.specials != FINITE

    @property
    def has_negative_zero(self) -> bool:
        return self.specials != FNUZ

    @property
    def code_dtype(self) -> np.dtype:
        """Unsigned integer type that holds one code (tf32 codes are float32 bit patterns)."""
        return np.dtype(np.uint8 if self.storage_bits <= 8 else f"uint{self.storage_bits}")

    def nan_code(self, negative: bool = False) -> int | None:
        """The code this library writes for NaN (the quiet NaN ml_dtypes writes), or None."""
        e, m = self.exp_bits, self.man_bits
        sign = (1 << (e + m)) if negative else 0
        if self.specials == IEEE:
            return sign | (((1 << e) - 1) << m) | (1 << (m - 1))
        if self.specials == FN:
            return sign | ((1 << (e + m)) - 1)
        if self.specials == FNUZ:
            return 1 << (e + m)
        return None

    def inf_code(self) -> int | None:
        """Code magnitude of +Inf, or None for formats without infinities."""
        if self.specials != IEEE:
            return None
        return ((1 << self.exp_bits) - 1) << self.man_bits


@dataclass(frozen=True)
class IntFormat:
    """Symmetric two's-complement integers ``k * 2**-frac_bits`` with ``|k| <= qmax``.

    ``int8`` has ``frac_bits = 0`` and takes a per-tensor float scale (value = k * scale);
    the MXINT8 element has an implied scale of 2**-6 (OCP MX v1.0 section 5.3.3), so its values
    are -127/64 .. 127/64. The code -128 is decodable but never produced: conversion clamps
    symmetrically, as the MX reference implementation (microsoft/microxcaling) does.
    """

    name: str
    bits: int
    frac_bits: int
    per_tensor_scale: bool
    source: str
    kind: ClassVar[str] = "int"
    specials: ClassVar[str] = FINITE
    has_inf: ClassVar[bool] = False
    has_nan: ClassVar[bool] = False
    has_negative_zero: ClassVar[bool] = False

    @property
    def qmax(self) -> int:
        return (1 << (self.bits - 1)) - 1

    @property
    def exp_bits(self) -> int:
        return 0

    @property
    def man_bits(self) -> int:
        return self.bits - 1

    @property
    def bias(self) -> int:
        return 0

    @property
    def emax(self) -> int:
        """Exponent of the largest power of two below max (MX v1.0 table: 0 for MXINT8)."""
        return self.bits - 2 - self.frac_bits

    @property
    def max(self) -> float:
        return math.ldexp(self.qmax, -self.frac_bits)

    @property
    def min_normal(self) -> float:
        """Integers have no subnormals: the smallest positive value, the step."""
        return math.ldexp(1.0, -self.frac_bits)

    @property
    def min_subnormal(self) -> float:
        return math.ldexp(1.0, -self.frac_bits)

    @property
    def epsilon(self) -> float:
        """Gap between 1 and the next value (for int8, with scale 1: 1)."""
        return math.ldexp(1.0, -self.frac_bits)

    @property
    def bits_per_value(self) -> float:
        return float(self.bits)

    @property
    def code_dtype(self) -> np.dtype:
        return np.dtype(np.int8)


@dataclass(frozen=True)
class MXFormat:
    """OCP MX v1.0 block format: ``block_size`` elements share one E8M0 power-of-two scale.

    A block's value i is ``X * P_i`` with ``X = 2**(scale_code - 127)``; scale code 0xFF (NaN)
    makes the whole block NaN (MX v1.0 section 5.2).
    """

    name: str
    element: FloatFormat | IntFormat
    source: str
    block_size: int = 32
    scale_bits: int = 8
    kind: ClassVar[str] = "mx"

    @property
    def emax_elem(self) -> int:
        """Exponent of the largest power of two in the element type (MX v1.0 table 1)."""
        return self.element.emax

    @property
    def bits(self) -> int:
        return self.element.bits

    @property
    def bits_per_value(self) -> float:
        """Element bits plus the scale spread over the block: 8.25 for MXFP8, 4.25 for MXFP4."""
        return self.element.bits + self.scale_bits / self.block_size

    @property
    def exp_bits(self) -> int:
        return self.element.exp_bits

    @property
    def man_bits(self) -> int:
        return self.element.man_bits

    @property
    def bias(self) -> int:
        return self.element.bias

    @property
    def max(self) -> float:
        """Largest finite value: element max times the largest scale 2**127."""
        return self.element.max * 2.0**127

    @property
    def min_normal(self) -> float:
        return self.element.min_normal * 2.0**-127

    @property
    def min_subnormal(self) -> float:
        return self.element.min_subnormal * 2.0**-127

    @property
    def epsilon(self) -> float:
        return self.element.epsilon

    @property
    def has_inf(self) -> bool:
        return False

    @property
    def has_nan(self) -> bool:
        return True  # through the scale


Format = FloatFormat | IntFormat | MXFormat

_IEEE754 = "IEEE 754-2019"
_OFP8 = "OCP 8-bit Floating Point Specification (OFP8) rev 1.0"
_MX = "OCP Microscaling Formats (MX) Specification v1.0"
_FNUZ = "FNUZ fp8 (Graphcore/AMD), as defined by ml_dtypes"

_FLOATS = (
    FloatFormat("fp32", 8, 23, 127, IEEE, 32, _IEEE754 + " binary32"),
    FloatFormat("tf32", 8, 10, 127, IEEE, 32, "NVIDIA TensorFloat-32; Neuron stores it in 32 bits"),
    FloatFormat("bf16", 8, 7, 127, IEEE, 16, "Google bfloat16 (top half of binary32)"),
    FloatFormat("fp16", 5, 10, 15, IEEE, 16, _IEEE754 + " binary16"),
    FloatFormat("fp8_e4m3fn", 4, 3, 7, FN, 8, _OFP8 + " E4M3"),
    # Neuron docs say values beyond +-240 become NaN in Trn1/Trn2's E4M3; trnlab follows the
    # IEEE-like definition (and ml_dtypes float8_e4m3): they overflow to Inf.
    FloatFormat(
        "fp8_e4m3", 4, 3, 7, IEEE, 8, "IEEE-like E4M3 (ml_dtypes float8_e4m3), as Trn1/Trn2 cFP8"
    ),
    FloatFormat("fp8_e5m2", 5, 2, 15, IEEE, 8, _OFP8 + " E5M2"),
    FloatFormat("fp8_e3m4", 3, 4, 3, IEEE, 8, "IEEE-like E3M4 (ml_dtypes float8_e3m4), cFP8"),
    FloatFormat("fp8_e4m3fnuz", 4, 3, 8, FNUZ, 8, _FNUZ),
    FloatFormat("fp8_e5m2fnuz", 5, 2, 16, FNUZ, 8, _FNUZ),
    FloatFormat("fp6_e2m3", 2, 3, 1, FINITE, 6, _MX + " FP6 E2M3 element"),
    FloatFormat("fp6_e3m2", 3, 2, 3, FINITE, 6, _MX + " FP6 E3M2 element"),
    FloatFormat("fp4_e2m1", 2, 1, 1, FINITE, 4, _MX + " FP4 E2M1 element"),
)
_INTS = (
    IntFormat("int8", 8, 0, True, "symmetric int8, per-tensor scale amax/127"),
    IntFormat("int8_mx", 8, 6, False, _MX + " INT8 element (implied scale 2^-6)"),
)
_BY_NAME: dict[str, Format] = {f.name: f for f in _FLOATS + _INTS}
for _name, _elem in (
    ("mxfp8_e4m3", "fp8_e4m3fn"),
    ("mxfp8_e5m2", "fp8_e5m2"),
    ("mxfp6_e2m3", "fp6_e2m3"),
    ("mxfp6_e3m2", "fp6_e3m2"),
    ("mxfp4", "fp4_e2m1"),
    ("mxint8", "int8_mx"),
):
    _BY_NAME[_name] = MXFormat(_name, _BY_NAME[_elem], _MX)  # type: ignore[arg-type]

_ALIASES = {
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float8_e4m3fn": "fp8_e4m3fn",
    "float8_e4m3": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "float8_e3m4": "fp8_e3m4",
    "float8_e4m3fnuz": "fp8_e4m3fnuz",
    "float8_e5m2fnuz": "fp8_e5m2fnuz",
    "float6_e2m3fn": "fp6_e2m3",
    "float6_e3m2fn": "fp6_e3m2",
    "float4_e2m1fn": "fp4_e2m1",
    "mxfp4_e2m1": "mxfp4",
}


def formats(kind: str | None = None) -> tuple[str, ...]:
    """Names of every format, optionally only one kind: ``"float"``, ``"int"`` or ``"mx"``."""
    if kind not in (None, "float", "int", "mx"):
        raise FormatError(f"kind must be 'float', 'int', 'mx' or None, not {kind!r}")
    return tuple(n for n, f in _BY_NAME.items() if kind is None or f.kind == kind)


def spec(fmt: str | Format) -> Format:
    """The format record called ``fmt`` (a record passes through unchanged).

    Raises
    ------
    ValueError
        For an unknown name; the message lists every format and the nearest names.
    """
    if isinstance(fmt, FloatFormat | IntFormat | MXFormat):
        return fmt
    if not isinstance(fmt, str):
        raise FormatTypeError(f"a format is named by a string such as 'bf16', not {fmt!r}")
    key = fmt.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key in _BY_NAME:
        return _BY_NAME[key]
    near = difflib.get_close_matches(key, list(_BY_NAME), n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(near)}?" if near else ""
    raise FormatError(
        f"unknown format {fmt!r}.{hint} Formats: {', '.join(_BY_NAME)}. "
        f"(fp8 has several encodings: name one, e.g. 'fp8_e4m3fn' or 'fp8_e5m2'.)"
    )


@cache
def _decode_table_cached(name: str) -> np.ndarray:
    f = _BY_NAME[name]
    if isinstance(f, IntFormat):
        k = np.arange(1 << f.bits, dtype=np.int64)
        k = np.where(k >= 1 << (f.bits - 1), k - (1 << f.bits), k)  # two's complement
        table = np.ldexp(k.astype(np.float64), -f.frac_bits).astype(np.float32)
        table.flags.writeable = False
        return table
    assert isinstance(f, FloatFormat)
    e, m = f.exp_bits, f.man_bits
    codes = np.arange(1 << f.bits, dtype=np.int64)
    sign = codes >> (e + m)
    ex = (codes >> m) & ((1 << e) - 1)
    mant = codes & ((1 << m) - 1)
    # subnormal: M * 2^(emin - m); normal: (2^m + M) * 2^(E - bias - m)   (IEEE 754 3.4)
    mag = np.where(
        ex == 0,
        np.ldexp(mant.astype(np.float64), f.emin - m),
        np.ldexp(((1 << m) + mant).astype(np.float64), ex - f.bias - m),
    )
    val = np.where(sign == 1, -mag, mag)
    magnitude = codes & ((1 << (e + m)) - 1)
    if f.specials == IEEE:
        top = ex == (1 << e) - 1
        val = np.where(top & (mant == 0), np.where(sign == 1, -np.inf, np.inf), val)
        val = np.where(top & (mant != 0), np.nan, val)
    elif f.specials == FN:
        val = np.where(magnitude == (1 << (e + m)) - 1, np.nan, val)
    elif f.specials == FNUZ:
        val = np.where(codes == 1 << (e + m), np.nan, val)
    table = val.astype(np.float32)
    # NaN codes decode to a quiet NaN carrying the code's sign (fnuz: positive).
    nan = np.isnan(table)
    bits = table.view(np.uint32)
    bits[nan] = np.where(sign[nan] == 1, 0xFFC00000, 0x7FC00000).astype(np.uint32)
    table.flags.writeable = False
    return table


def decode_table(fmt: str | Format) -> np.ndarray:
    """Float32 value of every code of an element format, indexed by code (read-only).

    For float formats of up to 16 bits of information and for the int formats (indexed by the
    code's unsigned byte). tf32 (2**19 codes) and fp32 are decoded from their bits instead.
    """
    f = spec(fmt)
    if isinstance(f, MXFormat):
        f = f.element
    if f.bits > 16:
        raise FormatError(
            f"{f.name} has 2**{f.bits} codes; it is decoded from its bits, not a table"
        )
    return _decode_table_cached(f.name)


def facts(fmt: str | Format) -> dict:
    """The format's facts as a plain dict (one row of a table), e.g. for ``pandas.DataFrame``.

    Keys: name, kind, bits, bits_per_value, exp_bits, man_bits, bias, max, min_normal,
    min_subnormal, epsilon, has_inf, has_nan, block_size (MX only, else None).

    >>> facts("fp8_e4m3fn")["max"], facts("mxfp4")["bits_per_value"]
    (448.0, 4.25)
    """
    f = spec(fmt)
    keys = ("bits", "bits_per_value", "exp_bits", "man_bits", "bias", "max", "min_normal")
    row = {"name": f.name, "kind": f.kind} | {k: getattr(f, k) for k in keys}
    row |= {k: getattr(f, k) for k in ("min_subnormal", "epsilon", "has_inf", "has_nan")}
    row["block_size"] = f.block_size if isinstance(f, MXFormat) else None
    return row


def grid(fmt: str | Format) -> np.ndarray:
    """Every finite value of ``fmt``, sorted, as float64 (each zero once), for plots.

    For MX formats this is the element grid (a block with scale 1): multiply by the block's
    scale 2**k. For ``int8`` it is the integers -127..127 (multiply by the tensor's scale).
    fp32 has too many values to list and raises ValueError.
    """
    f = spec(fmt)
    base = f.element if isinstance(f, MXFormat) else f
    if isinstance(base, IntFormat):
        k = np.arange(-base.qmax, base.qmax + 1, dtype=np.float64)
        return np.ldexp(k, -base.frac_bits)
    if base.bits > 20:
        raise FormatError(
            f"{base.name} has 2**{base.bits} values; grid() lists formats of up to 20 bits. "
            f"Use np.nextafter on float32 to walk fp32."
        )
    if base.bits <= 16:
        values = decode_table(base).astype(np.float64)
    else:  # tf32: enumerate its 19-bit codes as float32 bit patterns with 13 zero low bits
        codes = np.arange(1 << (base.bits - 1), dtype=np.uint32) << np.uint32(23 - base.man_bits)
        pos = codes[codes < 0x7F800000].view(np.float32).astype(np.float64)
        values = np.concatenate([pos, -pos])
    values = values[np.isfinite(values)]
    return np.unique(values)  # sorted; -0.0 and 0.0 compare equal and appear once
