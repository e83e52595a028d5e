"""Closed forms against values worked by hand (alpha-beta, Thakur et al. 2005; nccl-tests).

The by-hand tests use the pure alpha-beta model (``PURE``: no fixed cost per operation, links at
their full bandwidth) with the catalogue's step latencies: a NeuronLink step 1.5 us (Neuron
runtime docs: "about 1-2 us"), split as 1.0 us software + 0.5 us per hop (assumption); an EFA
hop 15 us (runtime docs: "~15 us"); trn2 link 128 GB/s per direction; Trn3 NeuronSwitch port
1.28 TB/s; trn2 EFA 25 GB/s per chip. The fixed cost and the link efficiency have their own
tests below.
"""

from __future__ import annotations

import math

import pytest

from trnlab import catalog, fabric
from trnlab.fabric import FabricError, FabricParams

GiB = 1 << 30
A1 = 1.5e-6  # one NeuronLink step: 1.0 us software + 0.5 us hop
A2 = 1.0e-6 + 2 * 0.5e-6  # chip -> NeuronSwitch -> chip
AE = 15e-6  # chip -> EFA fabric -> chip
B2 = 128e9
B3 = 1.28e12
BE = 25e9
PURE = FabricParams(op_overhead=0.0, efa_op_overhead=0.0, link_efficiency=1.0)


def cf(op, nbytes, system, alg, **kw):
    kw.setdefault("params", PURE)
    if not isinstance(system, str) and not hasattr(system, "chip"):  # a Topology already
        kw.pop("params")
    return fabric.collective(op, nbytes, system, alg, **kw)


def test_ring_all_reduce_on_trn2_by_hand():
    # 2(n-1) steps of alpha + S/(nB): 30 x (1.5 us + 1 GiB / 16 / 128 GB/s) = 15.77364 ms
    r = cf("all_reduce", GiB, "trn2.48xlarge", "ring")
    assert r.time == pytest.approx(30 * (A1 + GiB / 16 / B2), rel=1e-12)
    assert r.time == pytest.approx(15.77364e-3, rel=1e-6)
    assert r.closed_form.exact
    assert r.algbw == pytest.approx(GiB / r.time)
    assert r.busbw == pytest.approx(r.algbw * 2 * 15 / 16)  # nccl-tests all-reduce factor


def test_ring_reduce_scatter_all_gather_all_to_all_on_a_ring_by_hand():
    ring = fabric.ring(8, 100e9, latency=1e-6, message_overhead=2e-6)
    S = 8e6
    a = 3e-6
    assert cf("reduce_scatter", S, ring, "ring").time == pytest.approx(7 * (a + S / 8 / 100e9))
    assert cf("all_gather", S, ring, "ring").time == pytest.approx(7 * (a + S / 8 / 100e9))
    # Relay all-to-all: sum_k (alpha + k S/(nB)) = 7 alpha + 28/8 S/B = 7 alpha + 7 S/(2B)
    assert cf("all_to_all", S, ring, "ring").time == pytest.approx(7 * a + 7 * S / 2 / 100e9)
    # Bidirectional: half the data each way, same number of steps.
    assert cf("all_reduce", S, ring, "bidirectional_ring").time == pytest.approx(
        14 * (a + S / 16 / 100e9)
    )


def test_bidirectional_ring_through_one_switch_port_gains_nothing_by_hand():
    # On the NeuronSwitch every chip has one port, B3 each way. A bidirectional ring sends
    # S/(2n) to each neighbour per step, both through that port, in step with each other:
    # the two alphas run side by side and the port carries 2 x S/(2n) = S/n, so a step is
    # alpha + S/(nB), the one-way ring's. 144 chips: 2 x 143 steps of (2 us + S/144/B3).
    S = 64 * 2**20
    by_hand = 2 * 143 * (A2 + S / 144 / B3)
    for alg in ("ring", "bidirectional_ring"):
        r = cf("all_reduce", S, "trn3-ultraserver-gen2", alg)
        assert r.time == pytest.approx(by_hand, rel=1e-12), alg
        assert r.closed_form.exact
    rs = cf("reduce_scatter", S, "trn3-ultraserver-gen1", "bidirectional_ring")
    assert rs.time == pytest.approx(63 * (A2 + S / 64 / B3), rel=1e-12)
    # A ring of two: both directions lead to the one neighbour over one link.
    pair = fabric.ring(2, 100e9, latency=1e-6, message_overhead=1e-6)
    two = cf("all_reduce", S, pair, "bidirectional_ring")
    assert two.time == pytest.approx(2 * (2e-6 + S / 2 / 100e9), rel=1e-12)
    # Where each neighbour has its own link (a ring of 8) the two directions do halve the bytes.
    ring8 = fabric.ring(8, 100e9, latency=1e-6, message_overhead=1e-6)
    assert cf("all_reduce", S, ring8, "bidirectional_ring").time == pytest.approx(
        14 * (2e-6 + S / 16 / 100e9)
    )


def test_torus_all_reduce_on_trn2_by_hand():
    # Two shards of S/2, one per axis. Per shard: reduce-scatter along its first axis (3 steps
    # of S/2 / (2 x 4) = S/16 each way), then along the other (3 steps of S/64), then the
    # all-gather back: 6 (alpha + S/(16B)) + 6 (alpha + S/(64B)) = 12 alpha + 0.46875 S/B,
    # which is S (n-1)/n / (k B) with k = 2 axes.
    S = GiB
    r = cf("all_reduce", S, "trn2.48xlarge", "torus")
    assert r.time == pytest.approx(12 * A1 + 0.46875 * S / B2, rel=1e-12)
    rs = cf("reduce_scatter", S, "trn2.48xlarge", "torus")
    assert rs.time == pytest.approx(6 * A1 + 0.234375 * S / B2, rel=1e-12)


def test_direct_exchange_on_the_trn3_switch_by_hand():
    S = 144 * 2**20
    one = A2 + 143 / 144 * S / B3  # alpha + (n-1)/n S / B
    assert cf("all_to_all", S, "trn3-ultraserver-gen2", "direct").time == pytest.approx(one)
    assert cf("reduce_scatter", S, "trn3-ultraserver-gen2", "direct").time == pytest.approx(one)
    assert cf("all_reduce", S, "trn3-ultraserver-gen2", "direct").time == pytest.approx(2 * one)
    assert cf("broadcast", S, "trn3-ultraserver-gen2", "direct").time == pytest.approx(
        A2 + 143 * S / B3  # the root's port sends 143 copies
    )


def test_recursive_doubling_and_tree_on_a_power_of_two_switch_by_hand():
    # RDH all-reduce: halving S/2 ... S/64, then doubling back: 12 alpha + 2 (63/64) S / B
    S = 64e6
    r = cf("all_reduce", S, "trn3-ultraserver-gen1", "recursive_doubling")
    assert r.time == pytest.approx(12 * A2 + 2 * 63 / 64 * S / B3) and r.closed_form.exact
    ag = cf("all_gather", S, "trn3-ultraserver-gen1", "tree")
    assert ag.time == pytest.approx(6 * A2 + 63 / 64 * S / B3)
    b = cf("broadcast", S, "trn3-ultraserver-gen2", "tree")  # ceil(log2 144) = 8 rounds
    assert b.time == pytest.approx(8 * (A2 + S / B3))


def test_non_power_of_two_recursive_doubling_folds_the_extra_chips():
    # 144 = 128 + 16: fold and unfold (two full-vector steps) around 7 halving and 7 doubling
    # rounds over 128 chips; flagged as an estimate.
    S = 64e6
    r = cf("all_reduce", S, "trn3-ultraserver-gen2", "recursive_doubling")
    assert r.time == pytest.approx(2 * (A2 + S / B3) + 14 * A2 + 2 * 127 / 128 * S / B3)
    assert r.closed_form.kind == "estimate" and "fold" in r.closed_form.caveat


def test_hierarchical_all_reduce_on_four_trn2_instances_by_hand():
    c = catalog.cluster("trn2.48xlarge", 4)
    S = GiB
    local_rs = 6 * A1 + (3 / 16 + 3 / 64) * S / B2  # torus reduce-scatter inside an instance
    # Across EFA each chip holds S/16. Recursive halving (S/32, then S/64) and doubling back:
    # 4 alpha + 2 (S/32 + S/64) / B, which beats 16 rings of 4 (6 alpha, same bytes).
    efa = 2 * (2 * AE + (S / 32 + S / 64) / BE)
    r = cf("all_reduce", S, c, "hierarchical")
    assert r.time == pytest.approx(2 * local_rs + efa, rel=1e-12)
    assert "halving_doubling" in r.closed_form.formula
    ring = 2 * 3 * (AE + S / 16 / 4 / BE)
    assert ring > efa


def test_hierarchical_uses_rings_across_three_instances():
    # Three parts: halving/doubling would need a fold (two more full steps); rings win.
    c = catalog.cluster("trn2.48xlarge", 3)
    S = GiB
    local = 6 * A1 + (3 / 16 + 3 / 64) * S / B2
    r = cf("reduce_scatter", S, c, "hierarchical")
    assert r.time == pytest.approx(local + 2 * (AE + S / 16 / 3 / BE), rel=1e-12)
    assert "ring" in r.closed_form.formula


def test_ring_broadcast_is_a_pipelined_chain():
    # Between the one-piece chain and the ideal stream.
    S, n = GiB, 16
    r = cf("broadcast", S, "trn2.48xlarge", "ring")
    assert S / B2 + (n - 1) * A1 < r.time < (n - 1) * (A1 + S / B2)


def test_large_ring_all_reduce_bus_bandwidth_approaches_the_link():
    r = cf("all_reduce", 8 * GiB, "trn2.48xlarge", "ring")
    assert 0.99 * B2 < r.busbw < B2
    small = cf("all_reduce", 1024, "trn2.48xlarge", "ring")
    assert small.busbw < 0.01 * B2  # latency-bound: 30 alphas dominate 1 KiB


def test_crossover_where_latency_stops_dominating_is_near_alpha_times_bandwidth():
    # Ring all-reduce: latency term 2(n-1) alpha equals bandwidth term 2(n-1)/n S/B at
    # S* = n alpha B (here 16 x 1.5 us x 128 GB/s = 3.07 MB).
    s_star = 16 * A1 * B2
    r = cf("all_reduce", round(s_star), "trn2.48xlarge", "ring")
    assert r.time == pytest.approx(2 * 30 * A1, rel=1e-6)


def test_fastest_picks_the_lowest_closed_form():
    big = cf("all_reduce", GiB, "trn2.48xlarge", "fastest")
    assert big.algorithm == "torus"
    for alg in fabric.algorithms("all_reduce", "trn2.48xlarge"):
        est = fabric.closed_form("all_reduce", GiB, "trn2.48xlarge", alg, PURE)
        if est.kind != "bound":
            assert big.time <= est.time


@pytest.mark.parametrize(
    ("nbytes", "expected"),
    [(1024, "direct"), ((1 << 20) - 1, "direct"), (1 << 20, "recursive_doubling"),
     (56 * (1 << 20) - 1, "recursive_doubling"), (56 * (1 << 20), "torus"), (GiB, "torus")],
)  # fmt: skip
def test_auto_follows_the_runtimes_size_bands(nbytes, expected):
    # Neuron runtime docs (intra-node): Mesh < 1 MB, RDH 1-56 MB, KangaRing (rings) > 56 MB.
    assert cf("all_reduce", nbytes, "trn2.48xlarge", "auto").algorithm == expected


def test_auto_uses_rings_when_rdh_cannot_run_and_hierarchical_across_efa():
    # 144 chips: no recursive-halving reduce-scatter; the ring band takes over.
    assert cf("reduce_scatter", 4 << 20, "trn3-ultraserver-gen2", "auto").algorithm in (
        "ring",
        "bidirectional_ring",
    )
    assert cf("all_to_all", GiB, "trn3-ultraserver-gen2", "auto").algorithm == "direct"
    assert cf("all_to_all", 1024, "trn2-ultraserver", "auto").algorithm == "direct"
    assert cf("all_reduce", GiB, catalog.cluster("trn2-ultraserver", 4), "auto").algorithm == (
        "hierarchical"
    )


def test_torus_all_to_all_routes_by_shortest_paths_and_meets_the_bisection_bound():
    # Dimension-order routing on a ring of 4 puts S/2 on every link: on the 64 GB/s axis of
    # the Trn2 UltraServer that is S / 128 GB/s, exactly nS/4 over the bisection.
    per_chip = 64 * 2**20
    torus = cf("all_to_all", per_chip, "trn2-ultraserver", "auto")
    assert torus.algorithm == "direct"
    hops = 2 + 2 + 2  # the farthest chip: two hops along each axis
    assert torus.time == pytest.approx(1e-6 + hops * 0.5e-6 + per_chip / 2 / 64e9)
    assert torus.time - 4e-6 == pytest.approx(
        fabric.all_to_all_bound(per_chip, "trn2-ultraserver", PURE)
    )
    assert torus.closed_form.kind == "estimate"
    assert "torus" not in fabric.algorithms("all_to_all", "trn2-ultraserver")


def test_switch_beats_torus_for_all_to_all_per_chip_bandwidth():
    # Torus all-to-all is bisection-bound; the switch's is injection-bound.
    per_chip = 64 * 2**20
    torus = cf("all_to_all", per_chip, "trn2-ultraserver", "auto")
    switch = cf("all_to_all", per_chip, "trn3-ultraserver-gen1", "auto")
    assert switch.time == pytest.approx(A2 + 63 / 64 * per_chip / B3)
    assert switch.time < torus.time / 8


def test_zero_bytes_and_one_chip_move_nothing():
    z = cf("all_reduce", 0, "trn2.48xlarge", "ring")
    assert (z.time, z.algbw, z.busbw) == (0.0, 0.0, 0.0)
    one = cf("all_reduce", GiB, "trn1.2xlarge", "auto")
    assert one.time == 0.0 and one.chips == 1 and one.algorithm == "none"
    assert fabric.bus_factor("all_reduce", 1) == 0.0


def test_bus_factors_follow_nccl_tests():
    assert fabric.bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    for op in ("reduce_scatter", "all_gather", "all_to_all"):
        assert fabric.bus_factor(op, 8) == pytest.approx(7 / 8)
    assert fabric.bus_factor("broadcast", 8) == 1.0
    assert fabric.bus_factor("allreduce", 2) == 1.0  # alias


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (
            lambda: cf("all_reduce", 1, "trn3-ultraserver-gen2", "torus"),
            ["torus", "switch", "auto"],
        ),
        (
            lambda: cf("reduce_scatter", 1, "trn3-ultraserver-gen2", "tree"),
            ["power-of-two", "144", "ring"],
        ),
        (
            lambda: cf("all_reduce", 1, "trn2.48xlarge", "hierarchical"),
            ["cluster", "trn2.48xlarge"],
        ),
        (lambda: cf("broadcast", 1, "trn2.48xlarge", "torus"), ["no broadcast", "auto"]),
        (lambda: cf("all_reduce", 1, "trn2.48xlarge", "quickest"), ["unknown algorithm", "ring"]),
        (lambda: cf("allsum", 1, "trn2.48xlarge", "ring"), ["unknown collective", "all_reduce"]),
        (lambda: cf("all_reduce", -1, "trn2.48xlarge", "ring"), ["whole number", ">= 0"]),
        (lambda: cf("all_reduce", 1.5, "trn2.48xlarge", "ring"), ["whole number"]),
        (lambda: cf("all_reduce", 0, "trn3-ultraserver-gen2", "torus"), ["torus"]),
        (
            lambda: cf(
                "all_to_all",
                1,
                catalog.cluster("trn3-ultraserver-gen2", 100),
                "direct",
                simulate=True,
            ),
            ["messages", "simulate=False"],
        ),
    ],
)
def test_errors_teach(call, words):
    with pytest.raises(FabricError) as err:
        call()
    for w in words:
        assert w in str(err.value)


def test_closed_form_for_a_million_chips_is_hierarchical_and_fast_enough_to_sweep():
    c = catalog.cluster("trn3-ultraserver-gen2", 1_000_000 // 144)
    r = cf("all_reduce", GiB, c, "hierarchical")
    # Direct reduce-scatter and all-gather inside each UltraServer, then 144 rings of 6,944
    # UltraServers over EFA (200 Gbit/s per chip = 25 GB/s) carrying S/144 each.
    parts, m = 1_000_000 // 144, 144
    local = 2 * (A2 + (m - 1) / m * GiB / B3)  # direct reduce-scatter and all-gather
    # Across EFA, S/144 per chip among 6,944 parts: fold 2,848 parts into 4,096, halve and
    # double over 12 rounds, unfold. Rings would pay 2 x 6,943 EFA latencies instead.
    Sm = GiB / m
    halving = sum(AE + Sm / 2**k / BE for k in range(1, 13))
    efa = 2 * halving + 2 * (AE + Sm / BE)
    assert r.time == pytest.approx(local + efa, rel=1e-9)
    assert r.closed_form.kind == "estimate"  # the fold shares EFA ports
    assert 2 * (parts - 1) * AE > 50 * efa
    assert math.isfinite(r.busbw)


def test_every_collective_pays_the_fixed_cost_once():
    op = catalog.table("collectives")["op_overhead"].value
    params = FabricParams(link_efficiency=1.0)
    with_op = fabric.collective("all_reduce", GiB, "trn2.48xlarge", "ring", params=params)
    without = cf("all_reduce", GiB, "trn2.48xlarge", "ring")
    assert with_op.time - without.time == pytest.approx(op)
    assert with_op.closed_form.formula.startswith("T_op + ")
    sim = fabric.collective("all_reduce", 64 << 20, "trn2.48xlarge", "ring", True, params)
    bare = cf("all_reduce", 64 << 20, "trn2.48xlarge", "ring", simulate=True)
    assert sim.time - bare.time == pytest.approx(op)
    # crossing EFA costs one more EFA step (assumption) on top
    c = catalog.cluster("trn2.48xlarge", 2)
    assert fabric.topology(c, params).op_overhead == pytest.approx(op + AE)


def test_link_efficiency_scales_the_bandwidth_term_only():
    eff = catalog.table("collectives")["neuronlink_efficiency"].value
    full = cf("all_reduce", GiB, "trn2.48xlarge", "ring")
    real = fabric.collective(
        "all_reduce", GiB, "trn2.48xlarge", "ring", params=FabricParams(op_overhead=0.0)
    )
    # 30 steps: the latency part is unchanged, the bytes take 1/eff longer
    assert real.time == pytest.approx(30 * A1 + (full.time - 30 * A1) / eff)
    with pytest.raises(FabricError, match=r"\(0, 1\]"):
        FabricParams(link_efficiency=1.5)


@pytest.mark.parametrize(
    "bad",
    [dict(step_latency=-1e-6), dict(step_latency=float("nan")), dict(op_overhead=2.0),
     dict(efa_step_latency=0.1e-6), dict(link_efficiency=0.0),
     dict(step_latency=0.1e-6)],
)  # fmt: skip
def test_bad_fabric_parameters_are_refused(bad):
    with pytest.raises(FabricError):
        FabricParams(**bad)
