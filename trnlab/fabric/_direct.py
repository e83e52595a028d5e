"""Direct exchange: every chip sends straight to every other chip.

On a non-blocking switch (Trn3's NeuronSwitch-v1) one exchange costs alpha + (n-1)/n S/B,
limited by each chip's injection bandwidth; on a torus the routes share links and the form is
a lower bound (injection and bisection), the reason all-to-all traffic favours a switch.
"""

from __future__ import annotations

import numpy as np

from . import _plan as P
from ._base import OPS, Algorithm, Estimate
from ._topology import Topology

__all__ = ["Direct"]


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
            # Bisection bound: n/2 chips send n/2 pieces across a cut of 2 n/d links per way.
            time = max(time, max(d * S_each * n / (8 * b) for d, b in
                                 zip(t.shape, t.axis_bandwidth, strict=True)))  # fmt: skip
        return alpha + time

    def closed_form(self, op, S, t):
        n = t.chips
        kind = "exact" if self._inject(t)[2] else "bound"
        caveat = (
            "" if kind == "exact" else "a lower bound (injection, bisection): routes share links"
        )
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
