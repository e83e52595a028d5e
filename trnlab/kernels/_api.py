"""Public entry points: run a library kernel on numpy arrays (or shapes, timing only) and get a
:class:`trnlab.core.Run`; and the same kernels as ``trnlab.core`` kernels ``f(ctx, ...)``.

The NKI kernels are the one source of truth. ``tiled(ctx, a_t, b, c)`` and its siblings trace
the NKI kernel onto a ``KernelContext`` (:func:`trnlab.nki.record_into`) so code written
against the engine-level API (lab 05's checks, ``core.run``) keeps running them.
"""

from __future__ import annotations

import dataclasses
import inspect
import numbers

import numpy as np

import trnlab.nki as nki
import trnlab.nki.language as nl
from trnlab import core
from trnlab._checks import choose, flag, number, shape2, short, whole
from trnlab.core import InstructionLimitError, KernelArgumentError
from trnlab.core._context import _values
from trnlab.core._progress import instruction_limit, limit_message
from trnlab.nki._dtypes import DTYPES

from ._attention import nki_attention
from ._elementwise import TILE, nki_avgpool2d, nki_tensor_add
from ._epilogue import nki_matmul_bias_act
from ._estimates import ESTIMATES
from ._mamba import VERSIONS, nki_selective_scan
from ._matmul import PROGRESSION, estimate_instructions, out_dtype_for
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
        raise KernelArgumentError(
            f"format {fmt!r} has no NKI dtype; the kernels take "
            f"{', '.join(sorted(f for f in _FORMAT_TO_DTYPE if '_x4' not in f))}"
        )
    return d


def _params(chip, buffers: int | None) -> core.CoreParams:
    p = core.core_params(chip)
    if buffers is None:
        return p
    return p.replace(compiler_rotating_buffers=_bufs(buffers))


def _bufs(bufs) -> int:
    return whole(bufs, "bufs (rotating buffers per tile)", 1, 64, KernelArgumentError)


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


def _options(kernel, options: dict, fixed: tuple[str, ...]) -> dict:
    """The kernel's meta-parameters, checked: names it takes, sizes that are whole numbers
    >= 1 (a tile size of 0 would loop forever or divide by zero)."""
    params = inspect.signature(getattr(kernel, "fn", kernel)).parameters
    allowed = [n for n in params if n not in fixed]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise KernelArgumentError(
            f"{getattr(kernel, '__name__', kernel)} has no option {', '.join(unknown)}; its "
            f"options are {', '.join(allowed)}"
        )
    for name, v in options.items():
        default = params[name].default
        if isinstance(default, int) or (default is None and name == "a_width" and v is not None):
            whole(v, name, 1, 1 << 20, KernelArgumentError)
    return options


def _check_size(count: int, max_instructions, numerics: bool) -> int:
    """Refuse a run whose estimated instruction count exceeds its limit (before tracing)."""
    limit = instruction_limit(max_instructions, numerics, nki=True)
    if count > limit:
        raise InstructionLimitError(limit_message(count, limit, numerics, estimated=True, nki=True))
    return limit


def _fits(kernel: str, numerics: bool, *sizes) -> None:
    """Refuse before tracing a kernel whose estimated instruction count (:mod:`._estimates`) is
    beyond the run's limit: a huge timing-only shape would otherwise trace for minutes."""
    _check_size(ESTIMATES[kernel](*sizes), None, numerics)


def matmul(
    a,
    b,
    variant: str = "pipelined",
    chip="trn1",
    dtype: str = "bf16",
    numerics: bool = True,
    out_dtype: str | None = None,
    bufs: int | None = None,
    max_instructions: int | None = None,
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
        Rotating buffers per tile declared in a loop (default: the catalogue's
        ``compiler_rotating_buffers``, 2 on trn1 and 3 on trn2 and trn3; the ``pipelined``
        variant uses 3).
    max_instructions : int, optional
        The run's instruction limit (default :data:`trnlab.core.MAX_INSTRUCTIONS`, or the
        numerics one). The kernel's instruction count is estimated from the shapes first, and a
        run beyond the limit is refused at once, with the estimate and what to do.
    **options
        Meta-parameters of the variant's kernel (``tile_k``, ``tile_m``, ``tile_n``,
        ``tiles_m``, ``tiles_n``, ``TILES_IN_BLOCK_M``...).

    Returns
    -------
    trnlab.core.Run
        ``run.output`` is C (numerics on); ``run.latency``, ``run.utilisation``,
        ``run.timeline()``, ``run.counters()``.
    """
    variant = choose(variant, PROGRESSION, "matmul variant", KernelArgumentError)
    numerics = flag(numerics, "numerics", KernelArgumentError)
    shape_a, shape_b = _operand(a, "A"), _operand(b, "B")
    if shape_a[1] != shape_b[0]:
        raise KernelArgumentError(
            f"matmul needs A[M, K] and B[K, N] with the same K; got {shape_a} and {shape_b}"
        )
    M, K = shape_a
    N = shape_b[1]
    kernel, opts, buffers = PROGRESSION[variant]
    _options(kernel, options, ("lhsT", "rhs", "out_dtype"))
    if bufs is not None:
        _bufs(bufs)
    d = nki_dtype(dtype)
    out = nki_dtype(out_dtype) if out_dtype is not None else out_dtype_for(d)
    if numerics and (isinstance(a, tuple) or isinstance(b, tuple)):
        raise KernelArgumentError(
            f"A or B is given as a shape ({shape_a}, {shape_b}); numerics need values. "
            f"Pass arrays, or numerics=False for a timing-only run."
        )
    limit = _check_size(
        estimate_instructions(variant, M, K, N, **options), max_instructions, numerics
    )
    if numerics:
        lhsT = nki.hbm(np.ascontiguousarray(np.asarray(a, np.float32).T), d, name="a_t")
        rhs = nki.hbm(np.asarray(b, np.float32), d, name="b")
    else:
        lhsT, rhs = nki.hbm((K, M), d, name="a_t"), nki.hbm((K, N), d, name="b")
    with core.max_instructions(limit):
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
    activation = choose(activation, ACTIVATION_FUNCTIONS, "activation", KernelArgumentError)
    numerics = flag(numerics, "numerics", KernelArgumentError)
    (M, K), (K2, N) = _operand(a, "A"), _operand(b, "B")
    if isinstance(bias, tuple):
        bias_shape = bias
    else:
        bias = _values(bias, "bias")
        bias_shape = bias.shape
    if K2 != K or tuple(bias_shape) not in ((N,), (N, 1)):
        raise KernelArgumentError(
            f"need A[M, K], B[K, N] and bias[N]; got A {(M, K)}, B {(K2, N)}, bias {bias_shape}"
        )
    d = nki_dtype(dtype)
    if numerics and any(isinstance(x, tuple) for x in (a, b, bias)):
        raise KernelArgumentError(
            "A, B or bias is given as a shape; numerics need values. Pass arrays, or "
            "numerics=False for a timing-only run."
        )
    _fits("matmul_bias_act", numerics, M, K, N)
    if numerics:
        a, b = _values(a, "A"), _values(b, "B")
        args = (nki.hbm(b, d), nki.hbm(np.ascontiguousarray(a.T), d),
                nki.hbm(bias.reshape(-1, 1), nl.float32))  # fmt: skip
    else:
        args = (nki.hbm((K, N), d), nki.hbm((K, M), d), nki.hbm((N, 1), nl.float32))
    r = nki.profile(nki_matmul_bias_act, chip=core.core_params(chip))(
        *args, activation=ACTIVATION_FUNCTIONS[activation]
    )
    return dataclasses.replace(r, outputs={"y": r.output.T}) if numerics else r


def transpose(x, chip="trn1", dtype: str = "fp32", numerics: bool = True) -> core.Run:
    """Transpose X[R, C] through the Tensor Engine (a matmul against the identity);
    ``run.outputs["y"]`` is X.T."""
    numerics = flag(numerics, "numerics", KernelArgumentError)
    shape = _operand(x, "x")
    d = nki_dtype(dtype)
    if numerics and isinstance(x, tuple):
        raise KernelArgumentError(f"x is given as a shape {x}; numerics need values")
    _fits("transpose", numerics, *shape)
    arg = nki.hbm(_values(x, "x"), d) if numerics else nki.hbm(shape, d)
    r = nki.profile(nki_transpose, chip=core.core_params(chip))(arg)
    return dataclasses.replace(r, outputs={"y": r.output}) if numerics else r


# --- the kernels as trnlab.core kernels (traced onto a KernelContext) --------------------------
def _on_ctx(variant: str):
    kernel, opts, buffers = PROGRESSION[variant]

    def run(ctx, a_t, b, c, bufs: int | None = None, **options):
        _options(kernel, options, ("lhsT", "rhs", "out_dtype"))
        if bufs is not None:
            _bufs(bufs)
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
    activation = choose(activation, ACTIVATION_FUNCTIONS, "activation", KernelArgumentError)
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


def _scan_options(version, chunk, hoist) -> tuple[str, int, bool]:
    return (
        choose(version, VERSIONS, "selective scan version", KernelArgumentError),
        whole(chunk, "chunk", 1, 1 << 20, KernelArgumentError),
        flag(hoist, "hoist", KernelArgumentError),
    )


def selective_scan_kernel(ctx, delta, u, a, b, c, out, version="v3", chunk=512, hoist=False,
                          bufs=None):  # fmt: skip
    """:func:`nki_selective_scan` as a trnlab.core kernel (``out`` bound to its result)."""
    version, chunk, hoist = _scan_options(version, chunk, hoist)
    if bufs is not None:
        _bufs(bufs)
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
    """An HBM argument: values (numerics) or a shape (timing only), checked: real numbers, at
    least one element, a shape of whole numbers >= 1."""
    numerics = flag(numerics, "numerics", KernelArgumentError)
    d = nki_dtype(dtype)
    if isinstance(x, tuple):
        if not x or not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 1
                            for n in x):  # fmt: skip
            raise KernelArgumentError(f"{what} shape must be whole numbers >= 1, not {short(x)}")
        if numerics:
            raise KernelArgumentError(f"{what} is given as a shape {x}; numerics need values")
        return nki.hbm(x, d)
    a = _values(x, what)
    if a.ndim == 0 or not a.size:
        raise KernelArgumentError(
            f"{what} must be an array with at least one element, not one of shape {a.shape}"
        )
    return nki.hbm(a, d) if numerics else nki.hbm(a.shape, d)


def _profile(kernel, chip, *args, **kwargs) -> core.Run:
    return nki.profile(kernel, chip=core.core_params(chip))(*args, **kwargs)


def _dims(arg, what: str, ndim: int, names: str) -> tuple[int, ...]:
    """The shape of an HBM argument with ``ndim`` axes (``names`` says which), or a teaching
    error naming the argument, the shape it has and the one it needs."""
    if len(arg.shape) != ndim:
        raise KernelArgumentError(
            f"{what} must have {ndim} {'axis' if ndim == 1 else 'axes'} [{names}]; "
            f"got shape {arg.shape}"
        )
    return arg.shape


def _same(what: str, got: tuple, need: tuple, meaning: str) -> None:
    if tuple(got) != tuple(need):
        raise KernelArgumentError(f"{what} must have shape {tuple(need)} ({meaning}); got {got}")


def _vector(arg, what: str, length: int) -> None:
    """A weight vector of ``length`` features: shape (D,) or (D, 1) / (1, D)."""
    if arg.shape not in ((length,), (length, 1), (1, length)):
        raise KernelArgumentError(
            f"{what} must hold one weight per feature: shape ({length},), to match x [N, "
            f"{length}]; got {arg.shape}"
        )


def rmsnorm(x, gamma, eps=1e-6, chip="trn1", dtype="fp32", numerics=True) -> core.Run:
    """RMSNorm of the rows of ``x [N, D]`` with weight ``gamma [D]`` (:func:`nki_rmsnorm`)."""
    eps = number(eps, "eps", 0, None, error=KernelArgumentError)
    xa, ga = _hbm(x, dtype, numerics, "x"), _hbm(gamma, dtype, numerics, "gamma")
    N, D = _dims(xa, "x", 2, "N rows, D features")
    _vector(ga, "gamma", D)
    _fits("rmsnorm", xa.values is not None, N, D)
    return _profile(nki_rmsnorm, chip, xa, ga, eps=eps)


def layernorm(x, gamma, beta, eps=1e-5, chip="trn1", dtype="fp32", numerics=True) -> core.Run:
    """LayerNorm of the rows of ``x [N, D]`` (:func:`nki_layernorm`, bn_stats / bn_aggr)."""
    eps = number(eps, "eps", 0, None, error=KernelArgumentError)
    xa, ga = _hbm(x, dtype, numerics, "x"), _hbm(gamma, dtype, numerics, "gamma")
    ba = _hbm(beta, dtype, numerics, "beta")
    N, D = _dims(xa, "x", 2, "N rows, D features")
    _vector(ga, "gamma", D)
    _vector(ba, "beta", D)
    _fits("layernorm", xa.values is not None, N, D)
    return _profile(nki_layernorm, chip, xa, ga, ba, eps=eps)


def softmax(x, chip="trn1", dtype="fp32", numerics=True) -> core.Run:
    """Softmax of every row of ``x [N, D]`` (:func:`nki_softmax`)."""
    xa = _hbm(x, dtype, numerics, "x")
    _fits("softmax", xa.values is not None, *_dims(xa, "x", 2, "N rows, D features"))
    return _profile(nki_softmax, chip, xa)


def attention(q, k, v, causal=False, chip="trn2", dtype="bf16", numerics=True) -> core.Run:
    """Single-head fused attention ``softmax(q k^T / sqrt(d)) v`` for ``q [S, d]``,
    ``k, v [S_kv, d]`` (:func:`nki_attention`; the host lays q and k out transposed)."""
    causal = flag(causal, "causal", KernelArgumentError)

    def t(x, what):  # the host lays q and k out transposed: [d, S]
        if isinstance(x, tuple):
            return _hbm(tuple(reversed(x)), dtype, numerics, what)
        arr = _values(x, what)
        return _hbm(np.ascontiguousarray(arr.T) if arr.ndim == 2 else arr, dtype, numerics, what)

    qa, ka, va = t(q, "q"), t(k, "k"), _hbm(v, dtype, numerics, "v")
    d = _dims(qa, "q", 2, "S queries, d head dimension")[0]
    S_kv = _dims(ka, "k", 2, "S_kv keys, d head dimension")[1]
    _same("k", tuple(reversed(ka.shape)), (S_kv, d), "S_kv keys of q's head dimension")
    _same("v", va.shape, (S_kv, d), "one value row per key")
    if d > 128:
        raise KernelArgumentError(
            f"q's head dimension d = {d} exceeds the 128 partitions the kernel contracts it "
            f"over; split the head (d <= 128)"
        )
    _fits("attention", qa.values is not None, qa.shape[1], S_kv, d, causal)
    return _profile(nki_attention, chip, qa, ka, va, causal=causal)


def selective_scan(delta, u, a, b, c, version="v3", chunk=512, hoist=False, chip="trn1",
                   dtype="fp32", numerics=True, bufs=None) -> core.Run:  # fmt: skip
    """Mamba's selective scan (:func:`nki_selective_scan`): ``delta, u [channels, T]``,
    ``a [channels, S]``, ``b, c [S, T]``."""
    version, chunk, hoist = _scan_options(version, chunk, hoist)
    if bufs is not None:
        _bufs(bufs)
    args = [_hbm(x, dtype, numerics, n) for x, n in zip((delta, u, a, b, c), "duabc", strict=True)]
    channels, T = _dims(args[0], "delta", 2, "channels, T time steps")
    S = _dims(args[2], "a", 2, "channels, S states")[1]
    _same("u", args[1].shape, (channels, T), "as delta: channels x time steps")
    _same("a", args[2].shape, (channels, S), "channels x states")
    _same("b", args[3].shape, (S, T), "states x time steps")
    _same("c", args[4].shape, (S, T), "states x time steps")
    if channels % 128:
        raise KernelArgumentError(
            f"delta has {channels} channels; the kernel puts channels on the 128 partitions, "
            f"so it needs a multiple of 128 (pad to {-(-channels // 128) * 128})"
        )
    _fits("selective_scan", args[0].values is not None, channels, T, S, version, chunk, hoist)
    return nki.profile(nki_selective_scan, chip=_params(chip, bufs))(
        *args, version=version, chunk=chunk, hoist=hoist
    )


def avgpool2d(x, pool_size: int, chip="trn1", dtype="fp32", numerics=True) -> core.Run:
    """Average pooling of ``x [C, H, W]`` over ``pool_size``-square windows
    (:func:`nki_avgpool2d`)."""
    pool_size = whole(pool_size, "pool_size", 1, 1 << 16, KernelArgumentError)
    xa = _hbm(x, dtype, numerics, "x")
    C, H, W = _dims(xa, "x", 3, "C channels, H rows, W columns")
    if pool_size > min(H, W):
        raise KernelArgumentError(
            f"pool_size = {pool_size} is larger than the image ({H} x {W}): no window fits"
        )
    _fits("avgpool2d", xa.values is not None, C, H, W)
    return _profile(nki_avgpool2d, chip, xa, pool_size)


def tensor_add(a, b, chip="trn1", dtype="fp32", numerics=True) -> core.Run:
    """``a + b`` by the SPMD kernel :func:`nki_tensor_add` on a grid of one program per
    128 x 512 block (the programs run one after another on one NeuronCore)."""
    a_arg, b_arg = _hbm(a, dtype, numerics, "a"), _hbm(b, dtype, numerics, "b")
    shape = _dims(a_arg, "a", 2, "rows, columns")
    _same("b", b_arg.shape, shape, "as a: the kernel adds element by element")
    _fits("tensor_add", a_arg.values is not None, *shape)
    grid = (-(-shape[0] // TILE[0]), -(-shape[1] // TILE[1]))
    return _profile(nki_tensor_add[grid], chip, a_arg, b_arg)


def transpose2d(x, shape2d, chip="trn1", dtype="fp32", numerics=True) -> core.Run:
    """NKI's transpose2d problem: each row of ``x [P, f1 * f2]`` is an f1 x f2 matrix,
    returned transposed (:func:`nki_transpose2d`)."""
    shape2d = shape2(shape2d, "shape2d", KernelArgumentError, ("f1", "f2"))
    xa = _hbm(x, dtype, numerics, "x")
    F = _dims(xa, "x", 2, "P rows, f1 * f2 elements")[1]
    if shape2d[0] * shape2d[1] != F:
        raise KernelArgumentError(
            f"shape2d {shape2d} holds {shape2d[0] * shape2d[1]} elements, but each row of x "
            f"holds {F}: f1 * f2 must equal x's columns"
        )
    _fits("transpose2d", xa.values is not None, *xa.shape)
    return _profile(nki_transpose2d, chip, xa, shape2d)
