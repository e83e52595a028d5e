"""Torus collectives: bidirectional rings along each axis in turn, one data shard per axis.

"How to Scale Your Model" (jax-ml scaling-book), sharding chapter: on a torus with k axes and
wrap-around an all-gather takes about V/(W k), every axis busy at once.
"""

from __future__ import annotations

import numpy as np

from . import _plan as P
from ._base import Algorithm, Estimate
from ._ring import ring_plan

__all__ = ["Torus"]


def _axis_rings(shape: tuple[int, ...], axis: int) -> np.ndarray:
    """All rings along ``axis`` of a torus, shape (n / d, d), chips in ring order."""
    idx = np.arange(int(np.prod(shape))).reshape(shape)
    return np.moveaxis(idx, axis, -1).reshape(-1, shape[axis])


def _torus_phases(op: str, S: float, shape: tuple[int, ...]):
    """For each shard s: the phases (axis, op, data per chip) of a torus collective.

    Shard s (of k, S/k bytes) goes through the axes in the order s, s+1, ... (mod k), so at
    any moment the k shards use k different axes: all 2k links of a chip are busy (the
    scaling-book's V/(W k)). Reduce-scatter shrinks the data by d at each axis; all-gather
    grows it back.
    """
    k = len(shape)
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
    # No all-to-all: relaying slices ring by ring moves each byte over every hop it crosses
    # in separate steps; shortest-path routing (``direct``) reaches the bisection bound.
    ops = ("all_reduce", "reduce_scatter", "all_gather")
    kinds = ("torus",)
    summary = "bidirectional rings along each torus axis in turn, one data shard per axis"

    def _steps(self, op, S, t):
        """Per shard, the list of (axis, message bytes) of every step."""
        shards = []
        for phases in _torus_phases(op, S, t.shape):
            steps = []
            for a, _, data in phases:
                d = t.shape[a]
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
            seq = [ring_plan(sub, data, _axis_rings(t.shape, a), 2) for a, sub, data in phases]
            plans.append(P.concat(*seq))
        return P.concat(*plans, sequential=False)

    def messages(self, op, t):
        per_axis = 2 * t.chips * sum(d - 1 for d in t.shape)
        return len(t.shape) * per_axis * (2 if op == "all_reduce" else 1)
