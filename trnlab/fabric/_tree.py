"""Recursive halving and doubling (the Neuron runtime's RDH) and the binomial tree.

Thakur, Rabenseifner and Gropp, IJHPCA 2005: recursive halving reduce-scatter, recursive
doubling all-gather, their concatenation as the all-reduce (Rabenseifner's algorithm, which the
Neuron runtime docs call RDH: 2 log2 n steps, (n-1)/n S each way, bandwidth-optimal),
binomial-tree broadcast, and the fold for a number of chips that is not a power of two.
"""

from __future__ import annotations

import math

import numpy as np

from . import _plan as P
from ._base import Algorithm, Estimate, _classes, _step
from ._topology import Topology

__all__ = ["RecursiveDoubling"]


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0


class RecursiveDoubling(Algorithm):
    name = "recursive_doubling"
    ops = ("all_reduce", "reduce_scatter", "all_gather", "broadcast")
    summary = "log2(n) rounds with partners 1, 2, 4... apart (RDH); few steps, full bandwidth"

    def misfit(self, op, t):
        why = super().misfit(op, t)
        if why is None and op in ("reduce_scatter", "all_gather") and not _pow2(t.chips):
            return (
                f"recursive {'halving' if op == 'reduce_scatter' else 'doubling'} {op} needs a "
                f"power-of-two number of chips; {t.name} has {t.chips}. Use algorithm='ring' "
                "(any n) or 'auto'"
            )
        return why

    def _rounds(self, op, S, n):
        """(partner distance, bytes) of each round; plus folding rounds for odd counts."""
        if op == "broadcast":  # binomial tree: ceil(log2 n) rounds of S
            return [(1 << k, S) for k in range(math.ceil(math.log2(n)))]
        p = 1 << (n.bit_length() - 1)
        L = int(math.log2(p))
        halving = [(1 << (L - 1 - k), S / (2 << k)) for k in range(L)]  # S/2, S/4 ... S/p
        doubling = [(1 << k, (1 << k) * S / p) for k in range(L)]  # S/p, 2S/p ... S/2
        if op == "all_reduce":  # reduce-scatter by halving, then all-gather by doubling
            return halving + doubling
        return doubling if op == "all_gather" else halving

    def _hop_class(self, t: Topology, dist: int, folding: bool = False, tree: bool = False):
        """Hop classes of one round: pairs (i, i xor dist), or (i, i + dist) for the fold and
        the tree (only i < dist send). Memoised per topology."""
        key = ("rd", dist, folding, tree)
        if key not in t.memo:
            t.memo[key] = self._pairs_class(t, dist, folding, tree)
        return t.memo[key]

    def _pairs_class(self, t: Topology, dist: int, folding: bool, tree: bool) -> np.ndarray:
        n = t.chips
        # Tree (broadcast) round: only chips i < dist send, to i + dist.
        senders = min(dist, n - dist) if tree else n
        if t.kind == "cluster":
            m = t.part.chips
            efa = (t.efa_bandwidth, t.message_overhead + 2 * t.efa_latency)
            if dist >= m:  # every pair lies in two different parts: all over EFA
                return _classes([efa])
            # A crossing pair, if any, is among the first 2m + 2 dist senders (the first part
            # boundary), so a million chips need not be scanned.
            senders = min(senders, 2 * m + 2 * dist)
        i = np.arange(senders)
        j = (i + dist) if (folding or tree) else (i ^ dist)
        ok = (j < n) & (i != j)
        i, j = i[ok], j[ok]
        if t.kind == "cluster":
            pairs = []
            if np.any(i // m != j // m):
                pairs.append(efa)
            same = (i // m == j // m) & (i < m)
            pairs += [t.part.hop(int(a), int(b)) for a, b in zip(i[same], j[same], strict=True)]
            return _classes(pairs)
        return _classes([t.hop(int(a), int(b)) for a, b in zip(i, j, strict=True)])

    def closed_form(self, op, S, t):
        n = t.chips
        p = 1 << (n.bit_length() - 1)
        kind = "exact" if t.kind == "switch" and (p == n or op == "broadcast") else "estimate"
        caveat = (
            ""
            if kind == "exact"
            else (
                "an estimate (each round at its slowest pair): partners further than one hop "
                "share links; simulate for the contention"
                if t.kind != "switch"
                else "an estimate: folding the extra chips in makes some rounds meet others"
            )
        )
        total = 0.0
        for dist, m in self._rounds(op, S, n):
            total += _step(self._hop_class(t, dist, tree=op == "broadcast"), m)[0]
        if op == "all_reduce" and p != n:
            # Non-power-of-two (Thakur et al. 2005): the n-p extra chips first fold their
            # vector into a partner and get the result back at the end: two more rounds.
            total += 2 * _step(self._hop_class(t, p, folding=True), S)[0]
        what = {
            "broadcast": "⌈log2 n⌉·(alpha + S/B)",
            "all_reduce": "2 log2 n·alpha + 2(n-1)/n·S/B",
        }
        return Estimate(total, what.get(op, "log2 n·alpha + (n-1)/n·S/B"), kind, caveat)

    def plan(self, op, S, t):
        n = t.chips
        i = np.arange(n)
        if op == "broadcast":
            plans = []
            for k, (dist, m) in enumerate(self._rounds(op, S, n)):
                src = i[(i < dist) & (i + dist < n)]
                plans.append(P.make(src, src + dist, m, k))
            return P.concat(*plans, sequential=False)
        p = 1 << (n.bit_length() - 1)
        core = i[:p]
        plans = []
        if p != n:  # fold
            extra = i[p:]
            plans.append(P.make(extra, extra - p, S, 0))
        rounds = [
            P.make(core, core ^ dist, m, k) for k, (dist, m) in enumerate(self._rounds(op, S, n))
        ]
        plans.append(P.concat(*rounds, sequential=False))
        if p != n:
            extra = i[p:]
            plans.append(P.make(extra - p, extra, S, 0))
        return P.concat(*plans)

    def messages(self, op, t):
        rounds = math.ceil(math.log2(t.chips)) * (2 if op == "all_reduce" else 1)
        return t.chips * (rounds + 2)
