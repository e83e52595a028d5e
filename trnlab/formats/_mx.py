"""OCP Microscaling (MX) v1.0 blocks: shared E8M0 scale from the bits, elements, and back.

For each block of ``block`` consecutive elements along the chosen axis (MX v1.0 section 6.3,
and Algorithm 1 of Rouhani et al., "Microscaling Data Formats for Deep Learning", 2023):

1. ``shared_exp = floor(log2(max_i |V_i|)) - emax_elem``, clamped to the E8M0 range
   [-127, 127]. ``floor(log2 .)`` is read from the float32 exponent field (frexp for
   subnormals), never from a float log2, which rounds up just below a power of two.
   The Trainium3 rule uses ``floor(log2 amax) - (emax_elem - 1)``: one step larger, so no
   element saturates, at the cost of one bit of resolution at the bottom of the block.
2. ``P_i = V_i / 2**shared_exp`` rounded to the element format (round-to-nearest-even, or
   stochastic), normal numbers beyond the element's max clamped to it, sign kept.

Choices where the specification leaves room, following the authors' reference implementation
(microsoft/microxcaling, ``mx/mx_ops.py``):

- An all-zero block gets the smallest scale, 2**-127 (code 0x00); its elements are (signed) 0.
- A block holding a NaN or an Inf gets the NaN scale (0xFF), so the whole block decodes to NaN
  (MX v1.0 section 5.2: if X is NaN every value of the block is NaN); its element codes are 0.
- float32 subnormal inputs are kept (not flushed); division by the power-of-two scale is done
  on the exponent, so it is exact.
- A final block shorter than ``block`` (axis length not a multiple of 32) behaves as if padded
  with zeros: zeros do not change the block maximum.
- Dequantisation multiplies each element by 2**shared in float32. Every such product is a
  float32 exactly (element steps are >= 2**-16, the scale >= 2**-127), except that under the
  Trainium3 rule a block whose max is within half a step of 2**128 rounds up to Inf.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ._float_kernels import _ABS, _INF, _floor_log2, _magnitude_code
from ._stochastic import _draw

_NAN_BLOCK = 128  # outside the E8M0 exponent range [-127, 127]


@njit(cache=True)
def _shared_exponent(u, row, lo, hi, emax_elem, trainium3):
    """Shared exponent of ``u[row, lo:hi]`` (float32 bits), or _NAN_BLOCK for NaN/Inf."""
    amax = np.int64(0)
    for j in range(lo, hi):
        a = np.int64(u[row, j]) & _ABS
        if a > amax:
            amax = a
    if amax >= _INF:
        return _NAN_BLOCK
    if amax == 0:
        return -127
    ex = amax >> 23
    fl = ex - 127 if ex > 0 else _floor_log2(amax) - 149  # floor(log2 amax) from the bits
    shared = fl - emax_elem + (1 if trainium3 else 0)
    return min(max(shared, -127), 127)


@njit(cache=True)
def _element_code(v, shared, m, emin, cmax, sign_shift, is_int, stochastic, r):
    """Element code of float32 bits ``v`` scaled by 2**-shared, saturating at ``cmax``."""
    c = _magnitude_code(v & _ABS, shared, m, emin, stochastic, r)
    if c > cmax:
        c = cmax  # MX v1.0 6.3: clamp normal numbers to the element max, keep the sign
    negative = (v >> 31) & 1
    if is_int:  # two's complement byte; integers have no -0
        return (256 - c) & 0xFF if negative else c
    return (negative << sign_shift) | c


@njit(cache=True, parallel=True)
def _mx_encode(
    u, codes, scales, block, m, emin, cmax, sign_shift, is_int, emax_elem, trainium3,
    stochastic, key,
):  # fmt: skip
    """Element codes (rows, n) and E8M0 scale codes (rows, nblocks) of float32 bits ``u``."""
    rows, n = u.shape
    nb = scales.shape[1]
    for t in prange(rows * nb):
        row = t // nb
        b = t - row * nb
        lo = b * block
        hi = min(lo + block, n)
        shared = _shared_exponent(u, row, lo, hi, emax_elem, trainium3)
        if shared == _NAN_BLOCK:
            scales[row, b] = 0xFF
            for j in range(lo, hi):
                codes[row, j] = 0
            continue
        scales[row, b] = shared + 127
        for j in range(lo, hi):
            r = _draw(key, row * n + j) if stochastic else np.uint64(0)
            codes[row, j] = _element_code(
                np.int64(u[row, j]), shared, m, emin, cmax, sign_shift, is_int, stochastic, r
            )


@njit(cache=True, parallel=True)
def _mx_quantize(
    u, out, lut, block, m, emin, cmax, sign_shift, is_int, emax_elem, trainium3,
    stochastic, key,
):  # fmt: skip
    """Dequantised float32 values (rows, n) of float32 bits ``u`` after MX quantisation."""
    rows, n = u.shape
    nb = (n + block - 1) // block
    for t in prange(rows * nb):
        row = t // nb
        b = t - row * nb
        lo = b * block
        hi = min(lo + block, n)
        shared = _shared_exponent(u, row, lo, hi, emax_elem, trainium3)
        if shared == _NAN_BLOCK:
            for j in range(lo, hi):
                out[row, j] = np.nan
            continue
        x = np.float32(math.ldexp(1.0, shared))  # 2**shared is a float32 (subnormal at -127)
        for j in range(lo, hi):
            r = _draw(key, row * n + j) if stochastic else np.uint64(0)
            code = _element_code(
                np.int64(u[row, j]), shared, m, emin, cmax, sign_shift, is_int, stochastic, r
            )
            out[row, j] = lut[code] * x  # exact (module docstring)


@njit(cache=True, parallel=True)
def _mx_decode(codes, scales, lut, block, out):
    """float32 values (rows, n) of element codes and E8M0 scale codes."""
    rows, n = codes.shape
    nb = scales.shape[1]
    for t in prange(rows * nb):
        row = t // nb
        b = t - row * nb
        lo = b * block
        hi = min(lo + block, n)
        sc = np.int64(scales[row, b])
        if sc == 0xFF:
            for j in range(lo, hi):
                out[row, j] = np.nan
            continue
        x = np.float32(math.ldexp(1.0, sc - 127))
        for j in range(lo, hi):
            out[row, j] = lut[codes[row, j]] * x
