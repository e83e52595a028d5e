"""Memory per chip, by kind: weights, gradients, optimiser state, activations, KV cache.

Training with mixed-precision Adam keeps, per parameter, 2 bytes of BF16 weights, 2 of BF16
gradients and 12 of FP32 optimiser state (master weights, momentum, variance): 16 bytes
(Rajbhandari et al., "ZeRO", SC'20, section 3.1). ZeRO stage 1 shards the optimiser state
over the data-parallel group, stage 2 also the gradients, stage 3 also the weights.
Activations follow Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models" (2022): s·b·h·(34 + 5·a·s/h) bytes per layer without recomputation,
divided by the tensor-parallel degree with sequence parallelism, and 2·s·b·h with full
recomputation (only each layer's input is kept).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ._workloads import ModelSpec, WorkloadError

__all__ = ["MemoryBreakdown", "bytes_per_value", "inference_memory", "training_memory"]

#: FP32 master weights + Adam momentum + variance, bytes per parameter (ZeRO's K = 12).
ADAM_STATE_BYTES = 12


def bytes_per_value(fmt: str) -> float:
    """Storage of one value in ``fmt``, shared MX block scales included (from trnlab.formats)."""
    from trnlab import formats  # lazy: formats is only needed when memory is computed

    return formats.spec(fmt).bits_per_value / 8


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per chip of each kind of state."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    kv_cache: float = 0.0

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.kv_cache

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "total": self.total}

    def fits(self, capacity: float) -> bool:
        return self.total <= capacity


def _check_degrees(model: ModelSpec, **degrees: int) -> None:
    for name, value in degrees.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise WorkloadError(f"{name} must be a whole number >= 1, not {value!r}")
    tp, pp, ep = degrees.get("tp", 1), degrees.get("pp", 1), degrees.get("ep", 1)
    if model.heads % tp or (model.kv_heads % tp and tp % model.kv_heads):
        raise WorkloadError(
            f"{model.name}: tensor parallelism {tp} must divide the {model.heads} attention heads "
            f"(and split or replicate its {model.kv_heads} KV heads evenly)"
        )
    if model.layers % pp:
        raise WorkloadError(
            f"{model.name}: pipeline parallelism {pp} does not divide its {model.layers} layers; "
            f"choose a divisor of {model.layers}"
        )
    if ep > 1 and model.experts % ep:
        raise WorkloadError(
            f"{model.name}: expert parallelism {ep} does not divide its {model.experts} experts"
        )


def params_per_chip(model: ModelSpec, tp: int = 1, pp: int = 1, ep: int = 1) -> float:
    """Parameters held by one chip: dense parts split by tp x pp, experts also by ep."""
    experts = model.layers * model.experts * model.expert_params
    return (model.params - experts) / (tp * pp) + experts / (tp * pp * ep)


def training_memory(
    model: ModelSpec,
    *,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    ep: int = 1,
    cp: int = 1,
    zero: int = 0,
    micro_batch: int = 1,
    seq_len: int | None = None,
    recompute: bool = False,
) -> MemoryBreakdown:
    """Training memory per chip with mixed-precision Adam (BF16 weights and gradients).

    Parameters
    ----------
    tp, pp, dp, ep, cp : int
        Tensor, pipeline, data, expert and context (sequence) parallel degrees. Context
        parallelism splits each sequence over ``cp`` chips: activations shrink by ``cp``, the
        model state is replicated across them and sharded by ZeRO over ``dp x cp``.
    zero : {0, 1, 2, 3}
        ZeRO stage over the data-parallel group.
    micro_batch : int
        Sequences per micro-batch.
    seq_len : int, optional
        Sequence length (default: the model's).
    recompute : bool
        Full activation recomputation.
    """
    _check_degrees(model, tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, micro_batch=micro_batch)
    if zero not in (0, 1, 2, 3):
        raise WorkloadError(f"ZeRO stage must be 0, 1, 2 or 3, not {zero!r}")
    s = seq_len or model.seq_len
    if s % cp:
        raise WorkloadError(f"context parallelism {cp} does not divide the sequence of {s} tokens")
    n = params_per_chip(model, tp, pp, ep)
    shard = dp * cp  # ZeRO shards over every replica of the weights (Megatron: dp x cp)
    weights = 2 * n / (shard if zero >= 3 else 1)
    gradients = 2 * n / (shard if zero >= 2 else 1)
    optimizer = ADAM_STATE_BYTES * n / (shard if zero >= 1 else 1)
    h, a = model.hidden, model.heads
    s_local = s // cp  # each chip of a context-parallel group holds its slice of the sequence
    # 5as/h is the attention-score term: each chip scores its s/cp queries against all s keys
    full_layer = s_local * micro_batch * h * (34 + 5 * a * s / h) / tp
    # 1F1B pipelining: the first stage holds pp micro-batches of L/pp layers, i.e. L layers.
    if recompute:
        # Each layer keeps only its input (2sbh/t); the layer being recomputed needs its full
        # activations while its backward pass runs (Korthikanti et al. 2022, section 4).
        activations = 2 * s_local * micro_batch * h / tp * model.layers + full_layer
    else:
        activations = full_layer * model.layers
    return MemoryBreakdown(weights, gradients, optimizer, activations)


def inference_memory(
    model: ModelSpec,
    *,
    batch: int,
    context: int,
    weight_format: str = "bf16",
    kv_format: str = "bf16",
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
) -> MemoryBreakdown:
    """Inference memory per chip: weights in ``weight_format`` plus the KV cache of ``batch``
    sequences of ``context`` tokens in ``kv_format`` (split over tp x pp)."""
    _check_degrees(model, tp=tp, pp=pp, ep=ep, batch=batch, context=context)
    weights = params_per_chip(model, tp, pp, ep) * bytes_per_value(weight_format)
    kv = batch * context * model.kv_bytes_per_token(bytes_per_value(kv_format)) / (tp * pp)
    # Activations of one decode step are a few vectors per sequence: small beside weights and KV.
    activations = 2 * batch * model.hidden * 4 * 2
    return MemoryBreakdown(weights, 0.0, 0.0, activations, kv)
