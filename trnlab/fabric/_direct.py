"""Direct exchange (the Neuron runtime's Mesh): every chip sends straight to every other chip.

On a non-blocking switch (Trn3's NeuronSwitch-v1) one exchange costs alpha + (n-1)/n S/B,
limited by each chip's injection bandwidth. On a torus the messages follow shortest paths
(dimension-order routing, the shorter way round each axis), so links carry the traffic of the
pairs routed through them: with uniform traffic every link of axis j carries
S D_j / (d_j w_j) bytes, D_j the sum of ring distances 0..d_j-1 and w_j the directions in use
(2 for d_j > 2). On the slowest axis of a 4-ring that is S/2 per link, exactly the bisection
bound nS/4 over 2 n/d links: shortest-path routing reaches the bound, relaying does not.
"""

from __future__ import annotations

import numpy as np

from . import _plan as P
from ._base import OPS, Algorithm, Estimate
from ._topology import Topology

__all__ = ["Direct", "torus_link_load"]


def torus_link_load(t: Topology, S: float) -> float:
    """Seconds the busiest link of a torus needs for a uniform exchange of S bytes per chip
    (each chip sends S/n to every other) over dimension-order shortest paths."""
    worst = 0.0
    for d, b in zip(t.shape, t.axis_bandwidth, strict=True):
        dist = np.minimum(np.arange(d), d - np.arange(d)).sum()  # sum of ring distances
        worst = max(worst, S * dist / (d * min(2, d - 1)) / b)
    return worst


class Direct(Algorithm):
    name = "direct"
    ops = OPS
    summary = "every chip sends straight to every other chip; one step on a non-blocking switch"

    def _inject(self, t: Topology):
        """(alpha, B, exact): per-chip injection bandwidth and worst alpha of one exchange."""
        if t.kind == "switch":
            return t.message_overhead + 2 * t.axis_latency[0], t.axis_bandwidth[0], True
        if t.kind == "cluster":
            return t.message_overhead + 2 * t.efa_latency, t.efa_bandwidth, False
        hops = sum(d // 2 for d in t.shape)
        alpha = t.message_overhead + hops * max(t.axis_latency)
        return alpha, 2 * sum(t.axis_bandwidth), False

    def _exchange(self, S_each: float, t: Topology, n: int) -> float:
        alpha, B, _ = self._inject(t)
        # Injection bound: each chip sends (n-1) messages of S_each through its links.
        time = (n - 1) * S_each / B
        if t.kind == "cluster":  # only the traffic leaving the part crosses EFA
            time = (n - t.part.chips) * S_each / B
        if t.kind == "torus":
            time = max(time, torus_link_load(t, n * S_each))
        return alpha + time

    def closed_form(self, op, S, t):
        n = t.chips
        kind = "exact" if self._inject(t)[2] else ("estimate" if t.kind == "torus" else "bound")
        caveat = {
            "exact": "",
            "estimate": "an estimate: the busiest link's share of shortest-path routes, "
            "without queueing (simulate for that)",
            "bound": "a lower bound (injection): routes share links",
        }[kind]
        if op == "broadcast":
            # The root's n-1 copies leave through its links: alpha + (n-1) S / B.
            alpha, B, _ = self._inject(t)
            time = alpha + (n - (t.part.chips if t.kind == "cluster" else 1)) * S / B
            if t.kind == "torus":  # n/2 copies cross a bisection of 2 n/d links per way
                time = max(time, alpha + max(d * S / (4 * b) for d, b in
                                             zip(t.shape, t.axis_bandwidth, strict=True)))  # fmt: skip
            return Estimate(time, "alpha + (n-1)·S/B (root link)", kind, caveat)
        # One exchange of S/n pieces: alpha + (n-1)/n S/B; all-reduce is two (RS then AG).
        one = self._exchange(S / n, t, n)
        if op == "all_reduce":
            return Estimate(2 * one, "2·(alpha + (n-1)/n·S/B)", kind, caveat)
        return Estimate(one, "alpha + (n-1)/n·S/B", kind, caveat)

    def plan(self, op, S, t):
        n = t.chips
        i = np.arange(n)[None, :]
        j = np.arange(1, n)[:, None]  # shift order: at any slot the senders hit distinct chips
        if op == "broadcast":
            return P.make(0, np.arange(1, n), S, 0)
        one = P.make(i, (i + j) % n, S / n, 0)
        return P.concat(one, one) if op == "all_reduce" else one

    def messages(self, op, t):
        n = t.chips
        return n - 1 if op == "broadcast" else n * (n - 1) * (2 if op == "all_reduce" else 1)
