"""Serving a model: time to first token, time per output token, tokens per chip and per MW.

One replica of the model spans ``tp`` chips inside a NeuronLink domain; a system serves
``chips / tp`` replicas. Prefill is compute-bound (the prompt's FLOPs at the achieved matmul
rate); decode reads every weight and the whole KV cache once per generated token, so a token
never takes less than (weight bytes + KV bytes) / HBM bandwidth (the memory-bound roofline).
"""

from __future__ import annotations

from dataclasses import dataclass

from trnlab import catalog
from trnlab.catalog import System

from ._memory import MemoryBreakdown, inference_memory
from ._plan import USABLE_HBM, achieved_flops_per_chip, collective_time, tiers
from ._workloads import ModelSpec, WorkloadError, model

__all__ = ["InferenceResult", "inference"]


@dataclass(frozen=True)
class InferenceResult:
    """Latency and throughput of serving one batch, and what bounds them."""

    model: ModelSpec
    system: System
    tp: int
    batch: int
    prompt: int
    output: int
    memory: MemoryBreakdown
    ttft: float
    tpot: float
    tpot_memory_bound: float
    tpot_compute_bound: float
    tpot_comm: float
    watts_per_chip: float | None

    @property
    def replicas(self) -> int:
        return self.system.chips // self.tp

    @property
    def tokens_per_second(self) -> float:
        """Output tokens per second of the whole system (every replica decoding)."""
        return self.replicas * self.batch / self.tpot

    @property
    def tokens_per_second_per_chip(self) -> float:
        return self.tokens_per_second / self.system.chips

    @property
    def tokens_per_megawatt(self) -> float | None:
        """Output tokens per second per MW of chip power (None without a power figure)."""
        if self.watts_per_chip is None:
            return None
        return self.tokens_per_second_per_chip / (self.watts_per_chip / 1e6)

    @property
    def bound(self) -> str:
        return "memory" if self.tpot_memory_bound >= self.tpot_compute_bound else "compute"

    def explain(self) -> str:
        return (
            f"{self.model.name} on {self.replicas} x tp{self.tp} of {self.system.name}, batch "
            f"{self.batch}: first token {self.ttft * 1e3:,.0f} ms, then {self.tpot * 1e3:,.1f} ms "
            f"per token ({self.bound}-bound: memory {self.tpot_memory_bound * 1e3:,.1f} ms, compute "
            f"{self.tpot_compute_bound * 1e3:,.1f} ms, tensor parallel {self.tpot_comm * 1e3:,.1f} ms); "
            f"{self.tokens_per_second_per_chip:,.0f} tokens/s per chip."
        )


def inference(
    model_spec: str | ModelSpec,
    system: str | System,
    *,
    tp: int = 1,
    batch: int = 1,
    prompt: int = 2048,
    output: int = 256,
    weight_format: str = "bf16",
    kv_format: str = "bf16",
    watts_per_chip: float | None = None,
    usable_hbm: float = USABLE_HBM,
) -> InferenceResult:
    """Serve ``batch`` requests of ``prompt`` tokens generating ``output`` tokens each.

    Raises
    ------
    WorkloadError
        Non-positive sizes, tp that does not divide the chips or leaves the NeuronLink
        domain, or a model that does not fit in ``tp`` chips' HBM (with the arithmetic).
    """
    m = model(model_spec)
    sysobj = catalog.system(system) if isinstance(system, str) else system
    for name, value in (("batch", batch), ("prompt", prompt), ("output", output), ("tp", tp)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise WorkloadError(f"{name} must be a whole number >= 1, not {value!r}")
    t = tiers(sysobj)
    if sysobj.chips % tp or tp > t.domain:
        raise WorkloadError(
            f"tp={tp} must divide {sysobj.name}'s {sysobj.chips} chips and fit its "
            f"{t.domain}-chip NeuronLink domain"
        )
    context = prompt + output // 2  # average context while decoding
    mem = inference_memory(
        m,
        batch=batch,
        context=prompt + output,
        weight_format=weight_format,
        kv_format=kv_format,
        tp=tp,
    )
    capacity = sysobj.chip.hbm_bytes * usable_hbm
    if mem.total > capacity:
        raise WorkloadError(
            f"{m.name} in {weight_format} with a {batch} x {prompt + output}-token KV cache needs "
            f"{mem.total / 2**30:,.1f} GiB per chip at tp={tp} (weights {mem.weights / 2**30:,.1f}, "
            f"KV {mem.kv_cache / 2**30:,.1f}); {sysobj.chip.name} has {capacity / 2**30:,.1f} GiB "
            f"usable. Raise tp, shrink the batch, or use a narrower format."
        )
    dtype = _compute_dtype(weight_format)
    flops, _ = achieved_flops_per_chip(sysobj.chip.key, dtype)
    act = 2 * m.hidden  # one token's activations in bf16, bytes
    # Prefill: the prompt's FLOPs at the achieved rate, plus 2 all-reduces per layer.
    prefill_flops = batch * prompt * m.prefill_flops_per_token(prompt)
    ttft = prefill_flops / (tp * flops) + 2 * m.layers * collective_time(
        "all_reduce", batch * prompt * act, sysobj, tp
    )
    # Decode: every weight and the KV cache are read once per token (memory roofline).
    kv_bytes = mem.kv_cache * context / (prompt + output)
    t_mem = (mem.weights + kv_bytes) / sysobj.chip.hbm_bandwidth
    t_compute = batch * m.decode_flops_per_token(context) / (tp * flops)
    t_comm = 2 * m.layers * collective_time("all_reduce", batch * act, sysobj, tp)
    return InferenceResult(
        model=m,
        system=sysobj,
        tp=tp,
        batch=batch,
        prompt=prompt,
        output=output,
        memory=mem,
        ttft=ttft,
        tpot=max(t_mem, t_compute) + t_comm,
        tpot_memory_bound=t_mem,
        tpot_compute_bound=t_compute,
        tpot_comm=t_comm,
        watts_per_chip=watts_per_chip if watts_per_chip is not None else sysobj.chip.power,
    )


def _compute_dtype(weight_format: str) -> str:
    from trnlab import formats

    return formats.catalog_dtype(weight_format)
