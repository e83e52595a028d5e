"""Memory per chip, by kind: weights, gradients, optimiser state, activations, KV cache.

Training with mixed-precision Adam keeps, per parameter, 2 bytes of BF16 weights, 2 of BF16
gradients and 12 of FP32 optimiser state (master weights, momentum, variance): 16 bytes
(Rajbhandari et al., "ZeRO", SC'20, section 3.1). Megatron-LM without a distributed optimizer
accumulates gradients in FP32: 18 bytes (``megatron_state``). ZeRO stage 1 shards the optimiser
state over the data-parallel group, stage 2 also the gradients, stage 3 also the weights (then
each chip holds the gathered weights of the layers in flight: ``buffers``).

Activations follow Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models" (2022), per layer and micro-batch of b sequences of s tokens, hidden h, a heads, tensor
parallel t: sbh(10 + 24/t + 5as/(ht)) bytes, sbh(34/t + 5as/(ht)) with sequence parallelism.
The 5as/(ht) term stores the attention scores; FlashAttention (Dao et al. 2022) and selective
recomputation do not store them, and full recomputation keeps only each layer's input (2sbh/t
with sequence parallelism). A 1F1B pipeline's first stage holds min(p, m) micro-batches of its
layers; the interleaved schedule with v virtual stages holds (1 + (p-1)/(pv)) times that
(Korthikanti et al., section 4.2.3). The last stage also holds the FP32 logits of one
micro-batch for the loss, 4sbV/t bytes.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass

from trnlab._checks import flag, short

from ._workloads import ModelSpec, WorkloadError

__all__ = [
    "RECOMPUTE",
    "MemoryBreakdown",
    "bytes_per_value",
    "inference_memory",
    "params_per_chip",
    "recompute_mode",
    "stage_layers",
    "training_memory",
]

#: FP32 master weights + Adam momentum + variance, bytes per parameter (ZeRO's K = 12).
ADAM_STATE_BYTES = 12

#: Recomputation modes: nothing, the attention core (Korthikanti's "selective"), whole layers.
RECOMPUTE = ("none", "selective", "full")


def recompute_mode(value) -> str:
    """``"none"``, ``"selective"`` or ``"full"`` (True means "full"; False and None, the
    default of an option left unset, mean "none")."""
    if value is True:
        return "full"
    if value is False or value is None:
        return "none"
    if isinstance(value, str) and value.strip().lower() in RECOMPUTE:
        return value.strip().lower()
    raise WorkloadError(
        f"recompute = {value!r}: choose 'none', 'selective' (recompute the attention core) or "
        "'full' (recompute whole layers); True means 'full'"
    )


def bytes_per_value(fmt: str) -> float:
    """Storage of one value in ``fmt``, shared MX block scales included (from trnlab.formats).

    Raises
    ------
    WorkloadError
        For a format trnlab.formats does not know.
    """
    from trnlab import formats  # lazy: formats is only needed when memory is computed

    try:
        return formats.spec(fmt).bits_per_value / 8
    except (KeyError, ValueError) as err:
        raise WorkloadError(f"unknown number format {fmt!r}: {err}") from None


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per chip of each kind of state (the heaviest pipeline stage for training)."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    kv_cache: float = 0.0
    buffers: float = 0.0  # ZeRO-3: the gathered weights of the layers in flight
    logits: float = 0.0  # FP32 logits of one micro-batch on the last stage

    @property
    def total(self) -> float:
        return (
            self.weights
            + self.gradients
            + self.optimizer
            + self.activations
            + self.kv_cache
            + self.buffers
            + self.logits
        )

    @property
    def state(self) -> float:
        """Weights, gradients and optimiser state (what ZeRO shards)."""
        return self.weights + self.gradients + self.optimizer

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "total": self.total}

    def fits(self, capacity: float) -> bool:
        return self.total <= capacity


def _whole(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise WorkloadError(f"{name} must be a whole number >= 1, not {value!r}")


def _spec(value) -> ModelSpec:
    """A ModelSpec, or a preset's name; anything else is refused with a teaching error."""
    if isinstance(value, ModelSpec):
        return value
    if isinstance(value, str):
        from ._workloads import model

        return model(value)
    raise WorkloadError(
        f"model must be a ModelSpec (scale.model('llama3-8b')) or a preset's name, not "
        f"{short(value)}"
    )


def _check_degrees(
    model: ModelSpec, *, pad_heads: bool = False, ranks_per_chip: int = 1, **degrees: int
) -> None:
    """Whole degrees >= 1; the tensor-parallel ranks (tp chips x ``ranks_per_chip``) divide the
    heads (and split or replicate the KV heads evenly) unless ``pad_heads``: serving frameworks
    pad the heads to the ranks instead."""
    for name, value in degrees.items():
        _whole(name, value)
    _whole("ranks_per_chip", ranks_per_chip)
    tp, ep = degrees.get("tp", 1), degrees.get("ep", 1)
    ranks = tp * ranks_per_chip
    if not pad_heads and (
        model.heads % ranks or (model.kv_heads % ranks and ranks % model.kv_heads)
    ):
        over = (
            f"{ranks} ranks ({tp} chips x {ranks_per_chip} NeuronCores)"
            if ranks_per_chip > 1
            else f"{tp}"
        )
        raise WorkloadError(
            f"{model.name}: tensor parallelism {over} must divide the {model.heads} attention "
            f"heads (and split or replicate its {model.kv_heads} KV heads evenly): training "
            f"frameworks do not pad heads. Choose a tp that does."
        )
    if ep > 1 and model.experts % ep:
        raise WorkloadError(
            f"{model.name}: expert parallelism {ep} does not divide its {model.experts} experts"
        )


def stage_layers(model: ModelSpec, pp: int, layers: tuple[int, ...] | None = None):
    """Layers on each pipeline stage.

    ``pp`` dividing the layers gives equal stages. Otherwise the stages get ceil(L/p) layers
    and the first and last stages (which also hold the embedding and the loss) give up the
    remainder, alternately: Llama 3 405B's 126 layers on 16 stages are 7, 8 x 14, 7 (Llama
    Team 2024, section 3.3.2). An explicit ``layers`` tuple must sum to the model's layers.
    """
    model = _spec(model)
    _whole("pipeline parallelism", pp)
    if layers is not None and (isinstance(layers, str) or not isinstance(layers, tuple | list)):
        raise WorkloadError(f"stage_layers is a tuple of layers per stage, not {layers!r}")
    L = model.layers
    if layers is not None:
        layers = tuple(layers)
        if len(layers) != pp or any(
            isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in layers
        ):
            raise WorkloadError(
                f"stage_layers {layers} must give {pp} whole numbers >= 1 (one per stage)"
            )
        if sum(layers) != L:
            raise WorkloadError(
                f"stage_layers {layers} add up to {sum(layers)} layers; {model.name} has {L}"
            )
        return layers
    if pp > L:
        raise WorkloadError(
            f"{model.name}: {pp} pipeline stages for {L} layers leaves stages empty; use at "
            f"most {L} stages"
        )
    base = math.ceil(L / pp)
    out = [base] * pp
    short = base * pp - L
    ends = [0, pp - 1] if pp > 1 else [0]
    i = 0
    while short:  # take layers from the ends inward: first, last, second, second-to-last...
        k = ends[i % len(ends)] + (i // len(ends)) * (1 if i % 2 == 0 else -1)
        if out[k] > 1:
            out[k] -= 1
            short -= 1
        i += 1
    return tuple(out)


def _stage_params(model: ModelSpec, tp: int, ep: int, layers: int, first: bool, last: bool,
                  ranks_per_chip: int = 1):  # fmt: skip
    """(dense, expert) parameters one chip of a stage holds, the K and V heads its ranks copy
    included (:meth:`ModelSpec.tp_extra_params`)."""
    experts = model.experts * model.expert_params
    dense_layer = model.layer_params - experts + model.tp_extra_params(tp * ranks_per_chip)
    table = model.vocab * model.hidden
    dense = layers * dense_layer / tp
    if first:
        dense += (table + (model.seq_len * model.hidden if model.learned_positions else 0)) / tp
    if last:  # the output head (a copy of the table when tied and pipelined) and final norm
        if not model.tied_embeddings or not first:
            dense += table / tp
        dense += model.hidden
    return dense, layers * experts / (tp * ep)


def params_per_chip(model: ModelSpec, tp: int = 1, pp: int = 1, ep: int = 1) -> float:
    """Parameters held by one chip with the model spread evenly: dense parts split by tp x pp,
    experts also by ep (the average stage; :func:`training_memory` takes the heaviest)."""
    model = _spec(model)
    for name, value in (("tp", tp), ("pp", pp), ("ep", ep)):
        _whole(name, value)
    experts = model.layers * model.experts * model.expert_params
    return (model.params - experts) / (tp * pp) + experts / (tp * pp * ep)


def activation_bytes_per_layer(
    model: ModelSpec,
    *,
    seq_len: int,
    micro_batch: int = 1,
    tp: int = 1,
    cp: int = 1,
    recompute: str = "none",
    flash_attention: bool = True,
    sequence_parallel: bool = True,
) -> float:
    """Bytes one layer stores for its backward pass, per chip (Korthikanti et al. 2022).

    With full recomputation this is the stored layer input only; the layer being recomputed
    needs :func:`activation_bytes_per_layer` with ``recompute="none"`` on top, once.
    """
    s, b, h, a, t = seq_len // cp, micro_batch, model.hidden, model.heads, tp
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh / (t if sequence_parallel else 1)
    linear = 34 * sbh / t if sequence_parallel else sbh * (10 + 24 / t)
    # Korthikanti's attention-score term 5as^2b/t; with context parallelism each chip scores
    # its s/cp queries against all s keys. FlashAttention and selective recomputation drop it.
    scores = 0.0 if (flash_attention or recompute == "selective") else 5 * a * s * seq_len * b / t
    return linear + scores


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
    recompute: bool | str = "none",
    flash_attention: bool = True,
    sequence_parallel: bool = True,
    virtual_stages: int = 1,
    layers_per_stage: tuple[int, ...] | None = None,
    micro_batches: int | None = None,
    megatron_state: bool = False,
    reshard: bool = True,
    ranks_per_chip: int = 1,
) -> MemoryBreakdown:
    """Training memory per chip on the heaviest pipeline stage.

    Parameters
    ----------
    tp, pp, dp, ep, cp : int
        Tensor, pipeline, data, expert and context (sequence) parallel degrees. Context
        parallelism splits each sequence over ``cp`` chips: activations shrink by ``cp``; the
        model state is sharded by ZeRO over ``dp x cp`` (Megatron).
    zero : {0, 1, 2, 3}
        ZeRO stage over the data-parallel group.
    micro_batch : int
        Sequences per micro-batch.
    seq_len : int, optional
        Sequence length (default: the model's).
    recompute : {"none", "selective", "full"} or bool
        Activation recomputation (True = "full").
    flash_attention : bool
        Attention without stored scores (default True).
    sequence_parallel : bool
        Megatron sequence parallelism with tensor parallelism (default True).
    virtual_stages : int
        Model chunks per pipeline stage (interleaved 1F1B); 1 = plain 1F1B.
    layers_per_stage : tuple of int, optional
        Layers per pipeline stage (default: :func:`stage_layers`).
    micro_batches : int, optional
        Micro-batches per step per pipeline; fewer than ``pp`` keeps fewer in flight.
    megatron_state : bool
        FP32 gradients: 18 bytes per parameter instead of 16.
    reshard : bool
        ZeRO-3 frees gathered weights after each pass (default) instead of keeping a stage's
        weights gathered from forward to backward.
    ranks_per_chip : int
        Tensor-parallel ranks on one chip (:attr:`Chip.tp_ranks`: each logical NeuronCore of a
        Trainium is one): they must divide the heads, and the K and V heads they copy (NxD
        Training's ``kv_size_multiplier``) are held as weights, gradients and optimizer state.

    Raises
    ------
    WorkloadError
        Degrees that are not whole numbers >= 1 or do not divide the model, an unknown ZeRO
        stage or recompute mode, or a sequence that ``cp`` does not divide.
    """
    model = _spec(model)
    _check_degrees(model, ranks_per_chip=ranks_per_chip, tp=tp, pp=pp, dp=dp, ep=ep, cp=cp,
                   micro_batch=micro_batch)  # fmt: skip
    _whole("virtual_stages", virtual_stages)
    for name, value in (("flash_attention", flash_attention), ("sequence_parallel",
                        sequence_parallel), ("megatron_state", megatron_state),
                        ("reshard", reshard)):  # fmt: skip
        flag(value, name, WorkloadError)
    if micro_batches is not None:
        _whole("micro_batches", micro_batches)
    if isinstance(zero, bool) or not isinstance(zero, numbers.Integral) or zero not in (0, 1, 2, 3):
        raise WorkloadError(f"ZeRO stage must be 0, 1, 2 or 3, not {zero!r}")
    mode = recompute_mode(recompute)
    s = model.seq_len if seq_len is None else seq_len
    _whole("sequence length", s)
    if s % cp:
        raise WorkloadError(f"context parallelism {cp} does not divide the sequence of {s} tokens")
    layers = stage_layers(model, pp, layers_per_stage)
    if virtual_stages > min(layers):
        raise WorkloadError(
            f"{virtual_stages} virtual stages need at least {virtual_stages} layers on every "
            f"stage; the stages hold {min(layers)} to {max(layers)} layers"
        )
    m = micro_batches if micro_batches is not None else pp
    _whole("micro_batches", m)
    shard = dp * cp  # ZeRO shards over every replica of the weights (Megatron: dp x cp)
    grad_bytes = 4 if megatron_state else 2
    per_layer = activation_bytes_per_layer(
        model, seq_len=s, micro_batch=micro_batch, tp=tp, cp=cp, recompute=mode,
        flash_attention=flash_attention, sequence_parallel=sequence_parallel,
    )  # fmt: skip
    rerun = (
        activation_bytes_per_layer(
            model,
            seq_len=s,
            micro_batch=micro_batch,
            tp=tp,
            cp=cp,
            recompute="none",
            flash_attention=flash_attention,
            sequence_parallel=sequence_parallel,
        )
        if mode == "full"
        else 0.0
    )
    logits = 4 * (s // cp) * micro_batch * model.vocab / tp  # FP32, vocab split over tp
    best = None
    for i in range(pp):  # the heaviest stage: states and activations differ stage by stage
        dense, experts = _stage_params(model, tp, ep, layers[i], i == 0, i == pp - 1,
                                       ranks_per_chip)  # fmt: skip
        n = dense + experts
        # experts are replicated over dp x cp / ep chips, the rest over dp x cp
        sharded = dense / shard + experts / max(1, shard // ep)
        weights = 2 * (sharded if zero >= 3 else n)
        gradients = grad_bytes * (sharded if zero >= 2 else n)
        optimizer = ADAM_STATE_BYTES * (sharded if zero >= 1 else n)
        buffers = 0.0
        if zero >= 3 and shard > 1:  # one replica has nothing to gather
            per_layer_weights = 2 * n / max(layers[i], 1)
            # two layers' weights gathered at a time (prefetch), or the whole stage kept
            # gathered from forward to backward without resharding
            buffers = 2 * per_layer_weights if reshard else 2 * n - weights
        # 1F1B: stage i has pp - i micro-batches in flight (the first stage the most)
        held = min(pp - i, m) * (1 + (pp - 1) / (pp * virtual_stages) if virtual_stages > 1 else 1)
        mem = MemoryBreakdown(
            weights=weights,
            gradients=gradients,
            optimizer=optimizer,
            activations=per_layer * layers[i] * held + rerun,
            buffers=buffers,
            logits=logits if i == pp - 1 else 0.0,
        )
        if best is None or mem.total > best.total:
            best = mem
    return best


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
    ranks_per_chip: int = 1,
    kv_sharding: str = "replicate_to_tp",
) -> MemoryBreakdown:
    """Inference memory per chip: weights in ``weight_format`` plus the KV cache of ``batch``
    sequences of ``context`` tokens in ``kv_format``.

    The KV cache splits over pipeline stages and over tensor-parallel ranks only as far as
    there are KV heads: grouped-query attention cannot split one head, so with more ranks than
    ``kv_heads`` every rank holds a copy of one (NxD Inference's ``REPLICATE_TO_TP_DEGREE``,
    ndoc-nxdi-gqa). A chip holds ``ranks_per_chip`` ranks (:attr:`Chip.tp_ranks`: each
    logical NeuronCore is one, a GPU is one), so a Trainium chip at tp=16 with 8 KV heads
    keeps two copies of one head, 1 / 4 of the cache (``kv_sharding="convert_to_mha"``: a copy
    per query head, as Transformers NeuronX did); each rank also holds the K and V
    projection weights of its copy, and the Q and O (and, padded with them, K and V) projection
    weights of the query heads padded to a multiple of the ranks
    (:meth:`ModelSpec.tp_extra_params`: 40 heads on 32 ranks become 64), weights it streams
    every token like any other.
    """
    model = _spec(model)
    _check_degrees(model, pad_heads=True, ranks_per_chip=ranks_per_chip, tp=tp, pp=pp, ep=ep,
                   batch=batch, context=context)  # fmt: skip
    # each rank also holds its copies of K and V and its padded heads (streamed every token)
    ranks = tp * ranks_per_chip
    copies = model.tp_extra_params(ranks, kv_sharding) * model.layers / (tp * pp)
    weights = (params_per_chip(model, tp, pp, ep) + copies) * bytes_per_value(weight_format)
    heads_per_chip = model.kv_heads_on(ranks, kv_sharding) / tp  # copies beyond kv_heads
    kv = (
        batch * context * model.kv_bytes_per_token(bytes_per_value(kv_format))
        * heads_per_chip / (model.kv_heads * pp)
    )  # fmt: skip
    # Activations of one decode step are a few vectors per sequence: small beside weights and KV.
    activations = 2 * batch * model.hidden * 4 * 2
    return MemoryBreakdown(weights, 0.0, 0.0, activations, kv)
