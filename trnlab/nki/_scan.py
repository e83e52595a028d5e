"""The linear recurrence of ``tensor_tensor_scan`` with multiply / add (a selective scan),
compiled: ``out[:, j] = a[:, j] * out[:, j - 1] + b[:, j]`` in float32."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["linear_scan"]


@njit(cache=True)
def _scan(a, b, init, out):
    for p in range(a.shape[0]):
        prev = init[p]
        for j in range(a.shape[1]):
            prev = np.float32(np.float32(a[p, j] * prev) + b[p, j])
            out[p, j] = prev


def linear_scan(a: np.ndarray, b: np.ndarray, init: np.ndarray) -> np.ndarray:
    """``out[:, j] = a[:, j] * out[:, j - 1] + b[:, j]`` from ``out[:, -1] = init``."""
    a = np.ascontiguousarray(a, np.float32)
    b = np.ascontiguousarray(b, np.float32)
    out = np.empty_like(a)
    _scan(a, b, np.ascontiguousarray(init, np.float32), out)
    return out
