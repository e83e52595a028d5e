"""Scaling out: workloads, memory per chip, parallelism plans, step time, serving, cost, energy.

Workloads (:class:`ModelSpec` and presets, FLOPs per token), memory by kind, training plans
(:func:`plan`, :func:`search`) whose every collective comes from :mod:`trnlab.fabric`, and
serving (:func:`inference`, :func:`serving_curve`, :func:`tokens_per_megawatt_at`). Published
runs the model is checked against live in ``_published``; :func:`validation_case` runs one of
them now (docs/validation.md has them all).
"""

from ._gpu_kernels import flash_attention_rate, gemm_wave_efficiency
from ._inference import (
    InferenceResult,
    ServingPoint,
    decode_layer_overhead,
    inference,
    serving_curve,
    tokens_per_megawatt_at,
)
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
from ._search import SearchCancelled, SearchResult, search
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
    "SearchCancelled",
    "SearchResult",
    "ServingPoint",
    "Tiers",
    "ValidationRow",
    "WorkloadError",
    "achieved_flops_per_chip",
    "bytes_per_value",
    "collective_time",
    "decode_layer_overhead",
    "flash_attention_rate",
    "gemm_wave_efficiency",
    "inference",
    "inference_memory",
    "model",
    "models",
    "params_per_chip",
    "plan",
    "recompute_mode",
    "search",
    "serving_curve",
    "stage_layers",
    "tiers",
    "tokens_per_megawatt_at",
    "training_memory",
    "validation_case",
]


def __getattr__(name: str):
    # The published-run tables load on first use, not with every `import trnlab.scale` (they
    # add about 10 ms a lab or dashboard does not need).
    if name in ("ValidationRow", "validation_case"):
        from . import _validation

        return getattr(_validation, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
