"""Direct exchange (the Neuron runtime's Mesh): every chip sends straight to every other chip.

On a non-blocking switch (Trn3's NeuronSwitch-v1) one exchange costs alpha + (n-1)/n S/B,
limited by each chip's injection bandwidth. On a torus the messages follow shortest paths
(dimension-order routing, the shorter way round each axis), so links carry the traffic of the
pairs routed through them: with uniform traffic a link of axis j carries on average
S D_j / (d_j w_j) bytes, D_j the sum of ring distances 0..d_j-1 and w_j the directions in use
(2 for d_j > 2), and the busiest exactly that unless halfway ties load the two directions
unevenly (rings of 6, 10, 14... chips). On the slowest axis of a 4-ring that is S/2 per link,
exactly the bisection bound nS/4 over 2 n/d links: shortest-path routing reaches the bound,
relaying does not.

Against the simulation (flows sharing links max-min fairly): one exchange of equal messages,
all started together, gives every flow at least B_l / N_l on its bottleneck link l (N_l the
flows that ever cross it), so every flow has drained by the busiest link's bytes over its
bandwidth. The simulated time therefore lies between overhead + that load and the closed form
(which adds the longest route's latency); where every link in use carries the same number of
flows (axes alike, ties balanced) all flows drain together and the two agree exactly.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from . import _plan as P
from ._base import OPS, Algorithm, Estimate
from ._topology import Topology

__all__ = ["Direct", "torus_link_load"]


@cache
def _ring_link_pairs(d: int) -> tuple[int, bool]:
    """Most (source, destination) pairs of a ring of ``d`` that cross one directed link under
    the torus's shortest-way routing (halfway round: even coordinates one way, odd the other),
    and whether every link in use carries that many (the loads are balanced)."""
    if d < 2:
        return 0, True
    s = np.arange(d)[:, None]
    k = np.arange(1, d)[None, :]  # clockwise distance from s to its destination
    tie = (2 * k == d) & (d > 2)
    cw = (k < d - k) | (tie & (s % 2 == 0)) | ((d == 2) & (k == 1))
    counts = np.zeros((2, d), np.int64)
    for src, dist, way in zip(*np.broadcast_arrays(s, k, cw), strict=True):
        for a, kk, w in zip(src, dist, way, strict=True):
            hops = kk if w else d - kk
            links = (a + np.arange(hops)) % d if w else (a - np.arange(hops)) % d
            counts[0 if w else 1, links] += 1
    used = counts[counts > 0]
    return int(used.max()), bool(used.min() == used.max())


def torus_link_load(t: Topology, S: float) -> float:
    """Seconds the busiest link of a torus needs for a uniform exchange of S bytes per chip
    (each chip sends S/n to every other) over dimension-order shortest paths.

    A link of axis j carries the pairs of its ring that cross it, each for the n/d_j ways of
    choosing the other coordinates, so S c_j / d_j bytes, c_j the ring's busiest link count
    (:func:`_ring_link_pairs`). With halfway ties split by parity that is the average,
    D_j / w_j, except on rings of 6, 10, 14... chips, where a tie window of d_j/2 (odd) links
    holds one more even source than odd on every other link."""
    worst = 0.0
    for d, b in zip(t.shape, t.axis_bandwidth, strict=True):
        worst = max(worst, S * _ring_link_pairs(d)[0] / d / b)
    return worst


def _symmetric(t: Topology) -> bool:
    """Every link in use carries the same number of equal flows: axes alike, loads balanced."""
    return (
        len(set(t.shape)) == 1
        and len(set(t.axis_bandwidth)) == 1
        and len(set(t.axis_latency)) == 1
        and _ring_link_pairs(t.shape[0])[1]
    )


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
        if t.kind == "torus" and op != "broadcast" and _symmetric(t):
            kind = "exact"  # every flow drains at the busiest link's fair share
        caveat = {
            "exact": "",
            "estimate": "an upper bound within one route's latency: the busiest link's bytes "
            "of shortest-path routes, with routes sharing links fairly (simulate for the rest)",
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
