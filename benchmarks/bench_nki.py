"""Speed of trnlab.nki: tracing an NKI kernel, placing its buffers, and profiling it.

Figures (issue 12's target in brackets):

- ``tiled_32768_iterations_s``: ``nki.profile`` of the matmul tutorial's tiled kernel at the
  tutorial's size (4096 x 8192 x 8192 bf16 on trn1: 32 x 16 x 64 = 32,768 iterations of the
  inner loop, ~99k instructions), timing only, end to end [< 60 s]. ``..._phases`` splits it:
  the kernel's Python under the trace, buffer placement and replay onto the engine model, the
  dependency pass, and the scheduler.
- ``tiled_32768_latency_ms``: the model's latency of that kernel (the fidelity table's row).
- ``trace_ops_per_s``: NKI instructions traced per second in that run.
- ``numerics_1024_s``: ``nki.simulate`` of the tiled kernel on 1024^3 float32 arrays.
- ``ctx_tiled_32768_s``: the same kernel written in trnlab.core's own API (``kernels.tiled``
  traced onto a KernelContext): a reference for what the NKI front end costs.

A warm-up call compiles (or loads from the on-disk cache) the numba passes first.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks import best_of

M, K, N = 4096, 8192, 8192


def _tutorial_tiled():
    import trnlab.nki as nki
    import trnlab.nki.isa as nisa
    import trnlab.nki.language as nl

    @nki.jit
    def tiled(lhsT, rhs):
        k_size, m_size = lhsT.shape
        n_size = rhs.shape[1]
        tm, tk, tn = 128, 128, 512
        result = nl.ndarray((m_size, n_size), dtype=lhsT.dtype, buffer=nl.shared_hbm)
        for m in nl.affine_range(m_size // tm):
            for n in nl.affine_range(n_size // tn):
                acc = nl.ndarray((tm, tn), nl.float32, buffer=nl.psum)
                for k in nl.affine_range(k_size // tk):
                    a_tile = nl.ndarray((tk, tm), dtype=lhsT.dtype, buffer=nl.sbuf)
                    b_tile = nl.ndarray((tk, tn), dtype=rhs.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(
                        dst=a_tile, src=lhsT[k * tk : (k + 1) * tk, m * tm : (m + 1) * tm]
                    )
                    nisa.dma_copy(dst=b_tile, src=rhs[k * tk : (k + 1) * tk, n * tn : (n + 1) * tn])
                    nisa.nc_matmul(dst=acc, stationary=a_tile, moving=b_tile)
                out = nl.ndarray((tm, tn), dtype=result.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=out, src=acc)
                nisa.dma_copy(dst=result[m * tm : (m + 1) * tm, n * tn : (n + 1) * tn], src=out)
        return result

    return tiled


def _phases(kernel) -> dict:
    import trnlab.nki as nki
    import trnlab.nki.language as nl
    from trnlab import core
    from trnlab.nki._alloc import replay
    from trnlab.nki._kernel import _launch

    params = core.core_params("trn1")
    args = (nki.hbm((K, M), nl.bfloat16), nki.hbm((K, N), nl.bfloat16))
    t0 = time.perf_counter()
    (trace,), _ = _launch(kernel, args, {}, params, False)
    t1 = time.perf_counter()
    ctx = core.KernelContext(params, numerics=False)
    replay(trace, ctx)
    t2 = time.perf_counter()
    program = ctx.program()
    t3 = time.perf_counter()
    core.simulate(program, params)
    t4 = time.perf_counter()
    return {
        "trace_s": round(t1 - t0, 3),
        "place_and_replay_s": round(t2 - t1, 3),
        "dependencies_s": round(t3 - t2, 3),
        "schedule_s": round(t4 - t3, 3),
        "instructions": len(program),
        "trace_ops_per_s": round(len(trace.ops) / (t1 - t0)),
    }


def run(repeats: int = 1) -> dict:
    import trnlab.nki as nki
    import trnlab.nki.language as nl
    from trnlab import core, kernels

    tiled = _tutorial_tiled()
    t0 = time.perf_counter()
    nki.profile(tiled, chip="trn1")(
        nki.hbm((256, 256), nl.bfloat16), nki.hbm((256, 512), nl.bfloat16)
    )
    first = time.perf_counter() - t0

    big, run = best_of(
        lambda: nki.profile(tiled, chip="trn1")(
            nki.hbm((K, M), nl.bfloat16), nki.hbm((K, N), nl.bfloat16)
        ),
        repeats,
    )
    phases = _phases(tiled)
    ctx_s, _ = best_of(
        lambda: core.run(
            kernels.tiled,
            chip="trn1",
            numerics=False,
            a_t=core.hbm((K, M), "bf16", is_input=True),
            b=core.hbm((K, N), "bf16", is_input=True),
            c=core.hbm((M, N), "bf16"),
        ),
        repeats,
    )
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    num, out = best_of(lambda: nki.simulate(tiled, chip="trn1")(np.ascontiguousarray(a.T), b), 1)
    return {
        "first_call_s": round(first, 3),
        "tiled_32768_iterations_s": round(big, 3),
        "tiled_32768_instructions": len(run.program),
        "tiled_32768_latency_ms": round(run.latency * 1e3, 3),
        "tiled_32768_phases": phases,
        "ctx_tiled_32768_s": round(ctx_s, 3),
        "numerics_1024_s": round(num, 3),
        "numerics_1024_max_abs_error": float(np.abs(out - a @ b).max()),
        "targets": {"tiled_32768_iterations_s": "< 60"},
    }
