"""Plans (message lists) and the shortcuts the closed forms take, checked by brute force."""

from __future__ import annotations

import numpy as np
import pytest

from trnlab import catalog, fabric
from trnlab.fabric._algorithms import ALGORITHMS
from trnlab.fabric._plan import gates, make

CLUSTERS = [("trn3-ultraserver-gen2", 3), ("trn2.48xlarge", 7), ("trn3-ultraserver-gen1", 5),
            ("trn2-ultraserver", 3), ("trn1.2xlarge", 9)]  # fmt: skip


@pytest.mark.parametrize(("base", "parts"), CLUSTERS)
def test_tree_round_hop_costs_match_a_full_scan(base, parts):
    t = fabric.topology(catalog.cluster(base, parts))
    rd = ALGORITHMS["recursive_doubling"]
    n, m = t.chips, t.part.chips
    efa = (t.efa_bandwidth, t.message_overhead + 2 * t.efa_latency)
    for dist in (1 << e for e in range(12)):
        if dist >= n:
            break
        for folding, tree in ((False, False), (True, False), (False, True)):
            i = np.arange(min(dist, n - dist)) if tree else np.arange(n)
            j = (i + dist) if (folding or tree) else (i ^ dist)
            ok = (j < n) & (i != j)
            i, j = i[ok], j[ok]
            want = set()
            if np.any(i // m != j // m):
                want.add(efa)
            same = i // m == j // m
            want |= {
                t.part.hop(int(a % m), int(b % m)) for a, b in zip(i[same], j[same], strict=True)
            }
            got = rd._pairs_class(t, dist, folding, tree)
            assert sorted(map(tuple, got[:, :2].tolist())) == sorted(want), (dist, folding, tree)


@pytest.mark.parametrize("system", ["trn2.48xlarge", "trn3-ultraserver-gen1",
                                    catalog.cluster("trn2.48xlarge", 3)])  # fmt: skip
def test_message_counts_bound_the_plans(system):
    t = fabric.topology(system)
    for op in fabric.OPS:
        for name in fabric.algorithms(op, system):
            alg = ALGORITHMS[name]
            plan = alg.plan(op, 1e8, t)
            assert plan.messages <= alg.messages(op, t), (name, op)
            assert (plan.src != plan.dst).all()
            assert plan.src.max() < t.chips and plan.dst.max() < t.chips


def test_plans_move_the_bytes_the_collective_needs():
    # Every chip of a ring reduce-scatter sends (n-1)/n S; an all-reduce twice that.
    t = fabric.topology("trn2.48xlarge")
    S, n = 1.6e9, 16
    for op, per_chip in (("reduce_scatter", 15 / 16 * S), ("all_reduce", 30 / 16 * S)):
        for name in ("ring", "bidirectional_ring", "torus"):
            plan = ALGORITHMS[name].plan(op, S, t)
            sent = np.bincount(plan.src, weights=plan.nbytes, minlength=n)
            assert sent == pytest.approx(np.full(n, per_chip)), (name, op)
    # Direct all-to-all: each chip sends S/n to each of the n - 1 others.
    plan = ALGORITHMS["direct"].plan("all_to_all", S, t)
    pairs = np.zeros((n, n))
    np.add.at(pairs, (plan.src, plan.dst), plan.nbytes)
    assert pairs == pytest.approx((np.ones((n, n)) - np.eye(n)) * S / n)


def test_gates_wait_for_the_latest_earlier_receive_of_the_same_lane():
    # 0 -> 1 at step 0; 1 -> 2 at step 1 (waits for it); 1 -> 0 at step 1 on lane 1 (waits
    # for nothing: lane 1 has not delivered to chip 1); 2 -> 0 at step 3 (waits for step 1).
    plan = make([0, 1, 1, 2], [1, 2, 0, 0], 1.0, [0, 1, 1, 3], [0, 0, 1, 0])
    into, need, wait, ptr, msgs = gates(plan)
    assert wait[0] == -1 and wait[2] == -1
    assert wait[1] == into[0] and wait[3] == into[1]
    assert need.sum() == 4
    assert sorted(msgs[ptr[into[0]] : ptr[into[0] + 1]].tolist()) == [1]
