"""Public entry points: run a reference kernel on numpy arrays (or shapes, timing only)."""

from __future__ import annotations

import dataclasses

import numpy as np

from trnlab import core

from ._epilogue import matmul_bias_act_kernel
from ._matmul import VARIANTS
from ._transpose import transpose_kernel

__all__ = ["matmul", "matmul_bias_act", "transpose"]


def matmul(
    a,
    b,
    variant: str = "pipelined",
    chip="trn1",
    dtype: str = "bf16",
    numerics: bool = True,
    out_dtype: str | None = None,
    **options,
) -> core.Run:
    """C = A @ B with one of the reference kernels, on one NeuronCore of ``chip``.

    Parameters
    ----------
    a, b : array_like or tuple
        A[M, K] and B[K, N], or their shapes for a timing-only run (``numerics=False``).
        A is laid out transposed in HBM (``a_t[K, M]``, K-major), as NKI's matmul tutorials do,
        so its K rows land on SBUF partitions; the host does that transpose.
    variant : str
        ``"tiled"``, ``"hoisted"``, ``"blocked_mn"``, ``"blocked_mnk"`` or ``"pipelined"``.
    chip : str or CoreParams
        A Neuron chip of the catalogue (``"trn1"``, ``"trn2"``, ``"trn3"``).
    dtype : str
        Format of A and B in HBM and SBUF (a ``trnlab.formats`` name: ``"bf16"``,
        ``"fp8_e4m3"``, ``"mxfp8_e4m3"``, ``"fp32"``...). PSUM accumulates in fp32.
    numerics : bool
        Compute the values (False: timing only, for large shapes).
    out_dtype : str, optional
        Format of C in HBM (default: bf16, or fp32 for fp32/tf32 inputs); the PSUM result is
        rounded to it on the way out.
    **options
        Block sizes of the variant (``tiles_m``, ``tiles_n``, ``tiles_k``).

    Returns
    -------
    trnlab.core.Run
        ``run.output`` is C (numerics on); ``run.latency``, ``run.utilisation``,
        ``run.timeline()``, ``run.counters()``.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; the progression is {', '.join(VARIANTS)}")
    shape_a = a if isinstance(a, tuple) else np.shape(a)
    shape_b = b if isinstance(b, tuple) else np.shape(b)
    if len(shape_a) != 2 or len(shape_b) != 2 or shape_a[1] != shape_b[0]:
        raise ValueError(f"matmul needs A[M, K] and B[K, N]; got {shape_a} and {shape_b}")
    M, K = shape_a
    N = shape_b[1]
    from trnlab import formats

    dtype = formats.spec(dtype).name  # "float32" -> "fp32"; unknown names raise, with hints
    out_dtype = out_dtype or ("fp32" if dtype in ("fp32", "tf32") else "bf16")
    if numerics and (isinstance(a, tuple) or isinstance(b, tuple)):
        raise ValueError(
            f"A or B is given as a shape ({shape_a}, {shape_b}); numerics need values. "
            f"Pass arrays, or numerics=False for a timing-only run."
        )
    if numerics:
        a_arg = core.hbm(np.ascontiguousarray(np.asarray(a, np.float32).T), dtype)
        b_arg = core.hbm(np.asarray(b, np.float32), dtype)
    else:
        a_arg = core.hbm((K, M), dtype, is_input=True)
        b_arg = core.hbm((K, N), dtype, is_input=True)
    kernel = VARIANTS[variant]
    return core.run(
        lambda ctx, **kw: kernel(ctx, **kw, **options),
        chip=chip,
        numerics=numerics,
        a_t=a_arg,
        b=b_arg,
        c=core.hbm((M, N), out_dtype),
    )


def matmul_bias_act(
    a, b, bias, activation: str = "relu", chip="trn1", dtype: str = "bf16", numerics: bool = True
) -> core.Run:
    """``act(A @ B + bias)`` with the bias and activation fused on the Scalar engine.

    The kernel computes C transposed (N on partitions) so the bias, one value per column of C,
    is a per-partition operand of the Scalar engine's ``f(x * scale + bias)``;
    ``run.output`` is C[M, N] (the host transposes it back).
    """
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    bias = np.asarray(bias, np.float32).reshape(-1, 1)
    M, K = a.shape
    N = b.shape[1]
    if b.shape[0] != K or bias.shape[0] != N:
        raise ValueError(f"need A[M, K], B[K, N], bias[N]; got {a.shape}, {b.shape}, {bias.shape}")
    r = core.run(
        lambda ctx, **kw: matmul_bias_act_kernel(ctx, **kw, activation=activation),
        chip=chip,
        numerics=numerics,
        w=core.hbm(b, dtype),
        x_t=core.hbm(np.ascontiguousarray(a.T), dtype),
        bias=core.hbm(bias, "fp32"),
        y_t=core.hbm((N, M), "fp32"),
    )
    if numerics:
        r = dataclasses.replace(r, outputs={"y": r.outputs["y_t"].T})
    return r


def transpose(x, chip="trn1", dtype: str = "fp32", numerics: bool = True) -> core.Run:
    """Transpose X[R, C] through the Tensor Engine (a matmul against the identity)."""
    x = np.asarray(x, np.float32)
    return core.run(
        transpose_kernel,
        chip=chip,
        numerics=numerics,
        x=core.hbm(x, dtype),
        y=core.hbm(x.shape[::-1], dtype),
    )
