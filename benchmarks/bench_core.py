"""Speed of trnlab.core: the scheduler, a large timing-only kernel, a run with numerics.

Figures (issue 4 targets in brackets):

- ``schedule_instructions_per_s``: the numba scheduler (with the vectorised cost pass) on the
  recorded program of the large run below, best of ``repeats`` [>= 1e6].
- ``blocked_mnk_4096x8192x8192_s``: end to end (record + schedule + metrics) for
  ``kernels.matmul`` bf16 [4096 x 8192] @ [8192 x 8192], ``blocked_mnk`` on trn1,
  timing-only [< 2 s]; with its simulated latency and Tensor Engine utilisation.
- ``pipelined_1024_numerics_s``: a 1024^3 bf16 ``pipelined`` run with numerics (every tile
  through trnlab.formats, fp32 PSUM), end to end.
- ``record_instructions_per_s``: instructions recorded per second in the large run (the
  Python kernel API; the rest of its time).

A warm-up call compiles (or loads from the on-disk cache) the scheduler first; its time is
reported as ``first_call_s``.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks import best_of


def run(repeats: int = 3) -> dict:
    from trnlab import core, kernels

    t0 = time.perf_counter()
    kernels.matmul((256, 256), (256, 256), variant="pipelined", numerics=False)
    first = time.perf_counter() - t0

    big, r = best_of(
        lambda: kernels.matmul(
            (4096, 8192), (8192, 8192), variant="blocked_mnk", chip="trn1", numerics=False
        ),
        repeats,
    )
    n = len(r.program)
    sched, _ = best_of(lambda: core.schedule(r.program, r.params), repeats)

    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    num, rn = best_of(lambda: kernels.matmul(a, b, variant="pipelined", dtype="bf16"), repeats)
    err = float(np.abs(rn.output - a @ b).max() / np.abs(a @ b).max())

    return {
        "first_call_s": round(first, 3),
        "instructions": n,
        "schedule_s": round(sched, 4),
        "schedule_instructions_per_s": round(n / sched),
        "blocked_mnk_4096x8192x8192_s": round(big, 3),
        "blocked_mnk_record_instructions_per_s": round(n / max(big - sched, 1e-9)),
        "blocked_mnk_simulated_latency_ms": round(r.latency * 1e3, 3),
        "blocked_mnk_utilisation": round(r.utilisation, 4),
        "pipelined_1024_numerics_s": round(num, 3),
        "pipelined_1024_instructions": len(rn.program),
        "pipelined_1024_max_rel_error": err,
        "targets": {"schedule_instructions_per_s": ">= 1e6", "blocked_mnk_4096x8192x8192_s": "< 2"},
    }
