"""One training plan on one system: memory per chip, step time, MFU and HFU, cost, energy.

Placement follows the frameworks (Megatron-LM, NeuronX Distributed): ranks are ordered tensor
parallel innermost, then context, then pipeline, then data parallel outermost (expert
parallelism takes the innermost part of the data-parallel ranks); each group's collectives run
on the part of the fabric it occupies, :func:`trnlab.fabric.group`, timed by
:func:`trnlab.fabric.collective` (one topology model: the fabric's). Matmuls run at the rate
the chip achieves (:func:`achieved_flops_per_chip`), each GEMM of the layer at its own shape
(on GPUs the rate measured at that shape where the catalogue has a table, else wave
quantization; the memory roofline everywhere; unfused attention-score GEMMs at theirs);
FlashAttention at the chip's published fused-attention rate where it has one
(:mod:`trnlab.scale._gpu_kernels`); the layer's other kernels and the optimizer step move
their bytes at the HBM bandwidth (:mod:`trnlab.scale._memory_bound`).

Step time (per pipeline of m micro-batches, p stages, v virtual stages per stage):
  each micro-batch on stage i costs t_i = matmuls + memory-bound kernels + tensor-, context-
  and expert-parallel collectives + pipeline sends; the interleaved 1F1B schedule takes m max_i t_i +
  (sum_i t_i - max_i t_i) / v (Narayanan et al., SC'21: the bubble (p-1)/v micro-batch slots
  when stages are even); then the data-parallel reduction that the backward of the last
  micro-batch cannot hide, bucket by bucket; with ZeRO-3 the weight gathers of every
  micro-batch's forward, backward and recomputation that compute does not hide; and the
  optimizer step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from trnlab import catalog, fabric
from trnlab._checks import flag, number, short
from trnlab.catalog import CatalogError, System
from trnlab.fabric import FabricError
from trnlab.fabric._collective import _op as collective_name

from ._gpu_kernels import FA_BACKWARD_FLOPS, _fa_rates, _quantization, measured_gemm_share
from ._memory import (
    MemoryBreakdown,
    _check_degrees,
    _whole,
    recompute_mode,
    stage_layers,
    training_memory,
)
from ._memory_bound import (
    layer_traffic,
    loss_bytes_per_token,
    memory_ceiling,
    optimizer_bytes_per_param,
    stream_bandwidth,
)
from ._workloads import ModelSpec, WorkloadError, model

__all__ = [
    "MFU_CONVENTION",
    "Parallelism",
    "PlanResult",
    "Tiers",
    "achieved_flops_per_chip",
    "collective_time",
    "plan",
    "tiers",
]

#: Format names the NeuronCore model runs for each catalogue data type.
_KERNEL_FORMAT = {
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8_e4m3",
    "mxfp8": "mxfp8_e4m3",
    "mxfp4": "mxfp4",
    "fp32": "fp32",
}

#: Matmul efficiency assumed on chips the NeuronCore model does not cover (GPUs).
#: **Assumption**, replaced by a sourced, size-aware figure where the catalogue has one.
GPU_MATMUL_EFFICIENCY = 0.7

#: Shape of the representative GEMM the NeuronCore model runs to measure efficiency.
_GEMM = 2048

#: Share of HBM a training job can use. **Assumption:** the runtime, collective buffers and
#: allocator fragmentation hold back about 5%; no public source gives Neuron's figure.
USABLE_HBM = 0.95

#: Gradient bucket of the data-parallel reduction: PyTorch DDP's default ``bucket_cap_mb``
#: of 25 MB (PyTorch DistributedDataParallel documentation).
DDP_BUCKET_BYTES = 25 * 2**20

MFU_CONVENTION = (
    "MFU = model FLOPs per step / (step time x chips x the chip's dense peak in the matmul "
    "format); model FLOPs = 6N + 12·L·H·Q·T per token (PaLM, Chowdhery et al. 2022, App. B), "
    "N the active parameters a token multiplies (embedding lookups are not matmuls). HFU adds "
    "the FLOPs recomputation reruns, and those of the K and V heads copied and the query heads "
    "padded when the tensor-parallel ranks do not divide them."
)


@dataclass(frozen=True)
class Parallelism:
    """How a job is split, and how it is run.

    ``chips = tp * cp * pp * dp``; ranks are ordered tp (innermost), cp, pp, dp (outermost);
    expert parallelism splits the experts over ``ep`` of the data-parallel ranks (ep divides
    dp), as Megatron-style MoE training does.

    Attributes
    ----------
    tp, pp, dp, ep, cp : int
        Tensor, pipeline, data, expert and context parallel degrees.
    zero : {0, 1, 2, 3}
        ZeRO stage over the data-parallel replicas.
    recompute : {"none", "selective", "full"}
        Activation recomputation (True is read as "full", False as "none").
    micro_batch : int
        Sequences per micro-batch.
    virtual_stages : int
        Model chunks per pipeline stage: 1 is plain 1F1B, more is the interleaved schedule.
    layers_per_stage : tuple of int, optional
        Uneven pipeline stages (default: even, or the first and last stages one layer short).
    flash_attention : bool
        Attention without stored scores (default True).
    sequence_parallel : bool
        Megatron sequence parallelism with tp > 1 (default True): reduce-scatter and
        all-gather instead of all-reduce, activations split over tp.
    reshard : bool
        ZeRO-3 frees the gathered weights after the forward pass and gathers them again for
        the backward (default True); False keeps them, at the memory cost.
    megatron_state : bool
        FP32 gradients: 18 bytes per parameter (Megatron-LM) instead of 16; the gradients are
        also reduced in FP32 (Megatron-LM does so for BF16 runs).
    dropout : bool
        Dropout on the attention and MLP outputs (and on materialised attention
        probabilities), as Megatron-LM's GPT runs train; it adds mask traffic to the
        memory-bound kernels (default False, as Llama-style runs train).
    overlap_param_gather : bool
        ZeRO-1/2: the all-gather of the updated BF16 weights after the optimizer step hides
        under the next step's first forward (Megatron-LM's ``--overlap-param-gather``);
        default False: exposed.
    fused_loss : bool
        The cross-entropy over the vocabulary as one fused kernel (default True: its
        roofline, 12 bytes per logit). False: Megatron-LM's eager loss, a PyTorch kernel per
        step (52 bytes per logit), as Megatron-LM runs without
        ``--cross-entropy-loss-fusion``.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    cp: int = 1
    zero: int = 1
    recompute: str = "none"
    micro_batch: int = 1
    virtual_stages: int = 1
    layers_per_stage: tuple[int, ...] | None = None
    flash_attention: bool = True
    sequence_parallel: bool = True
    reshard: bool = True
    megatron_state: bool = False
    dropout: bool = False
    overlap_param_gather: bool = False
    fused_loss: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "recompute", recompute_mode(self.recompute))
        for name in ("tp", "pp", "dp", "ep", "cp", "micro_batch", "virtual_stages"):
            _whole(name, getattr(self, name))
        if (
            isinstance(self.zero, bool)
            or not isinstance(self.zero, int)
            or self.zero not in (0, 1, 2, 3)
        ):
            raise WorkloadError(f"ZeRO stage must be 0, 1, 2 or 3, not {self.zero!r}")
        for name in (
            "flash_attention",
            "sequence_parallel",
            "reshard",
            "megatron_state",
            "dropout",
            "overlap_param_gather",
            "fused_loss",
        ):
            flag(getattr(self, name), name, WorkloadError)
        if self.layers_per_stage is not None:
            lps = self.layers_per_stage
            if isinstance(lps, str) or not isinstance(lps, tuple | list) or len(lps) != self.pp:
                raise WorkloadError(
                    f"layers_per_stage gives the layers of each of the {self.pp} pipeline stages "
                    f"(a tuple of {self.pp} whole numbers), not {lps!r}"
                )
            for n in lps:
                _whole("layers_per_stage entry", n)
            object.__setattr__(self, "layers_per_stage", tuple(lps))

    @property
    def chips(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    def strides(self) -> dict[str, int]:
        """Rank distance between neighbours of each group (tp innermost, dp outermost)."""
        return {
            "tp": 1,
            "cp": self.tp,
            "pp": self.tp * self.cp,
            "dp": self.tp * self.cp * self.pp,
            "ep": self.tp * self.cp * self.pp,
        }

    def __str__(self) -> str:
        rc = f", recompute {self.recompute}" if self.recompute != "none" else ""
        ep = f" ep{self.ep}" if self.ep > 1 else ""
        cp = f" cp{self.cp}" if self.cp > 1 else ""
        v = f" v{self.virtual_stages}" if self.virtual_stages > 1 else ""
        return (
            f"tp{self.tp}{cp} pp{self.pp}{v} dp{self.dp}{ep} zero{self.zero} "
            f"mb{self.micro_batch}{rc}"
        )


@dataclass(frozen=True)
class Tiers:
    """The tiers a system's groups talk over, per chip and direction (for tables).

    ``domain`` chips share the scale-up fabric (NeuronLink, NeuronSwitch or NVSwitch);
    ``scale_up`` is its per-chip bandwidth each way as large collectives achieve it (the sum
    over a torus chip's links); ``efa`` the per-chip scale-out bandwidth each way (0 without).
    """

    domain: int
    scale_up: float
    efa: float
    fabric: str


def tiers(system: str | System) -> Tiers:
    """The scale-up domain and the per-chip bandwidths of a system (from trnlab.fabric)."""
    sysobj = catalog.system(system) if isinstance(system, str) else system
    topo = fabric.topology(sysobj)
    inner = topo.part if topo.kind == "cluster" else topo
    if inner.kind == "torus":
        pairs = zip(inner.shape, inner.axis_bandwidth, strict=True)
        up = sum(b * (2 if d > 2 else 1) for d, b in pairs)
    elif inner.kind == "switch":
        up = inner.axis_bandwidth[0]
    else:
        up = 0.0
    return Tiers(inner.chips, float(up), float(topo.efa_bandwidth), inner.name)


_TIMES: dict = {}


def collective_time(op: str, nbytes: float, system: System, size: int, stride: int = 1) -> float:
    """Seconds for ``op`` on ``nbytes`` over the group of ``size`` chips ``stride`` ranks apart
    in ``system`` (the fabric's auto algorithm on :func:`trnlab.fabric.group`). Cached.

    Raises
    ------
    WorkloadError
        When the group does not fit the system's layout (the fabric's reason), or for an
        unknown collective, a size that is not a number of bytes >= 0, a group size or stride
        that is not a whole number >= 1, a system that is not a System.
    """
    if not isinstance(system, System):
        raise WorkloadError(
            f"system must be a catalogue System (catalog.system('trn2.48xlarge')), not "
            f"{short(system)}"
        )
    nbytes = number(nbytes, "nbytes", 0, None, error=WorkloadError)
    _whole("group size", size)
    _whole("stride", stride)
    try:
        op = collective_name(op)  # the collective's canonical name ("AllReduce" -> all_reduce)
    except FabricError as err:
        raise WorkloadError(str(err)) from None
    if size <= 1 or nbytes <= 0:
        return 0.0
    key = (system.key, system.chips, op, int(nbytes), size, stride)
    if key not in _TIMES:
        if len(_TIMES) > 200_000:
            _TIMES.clear()
        try:
            topo = fabric.group(system, size, stride)
            _TIMES[key] = float(fabric.collective(op, int(nbytes), topo, "auto").time)
        except FabricError as err:
            raise WorkloadError(str(err)) from None
    return _TIMES[key]


def _reduction(op: str, nbytes: float, system: System, groups) -> float:
    """A reduction over several nested groups [(size, stride), ...] (innermost first):
    reduce-scatter inside, the outer ones on the shrunk data, all-gather back (the
    hierarchical algorithm of the Neuron runtime docs)."""
    groups = [(n, s) for n, s in groups if n > 1]
    if not groups:
        return 0.0
    if len(groups) == 1:
        return collective_time(op, nbytes, system, *groups[0])
    (n, s), rest = groups[0], groups[1:]
    inner = collective_time("reduce_scatter" if op != "all_gather" else "all_gather",
                            nbytes, system, n, s)  # fmt: skip
    outer = _reduction(op, nbytes / n, system, rest)
    back = collective_time("all_gather", nbytes, system, n, s) if op == "all_reduce" else 0.0
    return inner + outer + back


def _roofline(chip, shape: tuple[int, int, int]) -> tuple[float, str]:
    """FLOP/s a GEMM of ``shape = (M, N, K)`` can reach from HBM: its arithmetic intensity,
    2MNK / ((MK + KN + MN) x 2 bytes) FLOP per byte with BF16 operands read and the result
    written once, times the most the chip's compute can draw from HBM (:func:`memory_ceiling`:
    on Trainium its cores' DMA engines; Williams et al., "Roofline", CACM 2009)."""
    M, N, K = (max(1, int(x)) for x in shape)
    intensity = 2 * M * N * K / (2 * (M * K + K * N + M * N))
    return intensity * memory_ceiling(chip), f"roofline of a {M}x{N}x{K} GEMM"


def achieved_flops_per_chip(
    chip_key: str, dtype: str, shape: tuple[int, int, int] | None = None
) -> tuple[float, str]:
    """Dense matmul FLOP/s one chip sustains, and where the figure comes from.

    Neuron chips: the NeuronCore model's ``blocked_mnk`` kernel on a 2048^3 GEMM (timing
    only, with a compiled graph's DMA descriptors: :meth:`CoreParams.compiled_graph`), times
    the chip's cores. GPUs: the datasheet peak times the chip's measured
    ``matmul_efficiency`` (a sourced figure: the Maximum Achievable Matmul FLOPS of a shape
    search, or the largest shape a measured table holds). With ``shape = (M, N, K)`` a GPU
    GEMM runs at the rate measured at that shape where the catalogue has the GPU's table
    (``gemm_rates``: H100, B200 and their siblings, :mod:`trnlab.scale._gpu_kernels`), else
    keeps the share of the large-GEMM rate its output
    tiles' waves fill over the SMs (:func:`trnlab.scale.gemm_wave_efficiency`), and on
    either kind of chip the GEMM is held to its memory roofline (:func:`_roofline`), so
    small or thin GEMMs (decode, the batched attention-score GEMMs of unfused attention)
    come out slower than the large-shape rate.
    """
    if shape is not None:
        if not isinstance(shape, tuple) or len(shape) != 3:
            raise WorkloadError(
                f"shape is a GEMM's (M, N, K), three whole numbers, not {short(shape)}"
            )
        for x in shape:
            _whole("GEMM shape (M, N, K)", x)
        shape = tuple(int(x) for x in shape)
    try:
        chip = catalog.chip(chip_key)
        dtype = catalog.dtype_name(dtype)
    except CatalogError as err:
        raise WorkloadError(str(err)) from None
    return _achieved(chip.key, dtype, shape)


@lru_cache(maxsize=4096)
def _achieved(chip_key: str, dtype: str, shape: tuple[int, int, int] | None) -> tuple[float, str]:
    rate, where = _large_gemm_rate(chip_key, dtype)
    if shape is not None:
        chip = catalog.chip(chip_key)
        measured = measured_gemm_share(chip.key, shape) if dtype in ("bf16", "fp16") else None
        if measured is not None:
            # The GPU's GEMM rate measured at this shape (the kernel alone, no launch gaps).
            rate, where = measured[0] * chip.peak_flops(dtype), measured[1]
        else:
            # Wave and tile quantization of the GEMM's output tiles over the GPU's SMs.
            q = _quantization(chip.key, shape)
            if q is not None and q < 1.0:
                rate *= q
                where = f"{where}, {q:.1%} after wave quantization of {shape[0]}x{shape[1]}"
        roof, what = _roofline(chip, shape)
        if roof < rate:
            rate, where = roof, f"{where}, held to the {what}"
    return rate, where


@lru_cache(maxsize=64)
def _large_gemm_rate(chip_key: str, dtype: str) -> tuple[float, str]:
    """The large-GEMM rate of one chip and format, before any shape's quantization or
    roofline: one kernel simulation per (chip, format), shared by every shape a search
    evaluates."""
    chip = catalog.chip(chip_key)
    peak = chip.peak_flops(dtype)
    if chip.core is None or dtype not in _KERNEL_FORMAT:
        # A plain GEMM on the software stack of the chip's published runs when the catalogue
        # has it, else the shape-searched ceiling (MAMF), else an assumption.
        stack = chip.figures.get("stack_matmul_efficiency")
        fig = stack or chip.figures.get("matmul_efficiency")
        eff = float(fig.value) if fig is not None else GPU_MATMUL_EFFICIENCY
        mamf = stack is None and fig is not None and fig.sources[0].key == "ml-engineering-mamf"
        what = "measured MAMF" if mamf else "measured GEMM"
        where = (
            f"{eff:.1%} of peak ({what}, {fig.sources[0].key})"
            if fig is not None and not fig.extra.get("assumption")
            else f"assumed {eff:.1%} of peak"
        )
        rate = peak * eff
    else:
        from trnlab import core, kernels  # the core simulator compiles on first use

        gemm = (_GEMM, _GEMM)
        run = kernels.matmul(
            gemm,
            gemm,
            variant="blocked_mnk",
            chip=core.core_params(chip_key).compiled_graph(),
            dtype=_KERNEL_FORMAT[dtype],
            numerics=False,
        )
        rate = run.achieved_flops * chip.cores
        where = f"NeuronCore model, blocked_mnk {_GEMM}^3 ({run.utilisation:.0%} of core peak)"
    return rate, where


@dataclass(frozen=True)
class PlanResult:
    """A plan evaluated: fit, time, efficiency, cost and energy (or why it is impossible)."""

    model: ModelSpec
    system: System
    parallel: Parallelism
    dtype: str
    global_batch: int
    seq_len: int
    memory: MemoryBreakdown
    capacity: float
    step: dict[str, float] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    flops_source: str = ""
    price_per_chip_hour: float | None = None
    watts_per_chip: float | None = None
    tokens: float = 0.0
    stages: tuple[int, ...] = ()

    @property
    def feasible(self) -> bool:
        return not self.problems

    @property
    def step_time(self) -> float:
        return sum(self.step.values())

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

    @property
    def tokens_per_second(self) -> float:
        return self.tokens_per_step / self.step_time if self.step_time else 0.0

    @property
    def micro_batches(self) -> int:
        """Micro-batches each pipeline runs per step."""
        return self.global_batch // (self.parallel.dp * self.parallel.micro_batch)

    @property
    def model_flops_per_step(self) -> float:
        """6N + attention per token, no recomputation (see :data:`MFU_CONVENTION`)."""
        return self.tokens_per_step * self.model.model_flops_per_token(seq_len=self.seq_len)

    @property
    def hardware_flops_per_step(self) -> float:
        """What the chips compute: recomputation included, and the K and V heads copied and
        the query heads padded when tensor-parallel ranks do not divide them."""
        m, p = self.model, self.parallel
        ranks = p.tp * self.system.chip.tp_ranks
        return self.tokens_per_step * (
            m.training_flops_per_token(p.recompute, self.seq_len)
            + _tp_extra_flops(m, ranks, p.recompute, self.seq_len)
        )

    def _peak(self) -> float:
        return self.system.chips * self.system.chip.peak_flops(self.dtype)

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation against the dense peak of the matmul format."""
        return (
            self.model_flops_per_step / (self.step_time * self._peak()) if self.step_time else 0.0
        )

    @property
    def hfu(self) -> float:
        """Hardware FLOPs utilisation: recomputed FLOPs and those of copied or padded heads
        counted too."""
        if not self.step_time:
            return 0.0
        return self.hardware_flops_per_step / (self.step_time * self._peak())

    @property
    def convention(self) -> str:
        return MFU_CONVENTION

    @property
    def time_to_train(self) -> float:
        """Seconds to process the token budget."""
        return self.tokens / self.tokens_per_second if self.tokens_per_second else float("inf")

    @property
    def cost(self) -> float | None:
        """USD for the token budget, or None without a price."""
        if self.price_per_chip_hour is None:
            return None
        return self.time_to_train / 3600 * self.system.chips * self.price_per_chip_hour

    @property
    def energy(self) -> float | None:
        """Joules for the token budget (chips only), or None without a power figure."""
        if self.watts_per_chip is None:
            return None
        return self.time_to_train * self.system.chips * self.watts_per_chip

    def explain(self) -> str:
        """What limits the plan, in a sentence or two of numbers."""
        gib = 2**30
        m = self.memory
        mem = (
            f"{m.total / gib:,.1f} GiB per chip of {self.capacity / gib:,.0f} GiB "
            f"(weights {m.weights / gib:,.1f}, gradients {m.gradients / gib:,.1f}, "
            f"optimizer {m.optimizer / gib:,.1f}, activations {m.activations / gib:,.1f}"
            + (f", gathered weights {m.buffers / gib:,.1f}" if m.buffers else "")
            + (f", logits {m.logits / gib:,.1f}" if m.logits else "")
            + ")"
        )
        if not self.feasible:
            return (
                f"{self.parallel}: not possible: " + "; ".join(self.problems) + f". Memory: {mem}."
            )
        parts = ", ".join(f"{k} {v * 1e3:,.1f} ms" for k, v in self.step.items() if v > 0)
        return (
            f"{self.parallel}: step {self.step_time:.3f} s ({parts}); MFU {self.mfu:.1%} "
            f"(HFU {self.hfu:.1%}); {self.tokens_per_second:,.0f} tokens/s; memory {mem}."
        )


def _system_of(system) -> System:
    """A catalogue System from a name or a System; anything else is a teaching error."""
    if isinstance(system, System):
        return system
    if not isinstance(system, str):
        raise WorkloadError(
            f"system must be a catalogue system's name ('trn2-ultraserver'), a System or "
            f"catalog.cluster(...), not {short(system)}"
        )
    try:
        return catalog.system(system)
    except CatalogError as err:
        raise WorkloadError(str(err)) from None


def _price(system: System, override: float | None) -> float | None:
    if override is not None:
        return override
    if system.price_per_hour is not None:
        return system.price_per_hour / system.chips
    return system.chip.price_per_chip_hour


def _positive(name: str, value, whole: bool = False) -> None:
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and value > 0
    )
    if ok and whole and value != int(value):
        ok = False
    if not ok:
        kind = "a whole number >= 1" if whole else "a positive, finite number"
        raise WorkloadError(f"{name} must be {kind}, not {value!r}")


def _check_options(global_batch, seq_len, tokens, price, watts, usable_hbm) -> None:
    _positive("global batch", global_batch, whole=True)
    _positive("sequence length", seq_len, whole=True)
    _positive("token budget", tokens)
    if price is not None:
        _positive("price per chip-hour (USD)", price)
    if watts is not None:
        _positive("power per chip (W)", watts)
    if (
        isinstance(usable_hbm, bool)
        or not isinstance(usable_hbm, int | float)
        or not 0 < usable_hbm <= 1
    ):
        raise WorkloadError(
            f"usable_hbm = {usable_hbm!r}: the share of HBM a job may use is in (0, 1] "
            f"(default {USABLE_HBM})"
        )


def plan(
    model_spec: str | ModelSpec,
    system: str | System,
    parallel: Parallelism | None = None,
    *,
    global_batch: int = 1024,
    seq_len: int | None = None,
    dtype: str = "bf16",
    tokens: float = 1e12,
    overlap_dp: bool = True,
    price_per_chip_hour: float | None = None,
    watts_per_chip: float | None = None,
    usable_hbm: float = USABLE_HBM,
) -> PlanResult:
    """Evaluate one training plan.

    Parameters
    ----------
    model_spec : str or ModelSpec
        A preset name (``"llama3-70b"``) or a :class:`ModelSpec`.
    system : str or System
        A catalogue system or ``catalog.cluster(...)``; the plan uses all its chips.
    parallel : Parallelism
        The split (default: pure data parallelism over every chip, ZeRO-1).
    global_batch : int
        Sequences per optimiser step.
    seq_len : int, optional
        Tokens per sequence (default: the model's).
    dtype : str
        Matmul data type (``"bf16"``, ``"fp8"``, ``"mxfp8"``); weights, gradients and
        optimiser state follow mixed-precision Adam whatever it is.
    tokens : float
        Training token budget, for time, cost and energy.
    overlap_dp : bool
        The data-parallel gradient reduction overlaps the backward pass of the last
        micro-batch, bucket by bucket (False: fully exposed).
    price_per_chip_hour, watts_per_chip : float, optional
        Override the catalogue's price (system price / chips, else a market estimate) and
        power per chip.
    usable_hbm : float
        Share of each chip's HBM the job may use, in (0, 1] (default :data:`USABLE_HBM`,
        an assumption).

    Returns
    -------
    PlanResult
        With ``problems`` listing why the plan cannot run (memory, placement, divisibility);
        times are computed only for feasible plans.

    Raises
    ------
    WorkloadError
        Sizes, prices or shares out of range, or an unknown data type.
    """
    m = model(model_spec)
    sysobj = _system_of(system)
    chips = sysobj.chips
    flag(overlap_dp, "overlap_dp", WorkloadError)
    p = parallel or Parallelism(dp=chips)
    if not isinstance(p, Parallelism):
        raise WorkloadError(f"parallel must be a Parallelism, not {type(p).__name__}")
    s = m.seq_len if seq_len is None else seq_len
    _check_options(global_batch, s, tokens, price_per_chip_hour, watts_per_chip, usable_hbm)
    try:
        dt = sysobj.chip.matmul_dtype(dtype)  # an FP8 encoding only where the chip has it
        sysobj.chip.peak_flops(dt)
    except CatalogError as err:
        raise WorkloadError(f"{sysobj.chip.name} cannot run {dtype!r} matmuls: {err}") from None
    problems: list[str] = []
    if p.chips != chips:
        problems.append(
            f"tp x cp x pp x dp = {p.tp} x {p.cp} x {p.pp} x {p.dp} = {p.chips} chips, but "
            f"{sysobj} has {chips}"
        )
    if p.ep > 1 and p.dp % p.ep:
        problems.append(f"expert parallelism {p.ep} must divide data parallelism {p.dp}")
    domain = tiers(sysobj).domain
    if p.tp > domain:
        problems.append(
            f"tensor parallel group of {p.tp} chips does not fit the {domain}-chip NeuronLink "
            f"domain of {sysobj}"
        )
    per_replica = p.micro_batch * p.dp
    if global_batch % per_replica:
        problems.append(
            f"global batch {global_batch} is not a multiple of micro-batch x dp = {per_replica}"
        )
    micro_batches = max(1, global_batch // per_replica)
    stages: tuple[int, ...] = ()
    try:
        _check_degrees(m, tp=p.tp, ep=p.ep, ranks_per_chip=sysobj.chip.tp_ranks)
        stages = stage_layers(m, p.pp, p.layers_per_stage)
        mem = training_memory(
            m,
            tp=p.tp,
            ranks_per_chip=sysobj.chip.tp_ranks,
            pp=p.pp,
            dp=p.dp,
            ep=p.ep,
            cp=p.cp,
            zero=p.zero,
            micro_batch=p.micro_batch,
            seq_len=s,
            recompute=p.recompute,
            flash_attention=p.flash_attention,
            sequence_parallel=p.sequence_parallel,
            virtual_stages=p.virtual_stages,
            layers_per_stage=stages,
            micro_batches=micro_batches,
            megatron_state=p.megatron_state,
            reshard=p.reshard,
        )
    except WorkloadError as err:
        problems.append(str(err))
        mem = MemoryBreakdown(0, 0, 0, 0)
    try:
        capacity = float(sysobj.chip.hbm_bytes) * usable_hbm
    except CatalogError as err:
        raise WorkloadError(str(err)) from None
    if mem.total > capacity:
        problems.append(
            f"needs {mem.total / 2**30:,.1f} GiB per chip, {sysobj.chip.name} has "
            f"{capacity / 2**30:,.1f} GiB usable ({usable_hbm:.0%} of "
            f"{sysobj.chip.hbm_bytes / 2**30:,.0f} GiB)"
        )
    common = dict(
        model=m,
        system=sysobj,
        parallel=p,
        dtype=dt,
        global_batch=global_batch,
        seq_len=s,
        memory=mem,
        capacity=capacity,
        price_per_chip_hour=_price(sysobj, price_per_chip_hour),
        watts_per_chip=watts_per_chip if watts_per_chip is not None else sysobj.chip.power,
        tokens=tokens,
        stages=stages,
    )
    if problems:
        return PlanResult(**common, problems=tuple(problems))
    try:
        step, source = _step_time(m, sysobj, p, dt, s, micro_batches, stages, overlap_dp)
    except WorkloadError as err:  # a group that does not fit the system's layout
        return PlanResult(**common, problems=(str(err),))
    return PlanResult(**common, step=step, flops_source=source)


def _step_time(m: ModelSpec, sysobj: System, p: Parallelism, dtype: str, s: int, mbs: int,
               stages: tuple[int, ...], overlap_dp: bool):  # fmt: skip
    st = p.strides()
    b, h = p.micro_batch, m.hidden
    chip_key = sysobj.chip.key
    rows = max(1, b * s // p.cp)  # tokens of one micro-batch on one chip of the cp slice
    # Every GEMM of the layer at its own shape (a GPU's measured table or wave quantization,
    # the roofline on any chip): forward, and backward (input and weight gradients).
    # Tensor-parallel ranks: every logical NeuronCore of a Trainium chip is one (TP=32 on a
    # trn1.32xlarge), a GPU is one. With more ranks than KV heads the K and V projections are
    # copied until each rank has a head (NxD Training's kv_size_multiplier), and query heads
    # that the ranks do not divide are padded: computed, not free.
    ranks = p.tp * sysobj.chip.tp_ranks
    q_run, kv_run = m.q_heads_on(ranks), m.kv_heads_on(ranks)
    fwd_rate, bwd_rate, source = _layer_rates(m, p, chip_key, dtype, rows, q_run, kv_run)
    head_fwd_rate, head_bwd_rate = _passes(chip_key, dtype, rows, math.ceil(m.vocab / p.tp), h)
    tokens = b * s  # per micro-batch per pipeline
    # Forward FLOPs per token of one layer: its matmuls (attention projections, the top_k
    # experts a token visits, the router) and the attention scores (PaLM's accounting).
    layer_params = m.attention_params + m.top_k * m.expert_params
    layer_params += m.hidden * m.experts if m.is_moe else 0
    layer_params += m.tp_extra_params(ranks)  # K and V copies, padded query heads
    attn = 4 * q_run * m.head_dim * s
    linear = 2 * layer_params
    head_fwd = 2 * m.vocab * h  # the output projection, on the last stage
    split = p.tp * p.cp
    rerun = p.recompute != "none"
    # The attention core. FlashAttention on a chip with a published fused-attention rate: the
    # kernel skips the causal mask's half of the blocks, its backward does 2.5x the forward's
    # FLOPs (trnlab.scale._gpu_kernels). Otherwise its GEMMs run at the layer's rate; unfused
    # (no FlashAttention) they write and read the scores through HBM and run at the roofline
    # of the s/cp queries x s keys x head_dim GEMM.
    fa = _fa_rates(chip_key, dtype, s, m.head_dim) if p.flash_attention else None
    if fa is not None:
        work = attn / 2
        attn_fwd = work / fa[0]
        attn_s = attn_fwd + FA_BACKWARD_FLOPS * work / fa[1] + (attn_fwd if rerun else 0.0)
    else:
        attn_rate = fwd_rate
        if not p.flash_attention:
            scores = (b * s // p.cp, s, m.head_dim)
            attn_rate = achieved_flops_per_chip(chip_key, dtype, scores)[0]
        attn_fwd = attn / attn_rate
        attn_s = (3 * attn + (attn if rerun else 0.0)) / attn_rate
    # Seconds per token of one layer's matmuls on one chip, forward + backward (2x forward)
    # + what recomputation reruns.
    linear_fwd = linear / fwd_rate
    layer_s = linear_fwd + 2 * linear / bwd_rate + (linear_fwd if p.recompute == "full" else 0.0)
    layer_s = (layer_s + attn_s) / split
    layer_fwd_s = (linear_fwd + attn_fwd) / split
    head_s = 1 / head_fwd_rate + 2 / head_bwd_rate  # seconds per FLOP of forward, fwd + bwd
    # Memory-bound kernels (norms, activation, dropout, residuals, softmax over stored
    # scores, the loss) at the HBM bandwidth, per token on one chip of the cp slice.
    hbm = stream_bandwidth(sysobj.chip)
    traffic = layer_traffic(m, tp=p.tp, seq_len=s, recompute=p.recompute,
                            flash_attention=p.flash_attention,
                            sequence_parallel=p.sequence_parallel, dropout=p.dropout)  # fmt: skip
    chip_tokens = b * s / p.cp  # tokens one chip of a stage handles per micro-batch
    layer_mem = chip_tokens * traffic.total / hbm
    loss_mem = chip_tokens * loss_bytes_per_token(m, p.tp, fused=p.fused_loss) / hbm
    # Activations of one micro-batch on one context-parallel slice, in bf16 bytes.
    act = b * (s // p.cp) * h * 2
    tp_ops = _tp_collectives(act, sysobj, p)
    kv = b * s * kv_run * m.head_dim * 2 * 2 / p.tp  # K and V (copies too), bf16, over cp
    cp_passes = 2 if p.recompute == "full" else 1
    cp_layer = cp_passes * collective_time("all_gather", kv, sysobj, p.cp, st["cp"])
    cp_layer += collective_time("reduce_scatter", kv, sysobj, p.cp, st["cp"])
    a2a = 6 if p.recompute == "full" else 4  # dispatch + combine, forward and backward
    ep_layer = 0.0
    if m.is_moe and p.ep > 1:
        payload = act * m.top_k / (p.tp if p.sequence_parallel else 1)
        ep_layer = a2a * collective_time("all_to_all", payload, sysobj, p.ep, st["ep"])
    send = act / (p.tp if p.sequence_parallel else 1)
    pp_send = 2 * collective_time("broadcast", send, sysobj, 2, st["pp"]) if p.pp > 1 else 0.0
    per_stage = []
    for i, n_layers in enumerate(stages):
        last = i == p.pp - 1
        head = tokens * (head_fwd if last else 0) / split
        matmul = tokens * n_layers * layer_s + head * head_s
        memory = n_layers * layer_mem + (loss_mem if last else 0.0)
        comm = {
            "tensor parallel": n_layers * tp_ops,
            "context parallel": n_layers * cp_layer,
            "expert all-to-all": n_layers * ep_layer,
            "pipeline sends": pp_send,
        }
        forward = tokens * n_layers * layer_fwd_s + head / head_fwd_rate
        forward += chip_tokens * n_layers * traffic.forward / hbm
        per_stage.append((matmul, memory, comm, forward))
    totals = [c + mem + sum(x.values()) for c, mem, x, _ in per_stage]
    k = max(range(len(totals)), key=totals.__getitem__)
    heavy_matmul, heavy_memory, heavy_comm, heavy_fwd = per_stage[k]
    heavy_compute = heavy_matmul + heavy_memory
    # Interleaved 1F1B: m micro-batches at the slowest stage's pace, plus the fill and drain
    # through the other stages, in chunks of 1/v (Narayanan et al. 2021).
    pipeline = mbs * totals[k] + (sum(totals) - totals[k]) / p.virtual_stages
    step = {"compute": mbs * heavy_matmul, "memory-bound kernels": mbs * heavy_memory}
    for key, value in heavy_comm.items():
        step[key] = mbs * value
    step["pipeline bubble"] = pipeline - mbs * totals[k]
    # Data parallelism: gradients of the heaviest stage's parameters over the replicas.
    dense, experts = _stage_param_split(m, p, stages[k], k == 0, k == p.pp - 1,
                                        sysobj.chip.tp_ranks)  # fmt: skip
    grad_bytes = 4 if p.megatron_state else 2
    dp_groups = [(p.cp, st["cp"]), (p.dp, st["dp"])]
    ep_groups = [(p.cp, st["cp"]), (p.dp // p.ep, st["dp"] * p.ep)]
    backward = heavy_compute - heavy_fwd  # the backward of one micro-batch on that stage
    buckets = max(1, math.ceil((dense + experts) * grad_bytes / DDP_BUCKET_BYTES))
    if p.zero == 0:
        # Plain data parallelism: one all-reduce of the gradients, in buckets under the
        # backward of the last micro-batch.
        t_dp = _reduction("all_reduce", dense * grad_bytes, sysobj, dp_groups)
        t_dp += _reduction("all_reduce", experts * grad_bytes, sysobj, ep_groups)
        step["data parallel (exposed)"] = (
            max(t_dp - backward, t_dp / buckets) if overlap_dp else t_dp
        )
        step["ZeRO-3 gathers (exposed)"] = 0.0
    elif p.zero < 3:
        # ZeRO-1/2: the gradients reduce-scattered at their width under the last backward;
        # after the optimizer step each replica's updated BF16 weights all-gathered, which
        # can hide only under the next step's first forward (--overlap-param-gather).
        t_rs = _reduction("reduce_scatter", dense * grad_bytes, sysobj, dp_groups)
        t_rs += _reduction("reduce_scatter", experts * grad_bytes, sysobj, ep_groups)
        t_ag = _reduction("all_gather", dense * 2, sysobj, dp_groups)
        t_ag += _reduction("all_gather", experts * 2, sysobj, ep_groups)
        rs = max(t_rs - backward, t_rs / buckets) if overlap_dp else t_rs
        ag = max(t_ag - heavy_fwd, t_ag / buckets) if p.overlap_param_gather else t_ag
        step["data parallel (exposed)"] = rs + ag
        step["ZeRO-3 gathers (exposed)"] = 0.0
    else:
        # ZeRO-3: every micro-batch gathers the weights for its forward, again for its
        # backward (and for recomputation) unless kept, and reduce-scatters its gradients.
        weights = 2 * (dense + experts)
        gathers = 1 + (1 if p.reshard else 0) + (1 if p.reshard and p.recompute == "full" else 0)
        t_ag = _reduction("all_gather", weights, sysobj, dp_groups)
        t_rs = _reduction("reduce_scatter", (dense + experts) * grad_bytes, sysobj, dp_groups)
        passes = heavy_compute / gathers  # each gather hides under one pass (prefetch)
        first = t_ag / max(stages[k], 1)  # the first layer's gather is never hidden
        hidden_ag = gathers * (max(0.0, t_ag - passes) + first)
        step["ZeRO-3 gathers (exposed)"] = mbs * hidden_ag
        rs = max(t_rs - backward, t_rs / buckets) if overlap_dp else t_rs
        step["data parallel (exposed)"] = mbs * rs
    # The optimizer step on the parameters this chip updates (ZeRO >= 1 shards the update
    # over the dp x cp replicas), at the HBM bandwidth.
    updated = dense / (p.dp * p.cp if p.zero >= 1 else 1)
    updated += experts / (max(1, p.dp * p.cp // p.ep) if p.zero >= 1 else 1)
    step["optimizer step"] = updated * optimizer_bytes_per_param(grad_bytes) / hbm
    return step, source


def _passes(chip_key: str, dtype: str, m: int, n: int, k: int) -> tuple[float, float]:
    """(forward, backward) FLOP/s of a GEMM of m rows x n outputs x k inputs: the backward
    is the input gradient (m x k, reducing over n) and the weight gradient (k x n, reducing
    over the m rows), each at its own shape."""
    fwd = _achieved(chip_key, dtype, (m, n, k))[0]
    t_bwd = (
        1 / _achieved(chip_key, dtype, (m, k, n))[0] + 1 / _achieved(chip_key, dtype, (k, n, m))[0]
    )
    return fwd, 2 / t_bwd


def _layer_rates(m: ModelSpec, p: Parallelism, chip_key: str, dtype: str, rows: int,
                 q_run: int, kv_run: int):  # fmt: skip
    """(forward, backward) FLOP/s over one layer's GEMMs on one chip, each GEMM at its shape
    and weighted by its FLOPs (QKV with the ``q_run`` query and ``kv_run`` K/V heads the group
    computes, padding and copies included; attention output; the two or three FFN products of
    the experts a chip holds), and the source line of the largest (the FFN's first)."""
    up = m.ffn * (2 if m.gated_ffn else 1)
    e_rows, held = rows, 1  # rows per expert (the tokens of the ep ranks routed to it), experts
    if m.is_moe:
        e_rows = max(1, math.ceil(rows * m.top_k * p.ep / m.experts))
        held = max(1, m.experts // p.ep)
    gemms = [  # (rows, outputs, inputs, count)
        (rows, math.ceil((q_run + 2 * kv_run) * m.head_dim / p.tp), m.hidden, 1),
        (rows, m.hidden, math.ceil(q_run * m.head_dim / p.tp), 1),
        (e_rows, math.ceil(up / p.tp), m.hidden, held),
        (e_rows, m.hidden, math.ceil(m.ffn / p.tp), held),
    ]
    flops = t_fwd = t_bwd = 0.0
    for r, n, k, count in gemms:
        f = 2.0 * r * n * k * count
        fwd, bwd = _passes(chip_key, dtype, r, n, k)
        flops += f
        t_fwd += f / fwd
        t_bwd += f / bwd
    source = _achieved(chip_key, dtype, gemms[2][:3])[1]
    return flops / t_fwd, flops / t_bwd, source


def _tp_extra_flops(m: ModelSpec, ranks: int, recompute: str, seq_len: int) -> float:
    """Hardware FLOPs per token beyond the model's own on ``ranks`` tensor-parallel ranks: the
    copied K and V and the padded query heads' projections, and the padded heads' attention,
    in the passes :meth:`ModelSpec.training_flops_per_token` counts (recomputation included)."""
    linear, attn = m.tp_extra_forward_flops(ranks, seq_len)
    rerun = {"none": 0.0, "selective": attn, "full": linear + attn}[recompute]
    return 3 * (linear + attn) + rerun


def _stage_param_split(m: ModelSpec, p: Parallelism, layers: int, first: bool, last: bool,
                       ranks_per_chip: int):  # fmt: skip
    from ._memory import _stage_params

    return _stage_params(m, p.tp, p.ep, layers, first, last, ranks_per_chip)


def _tp_collectives(act: float, sysobj: System, p: Parallelism) -> float:
    """Tensor-parallel traffic of one layer and micro-batch (Megatron-LM): 2 all-reduces
    forward and 2 backward (2 more when a full recomputation reruns the forward); with
    sequence parallelism each all-reduce becomes a reduce-scatter plus an all-gather."""
    if p.tp == 1:
        return 0.0
    calls = 6 if p.recompute == "full" else 4
    if p.sequence_parallel:
        one = collective_time("reduce_scatter", act, sysobj, p.tp, 1)
        one += collective_time("all_gather", act, sysobj, p.tp, 1)
    else:
        one = collective_time("all_reduce", act, sysobj, p.tp, 1)
    return calls * one
