"""Hierarchical collectives: inside each NeuronLink domain, then across EFA, then inside.

The NeuronLink domain (an instance or an UltraServer) reduce-scatters with its best exact
algorithm; chips of equal local rank then all-reduce S/m over EFA in m parallel rings; the
domain all-gathers back. The EFA step carries 1/m of the data, so the slow tier costs little.
"""

from __future__ import annotations

import numpy as np

from . import _plan as P
from ._base import Algorithm, Estimate, _classes, _step
from ._direct import Direct
from ._ring import BidirectionalRing, ring_plan
from ._topology import Topology
from ._torus import Torus

__all__ = ["Hierarchical"]


class Hierarchical(Algorithm):
    name = "hierarchical"
    ops = ("all_reduce", "reduce_scatter", "all_gather")
    kinds = ("cluster",)
    summary = "reduce-scatter inside each NeuronLink domain, ring over EFA, all-gather inside"

    def _local(self, op, S, t: Topology):
        part = t.part
        if part.kind == "single":
            return None
        best = None
        for alg in (Torus(), Direct(), BidirectionalRing()):
            if alg.misfit(op, part) is None:
                est = alg.closed_form(op, S, part)
                if est.exact and (best is None or est.time < best[1].time):
                    best = (alg, est)
        return best

    def closed_form(self, op, S, t):
        m, parts = t.part.chips, t.parts
        cls = _classes([(t.efa_bandwidth, t.message_overhead + 2 * t.efa_latency)])
        total = 0.0
        if op in ("all_reduce", "reduce_scatter"):
            loc = self._local("reduce_scatter", S, t)
            total += loc[1].time if loc else 0.0
        # Across EFA: m rings (one per local rank) of `parts` chips, each on S/m bytes.
        if parts > 1:
            if op == "all_reduce":
                total += 2 * (parts - 1) * _step(cls, S / (m * parts))[0]
            elif op == "reduce_scatter":
                total += (parts - 1) * _step(cls, S / (m * parts))[0]
            else:
                total += (parts - 1) * _step(cls, S / (m * parts))[0]
        if op in ("all_reduce", "all_gather"):
            loc = self._local("all_gather", S, t)
            total += loc[1].time if loc else 0.0
        return Estimate(total, "T_local(RS) + 2(P-1)·(alpha_EFA + S/(mP·B_EFA)) + T_local(AG)")

    def _replicate(self, plan: P.Plan, t: Topology) -> P.Plan:
        off = (np.arange(t.parts) * t.part.chips)[:, None]
        return P.make(
            plan.src[None] + off, plan.dst[None] + off, plan.nbytes[None], plan.step[None]
        )

    def plan(self, op, S, t):
        m, parts = t.part.chips, t.parts
        groups = np.arange(t.chips).reshape(parts, m).T  # row r: local rank r of every part
        seq = []
        if op in ("all_reduce", "reduce_scatter"):
            loc = self._local("reduce_scatter", S, t)
            if loc:
                seq.append(self._replicate(loc[0].plan("reduce_scatter", S, t.part), t))
        efa_op = op
        seq.append(ring_plan(efa_op, S / m, groups, 1))
        if op in ("all_reduce", "all_gather"):
            loc = self._local("all_gather", S, t)
            if loc:
                seq.append(self._replicate(loc[0].plan("all_gather", S, t.part), t))
        return P.concat(*seq)

    def messages(self, op, t):
        loc = self._local("reduce_scatter", 1.0, t)
        local = loc[0].messages("all_reduce", t.part) * t.parts if loc else 0
        return local + 2 * t.chips * (t.parts - 1)
