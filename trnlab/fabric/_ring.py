"""Ring and bidirectional ring: every chip sends to its neighbour, n-1 steps per phase.

Thakur, Rabenseifner and Gropp, IJHPCA 2005 (ring reduce-scatter/all-gather, pipelined chain
broadcast); nccl-tests ``doc/PERFORMANCE.md`` (the 2(n-1)/n and (n-1)/n factors).
"""

from __future__ import annotations

import math

import numpy as np

from . import _plan as P
from ._base import OPS, Algorithm, Estimate, _chain, _pieces, _port_classes, _ring_classes

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
        # Each direction carries S/d. Where both directions leave through one port (a switch,
        # EFA for one-chip parts, a ring of two) they share it step by step, so the hops
        # through it count at B/d (see _port_classes): no gain over the one-way ring.
        ring = _ring_classes(t)
        cls = _port_classes(t, ring, d)
        shared = cls is not ring
        if len(cls) > 1:
            kind, caveat = "estimate", "an estimate: the ring's hops differ (see _chain)"
        elif shared and op == "broadcast" and n > 2:
            kind = "estimate"
            caveat = (
                "an estimate: the two chains share each chip's one port only while both pass it"
            )
        else:
            kind, caveat = "exact", ""

        def c(m):
            return _chain(cls, np.asarray(m, float))

        if op == "all_reduce":
            # Thakur et al. 2005: 2(n-1) steps of S/n: 2(n-1) alpha + 2 (n-1)/n S/B
            t_ = 2 * (n - 1) * c(S / (d * n))[0]
            return Estimate(t_, "2(n-1)·(alpha + S/(nB))", kind, caveat)
        if op in ("reduce_scatter", "all_gather"):
            # (n-1) alpha + (n-1)/n S/B
            t_ = (n - 1) * c(S / (d * n))[0]
            return Estimate(t_, "(n-1)·(alpha + S/(nB))", kind, caveat)
        if op == "all_to_all":
            # Relay: step k carries (n-1-k) S/n; sum = (n-1) alpha + (n-1) S/(2B)
            k = np.arange(1, n)
            t_ = float(c(k * S / (d * n)).sum())
            return Estimate(t_, "(n-1)·alpha + (n-1)·S/(2B)", kind, caveat)
        # Broadcast, pipelined chain of P pieces of m = S/P: the last piece leaves the root
        # after P transmissions and crosses n-1 hops; the sends' overheads overlap the
        # transmissions of earlier pieces: (n-1)(alpha + m/B) + (P-1) m/B.
        pieces = _pieces(S / d, n, ring)
        m = S / (d * pieces)
        B = cls[:, 0].min()

        def hop(k):  # the chain crosses every hop once: the mean hop cost, not the slowest
            return float((k[:, 2] * (k[:, 1] + m / k[:, 0])).sum())

        free = hop(ring)
        t_ = (n - 1) * free + (pieces - 1) * m / B
        if shared:
            # Two chains leave the root together, so each streams at the root's shared rate,
            # one piece per m/B' (B' = B/2), for W = (P-1) m/B'. Chain A's last piece (and
            # chain B's, the mirror image) crosses n - 1 hops; it shares a chip's port with
            # the other chain at the root and at chip q (which forwards both chains when
            # 2 <= q <= n-2) only while B's stream, which reaches q after n - q hops and lasts
            # W, is passing: from q = (n - W/h)/2 (h: one hop) to the middle. Each shared hop
            # costs the other chain's bytes once more.
            span = (pieces - 1) * m / B / max(free, 1e-300)
            lo = math.ceil((n - span) / 2 - 1e-9)
            hops = set(range(max(2, lo), min(n // 2, n - 2) + 1))  # q sends both chains
            hops |= set(range(max(1, lo - 1), n // 2))  # q + 1 receives both chains
            k = 1 + len(hops)
            t_ += k * (hop(cls) - free)
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
    summary = (
        "half the data each way round the ring: both directions of every link (no gain where"
        " both leave through one switch port)"
    )
