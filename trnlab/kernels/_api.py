"""Public entry points: run a library kernel on numpy arrays (or shapes, timing only) and get a
:class:`trnlab.core.Run`; and the same kernels as ``trnlab.core`` kernels ``f(ctx, ...)``.

The NKI kernels are the one source of truth. ``tiled(ctx, a_t, b, c)`` and its siblings trace
the NKI kernel onto a ``KernelContext`` (:func:`trnlab.nki.record_into`) so code written
against the engine-level API (lab 04's checks, ``core.run``) keeps running them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

import trnlab.nki as nki
import trnlab.nki.language as nl
from trnlab import core
from trnlab.nki._dtypes import DTYPES

from ._attention import nki_attention
from ._elementwise import TILE, nki_avgpool2d, nki_tensor_add
from ._epilogue import nki_matmul_bias_act
from ._mamba import nki_selective_scan
from ._matmul import PROGRESSION, out_dtype_for
from ._norms import nki_layernorm, nki_rmsnorm, nki_softmax
from ._transpose import nki_transpose, nki_transpose2d

__all__ = [
    "attention",
    "avgpool2d",
    "blocked_mn",
    "blocked_mnk",
    "hoisted",
    "layernorm",
    "matmul",
    "matmul_bias_act",
    "matmul_bias_act_kernel",
    "pipelined",
    "rmsnorm",
    "selective_scan",
    "selective_scan_kernel",
    "softmax",
    "tensor_add",
    "tiled",
    "transpose",
    "transpose2d",
    "transpose_kernel",
]

_FORMAT_TO_DTYPE = {d.fmt: d.name for d in reversed(list(DTYPES.values()))}
#: trnlab activation names (trnlab.core.ACTIVATIONS) -> nki.language functions.
ACTIVATION_FUNCTIONS = {
    "identity": nl.identity,
    "relu": nl.relu,
    "gelu": nl.gelu_apprx_tanh,
    "sigmoid": nl.sigmoid,
    "silu": nl.silu,
    "tanh": nl.tanh,
    "exp": nl.exp,
    "square": nl.square,
}


def nki_dtype(fmt: str) -> str:
    """The NKI dtype of a trnlab format name (``"bf16"`` -> ``"bfloat16"``)."""
    from trnlab import formats

    name = formats.spec(fmt).name  # "float32" -> "fp32"; unknown names raise, with hints
    d = _FORMAT_TO_DTYPE.get(name)
    if d is None:
        raise ValueError(
            f"format {fmt!r} has no NKI dtype; the kernels take "
            f"{', '.join(sorted(f for f in _FORMAT_TO_DTYPE if '_x4' not in f))}"
        )
    return d


def _params(chip, buffers: int | None) -> core.CoreParams:
    p = core.core_params(chip)
    return p.replace(compiler_rotating_buffers=int(buffers)) if buffers else p


def matmul(
    a,
    b,
    variant: str = "pipelined",
    chip="trn1",
    dtype: str = "bf16",
    numerics: bool = True,
    out_dtype: str | None = None,
    bufs: int | None = None,
    **options,
) -> core.Run:
    """C = A @ B with one of the NKI matmul kernels, on one NeuronCore of ``chip``.

    Parameters
    ----------
    a, b : array_like or tuple
        A[M, K] and B[K, N], or their shapes for a timing-only run (``numerics=False``).
        A is laid out transposed in HBM (``lhsT[K, M]``, K-major), as NKI's matmul tutorial
        does, so its K rows land on SBUF partitions; the host does that transpose.
    variant : str
        ``"tiled"``, ``"hoisted"``, ``"blocked_mn"``, ``"blocked_mnk"`` or ``"pipelined"``
        (:data:`trnlab.kernels.VARIANTS`).
    chip : str or CoreParams
        A Neuron chip of the catalogue (``"trn1"``, ``"trn2"``, ``"trn3"``).
    dtype : str
        Format of A and B in HBM and SBUF (a ``trnlab.formats`` name: ``"bf16"``,
        ``"fp8_e4m3"``, ``"fp32"``...; ``"mxfp8_e4m3"`` / ``"mxfp4"`` on trn3 are trnlab's
        unpacked MX tiles, see docs/nki.md). PSUM accumulates in fp32.
    numerics : bool
        Compute the values (False: timing only, for large shapes).
    out_dtype : str, optional
        Format of C in HBM (default: bf16, or fp32 for fp32/tf32 inputs).
    bufs : int, optional
        Rotating buffers per tile declared in a loop (default: the compiler's, 2; the
        ``pipelined`` variant uses 3).
    **options
        Meta-parameters of the variant's kernel (``tile_k``, ``tile_m``, ``tile_n``,
        ``tiles_m``, ``tiles_n``, ``TILES_IN_BLOCK_M``...).

    Returns
    -------
    trnlab.core.Run
        ``run.output`` is C (numerics on); ``run.latency``, ``run.utilisation``,
        ``run.timeline()``, ``run.counters()``.
    """
    if variant not in PROGRESSION:
        raise ValueError(
            f"unknown variant {variant!r}; the progression is {', '.join(PROGRESSION)}"
        )
    shape_a = a if isinstance(a, tuple) else np.shape(a)
    shape_b = b if isinstance(b, tuple) else np.shape(b)
    if len(shape_a) != 2 or len(shape_b) != 2 or shape_a[1] != shape_b[0]:
        raise ValueError(f"matmul needs A[M, K] and B[K, N]; got {shape_a} and {shape_b}")
    M, K = shape_a
    N = shape_b[1]
    d = nki_dtype(dtype)
    out = nki_dtype(out_dtype) if out_dtype else out_dtype_for(d)
    if numerics and (isinstance(a, tuple) or isinstance(b, tuple)):
        raise ValueError(
            f"A or B is given as a shape ({shape_a}, {shape_b}); numerics need values. "
            f"Pass arrays, or numerics=False for a timing-only run."
        )
    if numerics:
        lhsT = nki.hbm(np.ascontiguousarray(np.asarray(a, np.float32).T), d, name="a_t")
        rhs = nki.hbm(np.asarray(b, np.float32), d, name="b")
    else:
        lhsT, rhs = nki.hbm((K, M), d, name="a_t"), nki.hbm((K, N), d, name="b")
    kernel, opts, buffers = PROGRESSION[variant]
    return nki.profile(kernel, chip=_params(chip, bufs or buffers))(
        lhsT, rhs, out_dtype=out, **{**opts, **options}
    )


def matmul_bias_act(
    a, b, bias, activation: str = "relu", chip="trn1", dtype: str = "bf16", numerics: bool = True
) -> core.Run:
    """``act(A @ B + bias)`` with the bias and activation fused on the Scalar engine.

    The kernel computes C transposed (N on partitions) so the bias, one value per column of C,
    is a per-partition operand of the Scalar engine's ``f(x * scale + bias)``;
    ``run.outputs["y"]`` is C[M, N] (the host transposes it back)."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    bias = np.asarray(bias, np.float32).reshape(-1, 1)
    M, K = a.shape
    N = b.shape[1]
    if b.shape[0] != K or bias.shape[0] != N:
        raise ValueError(f"need A[M, K], B[K, N], bias[N]; got {a.shape}, {b.shape}, {bias.shape}")
    d = nki_dtype(dtype)
    if numerics:
        args = (nki.hbm(b, d), nki.hbm(np.ascontiguousarray(a.T), d), nki.hbm(bias, nl.float32))
    else:
        args = (nki.hbm((K, N), d), nki.hbm((K, M), d), nki.hbm((N, 1), nl.float32))
    r = nki.profile(nki_matmul_bias_act, chip=chip)(
        *args, activation=ACTIVATION_FUNCTIONS[activation]
    )
    return dataclasses.replace(r, outputs={"y": r.output.T}) if numerics else r


def transpose(x, chip="trn1", dtype: str = "fp32", numerics: bool = True) -> core.Run:
    """Transpose X[R, C] through the Tensor Engine (a matmul against the identity);
    ``run.outputs["y"]`` is X.T."""
    d = nki_dtype(dtype)
    arg = nki.hbm(np.asarray(x, np.float32), d) if numerics else nki.hbm(tuple(x), d)
    r = nki.profile(nki_transpose, chip=chip)(arg)
    return dataclasses.replace(r, outputs={"y": r.output}) if numerics else r


# --- the kernels as trnlab.core kernels (traced onto a KernelContext) --------------------------
def _on_ctx(variant: str):
    kernel, opts, buffers = PROGRESSION[variant]

    def run(ctx, a_t, b, c, bufs: int | None = None, **options):
        nki.record_into(
            ctx,
            kernel,
            a_t,
            b,
            outputs=(c,),
            buffers=bufs or buffers,
            out_dtype=nki_dtype(c.fmt),
            **{**opts, **options},
        )

    run.__name__ = run.__qualname__ = variant
    run.__doc__ = (
        f"The ``{variant}`` matmul as a trnlab.core kernel: ``{variant}(ctx, a_t, b, c)`` traces "
        f"the NKI kernel :func:`{kernel.__name__}` onto ``ctx`` with ``c = a_t.T @ b``.\n\n"
        f"Read the kernel with ``inspect.getsource(trnlab.kernels.{kernel.__name__})``."
    )
    run.nki_kernel = kernel
    return run


tiled = _on_ctx("tiled")
hoisted = _on_ctx("hoisted")
blocked_mn = _on_ctx("blocked_mn")
blocked_mnk = _on_ctx("blocked_mnk")
pipelined = _on_ctx("pipelined")


def matmul_bias_act_kernel(ctx, w, x_t, bias, y_t, activation: str = "relu"):
    """:func:`nki_matmul_bias_act` as a trnlab.core kernel: ``y_t[N, M] = act(w.T @ x_t +
    bias)`` on ``ctx``'s HBM tensors."""
    nki.record_into(
        ctx,
        nki_matmul_bias_act,
        w,
        x_t,
        bias,
        outputs=(y_t,),
        activation=ACTIVATION_FUNCTIONS[activation],
        out_dtype=nki_dtype(y_t.fmt),
    )


def transpose_kernel(ctx, x, y):
    """:func:`nki_transpose` as a trnlab.core kernel: ``y = x.T``."""
    nki.record_into(ctx, nki_transpose, x, outputs=(y,))


def selective_scan_kernel(ctx, delta, u, a, b, c, out, version="v3", chunk=512, hoist=False,
                          bufs=None):  # fmt: skip
    """:func:`nki_selective_scan` as a trnlab.core kernel (``out`` bound to its result)."""
    nki.record_into(
        ctx,
        nki_selective_scan,
        delta,
        u,
        a,
        b,
        c,
        outputs=(out,),
        buffers=bufs,
        version=version,
        chunk=chunk,
        hoist=hoist,
    )


# --- the rest of the library: numpy (or shapes) in, a Run out ----------------------------------
def _hbm(x, dtype: str, numerics: bool, what: str):
    """An HBM argument: values (numerics) or a shape (timing only)."""
    d = nki_dtype(dtype)
    if isinstance(x, tuple):
        if numerics:
            raise ValueError(f"{what} is given as a shape {x}; numerics need values")
        return nki.hbm(x, d)
    a = np.asarray(x, np.float32)
    return nki.hbm(a, d) if numerics else nki.hbm(a.shape, d)


def _profile(kernel, chip, *args, **kwargs) -> core.Run:
    return nki.profile(kernel, chip=chip)(*args, **kwargs)


def rmsnorm(x, gamma, eps=1e-6, chip="trn1", dtype="fp32", numerics=True) -> core.Run:
    """RMSNorm of the rows of ``x [N, D]`` with weight ``gamma [D]`` (:func:`nki_rmsnorm`)."""
    return _profile(nki_rmsnorm, chip, _hbm(x, dtype, numerics, "x"),
                    _hbm(gamma, dtype, numerics, "gamma"), eps=eps)  # fmt: skip


def layernorm(x, gamma, beta, eps=1e-5, chip="trn1", dtype="fp32", numerics=True) -> core.Run:
    """LayerNorm of the rows of ``x [N, D]`` (:func:`nki_layernorm`, bn_stats / bn_aggr)."""
    return _profile(nki_layernorm, chip, _hbm(x, dtype, numerics, "x"),
                    _hbm(gamma, dtype, numerics, "gamma"), _hbm(beta, dtype, numerics, "beta"),
                    eps=eps)  # fmt: skip


def softmax(x, chip="trn1", dtype="fp32", numerics=True) -> core.Run:
    """Softmax of every row of ``x [N, D]`` (:func:`nki_softmax`)."""
    return _profile(nki_softmax, chip, _hbm(x, dtype, numerics, "x"))


def attention(q, k, v, causal=False, chip="trn2", dtype="bf16", numerics=True) -> core.Run:
    """Single-head fused attention ``softmax(q k^T / sqrt(d)) v`` for ``q [S, d]``,
    ``k, v [S_kv, d]`` (:func:`nki_attention`; the host lays q and k out transposed)."""

    def t(x):
        return tuple(reversed(x)) if isinstance(x, tuple) else np.ascontiguousarray(np.asarray(x).T)

    return _profile(nki_attention, chip, _hbm(t(q), dtype, numerics, "q"),
                    _hbm(t(k), dtype, numerics, "k"), _hbm(v, dtype, numerics, "v"),
                    causal=causal)  # fmt: skip


def selective_scan(delta, u, a, b, c, version="v3", chunk=512, hoist=False, chip="trn1",
                   dtype="fp32", numerics=True, bufs=None) -> core.Run:  # fmt: skip
    """Mamba's selective scan (:func:`nki_selective_scan`): ``delta, u [channels, T]``,
    ``a [channels, S]``, ``b, c [S, T]``."""
    args = [_hbm(x, dtype, numerics, n) for x, n in zip((delta, u, a, b, c), "duabc", strict=True)]
    return nki.profile(nki_selective_scan, chip=_params(chip, bufs))(
        *args, version=version, chunk=chunk, hoist=hoist
    )


def avgpool2d(x, pool_size: int, chip="trn1", dtype="fp32", numerics=True) -> core.Run:
    """Average pooling of ``x [C, H, W]`` over ``pool_size``-square windows
    (:func:`nki_avgpool2d`)."""
    return _profile(nki_avgpool2d, chip, _hbm(x, dtype, numerics, "x"), pool_size)


def tensor_add(a, b, chip="trn1", dtype="fp32", numerics=True) -> core.Run:
    """``a + b`` by the SPMD kernel :func:`nki_tensor_add` on a grid of one program per
    128 x 512 block (the programs run one after another on one NeuronCore)."""
    shape = a if isinstance(a, tuple) else np.shape(a)
    grid = (-(-shape[0] // TILE[0]), -(-shape[1] // TILE[1]))
    return _profile(nki_tensor_add[grid], chip, _hbm(a, dtype, numerics, "a"),
                    _hbm(b, dtype, numerics, "b"))  # fmt: skip


def transpose2d(x, shape2d, chip="trn1", dtype="fp32", numerics=True) -> core.Run:
    """NKI's transpose2d problem: each row of ``x [P, f1 * f2]`` is an f1 x f2 matrix,
    returned transposed (:func:`nki_transpose2d`)."""
    return _profile(nki_transpose2d, chip, _hbm(x, dtype, numerics, "x"), tuple(shape2d))
