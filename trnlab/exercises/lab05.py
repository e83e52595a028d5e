"""Exercises of lab 05 (write a kernel, in NKI). The answer to each kernel exercise is an NKI
kernel, written as on a Trainium instance (``import trnlab.nki as nki``,
``trnlab.nki.language as nl``, ``trnlab.nki.isa as nisa``); the check profiles it on the
NeuronCore model (trn1), compares its output with numpy, and measures what it claims to:

- speed in *useful* work: ``2 * M * N * K`` FLOPs over the latency over the Tensor Engine's
  peak (matmuls that do no useful work never count), with the latency beside the reference
  kernel's;
- HBM bytes per operand against the minimum (each byte once), naming the operand that is
  loaded again and how many times over;
- where the time goes: the engine or DMA queue that is busy the longest, and with what;
- fusion per output element: how many engine instructions each element of the output went
  through after leaving PSUM, and whether it crossed HBM twice (any tile sizes, any loop
  order).

A matmul kernel is ``kernel(a_t, b) -> c`` with ``a_t[K, M]`` (A stored transposed, K on
partitions) and ``b[K, N]`` in HBM (bf16) and ``c[M, N]`` the ``shared_hbm`` tensor it
returns; the epilogue kernel is ``kernel(w, x_t, bias) -> y_t`` computing
``y_t[N, M] = relu(w.T @ x_t + bias)``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl

from ._checks import read_number
from ._exercise import Exercise
from ._slips import how_far

__all__ = [
    "EPILOGUE_SHAPE",
    "FAST_SHAPE",
    "LARGE_SHAPE",
    "TILED_SHAPE",
    "UTILISATION_TARGET",
    "correct_matmul",
    "diagnose",
    "epilogue",
    "explain_prediction",
    "fast",
    "fits_sbuf",
    "predict_tiled",
    "profile",
    "reference_blocked",
    "reference_epilogue",
    "reference_streamed",
    "reference_tiled",
    "useful_utilisation",
]

CHIP = "trn1"
#: Shapes (M, K, N) the checks use. Correctness: small and ragged, with numerics.
CHECK_SHAPES = ((200, 300, 700), (128, 128, 512))
#: Speed of a first tiled kernel: within SLOWDOWN of the reference tiled kernel here.
TILED_SHAPE = (512, 512, 1024)
SLOWDOWN = 1.5
#: A shape whose full-K strips do not fit SBUF (hoisting all of K overflows it).
LARGE_SHAPE = (512, 32768, 1024)
LARGE_SPEEDUP = 3.0  # at least this much faster than the reference tiled kernel
#: The utilisation exercise (useful FLOPs: 2 M N K over latency over peak).
FAST_SHAPE = (1024, 2048, 2048)
UTILISATION_TARGET = 0.50
#: The epilogue exercise: K, N (output features), M (tokens).
EPILOGUE_SHAPE = (256, 256, 1024)
#: A prediction within this (relative) passes.
PREDICTION_WITHIN = 0.25


# ----------------------------------------------------------------------------------------------
# Reference solutions (NKI kernels; each runs unchanged on a Trainium instance)
# ----------------------------------------------------------------------------------------------
@nki.jit
def reference_tiled(a_t, b):
    """For every (M, N) output tile and every K tile: load an A tile and a B tile, multiply
    them into PSUM (NKI accumulates into a PSUM tile it has already written); then copy the
    result to SBUF and store it. Tiles declared in the loops get the compiler's rotating
    buffers, so the next loads overlap this matmul."""
    K, M = a_t.shape
    N = b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    for m0 in nl.affine_range(0, M, 128):
        ms = min(128, M - m0)
        for n0 in nl.affine_range(0, N, 512):
            ns = min(512, N - n0)
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k0 in nl.affine_range(0, K, 128):
                ks = min(128, K - k0)
                a_tile = nl.ndarray((128, 128), dtype=a_t.dtype, buffer=nl.sbuf)
                b_tile = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a_tile[:ks, :ms], src=a_t[k0 : k0 + ks, m0 : m0 + ms])
                nisa.dma_copy(dst=b_tile[:ks, :ns], src=b[k0 : k0 + ks, n0 : n0 + ns])
                nisa.nc_matmul(
                    dst=acc[:ms, :ns], stationary=a_tile[:ks, :ms], moving=b_tile[:ks, :ns]
                )
            c_tile = nl.ndarray((128, 512), dtype=c.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=c_tile[:ms, :ns], src=acc[:ms, :ns])
            nisa.dma_copy(dst=c[m0 : m0 + ms, n0 : n0 + ns], src=c_tile[:ms, :ns])
    return c


@nki.jit
def reference_streamed(a_t, b, chunk=16):
    """K streamed in chunks of ``chunk`` K tiles. A group of M tiles keeps one PSUM tile per
    (M tile, N tile) for the whole of K (PSUM's 8 banks: 4 M tiles x 2 N tiles when N is
    1024); each chunk of A and B is loaded once and used for every output tile of the group,
    so SBUF holds one chunk (and its rotating twin) whatever K is."""
    K, M = a_t.shape
    N = b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    n_spans = [(n0, min(512, N - n0)) for n0 in range(0, N, 512)]
    group = max(1, 8 // len(n_spans)) * 128  # M columns whose sums fit the 8 PSUM banks
    for g0 in nl.affine_range(0, M, group):
        gs = min(group, M - g0)
        m_spans = [(m0, min(128, gs - m0)) for m0 in range(0, gs, 128)]
        acc = [
            [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in n_spans]
            for _ in m_spans
        ]
        for c0 in nl.sequential_range(0, K, chunk * 128):
            k_spans = [(k0, min(128, K - k0)) for k0 in range(c0, min(K, c0 + chunk * 128), 128)]
            a_tiles, b_tiles = [], []
            for k0, ks in k_spans:
                a_tile = nl.ndarray((128, group), dtype=a_t.dtype, buffer=nl.sbuf)
                b_tile = nl.ndarray((128, N), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a_tile[:ks, :gs], src=a_t[k0 : k0 + ks, g0 : g0 + gs])
                nisa.dma_copy(dst=b_tile[:ks, :], src=b[k0 : k0 + ks, :])
                a_tiles.append(a_tile)
                b_tiles.append(b_tile)
            for j, (_, ks) in enumerate(k_spans):
                for i, (m0, ms) in enumerate(m_spans):
                    for q, (n0, ns) in enumerate(n_spans):
                        nisa.nc_matmul(
                            dst=acc[i][q][:ms, :ns],
                            stationary=a_tiles[j][:ks, m0 : m0 + ms],
                            moving=b_tiles[j][:ks, n0 : n0 + ns],
                        )
        for i, (m0, ms) in enumerate(m_spans):
            for q, (n0, ns) in enumerate(n_spans):
                c_tile = nl.ndarray((128, 512), dtype=c.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=c_tile[:ms, :ns], src=acc[i][q][:ms, :ns])
                nisa.dma_copy(dst=c[g0 + m0 : g0 + m0 + ms, n0 : n0 + ns], src=c_tile[:ms, :ns])
    return c


@nki.jit
def reference_blocked(a_t, b, bm=8, bn=1):
    """Blocks of ``bm`` M tiles of A and ``bn`` N tiles of B, over all of K, stay in SBUF
    while every pair of their tiles is multiplied: each A tile loaded feeds a matmul for every
    N tile of B, each B tile ``bm``. With ``bm`` M tiles covering all of M (the
    exercise's 1,024 rows), A and B each cross HBM once, which trn1's one load queue
    (about 100 GB/s) needs."""
    K, M = a_t.shape
    N = b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    k_spans = [(k0, min(128, K - k0)) for k0 in range(0, K, 128)]
    for g0 in nl.affine_range(0, M, bm * 128):
        gs = min(bm * 128, M - g0)
        a_tiles = []
        for k0, ks in k_spans:
            a_tile = nl.ndarray((128, bm * 128), dtype=a_t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_tile[:ks, :gs], src=a_t[k0 : k0 + ks, g0 : g0 + gs])
            a_tiles.append(a_tile)
        for h0 in nl.affine_range(0, N, bn * 512):
            hs = min(bn * 512, N - h0)
            b_tiles = []
            for k0, ks in k_spans:
                b_tile = nl.ndarray((128, bn * 512), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=b_tile[:ks, :hs], src=b[k0 : k0 + ks, h0 : h0 + hs])
                b_tiles.append(b_tile)
            for m0 in nl.affine_range(0, gs, 128):
                ms = min(128, gs - m0)
                for n0 in nl.affine_range(0, hs, 512):
                    ns = min(512, hs - n0)
                    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
                    for j, (_, ks) in enumerate(k_spans):
                        nisa.nc_matmul(
                            dst=acc[:ms, :ns],
                            stationary=a_tiles[j][:ks, m0 : m0 + ms],
                            moving=b_tiles[j][:ks, n0 : n0 + ns],
                        )
                    c_tile = nl.ndarray((128, 512), dtype=c.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=c_tile[:ms, :ns], src=acc[:ms, :ns])
                    nisa.dma_copy(
                        dst=c[g0 + m0 : g0 + m0 + ms, h0 + n0 : h0 + n0 + ns], src=c_tile[:ms, :ns]
                    )
    return c


@nki.jit
def reference_epilogue(w, x_t, bias):
    """``y_t[N, M] = relu(w.T @ x_t + bias)``: N (output features) on partitions, so the bias
    is one value per partition and the Scalar engine computes relu(psum + bias) as it moves
    each result out of PSUM: one instruction per output tile after the matmuls."""
    K, N = w.shape
    M = x_t.shape[1]
    y_t = nl.ndarray((N, M), dtype=nl.float32, buffer=nl.shared_hbm)
    for n0 in nl.affine_range(0, N, 128):
        ns = min(128, N - n0)
        b_tile = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=b_tile[:ns, :], src=bias[n0 : n0 + ns, :])
        w_tiles = []
        for k0 in range(0, K, 128):
            ks = min(128, K - k0)
            w_tile = nl.ndarray((128, 128), dtype=w.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=w_tile[:ks, :ns], src=w[k0 : k0 + ks, n0 : n0 + ns])
            w_tiles.append(w_tile)
        for m0 in nl.affine_range(0, M, 512):
            ms = min(512, M - m0)
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for j, k0 in enumerate(range(0, K, 128)):
                ks = min(128, K - k0)
                x_tile = nl.ndarray((128, 512), dtype=x_t.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=x_tile[:ks, :ms], src=x_t[k0 : k0 + ks, m0 : m0 + ms])
                nisa.nc_matmul(
                    dst=acc[:ns, :ms], stationary=w_tiles[j][:ks, :ns], moving=x_tile[:ks, :ms]
                )
            y_tile = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(
                dst=y_tile[:ns, :ms], op=nl.relu, data=acc[:ns, :ms], bias=b_tile[:ns, :]
            )
            nisa.dma_copy(dst=y_t[n0 : n0 + ns, m0 : m0 + ms], src=y_tile[:ns, :ms])
    return y_t


# ----------------------------------------------------------------------------------------------
# Running a learner's kernel
# ----------------------------------------------------------------------------------------------
_SIGNATURES = {
    "matmul": "@nki.jit def my_kernel(a_t, b): ... return c",
    "epilogue": "@nki.jit def my_layer(w, x_t, bias): ... return y_t",
}


def _call(kernel: Callable, args: list, kind: str = "matmul"):
    """Profile ``kernel`` on trn1; returns (run, None) or (None, what went wrong)."""
    from trnlab import core

    if not callable(kernel):
        return None, (
            f"the answer should be an NKI kernel ({_SIGNATURES[kind]}), not {type(kernel).__name__}"
        )
    try:
        try:
            return nki.profile(kernel, chip=CHIP)(*args), None
        except core.KernelArgumentError as err:
            if err.__cause__ is None:  # a KernelSignatureError is also a TypeError (below)
                raise
            raise err.__cause__ from None  # the learner's own code raised: say what it raised
    except core.HardwareRuleError as err:
        return None, f"the NeuronCore refused the kernel: {err}"  # the learner's or a library's
    except nki.NotModelledError as err:
        return None, f"your kernel uses NKI that trnlab does not model: {err}"
    except TypeError as err:
        return None, (
            f"your kernel raised TypeError: {err} (lab 05's kernels take their HBM tensors "
            f"and return their output: {_SIGNATURES[kind]})"
        )
    except Exception as err:  # the learner's code: say what it raised, do not crash the lab
        return None, f"your kernel raised {type(err).__name__}: {err}"


def _matmul_args(m, k, n, numerics=True, seed=0):
    """(A, B) as float32 after bf16 rounding (None without numerics) and the kernel's args."""
    if not numerics:
        return None, [nki.hbm((k, m), nl.bfloat16, "a_t"), nki.hbm((k, n), nl.bfloat16, "b")]
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    a_t, bb = nki.hbm(np.ascontiguousarray(a.T), nl.bfloat16, "a_t"), nki.hbm(b, nl.bfloat16, "b")
    return (a_t.values.T, bb.values), [a_t, bb]


def _output(run, what: str, kind: str) -> tuple[np.ndarray | None, str | None, str | None]:
    """(values, name, problem) of the tensor a kernel returned."""
    names = run.extra.get("nki", {}).get("returns", ())
    if not names:
        return (
            None,
            None,
            (
                f"your kernel returned no HBM tensor: create {what} with nl.ndarray(..., "
                f"buffer=nl.shared_hbm), store into it and return it ({_SIGNATURES[kind]})"
            ),
        )
    name = names[0]
    if name not in run.outputs:
        return (
            None,
            name,
            (
                f"{what} (your tensor {name!r}) was never stored: copy each result tile to it with "
                f"nisa.dma_copy(dst={name}[...], src=sbuf_tile)"
            ),
        )
    return run.outputs[name], name, None


def _compare(out, exact, scale, what: str, advice: str = "") -> str | None:
    """None if ``out`` matches within bf16 rounding (inputs and output), else where it is off."""
    if out.shape != exact.shape:
        return f"{what} has shape {out.shape}, expected {exact.shape}"
    bad = ~(np.abs(out - exact) <= 0.02 * scale + 1e-3)  # NaN counts as wrong
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


def _nan_problem(run, out, name: str, what: str) -> str | None:
    """What NaN in the output means: never stored, or computed from memory never written."""
    from trnlab import core

    nan = np.isnan(out)
    if not nan.any():
        return None
    stores = core.element_passes(run, name)["stores"].reshape(out.shape)
    r, c = np.argwhere(nan)[0]
    if stores[r, c] == 0:
        missing = int((stores == 0).sum())
        return (
            f"{what}[{r}, {c}] was never stored ({missing:,} of {out.size:,} elements were "
            f"not): a new HBM tensor holds NaN until written. Check the last, partial tiles "
            f"(sizes not multiples of 128 or 512) and the loop bounds."
        )
    return (
        f"{what}[{r}, {c}] is NaN ({int(nan.sum()):,} of {out.size:,} values are): NaN is what "
        f"trnlab, like nki.simulate, puts in SBUF and PSUM that was never written, so your "
        f"kernel computed them from memory it had not filled. Check that every matmul reads "
        f"only the rows and columns you loaded ([:ks, :ms], [:ks, :ns] of a partial tile) and "
        f"that the first matmul into a PSUM tile overwrites it (accumulate=False or NKI's "
        f"default, not accumulate=True)."
    )


def _check_matmul_values(kernel) -> str | None:
    for m, k, n in CHECK_SHAPES:
        where = f"on A[{m} x {k}] @ B[{k} x {n}]"
        (a, b), args = _matmul_args(m, k, n)
        run, problem = _call(kernel, args)
        if problem:
            return f"{where}: {problem}"
        out, name, problem = _output(run, "C", "matmul")
        if problem:
            return f"{where}: {problem}"
        problem = _nan_problem(run, out, name, "C")
        if problem:
            return f"{where}: {problem}"
        exact = a.astype(np.float64) @ b.astype(np.float64)
        last = -(-k // 128) * 128 - 128  # the last K tile's rows
        only_last = a[:, last:].astype(np.float64) @ b[last:].astype(np.float64)
        advice = (
            "C holds only the last K tile's product: each matmul overwrote PSUM. Leave "
            "nc_matmul's accumulate at its default (it adds into a PSUM tile already written) "
            "or pass accumulate=True after the first K tile."
            if k > 128
            and out.shape == exact.shape
            and np.allclose(out, only_last, rtol=0.02, atol=0.02 * np.abs(only_last).max())
            else "Check the accumulation over K and the last, partial tiles (sizes not "
            "multiples of 128 or 512)."
        )
        problem = _compare(out, exact, np.abs(a) @ np.abs(b), "C", advice)
        if problem:
            return f"{where}: {problem}"
        if run.program.counts().get("matmul", 0) == 0:
            return "no matmul instructions: multiply on the Tensor Engine with nisa.nc_matmul"
    return None


@lru_cache(maxsize=16)
def _reference_run(name: str, shape: tuple[int, int, int]):
    kernel = {
        "tiled": reference_tiled,
        "streamed": reference_streamed,
        "blocked": reference_blocked,
    }[name]
    _, args = _matmul_args(*shape, numerics=False)
    run, problem = _call(kernel, args)
    if problem:  # pragma: no cover - the references run
        raise RuntimeError(problem)
    return run


def profile(kernel: Callable, shape: tuple[int, int, int] = TILED_SHAPE):
    """Profile a matmul kernel timing-only on trn1 at ``shape`` (M, K, N): the Run, for
    :class:`trnlab.widgets.KernelProfile` and :func:`diagnose`."""
    _, args = _matmul_args(*shape, numerics=False)
    run, problem = _call(kernel, args)
    if problem:
        raise ValueError(problem)
    return run


def useful_utilisation(run, shape: tuple[int, int, int]) -> float:
    """The useful FLOPs of C = A @ B (``2 M N K``) over the latency, over the Tensor Engine's
    bf16 peak: matmuls that do not contribute to C never count."""
    m, k, n = shape
    return 2.0 * m * n * k / run.latency / run.params.peak_flops("bf16")


def _mb(x: float) -> str:
    return f"{x / 1e6:,.2f} MB"


def _hbm_diagnosis(run, sizes: dict[str, float]) -> tuple[str, bool]:
    """HBM bytes per operand against the minimum, naming those loaded (or stored) again; and
    whether any was."""
    from trnlab import core

    traffic = core.hbm_traffic(run)
    parts, again = [], []
    for name, minimum in sizes.items():
        t = traffic.get(name)
        if t is None:
            continue
        moved = t["loaded"] + t["stored"]
        times = moved / minimum if minimum else 0.0
        verb = "stored" if t["stored"] and not t["loaded"] else "loaded"
        parts.append(f"{name} {_mb(moved)} {verb} ({times:.1f}x its {_mb(minimum)})")
        if times > 1.05:
            again.append((times, name, t["loads"] or t["stores"]))
    text = "HBM traffic: " + "; ".join(parts) + "."
    if again:
        again.sort(reverse=True)
        said = " and ".join(
            f"{name} {times:.1f} times over ({count:,} transfers)" for times, name, count in again
        )
        text += (
            f" Operands read from HBM more than once: {said}. Each re-read is a byte that "
            f"could have stayed in SBUF: keep tiles there while every output tile that needs "
            f"them is computed."
        )
    return text, bool(again)


def _dma_diagnosis(run, top: dict, reread: bool) -> str:
    """What bounds the busiest DMA queue: each transfer's set-up, or its bytes at the rate one
    queue of static descriptors streams (never the core's full DMA bandwidth, which one queue
    does not reach), and the way out of it."""
    p = run.params
    n = top["instructions"]
    per, size = top["busy_s"] / n, top["bytes"] / n
    what = ", ".join(top["tensors"]) or "its tensors"
    text = (
        f" carrying {what}: {n:,} transfers averaging {size / 1024:,.0f} KiB, "
        f"{per * 1e6:.2f} us each"
    )
    setup, stream = p.dma_queue_interval, size / p.dma_static_queue_bandwidth
    full = size / p.dma_bandwidth
    if per <= 1.5 * full:
        return text
    text += (
        f" (a queue sets up one transfer every {setup * 1e6:.2f} us and streams at most "
        f"{p.dma_static_queue_bandwidth / 1e9:.0f} GB/s on {p.chip}, {stream * 1e6:.2f} us for "
        f"these bytes; the core's full DMA bandwidth, which one queue does not reach, would "
        f"move them in {full * 1e6:.2f} us). "
    )
    fewer_bytes = (
        "load each byte of A and B once"
        if reread
        else "each byte is already loaded once, so start the matmuls while the loads stream"
    )
    if stream >= 1.25 * setup:
        return text + f"The queue's bytes bound the kernel: {fewer_bytes}"
    if stream <= 0.8 * setup:
        return text + (
            f"The set-up per transfer bounds the kernel: fewer, larger transfers (up to about "
            f"{setup * p.dma_static_queue_bandwidth / 1024:,.0f} KiB each, where the bytes "
            f"take over), or re-using what is loaded"
        )
    return text + (
        f"The two bounds are close, so larger transfers would meet the queue's bytes: {fewer_bytes}"
    )


def _time_diagnosis(run, reread: bool = True) -> str:
    """Which engine or DMA queue is busy the longest, and why (set-up per transfer or bytes).
    ``reread``: whether the kernel loads an operand more than once (the advice differs)."""
    from trnlab import core

    rows = core.time_breakdown(run)
    top = rows[0]
    text = (
        f"Where the time goes: {top['resource']} is busy {top['fraction']:.0%} of the "
        f"{run.latency * 1e6:,.1f} us"
    )
    if top["resource"].startswith("DMA"):
        text += _dma_diagnosis(run, top, reread) + "."
    else:
        text += f" ({top['instructions']:,} instructions)."
    others = [
        f"{r['resource']} {r['fraction']:.0%}"
        for r in rows[1:4]
        if r["fraction"] >= 0.05 and r["resource"] != top["resource"]
    ]
    if others:
        text += " Next: " + ", ".join(others) + "."
    return text


def diagnose(run, shape: tuple[int, int, int]) -> str:
    """Where a matmul kernel's bytes and time go (the text the checks give): HBM bytes per
    operand against the minimum, the operand loaded again, the busiest engine or queue."""
    m, k, n = shape
    names = [r.name for r in run.program.tensors]
    a_name = "a_t" if "a_t" in names else names[0]
    b_name = "b" if "b" in names else names[1]
    out = run.extra.get("nki", {}).get("returns", ()) or names[-1:]
    sizes = {a_name: 2.0 * m * k, b_name: 2.0 * k * n}
    c_rec = next((r for r in run.program.tensors if r.name == out[0]), None)
    if c_rec is not None:
        from trnlab.core import format_bits

        sizes[out[0]] = m * n * format_bits(c_rec.fmt) / 8
    hbm, reread = _hbm_diagnosis(run, sizes)
    return f"{hbm} {_time_diagnosis(run, reread)}"


def _timed(kernel, shape):
    _, args = _matmul_args(*shape, numerics=False)
    run, problem = _call(kernel, args)
    if problem:
        m, k, n = shape
        return None, f"on A[{m} x {k}] @ B[{k} x {n}] (timing only): {problem}"
    return run, None


def _shape_text(shape) -> str:
    m, k, n = shape
    return f"A[{m} x {k}] @ B[{k} x {n}]"


# ----------------------------------------------------------------------------------------------
# Checks
# ----------------------------------------------------------------------------------------------
def _check_correct(kernel) -> str | None:
    problem = _check_matmul_values(kernel)
    if problem:
        return problem
    run, problem = _timed(kernel, TILED_SHAPE)
    if problem:
        return problem
    ref = _reference_run("tiled", TILED_SHAPE)
    if run.latency > SLOWDOWN * ref.latency:
        return (
            f"correct, but slow: {run.latency * 1e6:,.1f} us on {_shape_text(TILED_SHAPE)}, "
            f"{run.latency / ref.latency:.1f}x the reference tiled kernel's time (the limit is "
            f"{SLOWDOWN}x; exercise 2 asks you to predict that time). "
            f"{diagnose(run, TILED_SHAPE)} Use full tiles (128 x 128 x 512)."
        )
    return None


def _check_fits(kernel) -> str | None:
    problem = _check_matmul_values(kernel)
    if problem:
        return problem
    run, problem = _timed(kernel, LARGE_SHAPE)
    if problem:
        if "SBUF" in problem:
            problem += (
                " All of K's tiles of an A strip and a B strip do not fit: stream K in chunks "
                "and keep the partial sums in PSUM across them."
            )
        return problem
    tiled = _reference_run("tiled", LARGE_SHAPE)
    need = tiled.latency / LARGE_SPEEDUP
    if run.latency > need:
        return (
            f"it fits, but on {_shape_text(LARGE_SHAPE)} it takes {run.latency * 1e6:,.0f} us: "
            f"the target is {need * 1e6:,.0f} us ({LARGE_SPEEDUP:g}x faster than the tiled "
            f"kernel's {tiled.latency * 1e6:,.0f} us). {diagnose(run, LARGE_SHAPE)}"
        )
    return None


def _check_fast(kernel) -> str | None:
    problem = _check_matmul_values(kernel)
    if problem:
        return problem
    run, problem = _timed(kernel, FAST_SHAPE)
    if problem:
        return problem
    useful = useful_utilisation(run, FAST_SHAPE)
    if useful >= UTILISATION_TARGET:
        return None
    ref = _reference_run("blocked", FAST_SHAPE)
    m, k, n = FAST_SHAPE
    text = (
        f"correct; on {_shape_text(FAST_SHAPE)} it takes {run.latency * 1e6:,.0f} us (the "
        f"reference blocked kernel {ref.latency * 1e6:,.0f} us): {useful:.1%} of the Tensor "
        f"Engine's peak in useful work (2 x M x N x K = {2 * m * n * k / 1e9:,.1f} GFLOP), the "
        f"target is {UTILISATION_TARGET:.0%}."
    )
    executed = run.flops / (2.0 * m * n * k)
    if executed > 1.01:
        text += (
            f" Your Tensor Engine ran {executed:.1f}x the FLOPs the product needs "
            f"({run.utilisation:.0%} busy): redundant matmuls keep it busy without computing "
            f"C, and never count."
        )
    return f"{text} {diagnose(run, FAST_SHAPE)}"


def _epilogue_data(numerics: bool = True, seed: int = 1):
    k, n, m = EPILOGUE_SHAPE
    if not numerics:
        return None, [
            nki.hbm((k, n), nl.bfloat16, "w"),
            nki.hbm((k, m), nl.bfloat16, "x_t"),
            nki.hbm((n, 1), nl.float32, "bias"),
        ]
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((k, n)).astype(np.float32) / np.sqrt(k)
    x = rng.standard_normal((m, k)).astype(np.float32)
    bias = rng.standard_normal((n, 1)).astype(np.float32)
    args = [
        nki.hbm(w, nl.bfloat16, "w"),
        nki.hbm(np.ascontiguousarray(x.T), nl.bfloat16, "x_t"),
        nki.hbm(bias, nl.float32, "bias"),
    ]
    return (args[0].values, args[1].values.T, bias), args


def _fusion_problem(run, name: str) -> str | None:
    """Per output element: one engine instruction after PSUM, stored once, never read back."""
    from trnlab import core

    e = core.element_passes(run, name)
    passes, stores, loads = e["passes"], e["stores"], e["loads"]
    total = passes.size
    if loads.any():
        back = int((loads > 0).sum())
        return (
            f"correct, but not fused: your kernel reads {back:,} of the {total:,} elements of "
            f"{name} back from HBM after storing them (a second pass over the output through "
            f"HBM). Apply bias and relu before the one store of each tile."
        )
    if (stores > 1).any():
        many = int((stores > 1).sum())
        return (
            f"correct, but not fused: {many:,} of the {total:,} elements of {name} are stored "
            f"more than once. Store each output element once, after the epilogue."
        )
    unfused = passes != 1
    if unfused.any():
        r, c = np.argwhere(unfused)[0]
        worst = int(passes[unfused].max())
        how = (
            f"went through {worst} engine instructions after leaving PSUM"
            if worst < 1000
            else "was not computed from a PSUM result"
        )
        return (
            f"correct, but not fused: {int(unfused.sum()):,} of the {total:,} elements of "
            f"{name} ({name}[{r}, {c}] among them) {how}. Apply bias and relu in the one "
            f"instruction that moves each result out of PSUM: nisa.activation(dst=sbuf_tile, "
            f"op=nl.relu, data=psum_tile, bias=bias_tile) with N on partitions, so the bias is "
            f"one value per partition."
        )
    return None


def _check_epilogue(kernel) -> str | None:
    (w, x, bias), args = _epilogue_data()
    run, problem = _call(kernel, args, "epilogue")
    if problem:
        return problem
    out, name, problem = _output(run, "y_t", "epilogue")
    if problem:
        return problem
    problem = _nan_problem(run, out, name, "y_t")
    if problem:
        return problem
    pre = w.T.astype(np.float64) @ x.T.astype(np.float64) + bias
    exact = np.maximum(pre, 0)
    scale = np.abs(w.T) @ np.abs(x.T) + np.abs(bias)
    negative = out.shape == exact.shape and (out < -1e-3).any()
    problem = _compare(
        out,
        exact,
        scale,
        "y_t",
        "Negative values remain: apply relu."
        if negative
        else "Check the bias (one per row of y_t, i.e. per partition) and the accumulation over K.",
    )
    if problem:
        return problem
    return _fusion_problem(run, name)


# ----------------------------------------------------------------------------------------------
# Predict, then run: the tiled kernel's latency
# ----------------------------------------------------------------------------------------------
def _tiled_us() -> float:
    return _reference_run("tiled", TILED_SHAPE).latency * 1e6


def _prediction_parts() -> dict[str, float]:
    """The model's figures a prediction is compared with (us): the latency, and the sums a
    learner might make of the load queue's set-ups and of its bytes at its streaming rate."""
    run = _reference_run("tiled", TILED_SHAPE)
    top = next(r for r in _time_breakdown(run) if r["resource"].startswith("DMA"))
    p = run.params
    return {
        "latency": run.latency * 1e6,
        "bytes": run.memory_bound_s * 1e6,
        "per_transfer": top["busy_s"] / top["instructions"] * 1e6,
        "transfers": top["instructions"],
        "setups": top["instructions"] * p.dma_queue_interval * 1e6,
        "stream": top["bytes"] / p.dma_static_queue_bandwidth * 1e6,
        "two_queues": top["instructions"] / 2 * p.dma_queue_interval * 1e6,
    }


def _time_breakdown(run):
    from trnlab import core

    return core.time_breakdown(run)


def explain_prediction(predicted=None) -> str:
    """The model's latency of the tiled kernel on :data:`TILED_SHAPE`, why it is what it is,
    and (given a prediction in us) how far the prediction was from it."""
    f = _prediction_parts()
    why = (
        f"the model gives {f['latency']:.1f} us. A's and B's loads share one DMA queue (as an "
        f"NKI kernel's loads do on trn1): {f['transfers']} transfers at about "
        f"{f['per_transfer']:.2f} us each. Its set-ups alone take {f['setups']:.1f} us and its "
        f"bytes, at the {_stream_gbs():.0f} GB/s one queue of static descriptors streams, "
        f"{f['stream']:.1f} us: the two bounds are close, and the matmuls, copies and stores "
        f"fit in between. The bytes at the core's full DMA bandwidth would take only "
        f"{f['bytes']:.1f} us (the roofline bound): one queue, not the DMA engines, sets the pace."
    )
    if predicted is None:
        return why[0].upper() + why[1:]
    p = read_number(predicted, "us", "a prediction")  # a number, or "45 us", "0.04 ms"
    if isinstance(p, str):
        return f"A prediction is a number of microseconds ({p}); {why}"
    if p <= 0:
        return f"A latency is a positive number of microseconds, not {p:,.3g}; {why}"
    return f"You predicted {p:,.3g} us ({how_far(p / f['latency'])}); {why}"


def _check_prediction(answer) -> str | None:
    p = read_number(answer, "us", "your prediction")  # a number, or "45 us", "0.04 ms"
    if isinstance(p, str):
        return p
    if p <= 0:
        return f"a latency is a positive number of microseconds, not {p:,.3g}"
    f = _prediction_parts()
    model = f["latency"]
    if abs(p / model - 1) <= PREDICTION_WITHIN:
        return None
    for value, unit in ((p * 1e6, "seconds"), (p / 1e3, "ns"), (p * 1e3, "ms")):
        if abs(value / model - 1) <= PREDICTION_WITHIN:
            return (
                f"your prediction reads as if it were in {unit}; the question asks for microseconds"
            )
    slips = (
        (f["bytes"], "that is the time the bytes take at the core's full DMA bandwidth (the "
         "roofline bound); every load goes through one queue, which sets up one transfer at a "
         "time and streams far slower than the DMA engines"),
        (f["two_queues"], "that splits the transfers over two queues working in parallel; on "
         "trn1 an NKI kernel's loads all go on one queue, A's and B's alike"),
    )  # fmt: skip
    near = [(abs(p / value - 1), says) for value, says in slips if abs(p / value - 1) <= 0.15]
    if near:
        return f"{how_far(p / model)}: {min(near)[1]}."
    return (
        f"{how_far(p / model)}. Count the transfers (one A tile and one B tile per matmul, all "
        f"on one queue) and the time the queue spends on each: its set-up, or its bytes at the "
        f"queue's rate, whichever is longer (the question gives both)."
    )


# ----------------------------------------------------------------------------------------------
# The exercises
# ----------------------------------------------------------------------------------------------
correct_matmul = Exercise(
    "lab05.correct_matmul",
    "Write an NKI kernel my_matmul(a_t, b) that returns C[M, N] = A @ B (bf16) from a_t[K, M] "
    "(A transposed) and b[K, N] in HBM, for any M, K, N (the last tiles may be partial). It "
    f"must match numpy and take at most {SLOWDOWN}x the reference tiled kernel's time on "
    f"{_shape_text(TILED_SHAPE)}.",
    _check_correct,
    hints=(
        "Create C in HBM: c = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm); "
        "return it at the end.",
        "Loop over M tiles (128), N tiles (512) and K tiles (128). Inside the K loop declare "
        "an A tile nl.ndarray((128, 128), dtype=a_t.dtype, buffer=nl.sbuf) and a B tile "
        "(128, 512), load both with nisa.dma_copy(dst=a_tile[:ks, :ms], src=a_t[k0:k0+ks, "
        "m0:m0+ms]) and multiply: nisa.nc_matmul(dst=acc[:ms, :ns], stationary=a_tile[:ks, "
        ":ms], moving=b_tile[:ks, :ns]) into a PSUM tile acc declared before the K loop.",
        "After the K loop: nisa.tensor_copy(dst=c_tile[:ms, :ns], src=acc[:ms, :ns]) into an "
        "SBUF tile in C's dtype, then nisa.dma_copy(dst=c[m0:m0+ms, n0:n0+ns], "
        "src=c_tile[:ms, :ns]). Partial tiles: ms = min(128, M - m0), and slice every operand "
        "to it.",
    ),
    solution=lambda: reference_tiled,
    solution_text="Three loops, two loads and a matmul in the innermost, a copy out of PSUM "
    "and a store per output tile; tiles declared inside the loops rotate.",
)


def _queue_us() -> float:
    from trnlab import core

    return core.core_params(CHIP).dma_queue_interval * 1e6


def _stream_gbs() -> float:
    from trnlab import core

    return core.core_params(CHIP).dma_static_queue_bandwidth / 1e9


predict_tiled = Exercise(
    "lab05.predict_tiled",
    f"Predict, before it runs: how many microseconds does the reference tiled kernel take on "
    f"{_shape_text(TILED_SHAPE)} (trn1)? It loads one A tile [128 x 128] and one B tile "
    f"[128 x 512] per matmul, all on one DMA queue (as NKI kernels load on trn1); the queue "
    f"sets up one transfer at a time, {_queue_us():.2f} us each, and streams at most "
    f"{_stream_gbs():.0f} GB/s.",
    _check_prediction,
    hints=(
        "Count the matmuls: (M / 128) x (N / 512) x (K / 128); each needs two transfers on the "
        "one load queue, an A tile (32 KiB) and a B tile (128 KiB).",
        "The queue handles one transfer after another: the kernel takes about as long as all "
        "the set-ups, or all the bytes at the queue's rate, whichever is longer (here they are "
        "close). The matmuls (about 0.2 us each) hide under them.",
    ),
    solution=_tiled_us,
    solution_text=f"predicted_us = 2 * (4 * 2 * 4) * {_queue_us():.2f}  # 64 transfers on one "
    f"queue x {_queue_us():.2f} us of set-up (their 5.2 MB at {_stream_gbs():.0f} GB/s take "
    "about as long): the queue, not the DMA engines, sets the time",
)

fits_sbuf = Exercise(
    "lab05.fits_sbuf",
    f"Write a matmul kernel (a_t, b) -> c, as for my_matmul, for {_shape_text(LARGE_SHAPE)} that fits SBUF "
    f"(hoisting all of K's tiles does not) and is at least {LARGE_SPEEDUP:g}x faster than the "
    "reference tiled kernel there. It must also be correct on small shapes.",
    _check_fits,
    hints=(
        "All 256 K tiles of an A strip (128 wide) and a B strip (512 wide) need 256 x (128 + "
        "512) x 2 B = 320 KiB per partition; trn1 has 176 KiB usable. Work on K in chunks of, "
        "say, 16 K tiles.",
        "Keep the partial sums in PSUM for the whole of K: for a group of M tiles, one PSUM "
        "tile per (M tile, N tile), declared before the K loop (8 banks: 4 M tiles x 2 N "
        "tiles when N = 1024). nc_matmul adds into a PSUM tile it has already written.",
        "For each chunk, load A's columns of the group and B's rows once (one DMA per K tile "
        "each) and use them for every (M tile, N tile) pair; declared inside the chunk loop, "
        "the chunk's tiles rotate, so the next chunk loads while this one multiplies.",
    ),
    solution=lambda: reference_streamed,
    solution_text="K streamed in chunks; the partial sums stay in PSUM across chunks; each "
    "chunk of A and B is loaded once for every output tile it feeds.",
)

fast = Exercise(
    "lab05.fast",
    f"Write a matmul kernel (a_t, b) -> c, as for my_matmul, that reaches at least {UTILISATION_TARGET:.0%} of "
    f"the Tensor Engine's peak in useful work on {_shape_text(FAST_SHAPE)} (bf16, trn1): "
    "2 x M x N x K FLOPs over its latency over the peak, so only matmuls that compute C "
    "count. It must also be correct on small shapes.",
    _check_fast,
    hints=(
        "The tiled kernel moves each A tile N / 512 times and each B tile M / 128 times: about "
        "100 FLOP per byte. On trn1 every load also shares one DMA queue that streams about "
        "100 GB/s: A and B (12.6 MB) take 123 us through it at best, the matmuls 94 us. Each "
        "byte must be loaded once.",
        "Load all of A (8 M tiles wide, all of K: 32 KiB per partition) once, then stream B one "
        "N tile (512 wide, all of K) at a time, multiplying it by every M tile of A: each B "
        "tile feeds 8 matmuls and crosses HBM once.",
        "Declare the PSUM tile and the output tile inside the (M tile, N tile) loops: they "
        "rotate, so copying one result out overlaps the matmuls of the next.",
    ),
    solution=lambda: reference_blocked,
    solution_text="All of A resident in SBUF (8 M tiles, all of K), B streamed one N tile (all "
    "of K) at a time and multiplied by every M tile: each byte of A and B crosses trn1's one "
    "load queue once, and the matmuls start as soon as A and the first strip are in.",
)

epilogue = Exercise(
    "lab05.epilogue",
    "Write my_layer(w, x_t, bias) returning y_t[N, M] = relu(w.T @ x_t + bias) (fp32) from "
    f"w[K, N], x_t[K, M] (bf16) and bias[N, 1] (fp32), K, N, M = {EPILOGUE_SHAPE}, with bias "
    "and relu fused into the one instruction that moves each result out of PSUM: each "
    "output element leaves PSUM through one instruction and is stored once (any tile sizes).",
    _check_epilogue,
    hints=(
        "Put N (output features) on partitions: nisa.nc_matmul(dst=acc[:ns, :ms], "
        "stationary=w_tile[:ks, :ns], moving=x_tile[:ks, :ms]) gives a tile of y_t.",
        "Load bias[n0:n0+ns, :] into an fp32 SBUF tile (128, 1): one value per partition.",
        "nisa.activation(dst=y_tile[:ns, :ms], op=nl.relu, data=acc[:ns, :ms], "
        "bias=b_tile[:ns, :]) reads PSUM, adds the bias, applies relu and writes SBUF in one "
        "Scalar-engine instruction; then store y_tile.",
    ),
    solution=lambda: reference_epilogue,
    solution_text="One Scalar-engine activation per output tile, straight from PSUM, with the "
    "bias as a per-partition operand.",
)
