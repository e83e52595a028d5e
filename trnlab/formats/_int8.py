"""Symmetric int8 with one float scale per tensor: ``value = k * scale``, ``|k| <= 127``.

The default scale is ``amax / 127`` with ``amax`` the largest finite ``|x|`` (the usual
"absmax" calibration; 1.0 when every value is zero), rounded to float32. Codes are
``k = clamp(round(x / scale), -127, 127)`` with ``x / scale`` evaluated in float64 (exact enough
that no tie is created or lost: the quotient of two 24-bit significands is never within 2**-45
of a half-integer unless it is one). -128 is never produced, so the grid is symmetric. +-Inf
clamps to +-127; int8 has no NaN, so NaN input is refused by the public functions.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ._stochastic import _draw

__all__ = ["absmax_scale"]


def absmax_scale(x: np.ndarray, qmax: int = 127) -> np.float32:
    """``amax / qmax`` over the finite values of ``x`` as float32; 1.0 if there are none > 0."""
    finite = np.abs(x[np.isfinite(x)])
    amax = float(finite.max()) if finite.size else 0.0
    scale = np.float32(amax / qmax)
    return scale if scale > 0 else np.float32(1.0)


@njit(cache=True, parallel=True)
def _encode_int8(x, out, scale, qmax, stochastic, key):
    """``out[i] = clamp(round(x[i] / scale), -qmax, qmax)`` over flat arrays (RNE or stochastic)."""
    for i in prange(x.size):
        y = np.float64(x[i]) / scale
        if stochastic:
            # floor(y + u), u uniform on [0, 1) from 53 random bits: P(up) = frac(y)
            u = np.float64(_draw(key, i) >> np.uint64(11)) * 2.0**-53
            k = math.floor(y + u) if math.isfinite(y) else y
        else:
            k = np.rint(y)
        if k > qmax:
            k = qmax
        elif k < -qmax:
            k = -qmax
        out[i] = np.int8(k)
