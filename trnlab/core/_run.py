"""Run a kernel: record it, schedule it on one NeuronCore, and measure the result."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trnlab._checks import choose, flag, number, short
from trnlab._gc import paused_gc
from trnlab._threads import one_blas_thread

from . import _program as P
from ._context import MAX_HBM_ELEMENTS, KernelContext, _shape2, _values
from ._errors import KernelArgumentError
from ._params import CoreParams, core_params
from ._progress import instruction_limit
from ._schedule import check_program, costs, schedule, tile_bits
from ._tiles import format_name

__all__ = ["HBM", "Run", "hbm", "record", "run", "simulate"]


@dataclass(frozen=True)
class HBM:
    """An HBM tensor argument of a kernel: input values, or the shape of an output."""

    data: np.ndarray | None
    shape: tuple[int, int]
    fmt: str
    is_input: bool


def hbm(x, fmt: str = "fp32", *, is_input: bool | None = None) -> HBM:
    """Describe a kernel argument in HBM: an array (an input, rounded to ``fmt``) or a shape
    (an output the kernel writes; ``is_input=True`` makes it a data-less input for
    timing-only runs).

    Raises
    ------
    KernelArgumentError
        A shape that is not two positive integers, an array that is not 2-D real numbers
        with at least one element, a flag that is not a boolean.
    """
    fmt = format_name(fmt)
    if is_input is not None:
        flag(is_input, "is_input", KernelArgumentError)
    if isinstance(x, tuple):
        return HBM(None, _shape2(x, "HBM tensor", MAX_HBM_ELEMENTS), fmt, bool(is_input))
    a = _values(x, "HBM tensor")
    if a.ndim != 2 or not a.size:
        raise KernelArgumentError(
            f"HBM tensors are 2-D (rows, cols) with at least one element; got an array of "
            f"shape {a.shape}"
        )
    return HBM(a, a.shape, fmt, True if is_input is None else is_input)


@dataclass(frozen=True, eq=False)
class Run:
    """A kernel run on one NeuronCore: outputs, timeline and counters.

    Attributes
    ----------
    program : Program
        The recorded instructions.
    params : CoreParams
        The core it ran on (figures from the catalogue).
    start, end : numpy.ndarray
        Start of each instruction on its engine (a DMA: its set-up on the queue) and the time
        its result can be read (a DMA: the consumer has been signalled).
    issue_end : numpy.ndarray
        When each instruction's engine is free again (a DMA: its last byte has moved); the
        engine bars of a timeline span ``start .. issue_end``.
    outputs : dict
        Name -> float32 array of every HBM tensor the kernel stored to (empty in timing-only runs).
    latency : float
        Seconds from the first instruction to the last result: the kernel's own timeline.
        ``total_latency`` adds the launch pre- and post-amble (what a benchmark of the kernel
        measures end to end).
    busy : dict
        Engine -> fraction of the latency it was busy ("DMA": fraction of the time at least
        one transfer is in flight; ``extra["dma_bandwidth_fraction"]``: share of the core's
        DMA bandwidth in use).
    flops, hbm_bytes : float
        Tensor Engine FLOPs and the bytes DMAs move to, from or within HBM (each transfer once:
        :meth:`Program.hbm_bytes`; an SBUF-to-SBUF copy moves none).
    compute_bound_s, memory_bound_s : float
        Roofline bounds: FLOPs at the peak of their data type, ``hbm_bytes`` at the DMA
        bandwidth.
    """

    program: P.Program
    params: CoreParams
    start: np.ndarray
    end: np.ndarray
    issue_end: np.ndarray
    outputs: dict[str, np.ndarray]
    latency: float
    busy: dict[str, float]
    flops: float
    hbm_bytes: float
    compute_bound_s: float
    memory_bound_s: float
    numerics: bool
    extra: dict[str, Any] = field(default_factory=dict)

    # Derived counters -------------------------------------------------------------------------
    @property
    def output(self) -> np.ndarray | None:
        """The output array when the kernel stored to exactly one tensor."""
        return next(iter(self.outputs.values())) if len(self.outputs) == 1 else None

    @property
    def achieved_flops(self) -> float:
        """Tensor Engine FLOP/s over the whole run."""
        return self.flops / self.latency if self.latency > 0 else 0.0

    @property
    def utilisation(self) -> float:
        """Hardware FLOPs utilisation of the Tensor Engine: time the FLOPs need at peak / latency."""
        return self.compute_bound_s / self.latency if self.latency > 0 else 0.0

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte of HBM traffic."""
        return self.flops / self.hbm_bytes if self.hbm_bytes else float("inf")

    @property
    def roofline_bound(self) -> float:
        """The roofline's lower bound on latency: max(FLOPs / peak, bytes / bandwidth)."""
        return max(self.compute_bound_s, self.memory_bound_s)

    @property
    def bound(self) -> str:
        """Which roof is closer: ``"compute"`` or ``"memory"``."""
        return "compute" if self.compute_bound_s >= self.memory_bound_s else "memory"

    @property
    def peak_flops(self) -> float:
        """Peak FLOP/s of the mix of data types the kernel multiplied."""
        return self.flops / self.compute_bound_s if self.compute_bound_s else 0.0

    def roofline(self) -> dict[str, float]:
        """The roofline point: intensity, achieved and attainable FLOP/s, ridge point.

        The memory roof is the core's DMA bandwidth (what one core can pull from HBM);
        ``hbm_share_per_core`` is the chip's HBM bandwidth over its cores, the roof when every
        core streams at once (lower than the DMA figure on trn2).
        """
        bw = self.params.dma_bandwidth
        peak = self.peak_flops
        ai = self.arithmetic_intensity
        return {
            "intensity": ai,
            "achieved_flops": self.achieved_flops,
            "attainable_flops": min(peak, ai * bw) if peak else 0.0,
            "peak_flops": peak,
            "bandwidth": bw,
            "ridge_intensity": peak / bw if bw else 0.0,
            "hbm_share_per_core": self.params.hbm_bandwidth / self.params.cores_per_chip,
        }

    def timeline(self) -> np.ndarray:
        """One row per instruction: index, engine id, op id, start, end (program order)."""
        t = self.program.table
        out = np.zeros(
            len(t),
            [("index", "i8"), ("engine", "i2"), ("op", "u1"), ("start", "f8"), ("end", "f8")],
        )
        out["index"] = np.arange(len(t))
        out["engine"] = t["engine"]
        out["op"] = t["op"]
        out["start"] = self.start
        out["end"] = self.end
        return out

    def occupancy(self, space: str = "sbuf") -> tuple[np.ndarray, np.ndarray]:
        """Bytes per partition in use over time (a step function): ``(times, bytes)``.

        A tile counts from the start of the first instruction touching it to the end of the last.
        """
        space = choose(space, ("sbuf", "psum"), "memory space", KernelArgumentError)
        t = self.program.table
        recs = [r for r in self.program.tiles if r.space == space]
        if not recs or not len(t):
            return np.zeros(1), np.zeros(1)
        n = len(self.program.tiles)
        first = np.full(n, np.inf)
        last = np.full(n, -np.inf)
        for col in ("out", "in0", "in1"):
            ids = t[col]
            ok = ids >= 0
            np.minimum.at(first, ids[ok], self.start[ok])
            np.maximum.at(last, ids[ok], self.end[ok])
        ids = np.array([r.id for r in recs])
        size = np.array([r.bytes_per_partition for r in recs], np.float64)
        used = np.isfinite(first[ids])
        times = np.concatenate([first[ids][used], last[ids][used]])
        delta = np.concatenate([size[used], -size[used]])
        order = np.lexsort((delta, times))
        return np.concatenate([[0.0], times[order]]), np.concatenate(
            [[0.0], np.cumsum(delta[order])]
        )

    def in_flight(self, t: float) -> np.ndarray:
        """Indices of the instructions running at time ``t`` (s), e.g. under a stepper's cursor."""
        t = number(t, "t (seconds into the run)", 0, None, error=KernelArgumentError)
        return np.flatnonzero((self.start <= t) & (t < self.end))

    def counters_at(self, t: float) -> dict[str, float]:
        """Running counters at time ``t`` (s): work of the instructions finished by then."""
        t = number(t, "t (seconds into the run)", 0, None, error=KernelArgumentError)
        done = self.end <= t
        tab = self.program.table
        flops = float(tab["flops"][done].sum())
        return {
            "time_s": t,
            "instructions_done": int(done.sum()),
            "flops": flops,
            "hbm_bytes": float(self.program.hbm_bytes()[done].sum()),
            "utilisation": (flops / self.flops) * self.compute_bound_s / t
            if t > 0 and self.flops
            else 0.0,
        }

    @property
    def launch_overhead(self) -> float:
        """The launch pre-amble and post-amble (s): outside the kernel's own timeline, inside
        every end-to-end measurement of it (catalogue: ``launch_preamble``, ``launch_postamble``)."""
        return float(self.params.launch_overhead)

    @property
    def total_latency(self) -> float:
        """The kernel's latency plus its launch overhead: what ``nki.benchmark`` reports."""
        return self.latency + self.launch_overhead

    def summary(self) -> str:
        """Where the time goes, in words and a small table (the text beside a timeline chart).

        Engine time is the sum of the engine's issue intervals (GpSimd's with the descriptors
        it writes for software-DGE transfers); the DMA row counts every transfer's time from
        its set-up on a queue to its last byte, summed over transfers (so over the queues,
        which run in parallel: it can exceed the latency).
        """
        t = self.program.table
        occ = self.issue_end - self.start
        lines = [
            f"{self.params.name} ({self.params.chip}): {len(t)} instructions in "
            f"{self.latency * 1e6:,.1f} us (plus {self.launch_overhead * 1e6:,.1f} us launch "
            f"overhead = {self.total_latency * 1e6:,.1f} us end to end); Tensor Engine at "
            f"{self.utilisation:.1%} of peak; {self.bound}-bound (roofline "
            f"{self.roofline_bound * 1e6:,.1f} us, intensity {self.arithmetic_intensity:,.0f} FLOP/B).",
            f"{'engine':<8} {'busy':>6} {'instr':>7} {'time us':>10}",
        ]
        sw = _swdge_count(t)
        for e, name in enumerate(P.ENGINES):
            sel = t["engine"] == e
            time = occ[sel].sum()
            note = ""
            if e == P.GPSIMD and sw:
                time += sw * float(self.params.swdge_gpsimd_time)
                note = f"  (with the descriptors of {sw} software-DGE transfers)"
            lines.append(
                f"{name:<8} {self.busy[name]:>6.1%} {int(sel.sum()):>7} {time * 1e6:>10,.1f}{note}"
            )
        sel = t["engine"] >= P.FIRST_DMA
        queues = len(np.unique(t["engine"][sel]))
        lines.append(
            f"{'DMA':<8} {self.busy['DMA']:>6.1%} {int(sel.sum()):>7} {occ[sel].sum() * 1e6:>10,.1f}"
            f"  (each transfer from set-up to last byte, summed: transfers in flight together "
            f"each count; {queues} queue{'s' if queues != 1 else ''}; "
            f"{self.hbm_bytes / 1e6:,.2f} MB, "
            f"{self.extra.get('dma_bandwidth_fraction', 0):.0%} of the DMA bandwidth)"
        )
        dropped = self.extra.get("nki", {}).get("repeats_dropped", 0)
        if dropped:
            lines.append(
                f"{dropped:,} of the kernel's instructions repeat an earlier one on unchanged "
                f"inputs: the compiler drops them and their readers take the earlier result "
                f"(compiler_cse), so they are not in this timeline."
            )
        return "\n".join(lines)

    def describe(self) -> str:
        """How this run was modelled: the core, the figures that are assumptions, overrides,
        and the mechanisms charged (the text to read before trusting a number)."""
        lines = [
            self.params.describe(),
            "  mechanisms: engine issue intervals and pipeline latencies; background "
            "LoadStationary; DMA descriptors (static, written by GpSimd, or by a hardware DGE), "
            "queue set-up, engine streaming by partitions (or, for a strided access, the "
            "handling of its packets, the contiguous runs beyond one per row, if longer) and "
            "completion signal; DMA transposes over every engine at the Trainium2 guide's "
            "share of their rate, in [128, 16] blocks; cross-engine "
            "semaphores; launch pre/post-amble (reported apart); for NKI kernels, the "
            "compiler's rotating buffers and its computing a repeated instruction once.",
            "  how close this model is to measured hardware: docs/fidelity.md",
        ]
        return "\n".join(lines)

    def counters(self) -> dict[str, Any]:
        """Every headline number as a plain dict (for tables, tests and JSON)."""
        return {
            "chip": self.params.chip,
            "core": self.params.name,
            "instructions": len(self.program),
            "latency_s": self.latency,
            "launch_overhead_s": self.launch_overhead,
            "total_latency_s": self.total_latency,
            "flops": self.flops,
            "achieved_flops": self.achieved_flops,
            "utilisation": self.utilisation,
            "hbm_bytes": self.hbm_bytes,
            "arithmetic_intensity": self.arithmetic_intensity,
            "roofline_bound_s": self.roofline_bound,
            "bound": self.bound,
            "busy": dict(self.busy),
            "peak_sbuf_bytes_per_partition": float(self.occupancy("sbuf")[1].max()),
            "peak_psum_bytes_per_partition": float(self.occupancy("psum")[1].max()),
        }

    def __repr__(self) -> str:
        busy = ", ".join(f"{k} {v:.0%}" for k, v in self.busy.items())
        return (
            f"Run({self.params.chip} {self.params.name}: {len(self.program)} instructions, "
            f"{self.latency * 1e6:,.1f} us, {self.utilisation:.1%} of Tensor Engine peak, "
            f"{self.bound}-bound; busy: {busy})"
        )


def _check_kernel(kernel, args: dict) -> None:
    """``kernel`` is a function taking ``(ctx, **args)``, or a teaching error."""
    if not callable(kernel):
        raise KernelArgumentError(
            f"kernel must be a function kernel(ctx, ...) that issues instructions, not "
            f"{short(kernel)}"
        )
    try:
        sig = inspect.signature(kernel)
    except (TypeError, ValueError):  # a builtin without a signature: let the call decide
        return
    try:
        sig.bind(None, **args)
    except TypeError as err:
        raise KernelArgumentError(
            f"kernel{sig} cannot take the arguments given ({', '.join(args) or 'none'}): {err}. "
            f"A kernel takes the context first, then its HBM tensors and options by name."
        ) from None


def record(
    kernel: Callable,
    *,
    chip: str | CoreParams = "trn1",
    numerics: bool = True,
    max_instructions: int | None = None,
    **args: Any,
) -> tuple[KernelContext, dict]:
    """Run ``kernel(ctx, **args)`` under a new context; HBM arguments become HBM tensors.

    The recording stops with an :class:`InstructionLimitError` past ``max_instructions``
    (default ``MAX_INSTRUCTIONS``, or ``MAX_NUMERICS_INSTRUCTIONS`` with numerics).
    """
    numerics = flag(numerics, "numerics", KernelArgumentError)
    limit = instruction_limit(max_instructions, numerics)
    _check_kernel(kernel, args)
    params = core_params(chip)
    ctx = KernelContext(params, numerics=numerics)
    ctx.progress.limit, ctx.progress.numerics = limit, numerics
    call = {}
    for name, v in args.items():
        if isinstance(v, np.ndarray):
            v = hbm(v)
        call[name] = (
            ctx.hbm(name, v.shape, v.fmt, v.data, written=v.is_input) if isinstance(v, HBM) else v
        )
    # A tile matmul is at most 128 x 128 x 512: too small for BLAS threads to pay.
    with paused_gc(), one_blas_thread() if numerics else contextlib.nullcontext():
        kernel(ctx, **call)
    return ctx, call


def simulate(program: P.Program, params: CoreParams, outputs=None, numerics=False) -> Run:
    """Schedule a recorded program and measure it."""
    check_program(program, params)
    if outputs is not None and not isinstance(outputs, dict):
        raise KernelArgumentError(
            f"outputs is a dict name -> array (or None), not {short(outputs)}"
        )
    numerics = flag(numerics, "numerics", KernelArgumentError)
    t = program.table
    c = costs(t, params, tile_bits(program))
    start, issue_end, end = schedule(program, params, c)
    latency = float(end.max() - start.min()) if len(t) else 0.0
    busy = {}
    for e, name in enumerate(P.ENGINES):
        sel = t["engine"] == e
        busy[name] = float(c.busy[sel].sum() / latency) if latency else 0.0
    dma = t["engine"] >= P.FIRST_DMA
    busy["DMA"] = _union(start[dma], issue_end[dma]) / latency if latency else 0.0
    if latency:  # GpSimd also writes the descriptors of every software-DGE transfer
        busy["GpSimd"] += _swdge_count(t) * float(params.swdge_gpsimd_time) / latency
    flops = float(t["flops"].sum())
    from trnlab.catalog import DTYPES

    compute = 0.0
    for d in np.unique(t["dtype"][t["flops"] > 0]):
        sel = (t["dtype"] == d) & (t["flops"] > 0)
        compute += float(t["flops"][sel].sum()) / params.peak_flops(DTYPES[int(d)])
    nbytes = float(program.hbm_bytes().sum())
    return Run(
        program=program,
        params=params,
        start=start,
        end=end,
        issue_end=issue_end,
        outputs=outputs or {},
        latency=latency,
        busy=busy,
        flops=flops,
        hbm_bytes=nbytes,
        compute_bound_s=compute,
        memory_bound_s=nbytes / params.dma_bandwidth,
        numerics=numerics,
        extra={
            "dma_bandwidth_fraction": nbytes / (params.dma_bandwidth * latency) if latency else 0.0
        },
    )


def swdge_transfers(t: np.ndarray) -> np.ndarray:
    """Indices of the transfers of instruction table ``t`` whose descriptors GpSimd writes
    (software DGE): GpSimd work that no instruction of the program shows."""
    return np.flatnonzero((t["engine"] >= P.FIRST_DMA) & ((t["flags"] & P.FLAG_DGE_SW) != 0))


def _swdge_count(t: np.ndarray) -> int:
    return len(swdge_transfers(t))


def _union(start: np.ndarray, end: np.ndarray) -> float:
    """Total length of the union of intervals [start, end)."""
    if not len(start):
        return 0.0
    o = np.argsort(start)
    s, e = start[o], np.maximum.accumulate(end[o])
    gaps = np.maximum(s[1:] - e[:-1], 0.0)
    return float(e[-1] - s[0] - gaps.sum())


def run(
    kernel: Callable,
    *,
    chip: str | CoreParams = "trn1",
    numerics: bool = True,
    max_instructions: int | None = None,
    **args: Any,
) -> Run:
    """Record ``kernel``, schedule it on one NeuronCore of ``chip`` and return the :class:`Run`.

    Parameters
    ----------
    kernel : callable
        ``kernel(ctx, **args)``: issues instructions through the :class:`KernelContext`.
    chip : str or CoreParams
        A Neuron chip of the catalogue (or parameters from :func:`core_params`).
    numerics : bool
        Execute the values; False is timing only (fast for large shapes).
    max_instructions : int, optional
        Stop with :class:`InstructionLimitError` once the kernel has recorded this many
        instructions (default ``MAX_INSTRUCTIONS``, 2 million, timing only; 250 thousand
        with numerics: a few seconds each), instead of running for minutes.
    **args
        Kernel arguments: :func:`hbm` descriptions (or numpy arrays, fp32) become HBM tensors;
        anything else is passed through.

    Examples
    --------
    >>> import numpy as np
    >>> from trnlab import core
    >>> def double(ctx, x, y):
    ...     t = ctx.sbuf(x.shape, "fp32")
    ...     ctx.load(t, x)
    ...     ctx.tensor_scalar(t, t, "multiply", 2.0)
    ...     ctx.store(y, t)
    >>> r = core.run(double, x=core.hbm(np.ones((4, 8))), y=core.hbm((4, 8)))
    >>> float(r.outputs["y"].sum())
    64.0
    """
    ctx, _ = record(kernel, chip=chip, numerics=numerics, max_instructions=max_instructions, **args)
    ctx.progress.phase(f"dependencies of {ctx.recorded:,} instructions")
    program = ctx.program()
    ctx.progress.phase(f"scheduling {len(program):,} instructions")
    stored = P.written_tensors(program.table)
    outputs = {}
    if numerics:
        for t in ctx._tensors:
            if t.id in stored:
                outputs[t.name] = t.data
    r = simulate(program, ctx.params, outputs, numerics)
    ctx.progress.done(f"{len(program):,} instructions, {r.latency * 1e6:,.1f} us on the core")
    return r
