"""Public entry points: run a reference kernel on numpy arrays (or shapes, timing only)."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np

from trnlab import core
from trnlab._checks import choose, flag, shape2, whole
from trnlab.core import InstructionLimitError, KernelArgumentError
from trnlab.core._context import _values
from trnlab.core._progress import instruction_limit, limit_message

from ._epilogue import matmul_bias_act_kernel
from ._matmul import VARIANTS, estimate_instructions
from ._transpose import transpose_kernel

__all__ = ["matmul", "matmul_bias_act", "transpose"]


def _operand(x, what: str) -> tuple[int, int]:
    """The shape of a matmul operand given as an array or as a shape, or a teaching error."""
    if isinstance(x, tuple):
        return shape2(x, f"{what} shape", KernelArgumentError, ("rows", "cols"))
    arr = _values(x, what)
    if arr.ndim != 2 or not arr.size:
        raise KernelArgumentError(
            f"{what} must be a 2-D array with at least one element (or a shape, for a "
            f"timing-only run); got an array of shape {arr.shape}"
        )
    return arr.shape


def _check_size(count: int, max_instructions, numerics: bool) -> int:
    """Refuse a run whose estimated instruction count exceeds its limit (before recording)."""
    limit = instruction_limit(max_instructions, numerics)
    if count > limit:
        raise InstructionLimitError(limit_message(count, limit, numerics, estimated=True))
    return limit


def matmul(
    a,
    b,
    variant: str = "pipelined",
    chip="trn1",
    dtype: str = "bf16",
    numerics: bool = True,
    out_dtype: str | None = None,
    max_instructions: int | None = None,
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
    max_instructions : int, optional
        The run's instruction limit (default :data:`trnlab.core.MAX_INSTRUCTIONS`, or the
        numerics one). The kernel's instruction count is estimated from the shapes first, and a
        run beyond the limit is refused at once, with the estimate.
    **options
        Block sizes of the variant (``tiles_m``, ``tiles_n``, ``tiles_k``; ``tile_k``,
        ``tile_m``, ``tile_n`` for tiled, hoisted, blocked_mn; ``bufs``; ``a_width`` for
        hoisted).

    Returns
    -------
    trnlab.core.Run
        ``run.output`` is C (numerics on); ``run.latency``, ``run.utilisation``,
        ``run.timeline()``, ``run.counters()``.
    """
    variant = choose(variant, VARIANTS, "matmul variant", KernelArgumentError)
    numerics = flag(numerics, "numerics", KernelArgumentError)
    shape_a, shape_b = _operand(a, "A"), _operand(b, "B")
    if shape_a[1] != shape_b[0]:
        raise KernelArgumentError(
            f"matmul needs A[M, K] and B[K, N] with the same K; got {shape_a} and {shape_b}"
        )
    M, K = shape_a
    N = shape_b[1]
    allowed = list(inspect.signature(VARIANTS[variant]).parameters)[4:]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise KernelArgumentError(
            f"{variant} has no option {', '.join(unknown)}; its options are {', '.join(allowed)}"
        )
    sizes = {k: whole(v, k, 1, 1 << 20, KernelArgumentError) for k, v in options.items()
             if k.startswith("tile") and v is not None}  # fmt: skip
    dtype = core.format_name(dtype)  # "float32" -> "fp32"; unknown names raise, with hints
    if out_dtype is None:
        out_dtype = "fp32" if dtype in ("fp32", "tf32") else "bf16"
    out_dtype = core.format_name(out_dtype)
    if numerics and (isinstance(a, tuple) or isinstance(b, tuple)):
        raise KernelArgumentError(
            f"A or B is given as a shape ({shape_a}, {shape_b}); numerics need values. "
            f"Pass arrays, or numerics=False for a timing-only run."
        )
    limit = _check_size(
        estimate_instructions(variant, M, K, N, **sizes), max_instructions, numerics
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
        max_instructions=limit,
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
    activation = choose(activation, core.ACTIVATIONS, "activation", KernelArgumentError)
    numerics = flag(numerics, "numerics", KernelArgumentError)
    (M, K), (K2, N) = _operand(a, "A"), _operand(b, "B")
    a, b = _values(a, "A"), _values(b, "B")
    bias = _values(bias, "bias")
    if K2 != K or bias.shape not in ((N,), (N, 1)):
        raise KernelArgumentError(
            f"need A[M, K], B[K, N] and bias[N]; got A {a.shape}, B {b.shape}, bias {bias.shape}"
        )
    bias = bias.reshape(-1, 1)
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
    x_arg = core.hbm(x, dtype)
    return core.run(
        transpose_kernel,
        chip=chip,
        numerics=numerics,
        x=x_arg,
        y=core.hbm(x_arg.shape[::-1], dtype),
    )
