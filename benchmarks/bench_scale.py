"""Planner speed: one plan evaluation, full plan searches (issue 6 figures), and a serving
curve as a learner's first call computes it (its decode attention runs on the NeuronCore model)."""

from __future__ import annotations

import subprocess
import sys
import time

from benchmarks import best_of
from trnlab import catalog, scale

_FIRST_SEARCH = """
import time
from trnlab import scale
t0 = time.perf_counter()
scale.search("llama3-8b", "trn1.32xlarge", global_batch=512, seq_len=4096, dtype="fp8")
print(time.perf_counter() - t0)
"""

_FIRST_SERVING = """
import time
from trnlab import scale
t0 = time.perf_counter()
scale.serving_curve("llama3-70b", "trn2.48xlarge", tp=4, prompt=2048, output=256,
                    batches=[2**k for k in range(11)])
t1 = time.perf_counter()
scale.inference("llama3-8b", "trn1.32xlarge", tp=16, prompt=65536, output=65536)
print(t1 - t0, time.perf_counter() - t1)
"""


def _fresh(code: str) -> list[float]:
    """Run ``code`` in a fresh interpreter (nothing cached); the figures its last line prints."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [float(x) for x in out.stdout.strip().splitlines()[-1].split()]


def _first_search_s() -> float:
    """A search as a learner's first one runs it: in a fresh interpreter, nothing cached (the
    NeuronCore model simulates its large GEMM once per chip and format on the way)."""
    return _fresh(_FIRST_SEARCH)[0]


def _explorer_stall() -> tuple[float, float]:
    """Start ScaleExplorer's search on a 16,384-chip cluster and time, on the main thread,
    how long the control change takes to return and the longest gap between 1 ms ticks
    while the search runs on its worker thread (the kernel's responsiveness)."""
    from trnlab.widgets import ScaleExplorer

    e = ScaleExplorer(model="llama3-70b", system="trn2-ultraserver", count=256, tp=8, pp=4,
                      global_batch=2048, seq_len=4096)  # fmt: skip
    t0 = time.perf_counter()
    e.auto.value = True
    returned = time.perf_counter() - t0
    worst, last = 0.0, time.perf_counter()
    while not e.job.wait(0.001):
        now = time.perf_counter()
        worst, last = max(worst, now - last), now
    return worst, returned


def run() -> dict:
    p = scale.Parallelism(tp=8, pp=4, dp=2, recompute=True)
    scale.plan("llama3-70b", "trn2-ultraserver", p, global_batch=512)  # warm: kernel model, rings
    one, _ = best_of(lambda: scale.plan("llama3-70b", "trn2-ultraserver", p, global_batch=512), 20)
    s70, r70 = best_of(lambda: scale.search("llama3-70b", "trn2-ultraserver", global_batch=512))
    cluster = catalog.cluster("trn2-ultraserver", 256)  # 16,384 chips
    s405, r405 = best_of(lambda: scale.search("llama3-405b", cluster, global_batch=2048))
    million = catalog.cluster("trn2-ultraserver", 15625)  # 1,000,000 chips
    s1m, r1m = best_of(
        lambda: scale.search("llama3-405b", million, global_batch=1_000_000, seq_len=8192), 1
    )
    stall, returned = _explorer_stall()
    curve, long_context = _fresh(_FIRST_SERVING)
    return {
        "serving_curve_70b_trn2_first_call_s": round(curve, 3),
        "inference_8b_128k_context_s": round(long_context, 3),
        "search_8b_trn1_32xlarge_first_call_s": round(_first_search_s(), 3),
        "search_405b_1m_chips_s": round(s1m, 3),
        "search_405b_1m_plans": len(r1m.ranked) + len(r1m.rejected),
        "explorer_auto_returns_s": round(returned, 4),
        "explorer_main_thread_max_stall_s": round(stall, 4),
        "plan_evaluation_s": round(one, 6),
        "search_70b_trn2_ultraserver_s": round(s70, 3),
        "search_70b_plans": len(r70.ranked) + len(r70.rejected),
        "search_70b_best": str(r70.best.parallel) if r70.best else None,
        "search_70b_best_mfu": round(r70.best.mfu, 3) if r70.best else None,
        "search_405b_16384_chips_s": round(s405, 3),
        "search_405b_plans": len(r405.ranked) + len(r405.rejected),
        "search_405b_best": str(r405.best.parallel) if r405.best else None,
        "search_405b_best_mfu": round(r405.best.mfu, 3) if r405.best else None,
    }
