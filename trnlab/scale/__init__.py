"""Scaling out: workloads, memory per chip, parallelism plans, step time, cost and energy.

This first part holds the workloads (:class:`ModelSpec` and presets, FLOPs per token) and
memory by kind; plans and step time build on :mod:`trnlab.fabric`.
"""

from ._inference import InferenceResult, inference
from ._memory import (
    RECOMPUTE,
    MemoryBreakdown,
    bytes_per_value,
    inference_memory,
    params_per_chip,
    recompute_mode,
    stage_layers,
    training_memory,
)
from ._plan import (
    MFU_CONVENTION,
    Parallelism,
    PlanResult,
    Tiers,
    achieved_flops_per_chip,
    collective_time,
    plan,
    tiers,
)
from ._search import SearchResult, search
from ._workloads import PRESETS, ModelSpec, WorkloadError, model, models

__all__ = [
    "MFU_CONVENTION",
    "PRESETS",
    "RECOMPUTE",
    "InferenceResult",
    "MemoryBreakdown",
    "ModelSpec",
    "Parallelism",
    "PlanResult",
    "SearchResult",
    "Tiers",
    "WorkloadError",
    "achieved_flops_per_chip",
    "bytes_per_value",
    "collective_time",
    "inference",
    "inference_memory",
    "model",
    "models",
    "params_per_chip",
    "plan",
    "recompute_mode",
    "search",
    "stage_layers",
    "tiers",
    "training_memory",
]
