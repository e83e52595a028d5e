"""Planner speed: one plan evaluation, and full plan searches (issue 6 figures)."""

from __future__ import annotations

from benchmarks import best_of
from trnlab import catalog, scale


def run() -> dict:
    p = scale.Parallelism(tp=8, pp=4, dp=2, recompute=True)
    scale.plan("llama3-70b", "trn2-ultraserver", p, global_batch=512)  # warm: kernel model, rings
    one, _ = best_of(lambda: scale.plan("llama3-70b", "trn2-ultraserver", p, global_batch=512), 20)
    s70, r70 = best_of(lambda: scale.search("llama3-70b", "trn2-ultraserver", global_batch=512))
    cluster = catalog.cluster("trn2-ultraserver", 256)  # 16,384 chips
    s405, r405 = best_of(lambda: scale.search("llama3-405b", cluster, global_batch=2048))
    return {
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
