"""A matmul in a low-precision format: quantise both inputs, accumulate in fp32, measure error.

This is what the Tensor Engine does numerically: inputs are stored in the chosen format
(MX formats block along the contraction axis, as MX matmul hardware requires: rows of A and
columns of B), products are exact and sums are kept in fp32 (PSUM). The fp32 accumulation here
is numpy's float32 matmul (BLAS sgemm), whose summation order differs from the hardware's, so
results agree with a device to fp32 rounding, not bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trnlab._checks import choose, flag
from trnlab._threads import blas_threads_for

from ._errors import FormatError
from ._quantize import Rounding, ScaleRule, _as_float32, _stochastic, quantize, seed_sequence
from ._specs import Format, MXFormat, spec

__all__ = ["MatmulResult", "matmul"]


@dataclass(frozen=True)
class MatmulResult:
    """Result of :func:`matmul` and its error against the fp64 product of the unquantised inputs.

    Attributes
    ----------
    out : numpy.ndarray
        float32 result ``quantize(a) @ quantize(b)`` accumulated in fp32.
    reference : numpy.ndarray
        float64 ``a @ b`` of the inputs as given (after conversion to float32).
    max_abs_error, mean_abs_error : float
        Largest and mean ``|out - reference|``.
    rel_error : float
        ``||out - reference||_F / ||reference||_F`` (0 when the reference is all zero and the
        result too; inf when only the reference is zero, or when the result holds Inf or NaN
        from an overflow the finite reference does not: the error is unbounded, not NaN).
    snr_db : float
        Signal-to-noise ratio ``-20 log10(rel_error)`` in dB.
    fmt_a, fmt_b : str
        Formats of the two inputs.
    """

    out: np.ndarray
    reference: np.ndarray
    max_abs_error: float
    mean_abs_error: float
    rel_error: float
    snr_db: float
    fmt_a: str
    fmt_b: str


def matmul(
    a,
    b,
    fmt: str | Format,
    *,
    fmt_b: str | Format | None = None,
    rounding: Rounding = "nearest",
    seed: int | None = None,
    saturate: bool = False,
    scale_rule: ScaleRule = "ocp",
) -> MatmulResult:
    """``a @ b`` with both inputs quantised to ``fmt`` (or ``fmt`` and ``fmt_b``), fp32 accumulate.

    Parameters
    ----------
    a : array_like, shape (M, K)
    b : array_like, shape (K, N)
    fmt : str
        Format of ``a`` (and of ``b`` unless ``fmt_b`` is given), e.g. ``"mxfp8_e4m3"``.
    fmt_b : str, optional
        Format of ``b`` (e.g. fp8_e4m3fn weights times fp8_e5m2 gradients).
    rounding, seed, saturate, scale_rule
        As in :func:`quantize`; with stochastic rounding ``a`` and ``b`` use independent streams
        derived from ``seed``.

    Returns
    -------
    MatmulResult

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> r = matmul(rng.standard_normal((64, 256)), rng.standard_normal((256, 32)), "bf16")
    >>> r.rel_error < 1e-2
    True
    """
    fa = spec(fmt)
    fb = spec(fmt_b) if fmt_b is not None else fa
    stochastic = _stochastic(rounding)
    seq = seed_sequence(seed)
    flag(saturate, "saturate", FormatError)
    scale_rule = choose(scale_rule, ("ocp", "trainium3"), "scale_rule", FormatError)
    a32 = _as_float32(a, "matmul")
    b32 = _as_float32(b, "matmul")
    if a32.ndim != 2 or b32.ndim != 2 or a32.shape[1] != b32.shape[0]:
        raise FormatError(
            f"matmul takes a of shape (M, K) and b of shape (K, N); got {a32.shape} and {b32.shape}"
        )
    if stochastic:
        seq = seq or np.random.SeedSequence()
        rounding = "stochastic"
    else:
        seq, rounding = None, "nearest"
    sa, sb = seq.spawn(2) if seq is not None else (None, None)

    def q(x: np.ndarray, f: Format, axis: int, s) -> np.ndarray:
        kw = {"axis": axis, "scale_rule": scale_rule} if isinstance(f, MXFormat) else {}
        return quantize(x, f, rounding=rounding, seed=s, saturate=saturate, **kw)

    # MX blocks run along the contraction axis K: axis 1 of a, axis 0 of b.
    aq = q(a32, fa, 1, sa)
    bq = q(b32, fb, 0, sb)
    macs = a32.shape[0] * a32.shape[1] * b32.shape[1]
    with blas_threads_for(macs), np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        out = np.matmul(aq, bq, dtype=np.float32)  # Inf/NaN inputs propagate as on hardware
        ref = a32.astype(np.float64) @ b32.astype(np.float64)
        err = out.astype(np.float64) - ref
        abs_err = np.abs(err)
        ref_norm = float(np.linalg.norm(ref))
        err_norm = float(np.linalg.norm(err))
        if np.isfinite(ref).all() and not np.isfinite(out).all():
            rel = float("inf")  # the format overflowed (Inf, or Inf - Inf = NaN): unbounded error
        elif ref_norm > 0:
            rel = err_norm / ref_norm
        else:
            rel = 0.0 if err_norm == 0 else float("inf")
        snr = float("inf") if rel == 0 else float(-20.0 * np.log10(rel))
    return MatmulResult(
        out=out,
        reference=ref,
        max_abs_error=float(abs_err.max()) if abs_err.size else 0.0,
        mean_abs_error=float(abs_err.mean()) if abs_err.size else 0.0,
        rel_error=rel,
        snr_db=snr,
        fmt_a=fa.name,
        fmt_b=fb.name,
    )
