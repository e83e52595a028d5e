"""Collective algorithms: the strategy base, the result of a closed form, hop-cost helpers.

Notation: n participants, S bytes (the nccl-tests "size": the buffer of an all-reduce or a
broadcast, the gathered output of an all-gather, the input of a reduce-scatter, the send buffer
of an all-to-all), B the per-direction bandwidth of the link a step uses, alpha the per-message
cost (message overhead + link latencies on the route). A step costs alpha + m/B for a message
of m bytes; where the hops of a ring differ (NeuronLink and EFA) see :func:`_chain`.

Sources: Thakur, Rabenseifner and Gropp, "Optimization of collective communication operations
in MPICH", IJHPCA 19(1), 2005 (ring, recursive doubling/halving, binomial tree, pipelined
chain); nccl-tests ``doc/PERFORMANCE.md`` (sizes and bus bandwidth); "How to Scale Your Model"
(jax-ml scaling-book), the sharding chapter (tori: all axes at once, V/(W k)).
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from . import _plan as P
from ._topology import Topology

__all__ = ["OPS", "Algorithm", "Estimate"]

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast")


@dataclass(frozen=True)
class Estimate:
    """A closed-form time with the formula that gave it."""

    time: float
    formula: str
    kind: str = "exact"  # "exact", "estimate" (hops differ, ports shared) or "bound" (lower)
    caveat: str = ""  # why it is not exact

    def __post_init__(self) -> None:
        object.__setattr__(self, "time", float(self.time))  # plain float, not numpy

    @property
    def exact(self) -> bool:
        """True when a contention-free simulation reproduces it (within 2%)."""
        return self.kind == "exact"


# Hop classes ------------------------------------------------------------------------------


def _classes(pairs: list[tuple[float, float]], weights=None) -> np.ndarray:
    """Distinct (B, alpha) hop classes with the share of hops in each: shape (k, 3)."""
    arr = np.array(pairs, dtype=float).reshape(-1, 2)
    w = np.ones(len(arr)) if weights is None else np.asarray(weights, float)
    uniq, inv = np.unique(arr, axis=0, return_inverse=True)
    share = np.bincount(inv.ravel(), weights=w, minlength=len(uniq))
    return np.column_stack([uniq, share / share.sum()])


def _chain(classes: np.ndarray, m) -> np.ndarray:
    """Per-step cost of a ring whose hops differ (vectorised over m).

    Each chip waits for its upstream neighbour, so the wait of a step averages over the
    ring's hops, sum_h share_h (alpha_h + m / B_h); the slowest link must still carry every
    message, m / min B. With one hop class this is exactly alpha + m / B.
    """
    m = np.asarray(m, float).reshape(1, -1)
    B, a, w = classes[:, 0][:, None], classes[:, 1][:, None], classes[:, 2][:, None]
    return np.maximum((w * (a + m / B)).sum(axis=0), (m / B).max(axis=0))


def _step(classes: np.ndarray, m) -> np.ndarray:
    """c(m) = max over hop classes of alpha + m / B (vectorised over m)."""
    m = np.asarray(m, float)
    return np.max(classes[:, 1][:, None] + m.reshape(1, -1) / classes[:, 0][:, None], axis=0)


def _ring_classes(t: Topology) -> np.ndarray:
    """Hop classes of the ring order (both directions; the fabrics here are symmetric)."""
    if "ring" not in t.memo:
        t.memo["ring"] = _ring_hops(t)
    return t.memo["ring"]


def _ring_hops(t: Topology) -> np.ndarray:
    if t.kind == "cluster":
        o = t.part.ring_order()
        local = [t.part.hop(int(a), int(b)) for a, b in itertools.pairwise(o)]
        if t.parts == 1:
            local.append(t.part.hop(int(o[-1]), int(o[0])))
            return _classes(local)
        efa = (t.efa_bandwidth, t.message_overhead + 2 * t.efa_latency)
        return _classes([*local, efa])  # per part: m - 1 local hops and one EFA hop
    o = t.ring_order()
    return _classes([t.hop(int(a), int(b)) for a, b in zip(o, np.roll(o, -1), strict=True)])


def _shared_port(t: Topology) -> float:
    """Bandwidth of the one port a chip uses for every peer (a switch, or EFA for one-chip
    parts), which both ring directions share; 0 where each neighbour has its own link."""
    if t.kind == "switch":
        return t.axis_bandwidth[0]
    if t.kind == "cluster" and t.part.kind == "switch":
        return t.part.axis_bandwidth[0]
    if t.kind == "cluster" and t.part.kind == "single":
        return t.efa_bandwidth
    if t.kind == "torus" and t.chips == 2:  # a ring of two: both ways lead to one neighbour
        return t.axis_bandwidth[0]
    return 0.0


def _port_classes(t: Topology, classes: np.ndarray, directions: int) -> np.ndarray:
    """Hop classes as each direction of a ring sees them when both leave through one port.

    Where each neighbour has its own link (a torus of 3 or more along the ring) nothing
    changes. On a shared port (:func:`_shared_port`) the two directions run in step: both
    start together and each step waits for that step's arrivals, so a step's two messages
    pay their alphas side by side and then share the port: alpha + 2 m / B, which is the
    one-way ring's step for the same data (m = S/(2n) each way against S/n one way). Neither
    direction's overhead hides under the other's bytes: that needs the two half a step out of
    phase, and nothing puts them there. The hops through the shared port therefore count at
    B / directions; a cluster's EFA hops between switched parts have their own link."""
    port = _shared_port(t)
    if directions < 2 or not port:
        return classes
    out = classes.copy()
    shared = np.ones(len(out), bool)
    if t.kind == "cluster" and t.part.kind == "switch":  # the EFA hop is not the switch port
        efa = (t.efa_bandwidth, t.message_overhead + 2 * t.efa_latency)
        shared = ~((out[:, 0] == efa[0]) & (out[:, 1] == efa[1]))
    out[shared, 0] /= directions
    return out


def _pieces(S: float, n: int, cls: np.ndarray) -> int:
    """Pieces of a pipelined chain broadcast: sqrt((n-2) S / (B alpha)), clamped to 1..64
    (Thakur et al. 2005: the optimum of (n - 2 + P)(alpha + S/(P B)))."""
    B, a = cls[:, 0].min(), max(cls[:, 1].max(), 1e-12)
    return int(min(64, max(1, round(math.sqrt(max(n - 2, 0) * S / (B * a))))))


# Strategy base ------------------------------------------------------------------------------


class Algorithm(ABC):
    """A collective algorithm: which ops and topologies it fits, its closed form, its plan."""

    name = ""
    ops: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ("torus", "switch", "cluster")
    summary = ""

    def misfit(self, op: str, t: Topology) -> str | None:
        """Why this algorithm cannot run ``op`` on ``t`` (None if it can)."""
        if op not in self.ops:
            return (
                f"algorithm {self.name!r} has no {op} (it does {', '.join(self.ops)}); "
                "use algorithm='auto' or one listed by trnlab.fabric.algorithms(op, system)"
            )
        if t.kind not in self.kinds:
            return (
                f"algorithm {self.name!r} needs a {' or '.join(self.kinds)} fabric; {t.name} is a "
                f"{t.kind}. Use algorithm='auto' or one listed by trnlab.fabric.algorithms()"
            )
        return None

    @abstractmethod
    def closed_form(self, op: str, S: float, t: Topology) -> Estimate:
        """The alpha-beta time of ``op`` on ``S`` bytes over ``t``."""

    @abstractmethod
    def plan(self, op: str, S: float, t: Topology) -> P.Plan:
        """The message-level schedule the simulator runs."""

    @abstractmethod
    def messages(self, op: str, t: Topology) -> int:
        """How many messages :meth:`plan` would make (an upper estimate, without making them)."""
