"""N:M structured sparsity: keep the N largest-magnitude weights in every M along an axis.

NeuronCore-v3 and v4 (Trainium2, Trainium3) accept weights with at most N non-zeros in every M
consecutive values along the contraction dimension, for the patterns in
:data:`SPARSITY_PATTERNS`; the Tensor Engine then skips the zeros, up to M/N times faster
(4:16 -> 4x, 4:12 -> 3x, 4:8 -> 2x; AWS Neuron documentation, NeuronCore-v3 architecture page,
as collected in shared/reference/hardware-facts.md). Pruning by magnitude is the usual one-shot
recipe (Mishra et al., "Accelerating Sparse Deep Neural Networks", 2021).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from trnlab._checks import whole

from ._errors import FormatError, FormatTypeError
from ._quantize import _as_float32, _axis_type

__all__ = ["SPARSITY_PATTERNS", "PruneResult", "prune"]

#: (N, M) patterns NeuronCore-v3/v4 support, densest-saving first.
SPARSITY_PATTERNS: tuple[tuple[int, int], ...] = (
    (4, 16),
    (4, 12),
    (4, 8),
    (2, 8),
    (2, 4),
    (1, 4),
    (1, 2),
)


@dataclass(frozen=True)
class PruneResult:
    """Pruned weights, their mask and what the pruning cost.

    Attributes
    ----------
    weights : numpy.ndarray
        The input with pruned entries set to 0 (same shape and float type).
    mask : numpy.ndarray of bool
        True where a weight is kept.
    n, m : int
        The pattern: at most ``n`` kept in every ``m`` consecutive values along ``axis``.
    axis : int
        The axis the groups run along (the contraction axis for a matmul).
    compression : float
        ``m / n``: the nominal speed-up and value-storage saving of the pattern.
    kept_fraction : float
        Fraction of entries kept (``n / m``, more if a short final group keeps all it has).
    index_bits : int
        Metadata bits per kept value to record its position in its group, ``ceil(log2 m)``.
    rel_error : float
        ``||w - pruned||_F / ||w||_F`` (0 for an all-zero ``w``).
    energy_kept : float
        ``||pruned||_F**2 / ||w||_F**2`` (1 for an all-zero ``w``).
    """

    weights: np.ndarray
    mask: np.ndarray
    n: int
    m: int
    axis: int
    compression: float
    kept_fraction: float
    index_bits: int
    rel_error: float
    energy_kept: float


def prune(w, n: int, m: int, axis: int = -1) -> PruneResult:
    """Keep the ``n`` largest-magnitude values in every ``m`` consecutive ones along ``axis``.

    Parameters
    ----------
    w : array_like of float
        Weights. For a matmul ``x @ w`` the contraction axis of ``w`` is 0.
    n, m : int
        The pattern; one of :data:`SPARSITY_PATTERNS`.
    axis : int
        Axis the groups of ``m`` run along. If its length is not a multiple of ``m``, the last
        group is shorter and keeps at most ``n`` (all of it if it holds ``n`` or fewer).

    Returns
    -------
    PruneResult

    Notes
    -----
    Ties in magnitude keep the earlier position; NaN counts as smaller than every number.

    Examples
    --------
    >>> prune([[0.1, -3.0, 0.5, 2.0]], 2, 4).weights.tolist()
    [[0.0, -3.0, 0.0, 2.0]]
    """
    n = whole(n, "n (values kept per group)", 1, None, FormatError)
    m = whole(m, "m (group size)", 1, None, FormatError)
    if (n, m) not in SPARSITY_PATTERNS:
        pats = ", ".join(f"{a}:{b}" for a, b in SPARSITY_PATTERNS)
        raise FormatError(
            f"{n}:{m} is not an N:M pattern NeuronCore-v3/v4 support; they are {pats}"
        )
    if isinstance(w, np.ndarray) and w.dtype.kind == "f":
        arr = w
    else:  # refuses None, text, integers, ragged lists with a teaching error
        checked = _as_float32(w, "prune")
        arr = checked if isinstance(w, np.ndarray) else np.asarray(w, np.float64)
    if arr.dtype.kind != "f":
        raise FormatTypeError(f"prune expects floating-point weights (w), got {arr.dtype}")
    if arr.ndim == 0:
        raise FormatError("prune needs at least one axis to group along")
    _axis_type(axis)
    if not -arr.ndim <= axis < arr.ndim:
        raise FormatError(f"axis {axis} is out of range for an array with {arr.ndim} dimension(s)")
    ax = axis % arr.ndim
    moved = np.moveaxis(arr, ax, -1)
    absw = np.ascontiguousarray(np.nan_to_num(np.abs(moved).astype(np.float64), nan=-1.0)).reshape(
        -1, moved.shape[-1]
    )
    mask2 = np.zeros(absw.shape, np.bool_)
    if absw.size:
        from ._sparsity_kernel import _nm_mask

        _nm_mask(absw, n, m, mask2)
    mask = np.ascontiguousarray(np.moveaxis(mask2.reshape(moved.shape), -1, ax))
    pruned = np.where(mask, arr, np.zeros((), arr.dtype))
    total = float(np.sum(np.square(arr, dtype=np.float64)))
    kept = float(np.sum(np.square(pruned, dtype=np.float64)))
    removed = float(np.sum(np.square(np.where(mask, 0, arr), dtype=np.float64)))
    return PruneResult(
        weights=pruned,
        mask=mask,
        n=n,
        m=m,
        axis=ax,
        compression=m / n,
        kept_fraction=float(mask.mean()) if mask.size else n / m,
        index_bits=math.ceil(math.log2(m)),
        rel_error=math.sqrt(removed / total) if total > 0 else 0.0,
        energy_kept=kept / total if total > 0 else 1.0,
    )
