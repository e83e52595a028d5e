"""Flow-level simulation against the closed forms, bounds and hand-worked schedules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trnlab import catalog, fabric
from trnlab.fabric import FabricParams

GiB = 1 << 30
SYSTEMS = ["trn1.32xlarge", "trn2.48xlarge", "trn2-ultraserver", "trn3-ultraserver-gen1",
           "trn3-ultraserver-gen2"]  # fmt: skip


# Links at full bandwidth and no fixed cost per operation: the simulator's timing against the
# alpha-beta closed forms (the fixed cost and the efficiency are checked in the closed-form tests).
PURE = FabricParams(op_overhead=0.0, efa_op_overhead=0.0, link_efficiency=1.0)


def both(op, nbytes, system, alg, **kw):
    kw.setdefault("params", PURE)
    sim = fabric.collective(op, nbytes, system, alg, simulate=True, **kw)
    return sim, sim.closed_form


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("op", fabric.OPS)
def test_contention_free_simulation_is_within_two_percent_of_the_closed_form(system, op):
    checked = 0
    for alg in fabric.algorithms(op, system):
        sim, est = both(op, 64 * 2**20, system, alg)
        if est.exact:
            assert sim.time == pytest.approx(est.time, rel=0.02), (alg, sim.time, est.time)
            checked += 1
        # Never faster than the bytes each link must carry.
        assert sim.time >= sim.load_bound * (1 - 1e-9)
        if est.kind == "bound":
            assert sim.time >= est.time * (1 - 1e-9), (alg, "beat its lower bound")
    # Every case has an exact algorithm except on the Trn2 UltraServer, whose ring and tree
    # hops differ (NeuronLink inside an instance, slower links across them), for a broadcast
    # and for an all-to-all (whose shortest-path routes share links: see the next test).
    assert checked >= 1 or (system, op) in {
        ("trn2-ultraserver", "broadcast"),
        ("trn2-ultraserver", "all_to_all"),
    }


SHARED_PORT = ["trn3-ultraserver-gen1", "trn3-ultraserver-gen2", "trn3-ultraserver-gen2-tiered",
               "p5.48xlarge", "gb200-nvl72", catalog.cluster("trn1.2xlarge", 4)]  # fmt: skip


@pytest.mark.parametrize("system", SHARED_PORT, ids=lambda s: getattr(s, "key", s))
@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather", "all_to_all"])
@pytest.mark.parametrize("params", [PURE, None], ids=["pure", "calibrated"])
def test_bidirectional_ring_through_one_port_matches_its_closed_form(system, op, params):
    # A switch (or EFA, for one-chip parts) gives each chip one port: both directions of a
    # bidirectional ring leave through it, so it carries what the one-way ring's does and the
    # simulation takes exactly as long as the one-way ring. The closed form must say the same
    # (it used to let one direction's alpha hide under the other's bytes: 739 against a
    # simulated 898 us for a 64 MiB all-reduce on the Trn3 Gen2 UltraServer).
    for nbytes in (64 * 2**10, 64 * 2**20):
        sim, est = both(op, nbytes, system, "bidirectional_ring", params=params)
        one_way, _ = both(op, nbytes, system, "ring", params=params)
        assert est.exact
        assert sim.time == pytest.approx(est.time, rel=1e-9)
        assert sim.time == pytest.approx(one_way.time, rel=1e-9)


@pytest.mark.parametrize("system", [*SHARED_PORT, catalog.cluster("trn1.2xlarge", 3)],
                         ids=lambda s: getattr(s, "key", s))  # fmt: skip
def test_bidirectional_broadcast_through_one_port_stays_near_its_estimate(system):
    # Two pipelined chains from the root share its port all along, and a chip's port only
    # while both chains pass it (near the middle of the ring): an estimate, within 7% here.
    worst = 0.0
    for k in range(10, 34, 3):
        sim, est = both("broadcast", 1 << k, system, "bidirectional_ring")
        assert sim.time >= sim.load_bound * (1 - 1e-9)
        worst = max(worst, abs(sim.time / est.time - 1))
    assert worst < 0.07


def _direct_bounds(sim, est):
    """The bounds of one direct exchange (``trnlab.fabric._direct``): no earlier than the
    overhead plus the busiest link's bytes, no later than the closed form, which adds the
    longest route's latency (every flow gets at least its bottleneck's fair share)."""
    overhead = sim.topology.message_overhead
    assert sim.time >= overhead + sim.load_bound * (1 - 1e-9)
    assert sim.time <= est.time * (1 + 1e-9)


@pytest.mark.parametrize("system", ["trn1.32xlarge", "trn2.48xlarge", "trn2-ultraserver"])
def test_shortest_path_all_to_all_on_a_torus_reaches_its_busiest_link(system):
    # Dimension-order routing with halfway-round ties split loads every link of an axis alike,
    # and flows share links fairly: the simulation lands on the busiest link's bytes, which the
    # closed form predicts; on the 4x4 tori every link in use carries the same flows, so the
    # two agree exactly. The UltraServer's third axis is slower: its closed form is the bound.
    sim, est = both("all_to_all", 64 * 2**20, system, "direct")
    assert sim.load_bound == pytest.approx(est.time, rel=0.05)
    _direct_bounds(sim, est)
    if system == "trn2-ultraserver":
        assert est.kind == "estimate"
    else:
        assert est.exact
        assert sim.time == pytest.approx(est.time, rel=1e-9)


@pytest.mark.parametrize(
    ("system", "alg"),
    [("trn2.48xlarge", "recursive_doubling"), ("trn2-ultraserver", "direct")],
)  # fmt: skip
def test_routed_schedules_stay_near_their_estimates(system, alg):
    # RDH and mesh messages cross several hops and share links; their closed forms count each
    # round's slowest pair (RDH) or the busiest link (mesh), so the simulation, which shares
    # links between messages, lands within a few percent of them.
    sim, est = both("all_reduce", 64 * 2**20, system, alg)
    assert not est.exact
    assert est.time * 0.98 <= sim.time <= est.time * 1.1
    assert sim.time >= sim.load_bound * (1 - 1e-9)
    assert sim.link_utilisation.max() <= 1 + 1e-9


def test_simulated_ring_all_reduce_bus_bandwidth_approaches_the_link():
    sim, _ = both("all_reduce", 8 * GiB, "trn2.48xlarge", "ring")
    assert 0.99 * 128e9 < sim.busbw < 128e9
    sim3, _ = both("all_reduce", 8 * GiB, "trn3-ultraserver-gen1", "ring")
    # busbw = 2(n-1)/n S / (2(n-1)(alpha + S/(nB))) = B S / (S + n alpha B): the gap to B is
    # the latency share, n alpha B = 64 x 2.0 us x 1.28 TB/s = 164 MB against 8.6 GB.
    S, B, n, alpha = 8 * GiB, 1.28e12, 64, 2.0e-6
    assert sim3.busbw == pytest.approx(B * S / (S + n * alpha * B), rel=0.02)
    assert 0.97 * B < sim3.busbw < B


def test_ring_schedule_steps_and_link_load_by_hand():
    ring = fabric.ring(4, 100e9, latency=1e-6, message_overhead=1e-6)
    S = 4e6
    sim, _ = both("all_reduce", S, ring, "ring")
    sch = sim.schedule
    assert sch.steps == 6 and sch.src.size == 6 * 4  # 2(n-1) steps, n messages each
    assert np.allclose(sch.nbytes, S / 4)
    step0 = sch.at_step(0)
    assert sorted(zip(step0["src"].tolist(), step0["dst"].tolist(), strict=True)) == [
        (0, 1), (1, 2), (2, 3), (3, 0)
    ]  # fmt: skip
    # Each step: 1 us overhead + 1 us hop + 1 MB / 100 GB/s = 12 us; six steps = 72 us.
    assert sim.time == pytest.approx(72e-6)
    assert np.allclose(step0["finish"], 12e-6)
    # Clockwise links carry 6 x 1 MB; the anticlockwise ones nothing.
    cw = sim.topology.link_dst == (sim.topology.link_src + 1) % 4
    assert np.allclose(sim.link_bytes[cw], 6e6) and np.allclose(sim.link_bytes[~cw], 0)
    assert sim.link_utilisation[cw] == pytest.approx(np.full(4, 60e-6 / 72e-6))


def test_two_messages_sharing_a_link_take_twice_as_long():
    # A direct all-to-all on a ring of 4 with no latencies: chip i sends S/4 to i+1, i+2,
    # i+3; i+1 goes clockwise, i+3 anticlockwise, and i+2 (halfway round) clockwise from
    # even chips, anticlockwise from odd ones. Clockwise link i->i+1 then carries i's message
    # to i+1 and one two-hop message (from i if i is even, else from i-1): 2 x S/4, so the
    # exchange needs at least 2 S/(4B). Every link in use carries two flows, so each gets half
    # of every link it crosses and all finish at that bound.
    ring = fabric.ring(4, 1e9, latency=0.0, message_overhead=0.0)
    S = 4e6
    sim, est = both("all_to_all", S, ring, "direct")
    assert sim.load_bound == pytest.approx(2 * S / 4 / 1e9)
    assert sim.time == pytest.approx(sim.load_bound, rel=1e-9)
    assert np.allclose(sim.schedule.finish, sim.load_bound)
    assert est.exact and est.time == pytest.approx(sim.time, rel=1e-9)


def _run(topo, src, dst, nbytes, step, lane=0):
    from trnlab.fabric import _plan, _sim

    plan = _plan.make(src, dst, nbytes, step, lane)
    return plan, _sim.simulate(topo, plan)


def test_links_are_shared_max_min_fairly():
    # On a ring of 4 (1 GB/s, no latencies): f0 = 0->1 on link 0->1; f1 = 0->2 on links 0->1
    # and 1->2; f2, f3 = 1->2 on link 1->2. Link 1->2 is the bottleneck of f1, f2, f3 (a third
    # each); f0 takes what f1 leaves on link 0->1: two thirds. All carry 1 MB: f0 finishes at
    # 1.5 ms; f1-f3 stay at a third (link 1->2 is still shared three ways) and finish at 3 ms.
    ring = fabric.ring(4, 1e9, latency=0.0, message_overhead=0.0)
    _, (t, start, done, busy, nbytes) = _run(ring, [0, 0, 1, 1], [1, 2, 2, 2], 1e6, 0)
    assert done == pytest.approx([1.5e-3, 3e-3, 3e-3, 3e-3])
    assert t == pytest.approx(3e-3)
    assert np.allclose(start, 0)
    # link 1->2 carried 3 MB, link 0->1 2 MB; busy time is bytes over bandwidth
    assert sorted(nbytes[nbytes > 0].tolist()) == pytest.approx([2e6, 3e6])
    assert busy.max() == pytest.approx(3e-3)


def test_a_message_streams_through_its_hops():
    # Cut-through, not store-and-forward: 0 -> 2 on a ring of 4 crosses two links and costs
    # overhead + two latencies + m/B, not twice m/B.
    ring = fabric.ring(4, 1e9, latency=0.5e-6, message_overhead=1e-6)
    _, (t, *_rest) = _run(ring, [0], [2], 1e6, 0)
    assert t == pytest.approx(1e-6 + 2 * 0.5e-6 + 1e-3)


def test_a_chips_later_steps_wait_for_its_earlier_sends_to_leave():
    # Chip 0 sends step 0 to chip 1 (clockwise) and step 1 to chip 3 (anticlockwise): separate
    # links, but one DMA queue, so the second starts when the first has left: after its
    # overhead (1 us, in parallel) and 1 ms of bytes; it lands at 2 ms plus one latency.
    # A second lane is a second queue and goes at once.
    ring = fabric.ring(4, 1e9, latency=0.5e-6, message_overhead=1e-6)
    _, (t, start, *_r) = _run(ring, [0, 0], [1, 3], 1e6, [0, 1])
    assert start == pytest.approx([1e-6, 1e-6 + 1e-3])
    assert t == pytest.approx(1e-6 + 2e-3 + 0.5e-6)
    _, (t2, start2, *_r) = _run(ring, [0, 0], [1, 3], 1e6, [0, 1], lane=[0, 1])
    assert start2 == pytest.approx([1e-6, 1e-6])
    assert t2 == pytest.approx(1e-6 + 1e-3 + 0.5e-6)


def test_hierarchical_and_ring_on_a_cluster():
    c = catalog.cluster("trn2.48xlarge", 4)
    for alg in ("hierarchical", "ring"):
        sim, est = both("all_reduce", 64 * 2**20, c, alg)
        assert sim.time == pytest.approx(est.time, rel=0.02)
    sim, _ = both("all_reduce", 64 * 2**20, c, "hierarchical")
    efa = sim.topology.link_tier == 2
    assert sim.link_bytes[efa].sum() > 0
    assert "EFA links busiest" in sim.summary()


def test_zero_bytes_and_one_chip_simulate_to_nothing():
    z = fabric.collective("all_reduce", 0, "trn2.48xlarge", "ring", simulate=True)
    assert z.time == 0 and z.schedule is None
    one = fabric.collective("broadcast", 100, "trn1.2xlarge", simulate=True)
    assert one.time == 0


_settings = settings(max_examples=int(__import__("os").environ.get("FABRIC_EXAMPLES", 25)), deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])  # fmt: skip


@_settings
@given(
    n=st.integers(2, 13),
    nbytes=st.integers(0, 2**31),
    op=st.sampled_from(fabric.OPS),
    alg=st.sampled_from(["ring", "bidirectional_ring"]),
    bw=st.floats(1e9, 1e12),
    lat=st.floats(0, 5e-6),
)
def test_rings_of_any_size_match_their_closed_form(n, nbytes, op, alg, bw, lat):
    ring = fabric.ring(n, bw, latency=lat, message_overhead=1e-6)
    sim, est = both(op, nbytes, ring, alg)
    # Exact everywhere, the ring of two included (both directions share its one link).
    assert est.exact
    assert sim.time == pytest.approx(est.time, rel=0.02)
    if nbytes:
        assert sim.time >= sim.load_bound * (1 - 1e-9)


@_settings
@given(
    shape=st.lists(st.integers(3, 5), min_size=2, max_size=3).map(tuple),
    nbytes=st.integers(1, 2**30),
    op=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]),
)
def test_tori_with_equal_axes_match_their_closed_form(shape, nbytes, op):
    t = fabric.torus(shape, 100e9)
    sim, est = both(op, nbytes, t, "direct" if op == "all_to_all" else "torus")
    assert sim.time >= sim.load_bound * (1 - 1e-9)
    if op == "all_to_all":  # shortest paths: between the busiest link's bytes and the closed form
        _direct_bounds(sim, est)
    if len(set(shape)) == 1:  # shards stay in step only when every axis has the same length
        assert est.exact
        assert sim.time == pytest.approx(est.time, rel=1e-6 if op == "all_to_all" else 0.02)


@_settings
@given(
    shape=st.lists(st.integers(2, 7), min_size=1, max_size=3).map(tuple),
    data=st.data(),
    nbytes=st.integers(1, 2**30),
    op=st.sampled_from(["all_to_all", "all_gather", "reduce_scatter"]),
    lat=st.floats(0, 2e-6),
)
def test_one_direct_exchange_lies_between_its_busiest_link_and_its_closed_form(
    shape, data, nbytes, op, lat
):
    # Any torus, axes of any bandwidth: every flow of one exchange gets at least B_l / N_l on
    # its bottleneck link, so the exchange ends between overhead + the busiest link's bytes
    # and the closed form (which adds the longest route's latency).
    bw = tuple(data.draw(st.floats(1e9, 1e12)) for _ in shape)
    t = fabric.torus(shape, bw, latency=lat)
    sim, est = both(op, nbytes, t, "direct")
    _direct_bounds(sim, est)
    assert sim.load_bound == pytest.approx(est.time - est_alpha(t), rel=1e-6)


def est_alpha(t):
    """The closed form's alpha of a direct exchange on a torus: overhead + the longest route."""
    return t.message_overhead + sum(d // 2 for d in t.shape) * max(t.axis_latency)


@_settings
@given(n=st.integers(2, 40), nbytes=st.integers(1, 2**28), op=st.sampled_from(fabric.OPS))
def test_any_plan_delivers_and_never_beats_its_link_load(n, nbytes, op):
    t = fabric.torus((n,), 50e9)
    for alg in fabric.algorithms(op, t):
        sim = fabric.collective(op, nbytes, t, alg, simulate=True)
        assert np.all(sim.schedule.finish >= sim.schedule.start)
        assert sim.time == pytest.approx(sim.schedule.finish.max())
        assert sim.time >= sim.load_bound * (1 - 1e-9)


def test_step_link_bytes_add_up_to_the_link_loads():
    sim, _ = both("all_reduce", 16 * 2**20, "trn2.48xlarge", "torus")
    per_step = sim.step_link_bytes()
    assert per_step.shape == (sim.schedule.steps, sim.topology.links)
    assert per_step.sum(axis=0) == pytest.approx(sim.link_bytes)
    # Step 0 of the torus all-reduce: each of the 2 shards sends S/2/(2 x 4) both ways on its
    # axis, so every one of the 64 directed links carries S/16 in step 0.
    assert per_step[0] == pytest.approx(np.full(64, 16 * 2**20 / 16))
    with pytest.raises(fabric.FabricError, match="simulate=True"):
        fabric.collective("all_reduce", 1, "trn2.48xlarge", "ring").step_link_bytes()
