"""Exercises of lab 06 (structured sparsity). Expected answers come from the model."""

from __future__ import annotations

from functools import lru_cache

from trnlab import catalog, formats

from ._checks import choice, close_to
from ._exercise import Exercise

__all__ = ["best_pattern", "kept", "trn2_sparse_pf"]

kept = Exercise(
    "lab06.kept",
    "What fraction of the weights does 4:16 structured sparsity keep?",
    close_to(4 / 16, rtol=1e-9, what="the fraction"),
    hints=("At most N non-zeros in every M consecutive weights.",),
    solution=lambda: 4 / 16,
    solution_text="kept = 4 / 16   # 0.25: a quarter of the weights, hence up to 4x",
)

trn2_sparse_pf = Exercise(
    "lab06.trn2_sparse",
    "Trainium2 is rated at 1.299 PFLOP/s of dense FP8. What does 4:16 sparsity promise, in "
    "PFLOP/s, if the speed-up applies to FP8 (as AWS's 83.2 PF instance figure assumes)?",
    close_to(
        catalog.chip("trn2").peak_flops("fp8", pattern="4:16") / 1e15, rtol=0.005, what="the peak"
    ),
    hints=("4:16 keeps a quarter of the weights: up to 4x.",),
    solution=lambda: catalog.chip("trn2").peak_flops("fp8", pattern="4:16") / 1e15,
    solution_text="1.299 * 4   # 5.2 PF; the Trainium2 docs quote only 2.56 PF sparse per chip",
)


@lru_cache(maxsize=1)
def _errors_at_4x(size: int = 256) -> dict[str, float]:
    w = formats.sample("weights", (size, size), seed=0)
    return {
        p: formats.prune(w, *map(int, p.split(":")), axis=0).rel_error
        for p in ("4:16", "2:8", "1:4")
    }


def _best() -> str:
    errors = _errors_at_4x()
    return min(errors, key=errors.get)


best_pattern = Exercise(
    "lab06.best_pattern",
    "4:16, 2:8 and 1:4 all keep a quarter of the weights (4x). Which one loses the least "
    "weight energy when pruning the lab's weight matrix by magnitude: '4:16', '2:8' or '1:4'?",
    choice(
        _best(),
        ["4:16", "2:8", "1:4"],
        explain={
            p: "look at the error table: a longer group lets pruning keep the largest weights "
            "wherever they sit, a shorter one forces a pick from every few"
            for p in ("4:16", "2:8", "1:4")
            if p != _best()
        },
    ),
    hints=("Run the error cell and compare the three rows with 4x speed-up.",),
    solution=_best,
    solution_text="'4:16': within 16 weights, any 4 may survive, so fewer large weights are lost",
)
