"""Speed of trnlab.core: recording, dependencies, scheduling, and whole runs.

Figures (issue 11 targets in brackets):

- ``record_instructions_per_s``: instructions recorded per second by a streaming kernel (the
  kernel API's Python, including the kernel's own loop) [>= 500 thousand].
- ``program_instructions_per_s``: the flat table and the dependency pass (numba) [linear].
- ``schedule_instructions_per_s``: costs plus the numba scheduler [>= 1 million].
- ``rows_8192_s`` / ``rows_25600_s``: a store-heavy kernel streaming 8,192 (25,600) single-row
  tiles through load / exp / multiply / store, end to end (was over 15 s / minutes).
- ``read_back_8192_s`` / ``read_back_25600_s``: a kernel that stores 8,192 (25,600) rows to an
  output and then loads every one back; each load asks whether a store reached its rows (was
  a scan over every store so far: quadratic, 1.6 s at 8,192 rows).
- ``blocked_window_256k_schedule_s``: scheduling 256,001 instructions where the Vector
  engine's first instruction waits for the last of 128,000 loads while the 128,000 independent
  ones behind it start out of order (was 27 s: each step rescanned the started ones).
- ``assembled_4096_s``: a tile written in 4,096 one-column pieces (Vector and GpSimd
  alternately), then read whole 4,096 times, end to end (each read waited for every piece:
  16.8 million dependencies; the first read now merges the pieces into one join).
- ``million_instructions_s``: a one-million-instruction timing-only kernel end to end [< 10 s].
- ``blocked_mnk_4096x8192x8192_s``: ``kernels.matmul`` bf16 on trn1, timing only, end to end.
- ``pipelined_1024_numerics_s``: a 1024^3 bf16 run with numerics.

A warm-up call compiles (or loads from the on-disk cache) the numba passes first; its time is
``first_call_s``.
"""

from __future__ import annotations

import gc
import time

import numpy as np

from benchmarks import best_of


def _rows_kernel(ctx, x, y):
    R, C = x.shape
    t = ctx.sbuf((1, C), "fp32", bufs=2)
    u = ctx.sbuf((1, C), "fp32", bufs=2)
    for i in range(R):
        a, b = t.next(), u.next()
        ctx.load(a, x[i : i + 1, :])
        ctx.activation(b, a, "exp")
        ctx.tensor_scalar(b, b, "multiply", 2.0)
        ctx.store(y[i : i + 1, :], b)


def _rows(n: int, cols: int = 512):
    from trnlab import core

    return core.run(
        _rows_kernel,
        numerics=False,
        x=core.hbm((n, cols), "fp32", is_input=True),
        y=core.hbm((n, cols), "fp32"),
    )


def _read_back_kernel(ctx, x, y, z):
    R, C = x.shape
    t = ctx.sbuf((1, C), "fp32", bufs=2)
    for i in range(R):
        a = t.next()
        ctx.load(a, x[i : i + 1, :])
        ctx.store(y[i : i + 1, :], a)
    for i in range(R):
        a = t.next()
        ctx.load(a, y[i : i + 1, :])
        ctx.store(z[i : i + 1, :], a)


def _read_back(n: int):
    from trnlab import core

    return core.run(
        _read_back_kernel,
        numerics=False,
        x=core.hbm((n, 128), "fp32", is_input=True),
        y=core.hbm((n, 128), "fp32"),
        z=core.hbm((n, 128), "fp32"),
    )


def _assembled_kernel(ctx, y):
    n = y.shape[1]
    big = ctx.sbuf((128, n), "bf16")
    for j in range(n):
        ctx.memset(big[:, j : j + 1], 1.0, engine=("vector", "gpsimd")[j % 2])
    out = ctx.sbuf((128, 1), "fp32", bufs=2)
    for _ in range(n):
        ctx.reduce(out.next(), big, "add")
    ctx.store(y, big)


def _assembled(n: int):
    from trnlab import core

    return core.run(_assembled_kernel, chip="trn2", numerics=False, y=core.hbm((128, n), "bf16"))


def _blocked_window_kernel(ctx, x):
    n = x.shape[0]
    w = ctx.sbuf((1, 64), "fp32")
    for i in range(n):
        ctx.load(w, x[i : i + 1, :])
    ctx.copy(ctx.sbuf((1, 64), "fp32"), w)  # waits for the last load
    t = ctx.sbuf((1, 64), "fp32", bufs=2)
    for _ in range(n):
        ctx.memset(t.next(), 0.0)  # independent: starts while the copy waits


def _blocked_window_schedule(n: int) -> float:
    from trnlab import core

    ctx, _ = core.record(
        _blocked_window_kernel, chip="trn2", numerics=False, x=core.hbm((n, 64), is_input=True)
    )
    prog = ctx.program()
    t, _ = best_of(lambda: core.schedule(prog, ctx.params), 3)
    return t


def _phases(n: int) -> dict:
    from trnlab import core

    args = dict(x=core.hbm((n, 512), "fp32", is_input=True), y=core.hbm((n, 512), "fp32"))
    rec = float("inf")
    for _ in range(5):  # each repeat starts from a collected heap, the last context freed
        ctx = None
        gc.collect()
        t0 = time.perf_counter()
        ctx, _ = core.record(_rows_kernel, numerics=False, **args)
        rec = min(rec, time.perf_counter() - t0)
    prog_t, prog = best_of(ctx.program, 3)
    sched_t, _ = best_of(lambda: core.schedule(prog, ctx.params), 3)
    m = len(prog)
    return {
        "instructions": m,
        "record_s": round(rec, 4),
        "record_instructions_per_s": round(m / rec),
        "program_s": round(prog_t, 4),
        "program_instructions_per_s": round(m / prog_t),
        "schedule_s": round(sched_t, 4),
        "schedule_instructions_per_s": round(m / sched_t),
    }


def run(repeats: int = 3) -> dict:
    from trnlab import kernels

    t0 = time.perf_counter()
    _rows(64)
    kernels.matmul((256, 256), (256, 256), variant="pipelined", numerics=False)
    first = time.perf_counter() - t0

    out = {"first_call_s": round(first, 3), "streaming_25600_rows": _phases(25_600)}
    r8, run8 = best_of(lambda: _rows(8192), repeats)
    r25, run25 = best_of(lambda: _rows(25_600), 1)
    out.update(
        {
            "rows_8192_s": round(r8, 3),
            "rows_8192_instructions": len(run8.program),
            "rows_25600_s": round(r25, 3),
            "rows_25600_instructions": len(run25.program),
        }
    )
    b8, _ = best_of(lambda: _read_back(8192), repeats)
    b25, _ = best_of(lambda: _read_back(25_600), 1)
    out.update({"read_back_8192_s": round(b8, 3), "read_back_25600_s": round(b25, 3)})
    out["blocked_window_256k_schedule_s"] = round(_blocked_window_schedule(128_000), 3)
    out["assembled_4096_s"] = round(best_of(lambda: _assembled(4096), 1)[0], 3)
    big_rows = 250_000  # 4 instructions each: one million
    t_m, run_m = best_of(lambda: _rows(big_rows, cols=128), 1)
    out["million_instructions"] = len(run_m.program)
    out["million_instructions_s"] = round(t_m, 3)

    big, r = best_of(
        lambda: kernels.matmul(
            (4096, 8192), (8192, 8192), variant="blocked_mnk", chip="trn1", numerics=False
        ),
        repeats,
    )
    out.update(
        {
            "blocked_mnk_4096x8192x8192_s": round(big, 3),
            "blocked_mnk_instructions": len(r.program),
            "blocked_mnk_simulated_latency_ms": round(r.latency * 1e3, 3),
            "blocked_mnk_utilisation": round(r.utilisation, 4),
        }
    )
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    num, rn = best_of(lambda: kernels.matmul(a, b, variant="pipelined", dtype="bf16"), repeats)
    err = float(np.abs(rn.output - a @ b).max() / np.abs(a @ b).max())
    out.update(
        {
            "pipelined_1024_numerics_s": round(num, 3),
            "pipelined_1024_max_rel_error": err,
            "targets": {
                "record_instructions_per_s": ">= 5e5",
                "schedule_instructions_per_s": ">= 1e6",
                "million_instructions_s": "< 10",
            },
        }
    )
    return out
