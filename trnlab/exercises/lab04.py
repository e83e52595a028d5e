"""Exercises of lab 04 (write a kernel). The answer to each is a kernel function; the check
runs it on the NeuronCore model, compares its output with numpy and its speed with a target,
and says what is wrong. The reference solutions are kernels written here, in the kernel API.

A matmul kernel is ``kernel(ctx, a_t, b, c)`` with ``a_t[K, M]`` (A stored transposed, K on
partitions), ``b[K, N]`` and ``c[M, N]`` in HBM (bf16); the epilogue kernel is
``kernel(ctx, w, x_t, bias, y_t)`` computing ``y_t[N, M] = relu(w.T @ x_t + bias)``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from ._exercise import Exercise

__all__ = [
    "EPILOGUE_SHAPE",
    "FAST_SHAPE",
    "LARGE_SHAPE",
    "UTILISATION_TARGET",
    "correct_matmul",
    "epilogue",
    "fast",
    "fits_sbuf",
    "profile",
    "reference_blocked",
    "reference_epilogue",
    "reference_streamed",
    "reference_tiled",
]

CHIP = "trn1"
#: Shapes (M, K, N) the checks use. Correctness: small and ragged, with numerics.
CHECK_SHAPES = ((200, 300, 700), (128, 128, 512))
#: Speed of a first tiled kernel: within SLOWDOWN of the reference tiled kernel here.
TILED_SHAPE = (512, 512, 1024)
SLOWDOWN = 1.5
#: A shape whose full-K strips do not fit SBUF (hoisting all of K overflows it).
LARGE_SHAPE = (512, 32768, 1024)
LARGE_SPEEDUP = 3.0  # at least this much faster than the tiled kernel
#: The utilisation exercise.
FAST_SHAPE = (1024, 2048, 2048)
UTILISATION_TARGET = 0.55
#: The epilogue exercise: K, N (output features), M (tokens).
EPILOGUE_SHAPE = (256, 256, 1024)

T_K, T_M, T_N = 128, 128, 512


def _spans(n: int, t: int) -> list[tuple[int, int]]:
    return [(i, min(t, n - i)) for i in range(0, n, t)]


# ----------------------------------------------------------------------------------------------
# Reference solutions (kernels)
# ----------------------------------------------------------------------------------------------
def reference_tiled(ctx, a_t, b, c):
    """Load an A tile and a B tile for each matmul; accumulate over K in PSUM; copy out, store."""
    (K, M), N = a_t.shape, b.shape[1]
    a_tile = ctx.sbuf((T_K, T_M), a_t.fmt, "a tile")
    b_tile = ctx.sbuf((T_K, T_N), b.fmt, "b tile")
    acc = ctx.psum((T_M, T_N), "acc")
    out = ctx.sbuf((T_M, T_N), c.fmt, "c tile")
    for m0, ms in _spans(M, T_M):
        for n0, ns in _spans(N, T_N):
            for i, (k0, ks) in enumerate(_spans(K, T_K)):
                ctx.load(a_tile[:ks, :ms], a_t[k0 : k0 + ks, m0 : m0 + ms])
                ctx.load(b_tile[:ks, :ns], b[k0 : k0 + ks, n0 : n0 + ns])
                ctx.matmul(acc[:ms, :ns], a_tile[:ks, :ms], b_tile[:ks, :ns], accumulate=i > 0)
            ctx.copy(out[:ms, :ns], acc[:ms, :ns])
            ctx.store(c[m0 : m0 + ms, n0 : n0 + ns], out[:ms, :ns])


def reference_streamed(ctx, a_t, b, c, chunk: int = 16):
    """Stream K in chunks of ``chunk`` tiles. For a group of M tiles (as many as PSUM holds
    with every N tile: 8 banks), the partial sums stay in PSUM across all the chunks, and each
    chunk of A and B is loaded once and used for every (M, N) pair of the group: SBUF holds
    one chunk whatever K is. Two buffer sets let the next chunk's loads overlap this chunk's
    matmuls."""
    (K, M), N = a_t.shape, b.shape[1]
    n_spans = _spans(N, T_N)
    banks = 8
    if len(n_spans) > banks:
        raise ValueError(f"this reference keeps one PSUM bank per N tile: N <= {banks * T_N}")
    group = max(1, banks // len(n_spans)) * T_M  # M columns per group
    gm, gn = min(group, M), N
    a_buf = [[ctx.sbuf((T_K, gm), a_t.fmt, f"A{s} k{j}") for j in range(chunk)] for s in range(2)]
    b_buf = [[ctx.sbuf((T_K, gn), b.fmt, f"B{s} k{j}") for j in range(chunk)] for s in range(2)]
    accs = [ctx.psum((T_M, T_N), f"acc{i}") for i in range(banks)]
    out = ctx.sbuf((T_M, T_N), c.fmt, "c tile")
    step = 0
    for G0, GS in _spans(M, group):
        m_spans = _spans(GS, T_M)
        for c0, cs in _spans(K, chunk * T_K):
            s = step % 2
            step += 1
            kspans = _spans(cs, T_K)
            for j, (k0, ks) in enumerate(kspans):
                rows = slice(c0 + k0, c0 + k0 + ks)
                ctx.load(a_buf[s][j][:ks, :GS], a_t[rows, G0 : G0 + GS])
                ctx.load(b_buf[s][j][:ks, :gn], b[rows, 0:N])
            for i, (m0, ms) in enumerate(m_spans):
                for q, (n0, ns) in enumerate(n_spans):
                    acc = accs[i * len(n_spans) + q]
                    for j, (k0, ks) in enumerate(kspans):
                        ctx.matmul(
                            acc[:ms, :ns],
                            a_buf[s][j][:ks, m0 : m0 + ms],
                            b_buf[s][j][:ks, n0 : n0 + ns],
                            accumulate=c0 + k0 > 0,
                        )
        for i, (m0, ms) in enumerate(m_spans):
            for q, (n0, ns) in enumerate(n_spans):
                acc = accs[i * len(n_spans) + q]
                ctx.copy(out[:ms, :ns], acc[:ms, :ns], engine=("vector", "scalar")[q % 2])
                ctx.store(c[G0 + m0 : G0 + m0 + ms, n0 : n0 + ns], out[:ms, :ns])


def reference_blocked(ctx, a_t, b, c):
    """Blocks over M, N and K: a block of B (8 K tiles x 2 N tiles) and one of A (8 K tiles x
    16 M tiles) feed 256 matmuls before the next loads; partial sums over K blocks are added
    into an SBUF accumulator, and the compiler's second buffer of each block lets the next
    block's loads overlap these matmuls. This is the library's ``blocked_mnk`` kernel (read it
    with ``inspect.getsource(trnlab.kernels.blocked_mnk)``)."""
    from trnlab.kernels import blocked_mnk  # the kernels import the core simulator

    blocked_mnk(ctx, a_t, b, c)


def reference_epilogue(ctx, w, x_t, bias, y_t):
    """``y_t[N, M] = relu(w.T @ x_t + bias)``: N (output features) on partitions, so the bias is
    one value per partition and the Scalar engine applies relu(psum + bias) as it moves each
    result out of PSUM: no separate bias or activation pass."""
    K, N = w.shape
    M = x_t.shape[1]
    kspans = _spans(K, T_K)
    w_tiles = [ctx.sbuf((T_K, T_M), w.fmt, f"w k{j}") for j in range(len(kspans))]
    x_tiles = [ctx.sbuf((T_K, T_N), x_t.fmt, f"x k{j}") for j in range(len(kspans))]
    b_tile = ctx.sbuf((T_M, 1), "fp32", "bias")
    accs = [ctx.psum((T_M, T_N), f"acc{s}") for s in range(2)]
    outs = [ctx.sbuf((T_M, T_N), y_t.fmt, f"y tile{s}") for s in range(2)]
    step = 0
    for n0, ns in _spans(N, T_M):
        ctx.load(b_tile[:ns, :], bias[n0 : n0 + ns, :])
        for j, (k0, ks) in enumerate(kspans):
            ctx.load(w_tiles[j][:ks, :ns], w[k0 : k0 + ks, n0 : n0 + ns])
        for m0, ms in _spans(M, T_N):
            acc, out = accs[step % 2], outs[step % 2]
            for j, (k0, ks) in enumerate(kspans):
                ctx.load(x_tiles[j][:ks, :ms], x_t[k0 : k0 + ks, m0 : m0 + ms])
                ctx.matmul(
                    acc[:ns, :ms], w_tiles[j][:ks, :ns], x_tiles[j][:ks, :ms], accumulate=j > 0
                )
            ctx.activation(out[:ns, :ms], acc[:ns, :ms], "relu", bias=b_tile[:ns, :])
            ctx.store(y_t[n0 : n0 + ns, m0 : m0 + ms], out[:ns, :ms])
            step += 1


# ----------------------------------------------------------------------------------------------
# Running a learner's kernel
# ----------------------------------------------------------------------------------------------
def _data(m: int, k: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((m, k)).astype(np.float32),
        rng.standard_normal((k, n)).astype(np.float32),
    )


def _call(kernel: Callable, numerics: bool, **args):
    """Run ``kernel`` on trn1; returns (run, None) or (None, what went wrong)."""
    from trnlab import core

    if not callable(kernel):
        return None, (
            f"the answer should be a kernel function def my_kernel(ctx, ...), not "
            f"{type(kernel).__name__}"
        )
    try:
        return core.run(kernel, chip=CHIP, numerics=numerics, **args), None
    except core.HardwareRuleError as err:
        return None, f"the NeuronCore refused your kernel: {err}"
    except Exception as err:  # the learner's code: say what it raised, do not crash the lab
        return None, f"your kernel raised {type(err).__name__}: {err}"


def _matmul_args(m, k, n, numerics=True, seed=0):
    from trnlab import core

    if not numerics:
        return None, {
            "a_t": core.hbm((k, m), "bf16", is_input=True),
            "b": core.hbm((k, n), "bf16", is_input=True),
            "c": core.hbm((m, n), "bf16"),
        }
    a, b = _data(m, k, n, seed)
    args = {
        "a_t": core.hbm(np.ascontiguousarray(a.T), "bf16"),
        "b": core.hbm(b, "bf16"),
        "c": core.hbm((m, n), "bf16"),
    }
    return (a, b), args


def _compare(out, exact, scale, what: str, advice: str = "") -> str | None:
    """None if ``out`` matches within bf16 rounding (inputs and output), else where it is off."""
    if out is None:
        return f"{what} was never stored: end with ctx.store(c[...], sbuf_tile) for every tile"
    if out.shape != exact.shape:
        return f"{what} has shape {out.shape}, expected {exact.shape}"
    bad = np.abs(out - exact) > 0.02 * scale + 1e-3
    if not bad.any():
        return None
    r, col = np.argwhere(bad)[0]
    zero = np.all(out[bad] == 0)
    return (
        f"{what}[{r}, {col}] is {out[r, col]:.4g}, expected {exact[r, col]:.4g}; "
        f"{bad.sum():,} of {bad.size:,} values are wrong"
        + (" (they are 0: those tiles were never computed or stored)" if zero else "")
        + (f". {advice}" if advice and not zero else "")
    )


def _check_matmul_values(kernel) -> str | None:
    for m, k, n in CHECK_SHAPES:
        (a, b), args = _matmul_args(m, k, n)
        run, problem = _call(kernel, True, **args)
        if problem:
            return f"on A[{m} x {k}] @ B[{k} x {n}]: {problem}"
        exact = a.astype(np.float64) @ b.astype(np.float64)
        problem = _compare(
            run.outputs.get("c"),
            exact,
            np.abs(a) @ np.abs(b),
            "C",
            "Check accumulate= (False for the first K tile of an output tile, True after) and "
            "the last, partial tiles (sizes not multiples of 128 or 512).",
        )
        if problem:
            return f"on A[{m} x {k}] @ B[{k} x {n}]: {problem}"
        if run.program.counts().get("matmul", 0) == 0:
            return "no matmul instructions: multiply on the Tensor Engine with ctx.matmul"
    return None


@lru_cache(maxsize=16)
def _reference_run(name: str, shape: tuple[int, int, int]):
    kernel = {
        "tiled": reference_tiled,
        "streamed": reference_streamed,
        "blocked": reference_blocked,
    }[name]
    _, args = _matmul_args(*shape, numerics=False)
    run, problem = _call(kernel, False, **args)
    if problem:  # pragma: no cover - the references run
        raise RuntimeError(problem)
    return run


def profile(kernel: Callable, shape: tuple[int, int, int] = TILED_SHAPE):
    """Run a matmul kernel timing-only on trn1 at ``shape`` (M, K, N): the run, for
    :class:`trnlab.widgets.KernelProfile` and the numbers in the checks' messages."""
    _, args = _matmul_args(*shape, numerics=False)
    run, problem = _call(kernel, False, **args)
    if problem:
        raise ValueError(problem)
    return run


def _speed(kernel, shape) -> tuple[object, str | None]:
    _, args = _matmul_args(*shape, numerics=False)
    run, problem = _call(kernel, False, **args)
    if problem:
        m, k, n = shape
        return None, f"on A[{m} x {k}] @ B[{k} x {n}] (timing only): {problem}"
    return run, None


# ----------------------------------------------------------------------------------------------
# Checks
# ----------------------------------------------------------------------------------------------
def _check_correct(kernel) -> str | None:
    problem = _check_matmul_values(kernel)
    if problem:
        return problem
    run, problem = _speed(kernel, TILED_SHAPE)
    if problem:
        return problem
    ref = _reference_run("tiled", TILED_SHAPE)
    if run.latency > SLOWDOWN * ref.latency:
        return (
            f"correct, but slow: {run.latency * 1e6:,.1f} us on A[512 x 512] @ B[512 x 1024], "
            f"more than {SLOWDOWN}x the reference tiled kernel's {ref.latency * 1e6:,.1f} us. "
            f"Use full tiles (128 x 128 x 512) and accumulate over K in PSUM."
        )
    return None


def _check_fits(kernel) -> str | None:
    problem = _check_matmul_values(kernel)
    if problem:
        return problem
    m, k, n = LARGE_SHAPE
    run, problem = _speed(kernel, LARGE_SHAPE)
    if problem:
        return problem
    tiled = _reference_run("tiled", LARGE_SHAPE)
    need = tiled.latency / LARGE_SPEEDUP
    if run.latency > need:
        return (
            f"it fits, but on A[{m} x {k}] @ B[{k} x {n}] it takes {run.latency * 1e6:,.0f} us: "
            f"the target is {need * 1e6:,.0f} us ({LARGE_SPEEDUP:g}x faster than the tiled "
            f"kernel's {tiled.latency * 1e6:,.0f} us). Load each A tile once per M tile, not "
            f"once per N tile, and keep the partial sums in PSUM across K chunks."
        )
    return None


def _check_fast(kernel) -> str | None:
    problem = _check_matmul_values(kernel)
    if problem:
        return problem
    m, k, n = FAST_SHAPE
    run, problem = _speed(kernel, FAST_SHAPE)
    if problem:
        return problem
    if run.utilisation < UTILISATION_TARGET:
        return (
            f"correct; the Tensor Engine is at {run.utilisation:.1%} of peak on A[{m} x {k}] @ "
            f"B[{k} x {n}] ({run.latency * 1e6:,.0f} us, {run.bound}-bound, "
            f"{run.arithmetic_intensity:,.0f} FLOP/B); the target is {UTILISATION_TARGET:.0%}. "
            f"Re-use each loaded tile for many matmuls (blocks of A and B resident in SBUF)."
        )
    return None


def _epilogue_data(seed: int = 1):
    from trnlab import core

    k, n, m = EPILOGUE_SHAPE
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((k, n)).astype(np.float32) / np.sqrt(k)
    x = rng.standard_normal((m, k)).astype(np.float32)
    bias = rng.standard_normal((n, 1)).astype(np.float32)
    args = {
        "w": core.hbm(w, "bf16"),
        "x_t": core.hbm(np.ascontiguousarray(x.T), "bf16"),
        "bias": core.hbm(bias, "fp32"),
        "y_t": core.hbm((n, m), "fp32"),
    }
    return (w, x, bias), args


def _check_epilogue(kernel) -> str | None:
    from trnlab.core import ENGINES

    (w, x, bias), args = _epilogue_data()
    run, problem = _call(kernel, True, **args)
    if problem:
        return problem
    pre = w.T.astype(np.float64) @ x.T.astype(np.float64) + bias
    exact = np.maximum(pre, 0)
    scale = np.abs(w.T) @ np.abs(x.T) + np.abs(bias)
    out = run.outputs.get("y_t")
    negative = out is not None and out.shape == exact.shape and (out < -1e-3).any()
    problem = _compare(
        out,
        exact,
        scale,
        "y_t",
        "Negative values remain: apply relu."
        if negative
        else "Check the bias (one per row of y_t, i.e. per partition) and accumulate= over K.",
    )
    if problem:
        return problem
    _, n, m = EPILOGUE_SHAPE
    tiles = -(-n // T_M) * -(-m // T_N)
    t = run.program.table
    passes = int(
        np.isin(t["engine"], [ENGINES.index(e) for e in ("Vector", "Scalar", "GpSimd")]).sum()
    )
    if passes > tiles:
        return (
            f"correct, but not fused: {passes} Vector/Scalar/GpSimd instructions for {tiles} "
            f"output tiles. Apply bias and relu in the one instruction that moves each tile out "
            f"of PSUM: ctx.activation(out, psum_tile, 'relu', bias=bias_tile) (N on partitions, "
            f"so the bias is one value per partition)."
        )
    return None


correct_matmul = Exercise(
    "lab04.correct_matmul",
    "Write my_matmul(ctx, a_t, b, c): C[M, N] = A @ B with a_t[K, M] (A transposed) and "
    "b[K, N] in HBM, for any M, K, N (the last tiles may be partial). It must match numpy "
    f"and be no slower than {SLOWDOWN}x the reference tiled kernel.",
    _check_correct,
    hints=(
        "Allocate one SBUF tile for A [128, 128], one for B [128, 512], a PSUM tile [128, 512] "
        "and an SBUF output tile [128, 512] (in c.fmt).",
        "Loop over M tiles (128), N tiles (512), K tiles (128); load both tiles, then "
        "ctx.matmul(acc[:ms, :ns], a_tile[:ks, :ms], b_tile[:ks, :ns], accumulate=k_index > 0).",
        "After the K loop: ctx.copy(out[:ms, :ns], acc[:ms, :ns]) then "
        "ctx.store(c[m0:m0+ms, n0:n0+ns], out[:ms, :ns]). Partial tiles: slice with the "
        "real size ms = min(128, M - m0).",
    ),
    solution=lambda: reference_tiled,
    solution_text="See trnlab.exercises.lab04.reference_tiled (print its source with "
    "inspect.getsource): three loops, two loads and a matmul in the innermost, a copy out of "
    "PSUM and a store per output tile.",
)

fits_sbuf = Exercise(
    "lab04.fits_sbuf",
    f"Write a matmul kernel for A[{LARGE_SHAPE[0]} x {LARGE_SHAPE[1]}] @ "
    f"B[{LARGE_SHAPE[1]} x {LARGE_SHAPE[2]}] that fits SBUF (hoisting all of K's tiles "
    f"does not) and is at least {LARGE_SPEEDUP:g}x faster than the tiled kernel. It must also "
    "be correct on small shapes.",
    _check_fits,
    hints=(
        "256 K tiles of A and B at once need 256 x (256 + 1024) B = 320 KiB per partition; "
        "trn1 has 176 KiB usable. Work on K in chunks.",
        "For each M tile, keep one PSUM tile per N tile (N = 1024: two banks) for the whole "
        "K loop; accumulate=True for every matmul after the very first K tile.",
        "For each chunk of, say, 32 K tiles: load A's chunk once and use it for every N tile; "
        "two sets of chunk buffers let the next chunk's loads overlap this chunk's matmuls.",
    ),
    solution=lambda: reference_streamed,
    solution_text="See trnlab.exercises.lab04.reference_streamed: K streamed in chunks, "
    "partial sums kept in PSUM across chunks, two buffer sets alternating.",
)

fast = Exercise(
    "lab04.fast",
    f"Write a matmul kernel that keeps the Tensor Engine at least {UTILISATION_TARGET:.0%} "
    f"busy (hardware FLOPs utilisation) on A[{FAST_SHAPE[0]} x {FAST_SHAPE[1]}] @ "
    f"B[{FAST_SHAPE[1]} x {FAST_SHAPE[2]}] in bf16 on trn1 (and is correct on small shapes).",
    _check_fast,
    hints=(
        "The tiled kernel is memory-bound (about 100 FLOP/B); the ridge of trn1 is about 337 "
        "FLOP/B. You need each loaded byte to feed more FLOPs.",
        "Load a block of A (e.g. 4 M tiles) and a block of B (2 N tiles) over all of K once, "
        "then multiply every pair of their tiles: 8 output tiles per load of the blocks.",
        "Alternate two PSUM tiles and two output tiles so copying one result out overlaps "
        "the matmuls of the next; alternate the copy between the Vector and Scalar engines.",
    ),
    solution=lambda: reference_blocked,
    solution_text="The library's blocked_mn kernel (inspect.getsource(trnlab.kernels.blocked_mn)): "
    "blocks of A and B resident over all of K, two PSUM banks and output tiles alternating.",
)

epilogue = Exercise(
    "lab04.epilogue",
    "Write my_layer(ctx, w, x_t, bias, y_t): y_t[N, M] = relu(w.T @ x_t + bias) with "
    f"w[K, N], x_t[K, M], bias[N, 1] (fp32) and y_t[N, M] (fp32), K, N, M = "
    f"{EPILOGUE_SHAPE}, with bias and relu fused into the one instruction that moves each "
    "output tile out of PSUM.",
    _check_epilogue,
    hints=(
        "Make N (output features) the stationary free dimension: ctx.matmul(acc[:ns, :ms], "
        "w_tile[:ks, :ns], x_tile[:ks, :ms]) gives y_t's tile with N on partitions.",
        "Load the bias slice bias[n0:n0+ns, :] into an fp32 SBUF tile [128, 1]: one value "
        "per partition.",
        "ctx.activation(out[:ns, :ms], acc[:ns, :ms], 'relu', bias=b_tile[:ns, :]) reads "
        "PSUM, adds the bias, applies relu and writes SBUF in one Scalar-engine instruction.",
    ),
    solution=lambda: reference_epilogue,
    solution_text="See trnlab.exercises.lab04.reference_epilogue: one Scalar-engine "
    "activation per output tile, straight from PSUM.",
)
