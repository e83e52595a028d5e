"""Ring and bidirectional ring: every chip sends to its neighbour, n-1 steps per phase.

Thakur, Rabenseifner and Gropp, IJHPCA 2005 (ring reduce-scatter/all-gather, pipelined chain
broadcast); nccl-tests ``doc/PERFORMANCE.md`` (the 2(n-1)/n and (n-1)/n factors).
"""

from __future__ import annotations

import numpy as np

from . import _plan as P
from ._base import OPS, Algorithm, Estimate, _chain, _pieces, _ring_classes, _shared_port

__all__ = ["BidirectionalRing", "Ring", "ring_plan"]


def ring_plan(op, S, groups: np.ndarray, directions: int, pieces: int = 1) -> P.Plan:
    """Ring plan over each row of ``groups`` (G rings of n chips, in ring order)."""
    n = groups.shape[1]
    if n < 2:
        return P.empty()
    nxt, prv = np.roll(groups, -1, axis=1), np.roll(groups, 1, axis=1)
    dirs = [(groups, nxt), (groups, prv)][:directions]
    share = S / directions
    plans = []
    if op in ("reduce_scatter", "all_gather", "all_reduce"):
        steps = (2 if op == "all_reduce" else 1) * (n - 1)
        k = np.arange(steps)[:, None, None]
        for lane, (src, dst) in enumerate(dirs):
            plans.append(P.make(src[None], dst[None], share / n, k, lane))
    elif op == "all_to_all":
        k = np.arange(n - 1)[:, None, None]
        for lane, (src, dst) in enumerate(dirs):
            # Relay: at step k a chip forwards the n-1-k pieces not yet at their destination.
            plans.append(P.make(src[None], dst[None], (n - 1 - k) * share / n, k, lane))
    elif op == "broadcast":
        # Pipelined chain from position 0: piece p crosses hop i at step p + i.
        p = np.arange(pieces)[:, None, None]
        i = np.arange(n - 1)[None, None, :]
        for d in range(len(dirs)):
            if d == 0:
                s_, d_ = groups[:, :-1], groups[:, 1:]
            else:  # the other way round: 0 -> n-1 -> n-2 ... -> 1
                s_ = np.concatenate([groups[:, :1], groups[:, :1:-1]], axis=1)
                d_ = groups[:, ::-1][:, :-1]
            plans.append(P.make(s_[None], d_[None], share / pieces, p + i, d))
    return P.concat(*plans, sequential=False)


class Ring(Algorithm):
    name = "ring"
    ops = OPS
    directions = 1
    summary = "every chip sends to the next chip of a ring; bandwidth-optimal, latency grows as n"

    def closed_form(self, op, S, t):
        n, d = t.chips, self.directions
        cls = _ring_classes(t)
        # On a switch both directions leave through the chip's one port: no gain from d = 2.
        port_bw = _shared_port(t)
        port = d if port_bw else 1
        kind = "exact" if len(cls) == 1 and port == 1 else "estimate"
        caveat = (
            ""
            if kind == "exact"
            else (
                "an estimate: the ring's hops differ (see _chain)"
                if len(cls) > 1
                else "an estimate: both directions share each chip's one port"
            )
        )

        def c(m):
            # On a shared port the two directions' steps overlap each other's overheads, but
            # the port carries both messages: max(alpha + m/B, 2 m/B).
            m = np.asarray(m, float)
            return np.maximum(_chain(cls, m), port * m / port_bw) if port > 1 else _chain(cls, m)

        def first(m):
            # On a shared port the first step starts both directions together: alpha + 2m/B.
            if port == 1:
                return 0.0
            return max(0.0, cls[:, 1].min() + port * m / port_bw - float(c(m)[0]))

        if op == "all_reduce":
            # Thakur et al. 2005: 2(n-1) steps of S/n: 2(n-1) alpha + 2 (n-1)/n S/B
            m = S / (d * n)
            t_ = 2 * (n - 1) * c(m)[0] + first(m)
            return Estimate(t_, "2(n-1)·(alpha + S/(nB))", kind, caveat)
        if op in ("reduce_scatter", "all_gather"):
            # (n-1) alpha + (n-1)/n S/B
            m = S / (d * n)
            return Estimate((n - 1) * c(m)[0] + first(m), "(n-1)·(alpha + S/(nB))", kind, caveat)
        if op == "all_to_all":
            # Relay: step k carries (n-1-k) S/n; sum = (n-1) alpha + (n-1) S/(2B)
            k = np.arange(1, n)
            t_ = float(c(k * S / (d * n)).sum()) + first((n - 1) * S / (d * n))
            return Estimate(t_, "(n-1)·alpha + (n-1)·S/(2B)", kind, caveat)
        # Broadcast, pipelined chain of P pieces of m = S/P: the last piece leaves the root
        # after P transmissions and crosses n-1 hops; the sends' overheads overlap the
        # transmissions of earlier pieces: (n-1)(alpha + m/B) + (P-1) m/B.
        pieces = _pieces(S / d, n, cls)
        m = S / (d * pieces)
        B = min(cls[:, 0].min(), port_bw / port if port > 1 else np.inf)
        # The chain crosses every hop once: the mean hop cost, not the slowest, times n - 1.
        per_hop = float((cls[:, 2] * (cls[:, 1] + m / cls[:, 0])).sum())
        if port > 1:
            per_hop = max(per_hop, port * m / port_bw)
        t_ = (n - 1) * per_hop + (pieces - 1) * m / B + first(m)
        return Estimate(t_, "(n-1)·(alpha + S/(PB)) + (P-1)·S/(PB)", kind, caveat)

    def plan(self, op, S, t):
        cls = _ring_classes(t)
        pieces = _pieces(S / self.directions, t.chips, cls) if op == "broadcast" else 1
        return ring_plan(op, S, t.ring_order()[None, :], self.directions, pieces)

    def messages(self, op, t):
        n, d = t.chips, self.directions
        if op == "broadcast":
            return d * (n - 1) * 64
        return d * n * (2 if op == "all_reduce" else 1) * (n - 1)


class BidirectionalRing(Ring):
    name = "bidirectional_ring"
    directions = 2
    summary = "half the data each way round the ring: both directions of every link"
