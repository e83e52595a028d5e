"""Collective algorithms as small strategies: where each fits, its closed form, its plan.

Notation: n participants, S bytes (the nccl-tests "size": the buffer of an all-reduce or a
broadcast, the gathered output of an all-gather, the input of a reduce-scatter, the send buffer
of an all-to-all), B the per-direction bandwidth of the link a step uses, alpha the per-message
cost (message overhead + link latencies on the route). A step costs alpha + m/B for a message
of m bytes; where the hops of one step differ (a ring through NeuronLink and EFA) the step
costs its slowest hop, c(m) = max over hops (alpha_h + m / B_h).

Sources: Thakur, Rabenseifner and Gropp, "Optimization of collective communication operations
in MPICH", IJHPCA 19(1), 2005 (ring, recursive doubling/halving, binomial tree, pipelined
chain); nccl-tests ``doc/PERFORMANCE.md`` (sizes and bus bandwidth); "How to Scale Your Model"
(jax-ml scaling-book), the sharding chapter (tori: all axes at once, V/(W k)).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from . import _plan as P
from ._params import FabricError
from ._topology import Topology

__all__ = ["ALGORITHMS", "OPS", "Estimate", "algorithm"]

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast")


@dataclass(frozen=True)
class Estimate:
    """A closed-form time with the formula that gave it."""

    time: float
    formula: str
    kind: str = "exact"  # "exact", "estimate" (hops differ, ports shared) or "bound" (lower)
    caveat: str = ""  # why it is not exact

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


def _pieces(S: float, n: int, cls: np.ndarray) -> int:
    """Pieces of a pipelined chain broadcast: sqrt((n-2) S / (B alpha)), clamped to 1..64
    (Thakur et al. 2005: the optimum of (n - 2 + P)(alpha + S/(P B)))."""
    B, a = cls[:, 0].min(), max(cls[:, 1].max(), 1e-12)
    return int(min(64, max(1, round(math.sqrt(max(n - 2, 0) * S / (B * a))))))


# Strategy base ------------------------------------------------------------------------------


class Algorithm:
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

    def closed_form(self, op: str, S: float, t: Topology) -> Estimate:
        raise NotImplementedError

    def plan(self, op: str, S: float, t: Topology) -> P.Plan:
        raise NotImplementedError

    def messages(self, op: str, t: Topology) -> int:
        """How many messages :meth:`plan` would make (an upper estimate, without making them)."""
        raise NotImplementedError


# Ring ---------------------------------------------------------------------------------------


def _ring_plan(op, S, groups: np.ndarray, directions: int, pieces: int = 1) -> P.Plan:
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
        return _ring_plan(op, S, t.ring_order()[None, :], self.directions, pieces)

    def messages(self, op, t):
        n, d = t.chips, self.directions
        if op == "broadcast":
            return d * (n - 1) * 64
        return d * n * (2 if op == "all_reduce" else 1) * (n - 1)


class BidirectionalRing(Ring):
    name = "bidirectional_ring"
    directions = 2
    summary = "half the data each way round the ring: both directions of every link"


# Torus: dimension by dimension, one shard per axis ---------------------------------------


def _axis_rings(shape: tuple[int, ...], axis: int) -> np.ndarray:
    """All rings along ``axis`` of a torus, shape (n / d, d), chips in ring order."""
    idx = np.arange(int(np.prod(shape))).reshape(shape)
    return np.moveaxis(idx, axis, -1).reshape(-1, shape[axis])


def _torus_phases(op: str, S: float, shape: tuple[int, ...]):
    """For each shard s: the phases (axis, op, data per chip) of a torus collective.

    Shard s (of k, S/k bytes) goes through the axes in the order s, s+1, ... (mod k), so at
    any moment the k shards use k different axes: all 2k links of a chip are busy (the
    scaling-book's V/(W k)). Reduce-scatter shrinks the data by d at each axis; all-gather
    grows it back; all-to-all keeps S on one shard, axis after axis.
    """
    k = len(shape)
    if op == "all_to_all":
        return [[(a, "all_to_all", S) for a in range(k)]]
    out = []
    for s in range(k):
        order = [(s + q) % k for q in range(k)]
        data, rs = S / k, []
        for a in order:
            rs.append((a, "reduce_scatter", data))
            data /= shape[a]
        ag = [(a, "all_gather", d) for (a, _, d) in reversed(rs)]
        out.append({"reduce_scatter": rs, "all_gather": ag, "all_reduce": rs + ag}[op])
    return out


class Torus(Algorithm):
    name = "torus"
    ops = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
    kinds = ("torus",)
    summary = "bidirectional rings along each torus axis in turn, one data shard per axis"

    def _steps(self, op, S, t):
        """Per shard, the list of (axis, message bytes) of every step."""
        shards = []
        for phases in _torus_phases(op, S, t.shape):
            steps = []
            for a, sub, data in phases:
                d = t.shape[a]
                if sub == "all_to_all":
                    steps += [(a, (d - 1 - j) * data / (2 * d)) for j in range(d - 1)]
                else:
                    steps += [(a, data / (2 * d))] * (d - 1)
            shards.append(steps)
        return shards

    def closed_form(self, op, S, t):
        # Each step of axis a costs alpha_a + m / B_a (bidirectional ring, S/(2d) per way);
        # a chip waits for all its shards at each step: T = Σ_steps max_shards (alpha + m/B).
        alpha = [t.message_overhead + x for x in t.axis_latency]
        shards = self._steps(op, S, t)
        length = max(len(s) for s in shards)
        total = 0.0
        for i in range(length):
            total += max(alpha[a] + m / t.axis_bandwidth[a] for s in shards if i < len(s)
                         for (a, m) in [s[i]])  # fmt: skip
        return Estimate(total, "Σ_steps max_shards (alpha_a + S_step/(2 d_a B_a))")

    def plan(self, op, S, t):
        plans = []
        for phases in _torus_phases(op, S, t.shape):
            seq = [_ring_plan(sub, data, _axis_rings(t.shape, a), 2) for a, sub, data in phases]
            plans.append(P.concat(*seq))
        return P.concat(*plans, sequential=False)

    def messages(self, op, t):
        per_axis = 2 * t.chips * sum(d - 1 for d in t.shape)
        shards = 1 if op == "all_to_all" else len(t.shape)
        return shards * per_axis * (2 if op == "all_reduce" else 1)


# Recursive doubling / tree -----------------------------------------------------------------


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0


class RecursiveDoubling(Algorithm):
    name = "recursive_doubling"
    ops = ("all_reduce", "reduce_scatter", "all_gather", "broadcast")
    summary = "log2(n) rounds with partners 1, 2, 4... apart; latency-optimal (tree)"

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
        if op == "all_reduce":  # full-vector exchange each round
            return [(1 << k, S) for k in range(L)]
        if op == "all_gather":  # round k exchanges 2^k S/n
            return [(1 << k, (1 << k) * S / n) for k in range(L)]
        return [(1 << (L - 1 - k), S / (2 << k)) for k in range(L)]  # recursive halving

    def _hop_class(self, t: Topology, dist: int, folding: bool = False, tree: bool = False):
        n = t.chips
        # Tree (broadcast) round: only chips i < dist send, to i + dist.
        i = np.arange(min(dist, n - dist)) if tree else np.arange(n)
        j = (i + dist) if (folding or tree) else (i ^ dist)
        if t.kind == "cluster":
            m = t.part.chips
            ok = j < n
            cross = np.any((i[ok] // m) != (j[ok] // m))
            pairs = []
            if cross:
                pairs.append((t.efa_bandwidth, t.message_overhead + 2 * t.efa_latency))
            loc = [(a % m, b % m) for a, b in zip(i[ok][:m], j[ok][:m], strict=True)
                   if a // m == b // m and a != b]  # fmt: skip
            pairs += [t.part.hop(a, b) for a, b in loc]
            return _classes(pairs)
        pairs = [t.hop(int(a), int(b)) for a, b in zip(i, j, strict=True) if b < n and a != b]
        return _classes(pairs)

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
        what = {"broadcast": "⌈log2 n⌉·(alpha + S/B)", "all_reduce": "log2 n·(alpha + S/B)"}
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
        return t.chips * (math.ceil(math.log2(t.chips)) + 2)


# Direct exchange ----------------------------------------------------------------------------


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


# Hierarchical -------------------------------------------------------------------------------


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
        seq.append(_ring_plan(efa_op, S / m, groups, 1))
        if op in ("all_reduce", "all_gather"):
            loc = self._local("all_gather", S, t)
            if loc:
                seq.append(self._replicate(loc[0].plan("all_gather", S, t.part), t))
        return P.concat(*seq)

    def messages(self, op, t):
        loc = self._local("reduce_scatter", 1.0, t)
        local = loc[0].messages("all_reduce", t.part) * t.parts if loc else 0
        return local + 2 * t.chips * (t.parts - 1)


ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (Ring(), BidirectionalRing(), Torus(), RecursiveDoubling(), Direct(), Hierarchical())
}
_ALIASES = {"tree": "recursive_doubling", "bidir_ring": "bidirectional_ring", "switch": "direct"}


def algorithm(name: str) -> Algorithm:
    """The algorithm called ``name`` (``tree`` and ``bidir_ring`` are aliases)."""
    key = str(name).strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key not in ALGORITHMS:
        raise FabricError(
            f"unknown algorithm {name!r}; trnlab.fabric knows {', '.join(ALGORITHMS)} "
            "(aliases: tree, bidir_ring) and 'auto'"
        )
    return ALGORITHMS[key]
