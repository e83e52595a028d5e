"""Hierarchical collectives: inside each NeuronLink domain, then across EFA, then inside.

The NeuronLink domain (an instance or an UltraServer) reduce-scatters with its best exact
algorithm; chips of equal local rank then all-reduce S/m over EFA (m parallel rings, or
recursive halving and doubling when that is faster, as it is for many parts); the domain
all-gathers back. The EFA step carries 1/m of the data, so the slow tier costs little.
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
    summary = "reduce-scatter inside each NeuronLink domain, EFA across, all-gather inside"

    def _local(self, op, S, t: Topology):
        part = t.part
        if part.kind == "single":
            return None
        best = None
        # the 2023 runtime had no mesh (Direct) inside an instance
        local = (Torus(), BidirectionalRing()) if part.runtime == "2023" else (
            Torus(), Direct(), BidirectionalRing())  # fmt: skip
        for alg in local:
            if alg.misfit(op, part) is None:
                est = alg.closed_form(op, S, part)
                if est.exact and (best is None or est.time < best[1].time):
                    best = (alg, est)
        return best

    def _efa(self, op, Sm: float, t: Topology):
        """The EFA phase on Sm = S/m bytes per chip: (name, time, kind), the faster of
        m parallel rings over the P parts, and recursive halving / doubling (Rabenseifner:
        reduce-scatter by halving, all-gather by doubling; P not a power of two folds the
        extra parts in and out with two more full-size steps, Thakur et al. 2005)."""
        parts = t.parts
        if parts == 1:
            return "none", 0.0, "exact"
        cls = _classes([(t.efa_bandwidth, t.message_overhead + 2 * t.efa_latency)])
        ring_steps = 2 * (parts - 1) if op == "all_reduce" else parts - 1
        best = ("ring", ring_steps * _step(cls, Sm / parts)[0], "exact")  # c(S/(mP)) per step
        p = 1 << (parts.bit_length() - 1)
        if op == "all_reduce" or p == parts:
            L = p.bit_length() - 1
            # Halving: steps of Sm/2, Sm/4 ... Sm/p; doubling: the same sizes back up.
            half = float(_step(cls, Sm / 2.0 ** np.arange(1, L + 1)).sum())
            t_ = half * (2 if op == "all_reduce" else 1)
            if p != parts:
                t_ += 2 * _step(cls, Sm)[0]
            if t_ < best[1]:
                best = ("halving_doubling", t_, "exact" if p == parts else "estimate")
        return best

    def closed_form(self, op, S, t):
        m = t.part.chips
        total = 0.0
        if op in ("all_reduce", "reduce_scatter"):
            loc = self._local("reduce_scatter", S, t)
            total += loc[1].time if loc else 0.0
        name, efa, kind = self._efa(op, S / m, t)
        total += efa
        if op in ("all_reduce", "all_gather"):
            loc = self._local("all_gather", S, t)
            total += loc[1].time if loc else 0.0
        formula = f"T_local + T_EFA({name}, S/m per chip) + T_local"
        caveat = "" if kind == "exact" else "an estimate: folding extra parts in shares EFA ports"
        return Estimate(total, formula, kind, caveat)

    def _replicate(self, plan: P.Plan, t: Topology) -> P.Plan:
        off = (np.arange(t.parts) * t.part.chips)[:, None]
        return P.make(
            plan.src[None] + off,
            plan.dst[None] + off,
            plan.nbytes[None],
            plan.step[None],
            plan.lane[None],
        )

    def _efa_plan(self, op, Sm: float, t: Topology) -> P.Plan:
        m, parts = t.part.chips, t.parts
        groups = np.arange(t.chips).reshape(parts, m).T  # row r: local rank r of every part
        name = self._efa(op, Sm, t)[0]
        if name == "none":
            return P.empty()
        if name == "ring":
            return ring_plan(op, Sm, groups, 1)
        p = 1 << (parts.bit_length() - 1)
        L = p.bit_length() - 1
        q = np.arange(p)
        seq = []
        if p != parts:  # fold the extra parts into the first ones
            x = np.arange(p, parts)
            seq.append(P.make(groups[:, x], groups[:, x - p], Sm, 0))
        rounds = []
        if op in ("all_reduce", "reduce_scatter"):
            for k in range(L):
                d = p >> (k + 1)
                rounds.append(P.make(groups[:, q], groups[:, q ^ d], Sm / (2 << k), len(rounds)))
        if op in ("all_reduce", "all_gather"):
            for k in range(L):
                d = 1 << k
                rounds.append(P.make(groups[:, q], groups[:, q ^ d], Sm * d / p, len(rounds)))
        seq.append(P.concat(*rounds, sequential=False))
        if p != parts:
            x = np.arange(p, parts)
            seq.append(P.make(groups[:, x - p], groups[:, x], Sm, 0))
        return P.concat(*seq)

    def plan(self, op, S, t):
        m = t.part.chips
        seq = []
        if op in ("all_reduce", "reduce_scatter"):
            loc = self._local("reduce_scatter", S, t)
            if loc:
                seq.append(self._replicate(loc[0].plan("reduce_scatter", S, t.part), t))
        seq.append(self._efa_plan(op, S / m, t))
        if op in ("all_reduce", "all_gather"):
            loc = self._local("all_gather", S, t)
            if loc:
                seq.append(self._replicate(loc[0].plan("all_gather", S, t.part), t))
        return P.concat(*seq)

    def messages(self, op, t):
        loc = self._local("reduce_scatter", 1.0, t)
        local = loc[0].messages("all_reduce", t.part) * t.parts if loc else 0
        return local + 2 * t.chips * (t.parts - 1)
