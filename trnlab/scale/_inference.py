"""Serving a model: time to first token, time per output token, tokens per chip and per MW.

One replica spans ``tp`` chips (a tensor-parallel group placed like training's, innermost); a
system serves ``chips / tp`` replicas. Each forward pass of a layer runs its matmuls, two
tensor-parallel all-reduces of the batch's activations (Megatron: after attention and after
the MLP), and a fixed per-layer step cost (kernel boundaries and synchronisation, calibrated on
published decode runs, ``decode_layer_overhead`` in the catalogue; on GPUs, whose weights the
model streams at the HBM roofline, the fit also holds what their GEMV kernels lose against it).

Prefill runs the prompt's FLOPs at the GEMM's achieved rate. Decode reads every weight once
per generated token, so a token never takes less than weight bytes / streaming bandwidth (on
Trainium what the cores' DMA engines move, at most the HBM bandwidth; on GPUs the HBM
bandwidth: :func:`memory_ceiling`), and attends over the KV cache: on Trainium the
decode-attention kernel timed on the NeuronCore model (:mod:`._decode`: the cores stream their
KV heads and take a softmax as long as the compiled sequence), on GPUs the cache's bytes at the
HBM bandwidth, inside the memory bound. The per-layer collectives and step costs come on top,
whatever the batch. The KV cache is split over tensor-parallel ranks (a GPU; on Trainium
each logical NeuronCore, :attr:`Chip.tp_ranks`), and with more ranks than KV heads each head is
replicated until every rank has a copy (grouped-query attention cannot split a head; NxD
Inference's default): a Trainium chip then holds and walks one copy per rank.
"""

from __future__ import annotations

from dataclasses import dataclass

from trnlab import catalog
from trnlab.catalog import CatalogError, System

from ._decode import decode_attention_time
from ._memory import MemoryBreakdown, _whole, bytes_per_value, inference_memory
from ._memory_bound import memory_ceiling
from ._plan import USABLE_HBM, _achieved, _positive, collective_time, tiers
from ._workloads import ModelSpec, WorkloadError, model

__all__ = [
    "InferenceResult",
    "ServingPoint",
    "decode_layer_overhead",
    "inference",
    "serving_curve",
    "tokens_per_megawatt_at",
]


def decode_layer_overhead(chip_key: str) -> tuple[float, str]:
    """Seconds of fixed cost per layer per forward step on ``chip_key``, and its basis."""
    chip = catalog.chip(chip_key)
    fig = chip.figures.get("decode_layer_overhead")
    if fig is None:
        raise WorkloadError(
            f"{chip.name} has no decode_layer_overhead in the catalogue; pass "
            "layer_overhead=... (seconds per layer per step)"
        )
    basis = "assumed" if fig.extra.get("assumption") else "calibrated"
    return float(fig.value), f"{fig.value * 1e6:,.0f} us per layer ({basis})"


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
    tpot_overhead: float = 0.0
    weight_format: str = "bf16"
    tpot_attention: float = 0.0
    attention_basis: str = ""

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
    def tokens_per_second_per_user(self) -> float:
        """What one request sees: one token every ``tpot`` seconds."""
        return 1.0 / self.tpot

    @property
    def tokens_per_megawatt(self) -> float | None:
        """Output tokens per second per MW of chip power (None without a power figure)."""
        if self.watts_per_chip is None:
            return None
        return self.tokens_per_second_per_chip / (self.watts_per_chip / 1e6)

    def time_split(self) -> str:
        """Where one output token's time goes, in words: weights, attention, collectives,
        step costs (the compute bound replaces the weights when it is the larger)."""
        first = (
            f"weights {self.tpot_memory_bound * 1e3:.1f} ms"
            if self.tpot_memory_bound >= self.tpot_compute_bound
            else f"matmuls {self.tpot_compute_bound * 1e3:.1f} ms"
        )
        return (
            f"{first}, attention over the KV cache {self.tpot_attention * 1e3:.1f} ms, "
            f"all-reduces {self.tpot_comm * 1e3:.1f} ms, step costs "
            f"{self.tpot_overhead * 1e3:.1f} ms"
        )

    @property
    def bound(self) -> str:
        return "memory" if self.tpot_memory_bound >= self.tpot_compute_bound else "compute"

    def explain(self) -> str:
        return (
            f"{self.model.name} ({self.weight_format}) on {self.replicas} x tp{self.tp} of "
            f"{self.system.name}, batch {self.batch}: first token {self.ttft * 1e3:,.0f} ms, then "
            f"{self.tpot * 1e3:,.1f} ms per token ({self.bound}-bound: memory "
            f"{self.tpot_memory_bound * 1e3:,.1f} ms, compute {self.tpot_compute_bound * 1e3:,.1f} "
            f"ms; attention over the KV cache {self.tpot_attention * 1e3:,.1f} ms, "
            f"tensor-parallel all-reduces {self.tpot_comm * 1e3:,.1f} ms and per-layer step "
            f"costs {self.tpot_overhead * 1e3:,.1f} ms on top); "
            f"{self.tokens_per_second_per_user:,.0f} tokens/s per user, "
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
    layer_overhead: float | None = None,
    compiled_length: int | None = None,
    kv_sharding: str = "replicate_to_tp",
) -> InferenceResult:
    """Serve ``batch`` requests of ``prompt`` tokens generating ``output`` tokens each.

    Parameters
    ----------
    layer_overhead : float, optional
        Seconds of fixed cost per layer per forward step (default: the chip's catalogued
        ``decode_layer_overhead``).
    compiled_length : int, optional
        The sequence length the decode graph was compiled for (its token-generation bucket):
        on Trainium every step attends over all of it. Default ``prompt + output``; at least
        that.
    kv_sharding : {"replicate_to_tp", "convert_to_mha"}
        How the ranks hold KV heads they cannot split (:meth:`ModelSpec.kv_heads_on`):
        NxD Inference's default copies each head to the TP degree; ``"convert_to_mha"`` gives
        every query head its own copy, as Transformers NeuronX did up to SDK 2.18.

    Raises
    ------
    WorkloadError
        Non-positive or non-integer sizes, an unknown format, a power or HBM share out of
        range, tp that does not divide the chips or leaves the scale-up domain, or a model
        that does not fit in ``tp`` chips' HBM (with the arithmetic).
    """
    m = model(model_spec)
    sysobj = catalog.system(system) if isinstance(system, str) else system
    for name, value in (("batch", batch), ("prompt", prompt), ("output", output), ("tp", tp)):
        _whole(name, value)
    if compiled_length is None:
        compiled_length = prompt + output
    _whole("compiled_length", compiled_length)
    if compiled_length < prompt + output:
        raise WorkloadError(
            f"compiled_length = {compiled_length:,} positions cannot hold a {prompt:,}-token "
            f"prompt and {output:,} generated tokens ({prompt + output:,}): a decode graph is "
            "compiled for at least the longest sequence it serves"
        )
    if watts_per_chip is not None:
        _positive("power per chip (W)", watts_per_chip)
    if layer_overhead is not None and not (
        isinstance(layer_overhead, int | float) and 0 <= layer_overhead < 1
    ):
        raise WorkloadError(f"layer_overhead = {layer_overhead!r} s must be in [0, 1) s")
    if (
        isinstance(usable_hbm, bool)
        or not isinstance(usable_hbm, int | float)
        or not 0 < usable_hbm <= 1
    ):
        raise WorkloadError(f"usable_hbm = {usable_hbm!r}: a share of HBM is in (0, 1]")
    domain = tiers(sysobj).domain
    if sysobj.chips % tp or tp > domain:
        raise WorkloadError(
            f"tp={tp} must divide {sysobj.name}'s {sysobj.chips} chips and fit its "
            f"{domain}-chip scale-up domain"
        )
    dtype = _compute_dtype(weight_format)
    try:
        if dtype == "fp8":  # an FP8 encoding only where the chip has it
            sysobj.chip.matmul_dtype(weight_format)
        sysobj.chip.peak_flops(dtype)
    except CatalogError as err:
        raise WorkloadError(f"{sysobj.chip.name} cannot run {weight_format}: {err}") from None
    mem = inference_memory(
        m,
        batch=batch,
        context=prompt + output,
        weight_format=weight_format,
        kv_format=kv_format,
        tp=tp,
        ranks_per_chip=sysobj.chip.tp_ranks,
        kv_sharding=kv_sharding,
    )
    capacity = sysobj.chip.hbm_bytes * usable_hbm
    if mem.total > capacity:
        raise WorkloadError(
            f"{m.name} in {weight_format} with a {batch} x {prompt + output}-token KV cache needs "
            f"{mem.total / 2**30:,.1f} GiB per chip at tp={tp} (weights {mem.weights / 2**30:,.1f}, "
            f"KV {mem.kv_cache / 2**30:,.1f}); {sysobj.chip.name} has {capacity / 2**30:,.1f} GiB "
            f"usable. Raise tp, shrink the batch, or use a narrower format."
        )
    overhead = (
        decode_layer_overhead(sysobj.chip.key)[0] if layer_overhead is None else layer_overhead
    )
    act = 2 * m.hidden  # one token's activations in bf16, bytes
    context = prompt + output // 2  # average context while decoding
    # Prefill: the prompt's FLOPs at the achieved rate of its MLP GEMM, plus two all-reduces
    # and one step cost per layer.
    gemm = (batch * prompt, m.ffn // tp, m.hidden)
    flops, _ = _achieved(sysobj.chip.key, dtype, gemm)
    ranks = tp * sysobj.chip.tp_ranks  # padded heads and KV copies compute too
    prefill_flops = (
        batch
        * prompt
        * (
            m.prefill_flops_per_token(prompt)
            + sum(m.tp_extra_forward_flops(ranks, prompt, kv_sharding))
        )
    )
    prefill_comm = 2 * m.layers * collective_time("all_reduce", batch * prompt * act, sysobj, tp)
    ttft = prefill_flops / (tp * flops) + prefill_comm + m.layers * overhead
    # Decode: every weight once per token, and attention over this chip's share of the KV
    # cache: on Trainium the decode-attention kernel on the NeuronCore model, over the length
    # the graph was compiled for; elsewhere the cache's bytes at the HBM bandwidth.
    attention = decode_attention_time(
        m, sysobj.chip.key, tp, batch, compiled_length, bytes_per_value(kv_format), kv_sharding
    )
    if attention is None:
        kv_bytes = mem.kv_cache * context / (prompt + output)
        t_mem = (mem.weights + kv_bytes) / memory_ceiling(sysobj.chip)
        t_attn, attn_where = 0.0, "KV cache bytes at the HBM bandwidth (in the memory bound)"
        flops_per_token = m.decode_flops_per_token(context) + sum(
            m.tp_extra_forward_flops(ranks, context, kv_sharding)
        )
    else:  # the attention FLOPs are inside the kernel's time
        t_mem = mem.weights / memory_ceiling(sysobj.chip)
        t_attn, attn_where = m.layers * attention[0], attention[1]
        flops_per_token = (
            m.decode_flops_per_token(0) + m.tp_extra_forward_flops(ranks, 0, kv_sharding)[0]
        )
    # The FLOPs at the chip's matmul rate; the bytes they need are t_mem (the roofline is the
    # larger of the two, so the GEMM's own memory roofline is not applied twice).
    dflops, _ = _achieved(sysobj.chip.key, dtype, None)
    t_compute = batch * flops_per_token / (tp * dflops)
    t_comm = 2 * m.layers * collective_time("all_reduce", batch * act, sysobj, tp)
    t_over = m.layers * overhead
    return InferenceResult(
        model=m,
        system=sysobj,
        tp=tp,
        batch=batch,
        prompt=prompt,
        output=output,
        memory=mem,
        ttft=ttft,
        tpot=max(t_mem, t_compute) + t_attn + t_comm + t_over,
        tpot_memory_bound=t_mem,
        tpot_compute_bound=t_compute,
        tpot_comm=t_comm,
        tpot_overhead=t_over,
        tpot_attention=t_attn,
        attention_basis=attn_where,
        watts_per_chip=watts_per_chip if watts_per_chip is not None else sysobj.chip.power,
        weight_format=weight_format,
    )


@dataclass(frozen=True)
class ServingPoint:
    """One point of the latency-throughput curve."""

    batch: int
    tokens_per_second_per_user: float
    tokens_per_second_per_chip: float
    tokens_per_megawatt: float | None
    result: InferenceResult


def serving_curve(model_spec, system, *, tp: int = 1, batches=None, **options) -> list:
    """The latency-throughput curve: for each batch that fits, tokens/s per user (1 / time
    per output token) against tokens/s per chip. Batches that do not fit are left out.

    Parameters
    ----------
    batches : iterable of int, optional
        Batch sizes to try (default 1, 2, 4 ... 1024).
    **options
        As :func:`inference` (prompt, output, formats, power).
    """
    if batches is not None and (
        isinstance(batches, str) or not isinstance(batches, tuple | list | range)
    ):
        raise WorkloadError(
            f"batches is a sequence of batch sizes such as (1, 8, 64), not {batches!r}"[:200]
        )
    batches = list(batches) if batches is not None else [2**k for k in range(11)]
    if not batches:
        raise WorkloadError("serving_curve needs at least one batch size")
    if len(batches) > 256:
        raise WorkloadError(
            f"serving_curve evaluates each batch size; {len(batches):,} are too many to "
            "wait for (at most 256): give the sizes to plot, e.g. powers of two"
        )
    for b in batches:
        _whole("batch size (batches)", b)
    points = []
    for b in batches:
        try:
            r = inference(model_spec, system, tp=tp, batch=b, **options)
        except WorkloadError as err:
            if "GiB per chip" in str(err):  # this batch's KV cache does not fit: stop
                break
            raise
        points.append(
            ServingPoint(
                b,
                r.tokens_per_second_per_user,
                r.tokens_per_second_per_chip,
                r.tokens_per_megawatt,
                r,
            )
        )
    if not points:
        raise WorkloadError(
            f"not even a batch of {batches[0]} fits {model(model_spec).name} at tp={tp}; "
            "raise tp or use a narrower format"
        )
    return points


def tokens_per_megawatt_at(
    model_spec, system, per_user: float, *, tp: int = 1, **options
) -> ServingPoint:
    """The busiest batch that still gives each user ``per_user`` tokens/s, and its tokens per
    second per MW: vendor claims of tokens per megawatt compare systems at equal latency per
    user, not at each system's best throughput.

    Raises
    ------
    WorkloadError
        A non-positive target, no power figure, or no batch fast enough.
    """
    _positive("tokens per second per user", per_user)
    curve = serving_curve(model_spec, system, tp=tp, **options)
    fast = [p for p in curve if p.tokens_per_second_per_user >= per_user]
    if not fast:
        best = max(p.tokens_per_second_per_user for p in curve)
        raise WorkloadError(
            f"no batch reaches {per_user:,.0f} tokens/s per user at tp={tp}; the fastest gives "
            f"{best:,.1f}. Ask for less, or raise tp"
        )
    point = max(fast, key=lambda p: p.tokens_per_second_per_chip)
    if point.tokens_per_megawatt is None:
        raise WorkloadError(
            f"{point.result.system.chip.name} has no power figure: pass watts_per_chip=..."
        )
    return point


def _compute_dtype(weight_format: str) -> str:
    from trnlab import formats

    try:
        bytes_per_value(weight_format)
        return formats.catalog_dtype(weight_format)
    except (KeyError, ValueError) as err:
        raise WorkloadError(f"unknown weight format {weight_format!r}: {err}") from None
