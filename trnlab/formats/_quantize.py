"""Public quantise / encode / decode: validation, defaults and random keys over the kernels.

Behaviour shared by :func:`quantize`, :func:`encode` and :func:`decode`:

- Input is converted to float32 first. float64 (numpy's default) and other float types are
  accepted and rounded to the nearest float32 before quantising (the same double rounding a
  host-side cast to fp32 does before data reaches a device). Integer, boolean and complex input
  raises TypeError: integers are usually codes, which :func:`decode` reads.
- Empty arrays give empty results of the same shape (and, for MX, an empty scale array).
- Rounding is round-to-nearest-even (``"nearest"``) or ``"stochastic"``: round up with
  probability equal to the distance from the value below, in grid steps; reproducible for a
  given ``seed`` (see ``_stochastic.py``); ``seed=None`` draws fresh entropy.
- Specials, for the element formats:

  ======================  ============================  ==============================
  format kind             non-saturating overflow, Inf  ``saturate=True``
  ======================  ============================  ==============================
  ieee (fp16, bf16, ...)  +-Inf                         +-max (Inf inputs too)
  fn (fp8_e4m3fn)         NaN                           +-max (Inf inputs too)
  fnuz                    NaN (0x80)                    +-max (Inf inputs too)
  finite (fp6, fp4)       +-max (no Inf or NaN codes)   +-max
  ======================  ============================  ==============================

  With stochastic rounding a value between max and the next step overflows (rounds up) with
  the usual probability, and then follows the table. fp32 is the identity (stochastic too).
  NaN stays NaN (the format's quiet NaN, sign kept except fnuz). fp6/fp4 and int8 have no NaN
  code, so NaN input raises ValueError for them (MX formats carry NaN in the block scale).
  -0 is kept, except in fnuz formats, which have no -0 (it becomes +0). Subnormals of both
  float32 and the target are rounded exactly.
- MX formats block along ``axis`` (see ``_mx.py``); ``saturate`` has no effect there (elements
  always clamp, as MX v1.0 says). ``int8`` takes a per-tensor ``scale`` (default amax/127).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Literal

import numpy as np

from trnlab._checks import choose, flag, number, short

from ._errors import FormatError, FormatTypeError
from ._specs import FINITE, FloatFormat, Format, IntFormat, MXFormat, decode_table, spec

__all__ = ["Encoded", "decode", "encode", "quantize"]

Rounding = Literal["nearest", "stochastic"]
ScaleRule = Literal["ocp", "trainium3"]


@dataclass(frozen=True)
class Encoded:
    """Codes of a quantised array, and what is needed to decode them.

    Attributes
    ----------
    fmt : str
        Format name.
    codes : numpy.ndarray
        One code per element, same shape as the input: uint8/uint16 for float formats up to 16
        bits (fp6 and fp4 codes in the low bits of a uint8), uint32 float32 bit patterns for
        tf32 and fp32, int8 for int8 and mxint8.
    scales : numpy.ndarray or None
        MX: E8M0 scale codes (uint8), the input's shape with ``ceil(n / 32)`` along ``axis``;
        int8: the per-tensor float32 scale as a 0-d array; otherwise None.
    axis : int or None
        MX: the (non-negative) axis the blocks run along.
    """

    fmt: str
    codes: np.ndarray
    scales: np.ndarray | None = None
    axis: int | None = None

    @property
    def bits(self) -> int:
        """Storage in bits: element codes plus scales."""
        f = spec(self.fmt)
        total = self.codes.size * (f.storage_bits if isinstance(f, FloatFormat) else f.bits)
        if isinstance(f, MXFormat) and self.scales is not None:
            total += self.scales.size * f.scale_bits
        elif isinstance(f, IntFormat) and self.scales is not None:
            total += 32  # one float32 scale
        return total


# --- validation -------------------------------------------------------------------------------


def _as_float32(x, what: str) -> np.ndarray:
    try:
        arr = np.asarray(x)
    except ValueError as exc:  # a ragged list
        raise FormatError(
            f"{what} takes an array of numbers (x); {short(x)} is not one ({exc})"
        ) from None
    kind = arr.dtype.kind
    if kind in "iub":
        raise FormatTypeError(
            f"{what} expects floating-point values, got an array of {arr.dtype}. If these are "
            f"codes from encode(), use decode(); to quantise integer-valued data, cast it "
            f"first with x.astype(np.float32)."
        )
    if kind == "c":
        raise FormatTypeError(
            f"{what} expects real values, got {arr.dtype}; quantise .real and .imag"
        )
    if kind == "O" and not all(
        isinstance(v, numbers.Real) and not isinstance(v, bool) for v in arr.flat
    ):
        raise FormatTypeError(
            f"{what} expects an array of real numbers (x), got {short(x)}: None, text or other "
            f"objects have no value to round."
        )
    if kind not in "fO":
        raise FormatTypeError(
            f"{what} expects floating-point values (x), got an array of {arr.dtype} "
            f"({short(x)}); convert text to numbers first."
        )
    if arr.dtype != np.float32:
        arr = arr.astype(np.float32)
    return arr if arr.flags.c_contiguous else arr.copy()  # (ascontiguousarray makes 0-d 1-d)


def seed_sequence(seed) -> np.random.SeedSequence | None:
    """``seed`` as a SeedSequence (None stays None: fresh entropy), or a teaching error."""
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        if seed < 0:
            raise FormatError(f"seed must be a non-negative integer, got {seed}")
        return np.random.SeedSequence(int(seed))
    raise FormatTypeError(f"seed must be an int, a numpy SeedSequence or None, not {short(seed)}")


def _key(stochastic: bool, seed) -> np.uint64:
    if not stochastic:
        return np.uint64(0)
    from ._stochastic import seed_key  # numba-backed module, imported on first use

    return seed_key(seed)


def _stochastic(rounding: str) -> bool:
    return choose(rounding, ("nearest", "stochastic"), "rounding", FormatError) == "stochastic"


def _axis_type(axis) -> None:
    if not isinstance(axis, int | np.integer) or isinstance(axis, bool):
        raise FormatTypeError(f"axis must be an integer, not {short(axis)}")


def _axis(axis, ndim: int, fmt: str) -> int:
    if ndim == 0:
        raise FormatError(
            f"{fmt} is a block format: it quantises blocks of 32 along an axis, and a 0-d value "
            f"has none. Pass np.atleast_1d(x) (a block of one)."
        )
    _axis_type(axis)
    if not -ndim <= axis < ndim:
        raise FormatError(f"axis {axis} is out of range for an array with {ndim} dimension(s)")
    return int(axis) % ndim


def _options(f: Format, rounding, seed, axis, saturate, scale_rule, scale) -> tuple[bool, str]:
    """Check every option of quantize/encode before any work: (stochastic, scale_rule)."""
    stochastic = _stochastic(rounding)
    seed_sequence(seed)
    _axis_type(axis)
    flag(saturate, "saturate", FormatError)
    rule = choose(scale_rule, ("ocp", "trainium3"), "scale_rule", FormatError)
    if rule != "ocp" and not isinstance(f, MXFormat):
        raise FormatError(f"scale_rule applies to MX block formats only; {f.name} has no blocks")
    if scale is not None:
        if not (isinstance(f, IntFormat) and f.per_tensor_scale):
            raise FormatError(f"scale is the per-tensor scale of int8; {f.name} takes none")
        number(scale, "int8 scale", 0, None, lo_open=True, error=FormatError)
    return stochastic, rule


def _refuse_nan(x: np.ndarray, f: Format) -> None:
    if np.isnan(x).any():
        raise FormatError(
            f"{f.name} has no NaN code and the input holds NaN. Replace NaNs first "
            f"(np.nan_to_num), or use an MX block format, whose scale carries NaN."
        )


def _float_params(f: FloatFormat) -> tuple:
    from ._float_kernels import KIND

    sign_shift = f.bits - 1
    nan_code = f.nan_code()
    nan_mag = 0 if nan_code is None else nan_code & ((1 << sign_shift) - 1)
    inf_mag = f.inf_code() or 0
    return (f.man_bits, f.emin, f.max_code, sign_shift, KIND[f.specials], nan_mag, inf_mag)


def _mx_params(f: MXFormat) -> tuple:
    e = f.element
    if isinstance(e, IntFormat):  # fixed point: every |k| < 2**m sits below "emin"
        m = e.bits - 1
        return (m, m - e.frac_bits, e.qmax, e.bits - 1, True, f.emax_elem)
    return (e.man_bits, e.emin, e.max_code, e.bits - 1, False, f.emax_elem)


def _rows(x: np.ndarray, axis: int) -> tuple[np.ndarray, tuple[int, ...]]:
    moved = np.moveaxis(x, axis, -1)
    return np.ascontiguousarray(moved).reshape(-1, moved.shape[-1]), moved.shape


def _unrows(y: np.ndarray, moved_shape: tuple[int, ...], axis: int) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(y.reshape(moved_shape), -1, axis))


def _scales_shape(shape: tuple[int, ...], axis: int, block: int) -> tuple[int, ...]:
    s = list(shape)
    s[axis] = -(-s[axis] // block)
    return tuple(s)


def _byte_codes(codes: np.ndarray, name: str, signed: bool, bits: int) -> np.ndarray:
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if codes.size and (int(codes.min()) < lo or int(codes.max()) > hi):
        raise FormatError(f"{name} codes lie in {lo}..{hi}, got {codes.min()}..{codes.max()}")
    return codes.astype(np.int8 if signed else np.uint8, copy=False)


# --- public API -------------------------------------------------------------------------------


def quantize(
    x,
    fmt: str | Format,
    *,
    rounding: Rounding = "nearest",
    seed: int | np.random.SeedSequence | None = None,
    axis: int = -1,
    saturate: bool = False,
    scale_rule: ScaleRule = "ocp",
    scale: float | None = None,
) -> np.ndarray:
    """Round ``x`` to the format ``fmt`` and return the values it represents, as float32.

    Equal to ``decode(encode(x, fmt, ...))``, computed in one pass.

    Parameters
    ----------
    x : array_like
        Floating-point values (float64 is rounded to float32 first; see the module notes).
    fmt : str or format record
        A name from :func:`formats`, e.g. ``"bf16"``, ``"fp8_e4m3fn"``, ``"mxfp4"``.
    rounding : {"nearest", "stochastic"}
        Round-to-nearest-even, or stochastic (unbiased) rounding.
    seed : int, SeedSequence or None
        Key of the stochastic draws; the same seed gives the same result.
    axis : int
        MX formats: the axis the blocks of 32 run along (put the contraction axis here).
        Ignored by the other formats.
    saturate : bool
        Clamp overflow (and Inf) to the largest finite value instead of the format's own
        overflow result (Inf or NaN). MX, fp6, fp4 and int8 always clamp.
    scale_rule : {"ocp", "trainium3"}
        MX only: the OCP v1.0 shared exponent, or Trainium3's one step larger.
    scale : float, optional
        int8 only: the per-tensor scale; default ``amax / 127``.

    Returns
    -------
    numpy.ndarray
        float32 array of ``x``'s shape.

    Raises
    ------
    ValueError
        Unknown format (the message lists them), bad option, NaN into a format without NaN.
    TypeError
        Integer, boolean or complex input.

    Examples
    --------
    >>> quantize([1.0, 1.1, 448.0, 500.0], "fp8_e4m3fn").tolist()
    [1.0, 1.125, 448.0, nan]
    >>> quantize([500.0], "fp8_e4m3fn", saturate=True).tolist()
    [448.0]
    """
    f = spec(fmt)
    stochastic, scale_rule = _options(f, rounding, seed, axis, saturate, scale_rule, scale)
    x32 = _as_float32(x, "quantize")
    if isinstance(f, FloatFormat):
        if f.specials == FINITE:
            _refuse_nan(x32, f)
        out = np.empty(x32.shape, np.float32)
        if x32.size == 0 or f.man_bits == 23:  # fp32: every float32 is already on the grid
            out[...] = x32
            return out
        key = _key(stochastic, seed)
        u = x32.reshape(-1).view(np.uint32)
        if f.exp_bits == 8:  # bf16, tf32 share fp32's exponent: round by add-and-mask
            from ._float_kernels import _round_wide

            _round_wide(
                u, out.reshape(-1).view(np.uint32), 23 - f.man_bits, saturate, stochastic, key
            )
            return out
        from ._float_kernels import _quantize_float

        _quantize_float(
            u, out.reshape(-1), decode_table(f), *_float_params(f), saturate, stochastic, key
        )
        return out
    if isinstance(f, IntFormat):
        return decode(encode(x32, f, rounding=rounding, seed=seed, scale=scale))
    assert isinstance(f, MXFormat)
    ax = _axis(axis, x32.ndim, f.name)
    if x32.size == 0:
        return np.empty(x32.shape, np.float32)
    from ._mx import _mx_quantize

    key = _key(stochastic, seed)
    rows, moved_shape = _rows(x32, ax)
    out = np.empty(rows.shape, np.float32)
    m, emin, cmax, sign_shift, is_int, emax_elem = _mx_params(f)
    _mx_quantize(
        rows.view(np.uint32), out, decode_table(f.element), f.block_size, m, emin, cmax,
        sign_shift, is_int, emax_elem, scale_rule == "trainium3", stochastic, key,
    )  # fmt: skip
    return _unrows(out, moved_shape, ax)


def encode(
    x,
    fmt: str | Format,
    *,
    rounding: Rounding = "nearest",
    seed: int | np.random.SeedSequence | None = None,
    axis: int = -1,
    saturate: bool = False,
    scale_rule: ScaleRule = "ocp",
    scale: float | None = None,
) -> Encoded:
    """Round ``x`` to ``fmt`` and return the bit codes (and scales), as an :class:`Encoded`.

    Parameters are those of :func:`quantize`. NaN is encoded as the format's quiet NaN
    (S.11..1.10..0 for IEEE-like formats, S.1111.111 for fp8_e4m3fn, 0x80 for fnuz), which is
    what ml_dtypes writes; NaN payloads are not kept.

    Examples
    --------
    >>> enc = encode([1.0, -2.0], "bf16")
    >>> [hex(c) for c in enc.codes]
    ['0x3f80', '0xc000']
    """
    f = spec(fmt)
    stochastic, scale_rule = _options(f, rounding, seed, axis, saturate, scale_rule, scale)
    x32 = _as_float32(x, "encode")
    key = _key(stochastic and x32.size > 0, seed)
    if isinstance(f, FloatFormat):
        if f.specials == FINITE:
            _refuse_nan(x32, f)
        u = x32.reshape(-1).view(np.uint32)
        if f.man_bits == 23:
            return Encoded(f.name, u.copy().reshape(x32.shape))
        if f.exp_bits == 8:
            bits = np.empty(u.size, np.uint32)
            if u.size:
                from ._float_kernels import _round_wide

                _round_wide(u, bits, 23 - f.man_bits, saturate, stochastic, key)
            codes = bits if f.storage_bits == 32 else (bits >> np.uint32(16)).astype(np.uint16)
            return Encoded(f.name, codes.reshape(x32.shape))
        codes = np.empty(u.size, f.code_dtype)
        if u.size:
            from ._float_kernels import _encode_float

            _encode_float(u, codes, *_float_params(f), saturate, stochastic, key)
        return Encoded(f.name, codes.reshape(x32.shape))
    if isinstance(f, IntFormat):
        if not f.per_tensor_scale:
            raise FormatError(f"{f.name} is the MXINT8 element type; use 'mxint8' or 'int8'")
        _refuse_nan(x32, f)
        from ._int8 import _encode_int8, absmax_scale

        sc = absmax_scale(x32, f.qmax) if scale is None else np.float32(scale)
        if not (np.isfinite(sc) and sc > 0):
            raise FormatError(f"int8 scale must be a positive finite number, got {scale!r}")
        codes = np.empty(x32.shape, np.int8)
        if x32.size:
            _encode_int8(x32.reshape(-1), codes.reshape(-1), float(sc), f.qmax, stochastic, key)
        return Encoded(f.name, codes, np.asarray(sc, np.float32))
    assert isinstance(f, MXFormat)
    ax = _axis(axis, x32.ndim, f.name)
    codes = np.zeros(x32.shape, np.int8 if isinstance(f.element, IntFormat) else np.uint8)
    scales = np.zeros(_scales_shape(x32.shape, ax, f.block_size), np.uint8)
    if x32.size == 0:
        return Encoded(f.name, codes, scales, ax)
    from ._mx import _mx_encode

    rows, moved_shape = _rows(x32, ax)
    c2 = np.empty(rows.shape, np.uint8)
    s2 = np.empty((rows.shape[0], -(-rows.shape[1] // f.block_size)), np.uint8)
    m, emin, cmax, sign_shift, is_int, emax_elem = _mx_params(f)
    _mx_encode(
        rows.view(np.uint32), c2, s2, f.block_size, m, emin, cmax, sign_shift, is_int,
        emax_elem, scale_rule == "trainium3", stochastic, key,
    )  # fmt: skip
    codes = _unrows(c2.view(codes.dtype), moved_shape, ax)
    smoved = (*moved_shape[:-1], s2.shape[1])
    return Encoded(f.name, codes, _unrows(s2, smoved, ax), ax)


def decode(
    data: Encoded | np.ndarray,
    fmt: str | Format | None = None,
    *,
    scales: np.ndarray | None = None,
    axis: int = -1,
    scale: float | None = None,
) -> np.ndarray:
    """float32 values of codes: ``decode(encode(x, fmt))`` or ``decode(codes, fmt, ...)``.

    Parameters
    ----------
    data : Encoded or array of integer codes
        An :class:`Encoded` carries its format, scales and axis; raw codes need ``fmt``.
    fmt : str, optional
        Format of raw codes.
    scales : array of uint8, optional
        MX: the E8M0 scale codes, shaped like the codes with ``ceil(n / 32)`` along ``axis``.
    axis : int
        MX: the axis the blocks run along.
    scale : float, optional
        int8: the per-tensor scale.

    Raises
    ------
    ValueError
        A code out of the format's range, missing or mis-shaped scales.
    """
    _axis_type(axis)
    if isinstance(data, Encoded):
        if fmt is not None and spec(fmt).name != data.fmt:
            raise FormatError(f"these codes are {data.fmt}, not {spec(fmt).name}")
        if scales is not None or scale is not None:
            raise FormatError(
                "an Encoded carries its own scales; pass scales= or scale= only with raw codes"
            )
        f = spec(data.fmt)
        codes = data.codes
        if isinstance(f, MXFormat):
            scales, axis = data.scales, data.axis
        elif isinstance(f, IntFormat):
            scale = float(data.scales)
    else:
        if fmt is None:
            raise FormatError("decode needs the format of raw codes: decode(codes, 'fp8_e4m3fn')")
        f = spec(fmt)
        codes = np.asarray(data)
        if codes.dtype.kind not in "iu":
            raise FormatTypeError(
                f"codes are integers (from encode), got {short(data)} of {codes.dtype}"
            )
        if scales is not None and not isinstance(f, MXFormat):
            raise FormatError(f"scales are the block scales of MX formats; {f.name} has none")
        if scale is not None:
            if not (isinstance(f, IntFormat) and f.per_tensor_scale):
                raise FormatError(f"scale is the per-tensor scale of int8; {f.name} takes none")
            number(scale, "int8 scale", 0, None, lo_open=True, error=FormatError)
    if isinstance(f, FloatFormat):
        if codes.size and (codes.min() < 0 or int(codes.max()) >= 1 << f.storage_bits):
            raise FormatError(f"{f.name} codes lie in 0..{(1 << f.storage_bits) - 1}")
        if f.exp_bits == 8:  # fp32, tf32 are float32 bit patterns; bf16 the top half of one
            shift = 32 - f.storage_bits
            bits = codes.astype(np.uint32) << np.uint32(shift)
            return bits.view(np.float32)
        if codes.size and int(codes.max()) >= 1 << f.bits:
            raise FormatError(f"{f.name} codes lie in 0..{(1 << f.bits) - 1}, got {codes.max()}")
        from ._float_kernels import _decode_lut

        out = np.empty(codes.shape, np.float32)
        if codes.size:
            flat = np.ascontiguousarray(codes.reshape(-1).astype(f.code_dtype, copy=False))
            _decode_lut(flat, decode_table(f), out.reshape(-1))
        return out
    elem = f.element if isinstance(f, MXFormat) else f
    codes = _byte_codes(codes, f.name, signed=isinstance(elem, IntFormat), bits=elem.bits)
    if isinstance(f, IntFormat):
        if scale is None:
            raise FormatError(
                "int8 codes need their per-tensor scale: decode(codes, 'int8', scale=s)"
            )
        return (codes.astype(np.float32) * np.float32(scale)).astype(np.float32)
    assert isinstance(f, MXFormat)
    if scales is None:
        raise FormatError(f"{f.name} codes need their E8M0 block scales (encode(...).scales)")
    ax = _axis(axis, codes.ndim, f.name)
    scales = np.asarray(scales)
    if scales.dtype.kind not in "iu":
        raise FormatTypeError(
            f"{f.name} scales are E8M0 codes (integers 0..255), not {short(scales)}"
        )
    if scales.size and (int(scales.min()) < 0 or int(scales.max()) > 255):
        raise FormatError(
            f"{f.name} scales are E8M0 codes 0..255, got {scales.min()}..{scales.max()}"
        )
    want = _scales_shape(codes.shape, ax, f.block_size)
    if scales.shape != want:
        raise FormatError(
            f"{f.name} scales for codes of shape {codes.shape} along axis {ax} have shape "
            f"{want}, got {scales.shape}"
        )
    if codes.size == 0:
        return np.empty(codes.shape, np.float32)
    from ._mx import _mx_decode

    c2, moved_shape = _rows(codes.view(np.uint8), ax)
    s2, _ = _rows(scales.astype(np.uint8, copy=False), ax)
    out = np.empty(c2.shape, np.float32)
    _mx_decode(c2, s2, decode_table(f.element), f.block_size, out)
    return _unrows(out, moved_shape, ax)
