"""One training plan on one system: memory per chip, step time, MFU, throughput, cost, energy.

Placement follows the tiers: tensor- and expert-parallel groups sit inside one NeuronLink
(or NeuronSwitch) domain, pipeline stages fill the domain next, and data parallelism spans
what is left (over EFA once it leaves the domain). Every communication time comes from
:func:`trnlab.fabric.collective` on a ring of the group's chips at the tier's per-link
bandwidth; compute runs at the achieved FLOP/s of the NeuronCore model's blocked matmul
(:mod:`trnlab.kernels`), or an assumed efficiency on chips without a NeuronCore (GPUs).

Step time = compute x (m + p - 1) / m (the 1F1B pipeline bubble, Narayanan et al., SC'21)
          + tensor-parallel all-reduces + expert all-to-alls + pipeline sends
          + the part of the data-parallel gradient reduction the backward pass does not hide.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from trnlab import catalog, fabric
from trnlab.catalog import CatalogError, System

from ._memory import MemoryBreakdown, training_memory
from ._workloads import ModelSpec, WorkloadError, model

__all__ = ["Parallelism", "PlanResult", "Tiers", "plan", "tiers"]

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
#: **Assumption**, not a measurement: large dense GEMMs on H100/B200 reach roughly this share
#: of the datasheet peak in public benchmarks.
GPU_MATMUL_EFFICIENCY = 0.7

#: Shape of the representative GEMM the NeuronCore model runs to measure efficiency.
_GEMM = 2048

#: Share of HBM a training job can use. **Assumption:** the runtime, collective buffers and
#: allocator fragmentation hold back about 5%; no public source gives Neuron's figure.
USABLE_HBM = 0.95


@dataclass(frozen=True)
class Parallelism:
    """How a job is split: tensor, context, pipeline, data and expert parallel degrees.

    ``chips = tp * cp * pp * dp``; context (sequence) parallelism splits each sequence over
    ``cp`` chips; expert parallelism splits the experts over ``ep`` of the data-parallel ranks
    (ep divides dp), as Megatron-style MoE training does.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    cp: int = 1
    zero: int = 1
    recompute: bool = False
    micro_batch: int = 1

    @property
    def chips(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    def __str__(self) -> str:
        rc = ", recompute" if self.recompute else ""
        ep = f" ep{self.ep}" if self.ep > 1 else ""
        cp = f" cp{self.cp}" if self.cp > 1 else ""
        return (
            f"tp{self.tp}{cp} pp{self.pp} dp{self.dp}{ep} zero{self.zero} mb{self.micro_batch}{rc}"
        )


@dataclass(frozen=True)
class Tiers:
    """The links a group of chips talks over: inside the NeuronLink domain, and over EFA.

    ``axes`` lists the domain's torus axes as (length, B/s per direction, latency); a switch
    is one axis. A group fills the axes in order, so a group longer than the first axis also
    crosses the next ones, and its ring runs at the slowest of them.
    """

    domain: int
    axes: tuple[tuple[int, float, float], ...]
    efa_bandwidth: float
    efa_latency: float
    overhead: float

    def link_for(self, group: int) -> tuple[float, float]:
        """(bandwidth, latency) of the slowest link a ring of ``group`` chips crosses."""
        span, bw, lat = 1, float("inf"), 0.0
        for length, axis_bw, axis_lat in self.axes:
            bw, lat = min(bw, axis_bw), max(lat, axis_lat)
            span *= length
            if span >= group:
                break
        return bw, lat


_TIERS: dict[tuple[str, int], Tiers] = {}


def _tiers_of(system: System) -> Tiers:
    topo = fabric.topology(system)
    inner = topo.part if topo.kind == "cluster" else topo
    axes = ()
    if inner.kind != "single":
        lengths = inner.shape if inner.kind == "torus" else (inner.chips,)
        axes = tuple(
            (int(n), float(b), float(la))
            for n, b, la in zip(lengths, inner.axis_bandwidth, inner.axis_latency, strict=False)
        )
    return Tiers(
        domain=inner.chips,
        axes=axes,
        efa_bandwidth=float(topo.efa_bandwidth),
        efa_latency=float(topo.efa_latency),
        overhead=float(topo.message_overhead),
    )


def tiers(system: str | System) -> Tiers:
    """The communication tiers of a system (NeuronLink domain size and link figures, EFA)."""
    sysobj = catalog.system(system) if isinstance(system, str) else system
    key = (sysobj.key, sysobj.chips)  # systems hold dicts (unhashable): key on what defines them
    if key not in _TIERS:
        _TIERS[key] = _tiers_of(sysobj)
    return _TIERS[key]


#: Largest group for which every algorithm is tried; larger groups use the bidirectional ring
#: (the fabric's recursive-doubling closed form walks every route and grows as n^2 log n).
AUTO_ALGORITHM_MAX_CHIPS = 64


@lru_cache(maxsize=4096)
def _ring_time(
    op: str, nbytes: int, chips: int, bandwidth: float, latency: float, overhead: float
) -> float:
    """Seconds for a collective on a ring of ``chips`` (the fabric's closed form)."""
    if chips <= 1 or nbytes <= 0:
        return 0.0
    ring = fabric.ring(chips, bandwidth, latency, overhead)
    algorithm = "auto" if chips <= AUTO_ALGORITHM_MAX_CHIPS else "bidirectional_ring"
    if op == "broadcast" and algorithm != "auto":
        algorithm = "ring"
    return float(fabric.collective(op, int(nbytes), system=ring, algorithm=algorithm).time)


def _group_time(op: str, nbytes: float, group: int, inside_domain: bool, t: Tiers) -> float:
    if group <= 1:
        return 0.0
    if inside_domain:
        if not t.axes:
            raise WorkloadError(
                "a group of more than one chip needs a fabric; this system has one chip"
            )
        bw, lat = t.link_for(group)
        return _ring_time(op, int(nbytes), group, bw, lat, t.overhead)
    if t.efa_bandwidth <= 0:
        raise WorkloadError(
            "this group leaves the NeuronLink domain but the system has no EFA figure"
        )
    return _ring_time(op, int(nbytes), group, t.efa_bandwidth, t.efa_latency, t.overhead)


@lru_cache(maxsize=32)
def achieved_flops_per_chip(chip_key: str, dtype: str) -> tuple[float, str]:
    """Dense matmul FLOP/s one chip sustains, and where the figure comes from.

    Neuron chips: the NeuronCore model's ``blocked_mnk`` kernel on a 2048^3 GEMM (timing
    only), times the chip's cores. GPUs: the datasheet peak times :data:`GPU_MATMUL_EFFICIENCY`.
    """
    chip = catalog.chip(chip_key)
    peak = chip.peak_flops(dtype)
    if chip.core is None or dtype not in _KERNEL_FORMAT:
        return peak * GPU_MATMUL_EFFICIENCY, f"assumed {GPU_MATMUL_EFFICIENCY:.0%} of peak"
    from trnlab import kernels  # the core simulator compiles on first use

    shape = (_GEMM, _GEMM)
    run = kernels.matmul(
        shape,
        shape,
        variant="blocked_mnk",
        chip=chip_key,
        dtype=_KERNEL_FORMAT[dtype],
        numerics=False,
    )
    return (
        run.achieved_flops * chip.cores,
        f"NeuronCore model, blocked_mnk {_GEMM}^3 ({run.utilisation:.0%} of core peak)",
    )


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
    def model_flops_per_step(self) -> float:
        # MFU counts the model's FLOPs (6N + attention), never recomputation (PaLM, App. B).
        return self.tokens_per_step * self.model.training_flops_per_token(seq_len=self.seq_len)

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation: model FLOP/s over the chips' published peak."""
        peak = self.system.chips * self.system.chip.peak_flops(self.dtype)
        return self.model_flops_per_step / (self.step_time * peak) if self.step_time else 0.0

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
        mem = (
            f"{self.memory.total / gib:,.1f} GiB per chip of {self.capacity / gib:,.0f} GiB "
            f"(weights {self.memory.weights / gib:,.1f}, gradients {self.memory.gradients / gib:,.1f}, "
            f"optimizer {self.memory.optimizer / gib:,.1f}, activations {self.memory.activations / gib:,.1f})"
        )
        if not self.feasible:
            return (
                f"{self.parallel}: not possible: " + "; ".join(self.problems) + f". Memory: {mem}."
            )
        parts = ", ".join(f"{k} {v * 1e3:,.1f} ms" for k, v in self.step.items() if v > 0)
        return (
            f"{self.parallel}: step {self.step_time:.3f} s ({parts}); MFU {self.mfu:.1%}; "
            f"{self.tokens_per_second:,.0f} tokens/s; memory {mem}."
        )


def _price(system: System, override: float | None) -> float | None:
    if override is not None:
        return override
    if system.price_per_hour is not None:
        return system.price_per_hour / system.chips
    return system.chip.price_per_chip_hour


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
        The data-parallel gradient reduction overlaps the backward pass (only what does not
        fit under it is exposed).
    price_per_chip_hour, watts_per_chip : float, optional
        Override the catalogue's price (system price / chips, else a market estimate) and
        power per chip.
    usable_hbm : float
        Share of each chip's HBM the job may use (default :data:`USABLE_HBM`, an assumption).

    Returns
    -------
    PlanResult
        With ``problems`` listing why the plan cannot run (memory, placement, divisibility);
        times are computed only for feasible plans.
    """
    m = model(model_spec)
    sysobj = catalog.system(system) if isinstance(system, str) else system
    chips = sysobj.chips
    p = parallel or Parallelism(dp=chips)
    s = seq_len or m.seq_len
    for name, value in (
        ("global batch", global_batch),
        ("sequence length", s),
        ("token budget", tokens),
    ):
        if value <= 0:
            raise WorkloadError(f"{name} must be positive, not {value!r}")
    problems: list[str] = []
    if p.chips != chips:
        problems.append(
            f"tp x cp x pp x dp = {p.tp} x {p.cp} x {p.pp} x {p.dp} = {p.chips} chips, but "
            f"{sysobj} has {chips}"
        )
    if p.ep > 1 and p.dp % p.ep:
        problems.append(f"expert parallelism {p.ep} must divide data parallelism {p.dp}")
    t = tiers(sysobj)
    if p.tp * p.cp * p.ep > t.domain:
        problems.append(
            f"tensor x context x expert parallel group of {p.tp * p.cp * p.ep} chips does not "
            f"fit the {t.domain}-chip NeuronLink domain of {sysobj}"
        )
    per_replica = p.micro_batch * p.dp
    if global_batch % per_replica:
        problems.append(
            f"global batch {global_batch} is not a multiple of micro-batch x dp = {per_replica}"
        )
    try:
        mem = training_memory(
            m,
            tp=p.tp,
            pp=p.pp,
            dp=p.dp,
            ep=p.ep,
            cp=p.cp,
            zero=p.zero,
            micro_batch=p.micro_batch,
            seq_len=s,
            recompute=p.recompute,
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
        dtype=dtype,
        global_batch=global_batch,
        seq_len=s,
        memory=mem,
        capacity=capacity,
        price_per_chip_hour=_price(sysobj, price_per_chip_hour),
        watts_per_chip=watts_per_chip if watts_per_chip is not None else sysobj.chip.power,
        tokens=tokens,
    )
    if problems:
        return PlanResult(**common, problems=tuple(problems))

    flops_per_chip, source = achieved_flops_per_chip(sysobj.chip.key, catalog.dtype_name(dtype))
    micro_batches = global_batch // per_replica
    step_flops = global_batch * s * m.training_flops_per_token(recompute=p.recompute, seq_len=s)
    compute = step_flops / (chips * flops_per_chip)
    # 1F1B pipeline: (m + p - 1) micro-batch slots for m micro-batches; the idle share is
    # (p - 1)/(m + p - 1) of the step (Narayanan et al., SC'21).
    bubble = compute * (p.pp - 1) / micro_batches
    # one micro-batch's activations on one context-parallel slice, in bf16 bytes
    act = p.micro_batch * (s // p.cp) * m.hidden * 2
    layers = m.layers // p.pp
    # Megatron tensor parallelism: 2 all-reduces forward, 2 backward per layer (+2 recomputed).
    tp_calls = micro_batches * layers * (6 if p.recompute else 4)
    tp_time = tp_calls * _group_time("all_reduce", act, p.tp, True, t)
    # Context parallelism (ring attention): each layer all-gathers K and V over the cp group
    # forward (again when recomputing) and reduce-scatters their gradients backward.
    kv = p.micro_batch * s * m.kv_heads * m.head_dim * 2 * 2 // p.tp  # K and V, bf16, gathered
    cp_time = (
        micro_batches
        * layers
        * (
            (2 if p.recompute else 1) * _group_time("all_gather", kv, p.cp, True, t)
            + _group_time("reduce_scatter", kv, p.cp, True, t)
        )
    )
    ep_time = 0.0
    if m.is_moe and p.ep > 1:
        # dispatch + combine all-to-all, forward and backward, of each token's top-k copies
        ep_time = (
            micro_batches * layers * 4 * _group_time("all_to_all", act * m.top_k, p.ep, True, t)
        )
    pp_inside = p.tp * p.cp * p.ep * p.pp <= t.domain
    pp_time = (
        2
        * micro_batches
        * (p.pp - 1)
        / p.pp
        * _group_time("broadcast", act / p.tp, 2, pp_inside, t)
        if p.pp > 1
        else 0.0
    )
    grads = 2 * (m.params / (p.tp * p.pp))  # bf16 gradients per chip before any sharding
    dp_inside = chips <= t.domain
    dp_op = "all_reduce" if p.zero < 2 else "reduce_scatter"
    # Gradients are reduced over every replica of the weights: dp x cp (Megatron).
    replicas = p.dp * p.cp
    dp_time = _group_time(dp_op, grads, replicas, dp_inside, t)
    if p.zero >= 3:  # ZeRO-3 gathers the weights in the forward and again in the backward
        dp_time += 2 * _group_time("all_gather", grads, replicas, dp_inside, t)
    backward = compute * (2 / 3 if not p.recompute else 2 / 4)
    dp_exposed = max(0.0, dp_time - backward) if overlap_dp else dp_time
    step = {
        "compute": compute,
        "pipeline bubble": bubble,
        "tensor parallel": tp_time,
        "context parallel": cp_time,
        "expert all-to-all": ep_time,
        "pipeline sends": pp_time,
        "data parallel (exposed)": dp_exposed,
    }
    return PlanResult(**common, step=step, flops_source=source)
