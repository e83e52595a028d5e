"""numba kernels that round float32 values to a narrower binary float format, by integer ops.

All rounding happens on the float32 bit pattern, never through float arithmetic, so the result
is the single correctly rounded value: no double rounding, subnormals of both formats exact.

The idea (IEEE 754-2019 section 4.3): a float32 magnitude is ``sig * 2**(e - 23)`` with a 24-bit
significand ``sig``. In a target with ``m`` mantissa bits and minimum normal exponent ``emin``
the grid step at exponent ``e`` is ``2**(max(e, emin) - m)``, so rounding drops
``s = 23 - m + max(emin - e, 0)`` low bits of ``sig``. The *code magnitude* (the code without
its sign bit) is then ``((e - emin) << m) + round(sig >> s)`` in the normal range and
``round(sig >> s)`` below it; a carry out of the mantissa walks into the next binade, exactly
as codes are ordered. Round-to-nearest-even adds ``2**(s-1) - 1 + lsb`` before the shift;
stochastic rounding adds ``s`` random bits instead (round up with probability
``dropped / 2**s``). Overflow (a code magnitude above the format's largest finite one) then
follows the format: saturate, Inf, or NaN.

The kernels take flat uint32 views of float32 arrays and write into a caller-supplied ``out``;
validation and random keys live in ``_quantize.py``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ._stochastic import _draw

# Kinds of special values, as integers for the kernels (see _specs.py).
KIND_IEEE, KIND_FN, KIND_FNUZ, KIND_FINITE = 0, 1, 2, 3
KIND = {"ieee": KIND_IEEE, "fn": KIND_FN, "fnuz": KIND_FNUZ, "finite": KIND_FINITE}

_ABS = 0x7FFFFFFF
_INF = 0x7F800000
_QNAN = 0x7FC00000
_SIGN = 0x80000000


@njit(cache=True)
def _floor_log2(a):
    """floor(log2(a)) of an integer 0 < a < 2**53, exactly (from frexp's exponent)."""
    return math.frexp(float(a))[1] - 1


@njit(cache=True)
def _magnitude_code(a, e_off, m, emin, stochastic, r):
    """Code magnitude of the float32 magnitude bits ``a`` (finite) divided by ``2**e_off``.

    ``m`` mantissa bits, smallest normal exponent ``emin``; no overflow check (the caller
    compares with the format's largest code). ``r``: 64 random bits when ``stochastic``.
    """
    if a == 0:
        return 0
    ex = a >> 23
    if ex == 0:  # float32 subnormal: normalise so sig has its leading bit at 2**23
        k = _floor_log2(a)
        sig = a << (23 - k)
        e = k - 149
    else:
        sig = (a & 0x7FFFFF) | 0x800000
        e = ex - 127
    e = e - e_off
    if e >= emin:
        base = (e - emin) << m
        s = 23 - m
    else:
        base = 0
        s = 23 - m + (emin - e)
    if s > 62:  # below a quarter of the smallest subnormal by a factor 2**38 or more
        return 0
    if stochastic:
        q = (sig + np.int64(r >> np.uint64(64 - s))) >> s
    else:
        q = (sig + ((np.int64(1) << (s - 1)) - 1) + ((sig >> s) & 1)) >> s
    return base + q


@njit(cache=True)
def _float_code(v, m, emin, cmax, sign_shift, kind, nan_mag, inf_mag, saturate, stochastic, r):
    """Full code (sign included) of the float32 bit pattern ``v`` in the target format."""
    sign = (v >> 31) & 1
    a = v & _ABS
    if a > _INF:  # NaN: the format's quiet NaN, sign kept (fnuz has one NaN, 0x80)
        if kind == KIND_FNUZ:
            return np.int64(1) << sign_shift
        return (sign << sign_shift) | nan_mag
    if a == _INF:
        c = cmax + 1
    else:
        c = _magnitude_code(a, 0, m, emin, stochastic, r)
    if c > cmax:
        if saturate or kind == KIND_FINITE:
            c = cmax
        elif kind == KIND_IEEE:
            c = inf_mag
        elif kind == KIND_FN:
            c = nan_mag
        else:
            return np.int64(1) << sign_shift
    if c == 0 and kind == KIND_FNUZ:
        return 0  # no negative zero
    return (sign << sign_shift) | c


_CHUNK = 1 << 14  # elements per parallel work item


@njit(cache=True, parallel=True)
def _encode_float(
    u, out, m, emin, cmax, sign_shift, kind, nan_mag, inf_mag, saturate, stochastic, key
):
    """Codes of float32 bit patterns ``u`` (flat uint32) into ``out`` (flat unsigned ints)."""
    n = u.size
    for c in prange((n + _CHUNK - 1) // _CHUNK):
        for i in range(c * _CHUNK, min(n, (c + 1) * _CHUNK)):
            r = _draw(key, i) if stochastic else np.uint64(0)
            out[i] = _float_code(
                np.int64(u[i]), m, emin, cmax, sign_shift, kind, nan_mag, inf_mag, saturate,
                stochastic, r,
            )  # fmt: skip


@njit(cache=True, parallel=True)
def _quantize_float(
    u, out, lut, m, emin, cmax, sign_shift, kind, nan_mag, inf_mag, saturate, stochastic, key
):
    """Rounded float32 values of ``u`` (flat uint32) into ``out`` via the decode table ``lut``."""
    n = u.size
    for c in prange((n + _CHUNK - 1) // _CHUNK):
        for i in range(c * _CHUNK, min(n, (c + 1) * _CHUNK)):
            r = _draw(key, i) if stochastic else np.uint64(0)
            code = _float_code(
                np.int64(u[i]), m, emin, cmax, sign_shift, kind, nan_mag, inf_mag, saturate,
                stochastic, r,
            )  # fmt: skip
            out[i] = lut[code]


@njit(cache=True, parallel=True)
def _round_wide(u, out, s, saturate, stochastic, key):
    """Round float32 bits ``u`` to ``23 - s`` mantissa bits in place of the fp32 layout.

    For formats that share fp32's 8-bit exponent (bf16, tf32): the grid is fp32's with the low
    ``s`` bits cleared, fp32 subnormals included, so rounding is an add and a mask, and a carry
    past the largest binade lands exactly on Inf. ``out`` (uint32) receives the result bits.
    """
    low = (np.int64(1) << s) - 1
    half = (np.int64(1) << (s - 1)) - 1
    maxbits = np.int64(0x7F7FFFFF) & ~low
    for i in prange(u.size):
        v = np.int64(u[i])
        a = v & _ABS
        if stochastic:
            add = np.int64(_draw(key, i) >> np.uint64(64 - s))
        else:
            add = half + ((a >> s) & 1)
        rr = (a + add) & ~low
        if saturate and rr > maxbits:
            rr = maxbits
        if a > _INF:
            rr = _QNAN
        out[i] = (v & _SIGN) | rr


@njit(cache=True, parallel=True)
def _decode_lut(codes, lut, out):
    """``out[i] = lut[codes[i]]`` over flat arrays."""
    for i in prange(codes.size):
        out[i] = lut[codes[i]]
