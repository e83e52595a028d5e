"""Exercises of lab 08 (scaling to UltraServers). Expected answers come from trnlab.scale."""

from __future__ import annotations

import math

from trnlab import catalog, scale

from ._checks import close_to
from ._exercise import Exercise

__all__ = ["adam_bytes", "bubble", "min_chips"]


def _state_bytes_per_param() -> float:
    m = scale.model("llama3-8b")
    mem = scale.training_memory(m, recompute=True)  # no sharding: every chip holds everything
    return (mem.weights + mem.gradients + mem.optimizer) / m.params


adam_bytes = Exercise(
    "lab08.adam_bytes",
    "Mixed-precision Adam keeps BF16 weights, BF16 gradients, and FP32 master weights, momentum "
    "and variance. How many bytes per parameter is that?",
    close_to(_state_bytes_per_param(), rtol=1e-9, what="bytes per parameter"),
    hints=("BF16 is 2 bytes, FP32 is 4.", "2 + 2 + 3 x 4"),
    solution=lambda: 2 + 2 + 3 * 4,
    solution_text="bytes = 2 + 2 + 4 + 4 + 4   # 16: the ZeRO paper's 2 + 2 + K with K = 12",
)


def _min_chips() -> int:
    m = scale.model("llama3-70b")
    usable = catalog.chip("trn2").hbm_bytes * scale._plan.USABLE_HBM
    return math.ceil(16 * m.params / usable)


min_chips = Exercise(
    "lab08.min_chips",
    "Ignoring activations, what is the smallest number of Trainium2 chips whose HBM (96 GiB each, "
    "95% usable) can hold Llama 3 70B's training state (70.55B parameters x 16 bytes) when ZeRO-3 "
    "shards all of it?",
    close_to(_min_chips(), rtol=1e-9, what="the chip count"),
    hints=(
        "Total state = 16 x 70.55e9 bytes; one chip holds 0.95 x 96 x 2^30 bytes.",
        "Divide and round up: a fraction of a chip does not exist.",
    ),
    solution=_min_chips,
    solution_text="math.ceil(16 * 70.55e9 / (0.95 * 96 * 2**30))   # 12: the state alone; activations need more",
)

bubble = Exercise(
    "lab08.bubble",
    "A 1F1B pipeline has 4 stages and runs 16 micro-batches per step. What fraction of the step "
    "are the stages idle (the pipeline bubble)?",
    close_to((4 - 1) / (16 + 4 - 1), rtol=1e-6, what="the bubble fraction"),
    hints=(
        "The step takes m + p - 1 micro-batch slots for m micro-batches.",
        "Idle share = (p - 1) / (m + p - 1).",
    ),
    solution=lambda: (4 - 1) / (16 + 4 - 1),
    solution_text="bubble = (4 - 1) / (16 + 4 - 1)   # 0.158: more micro-batches shrink it",
)
