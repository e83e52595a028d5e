"""numba kernel of N:M magnitude pruning (kept apart so importing trnlab.formats stays light)."""

from __future__ import annotations

from numba import njit, prange


@njit(cache=True, parallel=True)
def _nm_mask(absw, n, m, mask):
    """Mask (rows, k) keeping the ``n`` largest of every ``m`` along axis 1 (ties: first wins)."""
    rows, k = absw.shape
    ng = (k + m - 1) // m
    for t in prange(rows * ng):
        row = t // ng
        lo = (t - row * ng) * m
        hi = min(lo + m, k)
        for j in range(lo, hi):
            mask[row, j] = False
        for _ in range(min(n, hi - lo)):
            best = -1
            for j in range(lo, hi):
                if not mask[row, j] and (best < 0 or absw[row, j] > absw[row, best]):
                    best = j
            mask[row, best] = True
