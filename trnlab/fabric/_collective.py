"""The public entry point: ``collective(op, nbytes, system=..., algorithm=..., simulate=...)``."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ._algorithms import ALGORITHMS, OPS, Estimate, algorithm
from ._params import FabricError, FabricParams, collective_figure
from ._plan import Plan
from ._topology import TIER_NAMES, Topology, topology

__all__ = [
    "CollectiveResult",
    "Schedule",
    "algorithms",
    "bus_factor",
    "closed_form",
    "collective",
    "runtime_choice",
]

_OP_ALIASES = {
    "allreduce": "all_reduce",
    "reducescatter": "reduce_scatter",
    "allgather": "all_gather",
    "alltoall": "all_to_all",
    "bcast": "broadcast",
}
# Simulations above this many chunk-hop events are refused (they would take minutes).
MAX_EVENTS = 60_000_000
MAX_MESSAGES = 8_000_000
MAX_GRAPH_CHIPS = 200_000


def _op(op: str) -> str:
    key = str(op).strip().lower().replace("-", "_")
    key = _OP_ALIASES.get(key.replace("_", ""), key)
    if key not in OPS:
        raise FabricError(f"unknown collective {op!r}; trnlab.fabric knows {', '.join(OPS)}")
    return key


def _nbytes(nbytes) -> int:
    if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Real):
        raise FabricError(f"nbytes must be a number of bytes, not {nbytes!r}")
    if not math.isfinite(nbytes) or nbytes < 0 or nbytes != int(nbytes):
        raise FabricError(f"nbytes = {nbytes!r}: a message size is a whole number of bytes >= 0")
    return int(nbytes)


def bus_factor(op: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor: busbw = algbw x factor.

    2(n-1)/n for all-reduce; (n-1)/n for reduce-scatter, all-gather and all-to-all; 1 for
    broadcast (nccl-tests ``doc/PERFORMANCE.md``).
    """
    op = _op(op)
    if n <= 1:
        return 0.0
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op == "broadcast":
        return 1.0
    return (n - 1) / n


@dataclass(frozen=True, eq=False)
class Schedule:
    """What the simulator did, message by message (for tables and animation).

    Attributes
    ----------
    src, dst : ndarray of int
        Source and destination chip of each message.
    nbytes : ndarray of float
        Bytes of each message.
    step : ndarray of int
        Algorithm step of each message (a chip sends step k once its previous receives landed).
    start, finish : ndarray of float
        Seconds when the message began (after its overhead) and when its last byte arrived.
    """

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    step: np.ndarray
    start: np.ndarray
    finish: np.ndarray

    @property
    def steps(self) -> int:
        return int(self.step.max()) + 1 if self.step.size else 0

    def at_step(self, k: int) -> dict[str, np.ndarray]:
        """The messages of step ``k`` (``src``, ``dst``, ``nbytes``, ``start``, ``finish``)."""
        sel = self.step == k
        return {f: getattr(self, f)[sel] for f in ("src", "dst", "nbytes", "start", "finish")}


@dataclass(frozen=True, eq=False)
class CollectiveResult:
    """Time and bandwidths of one collective.

    Attributes
    ----------
    op, algorithm : str
        The collective and the algorithm used (``auto`` resolved).
    nbytes : int
        Size in the nccl-tests convention (see :func:`collective`).
    chips : int
        Participants.
    time : float
        Seconds: simulated when ``simulated`` is True, else the closed form.
    closed_form : Estimate
        The alpha-beta time, its formula, and whether it is exact or a lower bound.
    algbw, busbw : float
        nbytes / time and algbw x :func:`bus_factor` (B/s); 0 when nothing moves.
    link_utilisation : ndarray or None
        Per directed link, busy time / time (simulation only).
    link_bytes : ndarray or None
        Bytes carried per directed link (simulation only).
    schedule : Schedule or None
        Message-level schedule (simulation only).
    load_bound : float or None
        max over links of bytes carried / bandwidth: no schedule that moves these bytes over
        these links can be faster (simulation only).
    topology : Topology
        The fabric (link arrays for drawing).
    """

    op: str
    algorithm: str
    nbytes: int
    chips: int
    time: float
    closed_form: Estimate
    simulated: bool
    algbw: float
    busbw: float
    topology: Topology
    link_utilisation: np.ndarray | None = None
    link_bytes: np.ndarray | None = None
    schedule: Schedule | None = None
    load_bound: float | None = None

    def step_link_bytes(self) -> np.ndarray:
        """Bytes each directed link carries in each step, shape (steps, links), for animation.

        Simulation only; a message counts in the step it belongs to, on every link of its route.
        """
        if self.schedule is None:
            raise FabricError(
                "step_link_bytes needs the schedule of a simulation: call "
                "collective(..., simulate=True)"
            )
        sch, topo = self.schedule, self.topology
        out = np.zeros((max(sch.steps, 1), topo.links))
        n = topo.chips
        keys, pair = np.unique(sch.src * n + sch.dst, return_inverse=True)
        for p, key in enumerate(keys.tolist()):
            sel = pair == p
            per_step = np.bincount(sch.step[sel], weights=sch.nbytes[sel], minlength=out.shape[0])
            for link in topo.route(*divmod(key, n)):
                out[:, link] += per_step
        return out

    def summary(self) -> str:
        """One paragraph of numbers, for a notebook or a text summary beside a chart."""
        how = "simulated" if self.simulated else "closed form"
        text = (
            f"{self.op} of {self.nbytes:,} B on {self.topology.name} ({self.chips:,} chips), "
            f"{self.algorithm}: {self.time * 1e6:,.2f} us ({how}); algbw "
            f"{self.algbw / 1e9:,.1f} GB/s, busbw {self.busbw / 1e9:,.1f} GB/s. Closed form "
            f"{self.closed_form.time * 1e6:,.2f} us = {self.closed_form.formula}"
        )
        if self.closed_form.caveat:
            text += f" ({self.closed_form.caveat})"
        if self.link_utilisation is not None and self.link_utilisation.size:
            tiers = self.topology.link_tier
            for t, name in enumerate(TIER_NAMES):
                u = self.link_utilisation[tiers == t]
                if u.size and u.max() > 0:
                    text += f"; {name} links busiest {u.max():.0%}, mean {u.mean():.0%}"
        if self.topology.notes:
            text += ". Model: " + "; ".join(self.topology.notes)
        return text + "."


def algorithms(op: str, system="trn2.48xlarge", params: FabricParams | None = None) -> list[str]:
    """Names of the algorithms that can run ``op`` on ``system``.

    Parameters
    ----------
    op : str
        A collective (see :func:`collective`).
    system : str, System or Topology
        Where it runs.
    params : FabricParams, optional
        Model assumptions.

    Returns
    -------
    list of str
        Names accepted by :func:`collective` (``auto`` picks among them).
    """
    op, topo = _op(op), topology(system, params)
    return [name for name, a in ALGORITHMS.items() if a.misfit(op, topo) is None]


def _fits(op: str, topo: Topology):
    return [a for a in ALGORITHMS.values() if a.misfit(op, topo) is None]


def _fastest(op: str, nbytes: int, topo: Topology, pool=None):
    """The lowest closed-form time; an algorithm known only by a lower bound is chosen only
    when nothing else fits (its bound would flatter it)."""
    best = None
    for a in pool if pool is not None else _fits(op, topo):
        est = a.closed_form(op, float(nbytes), topo)
        rank = (est.kind == "bound", est.time)
        if best is None or rank < best[2]:
            best = (a, est, rank)
    if best is None:
        raise FabricError(f"no algorithm can run {op} on {topo.name}")
    return best[0], best[1]


def runtime_choice(op: str, nbytes: int, topo: Topology) -> str:
    """The algorithm the Neuron runtime would pick, by message size (``algorithm="auto"``).

    Inside a NeuronLink domain the runtime docs give each algorithm a sweet range: Mesh
    (every chip straight to every other, trnlab's ``direct``) below about 1 MB, recursive
    doubling and halving (RDH) from 1 to 56 MB, rings (KangaRing) above. Across EFA it runs
    hierarchical algorithms. All-to-all is always a direct exchange (shortest-path routes);
    a broadcast takes the fastest closed form. Where the runtime's choice cannot run (RDH
    reduce-scatter on a number of chips that is not a power of two) the ring band takes over.
    A topology built for the ``"2023"`` runtime (``FabricParams(runtime="2023")``, SDK 2.10)
    runs rings inside an instance whatever the size: the mesh all-reduce came with SDK 2.11
    (runtime release notes, 2.14.8, June 2023).
    """
    if op == "broadcast":
        return _fastest(op, nbytes, topo)[0].name
    if op == "all_to_all":
        return "direct"
    if topo.kind == "cluster":
        return "hierarchical" if topo.part.kind != "single" else _fastest(op, nbytes, topo)[0].name
    fits = {a.name for a in _fits(op, topo)}
    if topo.runtime == "2023":
        rings = [ALGORITHMS[k] for k in ("torus", "bidirectional_ring", "ring") if k in fits]
        return _fastest(op, nbytes, topo, rings)[0].name
    if nbytes < collective_figure("mesh_max_bytes") and "direct" in fits:
        return "direct"
    if nbytes < collective_figure("rdh_max_bytes") and "recursive_doubling" in fits:
        return "recursive_doubling"
    rings = [ALGORITHMS[k] for k in ("torus", "bidirectional_ring", "ring") if k in fits]
    return _fastest(op, nbytes, topo, rings)[0].name


def _choose(op: str, nbytes: int, topo: Topology, name: str):
    if name == "fastest":
        return _fastest(op, nbytes, topo)
    if name == "auto":
        name = runtime_choice(op, nbytes, topo)
    a = algorithm(name)
    why = a.misfit(op, topo)
    if why:
        raise FabricError(f"cannot run {op} on {topo.name}: {why}")
    return a, a.closed_form(op, float(nbytes), topo)


def _with_op_overhead(est: Estimate, topo: Topology) -> Estimate:
    """Add the fixed cost per collective operation (once, whatever the algorithm)."""
    if topo.op_overhead <= 0:
        return est
    return Estimate(est.time + topo.op_overhead, f"T_op + {est.formula}", est.kind, est.caveat)


def closed_form(
    op: str,
    nbytes: int,
    system="trn2.48xlarge",
    algorithm: str = "auto",
    params: FabricParams | None = None,
) -> Estimate:
    """The alpha-beta time of a collective, without simulating it.

    Parameters are those of :func:`collective`.

    Returns
    -------
    Estimate
        ``time`` in seconds, the ``formula``, and ``kind``: ``"exact"`` (a contention-free
        simulation agrees within 2%), ``"estimate"`` (hops or ports differ; see ``caveat``)
        or ``"bound"`` (a lower bound: the schedule's routes share links).
    """
    return collective(op, nbytes, system, algorithm, simulate=False, params=params).closed_form


def collective(
    op: str,
    nbytes: int,
    system="trn2.48xlarge",
    algorithm: str = "auto",
    simulate: bool = False,
    params: FabricParams | None = None,
) -> CollectiveResult:
    """Time a collective on a Trainium fabric, by closed form or by simulation.

    Parameters
    ----------
    op : str
        ``"all_reduce"``, ``"reduce_scatter"``, ``"all_gather"``, ``"all_to_all"`` or
        ``"broadcast"`` (``"allreduce"`` etc. also accepted).
    nbytes : int
        Size in the nccl-tests convention: the buffer of an all-reduce or broadcast, the
        gathered output of an all-gather, the input of a reduce-scatter, the whole send buffer
        of an all-to-all (each chip sends nbytes/n to each peer).
    system : str, System or Topology
        A catalogue system, an UltraCluster (``catalog.cluster(...)``) or a Topology.
    algorithm : str
        ``"ring"``, ``"bidirectional_ring"``, ``"torus"``, ``"recursive_doubling"`` (``"tree"``,
        ``"rdh"``), ``"direct"`` (``"mesh"``), ``"hierarchical"``, ``"auto"`` (what the Neuron
        runtime picks for this size: :func:`runtime_choice`) or ``"fastest"`` (the lowest
        closed-form time).
    simulate : bool
        False: the closed form (alpha-beta). True: the chunk-level event simulation with link
        contention, which also fills ``link_utilisation``, ``link_bytes`` and ``schedule``.
    params : FabricParams, optional
        Latencies and conventions (assumptions; see :class:`FabricParams`).

    Returns
    -------
    CollectiveResult

    Notes
    -----
    Zero bytes or a single chip: nothing moves, so ``time`` is 0 and both bandwidths are 0
    (nccl-tests prints 0 for a zero-size run too); the algorithm is still checked.
    Every other collective pays the fabric's fixed cost per operation once
    (``Topology.op_overhead``) on top of its algorithm's steps.
    busbw = algbw x 2(n-1)/n for all-reduce, x (n-1)/n for reduce-scatter, all-gather and
    all-to-all, x 1 for broadcast (nccl-tests ``doc/PERFORMANCE.md``).

    Raises
    ------
    FabricError
        Unknown op or algorithm, an algorithm that does not fit the system (the message says
        which do), a negative or fractional size, or a simulation too large to run.
    """
    op, nbytes = _op(op), _nbytes(nbytes)
    params = params or FabricParams()
    topo = topology(system, params)
    n = topo.chips
    if n == 1 or nbytes == 0:
        if algorithm != "auto" and n > 1:
            _choose(op, 1, topo, algorithm)  # still refuse an algorithm that does not fit
        name = "none" if n == 1 else algorithm
        est = Estimate(0.0, "nothing to move" if n == 1 else "zero bytes: nothing to move")
        return CollectiveResult(op, name, nbytes, n, 0.0, est, simulate, 0.0, 0.0, topo)
    alg, est = _choose(op, nbytes, topo, algorithm)
    est = _with_op_overhead(est, topo)
    if not simulate:
        algbw = float(nbytes / est.time)
        return CollectiveResult(
            op, alg.name, nbytes, n, est.time, est, False, algbw, algbw * bus_factor(op, n), topo
        )
    _check_messages(alg, op, topo)
    plan = alg.plan(op, float(nbytes), topo)
    _check_size(plan, topo, params, alg.name, op)
    from ._sim import simulate as run  # numba is imported only when a simulation runs

    t, start, done, busy, lbytes = run(topo, plan, params.chunk_bytes, params.max_chunks)
    t += topo.op_overhead  # the fixed cost per operation comes before the first message
    start, done = start + topo.op_overhead, done + topo.op_overhead
    algbw = float(nbytes / t)
    return CollectiveResult(
        op,
        alg.name,
        nbytes,
        n,
        t,
        est,
        True,
        algbw,
        algbw * bus_factor(op, n),
        topo,
        link_utilisation=busy / t,
        link_bytes=lbytes,
        schedule=Schedule(plan.src, plan.dst, plan.nbytes, plan.step, start, done),
        load_bound=float((lbytes / topo.link_bandwidth).max()) if lbytes.size else 0.0,
    )


def _check_messages(alg, op: str, topo: Topology) -> None:
    if topo.chips > MAX_GRAPH_CHIPS:
        raise FabricError(
            f"{topo.name} has {topo.chips:,} chips; the simulation builds the link graph only up "
            f"to {MAX_GRAPH_CHIPS:,} chips. Use simulate=False: the closed form is hierarchical "
            "and needs no graph."
        )
    count = alg.messages(op, topo)
    if count > MAX_MESSAGES:
        raise FabricError(
            f"simulating {op} with {alg.name} on {topo.name} would make about {count:,} messages "
            f"(limit {MAX_MESSAGES:,}); use simulate=False (closed form), fewer chips, or a "
            "hierarchical algorithm (fewer, larger messages)"
        )


def _check_size(plan: Plan, topo: Topology, params: FabricParams, name: str, op: str) -> None:
    chunks = np.clip(np.ceil(plan.nbytes / params.chunk_bytes), 1, params.max_chunks)
    events = float(chunks.sum()) * 2
    if events > MAX_EVENTS:
        raise FabricError(
            f"simulating {op} with {name} on {topo.name} needs about {events:,.0f} chunk events "
            f"(limit {MAX_EVENTS:,}); use simulate=False (closed form), fewer chips, or a larger "
            "FabricParams(chunk_bytes=...)"
        )
