"""CollectiveModel (the explorer's model) and fabric.bisection_bandwidth, without a browser.

Expected numbers are worked by hand from the pure alpha-beta model (``PURE``: no fixed cost per
operation, links at their stated bandwidth): trn2.48xlarge links carry 128 GB/s each way
(1.024 TB/s / 4 links / 2 directions); one ring step costs alpha = 1.5 us (the Neuron runtime
docs' "about 1-2 us" per hop). The calibrated defaults have their own tests at the end.
"""

from __future__ import annotations

import numpy as np
import pytest

from trnlab import catalog, fabric
from trnlab.fabric import FabricParams
from trnlab.widgets.collective_model import DRAW_SIZES, SIM_MESSAGES, CollectiveModel

B, ALPHA, N = 128e9, 1.5e-6, 16
MiB, GiB = 1 << 20, 1 << 30
PURE = FabricParams(op_overhead=0.0, efa_op_overhead=0.0, link_efficiency=1.0)


@pytest.fixture
def ring():
    return CollectiveModel(system="trn2.48xlarge", op="all_reduce", algorithm="ring", params=PURE)


def test_sweep_is_the_ring_alpha_beta_formula_from_1_kib_to_8_gib(ring):
    sw = ring.sweep()
    assert sw.sizes[0] == 1024 and sw.sizes[-1] == 8 * GiB
    expected = 2 * (N - 1) * (ALPHA + sw.sizes / (N * B))  # Thakur et al. 2005
    np.testing.assert_allclose(sw.time["ring"], expected, rtol=1e-9)
    # nccl-tests: busbw = S / t x 2(n-1)/n; small messages are latency-bound, large ones
    # approach the 128 GB/s link.
    assert sw.busbw["ring"][0] < 0.01 * B
    assert 0.99 * B < sw.busbw["ring"][-1] < B
    # Every fitting algorithm is swept; auto follows the runtime's bands: mesh, RDH, rings.
    assert set(sw.time) == {"ring", "bidirectional_ring", "torus", "recursive_doubling",
                            "direct", "auto"}  # fmt: skip
    assert sw.auto_picks[0] == "direct" and sw.auto_picks[-1] == "torus"
    assert "recursive_doubling" in sw.auto_picks


def test_auto_picks_what_fabric_picks():
    m = CollectiveModel(system="trn3-ultraserver-gen2", op="all_reduce")  # calibrated defaults
    sw = m.sweep()
    for i in (0, 30, 60, len(sw.sizes) - 1):
        r = fabric.collective("all_reduce", int(sw.sizes[i]), m.topology)
        assert sw.auto_picks[i] == r.algorithm
        assert sw.time["auto"][i] == pytest.approx(r.time, rel=1e-12)


def test_crossover_is_where_the_bandwidth_term_equals_the_latency_term(ring):
    reg = ring.regimes()
    # 2(n-1) alpha = 2(n-1) S/(nB)  =>  S* = n alpha B = 16 x 1.5 us x 128 GB/s = 3.07 MB
    assert reg.latency == pytest.approx(2 * (N - 1) * ALPHA, rel=1e-3)
    assert reg.crossover == pytest.approx(N * ALPHA * B, rel=1e-4)
    assert reg.per_byte == pytest.approx(2 * (N - 1) / (N * B), rel=1e-3)
    # At the crossover the bus bandwidth is half its large-message value.
    t = ring.sweep()
    half = np.interp(np.log(reg.crossover), np.log(t.sizes), t.busbw["ring"])
    assert half == pytest.approx(B / 2, rel=0.03)
    assert "latency-bound" in ring.set(nbytes=1 * MiB).summary()
    assert "64 MiB is bandwidth-bound" in ring.set(nbytes=64 * MiB).summary()


def test_the_calibrated_defaults_add_the_fixed_cost_and_the_link_efficiency():
    op = catalog.table("collectives")["op_overhead"].value
    eff = catalog.table("collectives")["neuronlink_efficiency"].value
    m = CollectiveModel(system="trn2.48xlarge", op="all_reduce", algorithm="ring")
    reg = m.regimes()
    assert reg.latency == pytest.approx(op + 2 * (N - 1) * ALPHA, rel=1e-3)
    assert reg.per_byte == pytest.approx(2 * (N - 1) / (N * eff * B), rel=1e-3)


def test_drawn_ring_loads_exactly_the_ring_links_in_one_direction(ring):
    res, why = ring.result()
    assert res.simulated and why == ""
    assert res.time == pytest.approx(2 * (N - 1) * (ALPHA + 64 * MiB / (N * B)), rel=0.02)
    d = ring.drawing()
    assert len(d.ends) == 32  # a 4x4 torus: 64 directed links, 32 neighbour pairs
    busy = d.load > 0
    assert busy.sum() == N  # the ring uses 16 of the 32 pairs
    # Each used pair carries 2(n-1) chunks of S/n one way and nothing the other way.
    per_link = 2 * (N - 1) * 64 * MiB / N
    np.testing.assert_allclose(np.sort(d.bytes_each_way[busy], axis=1)[:, 1], per_link)
    assert (np.sort(d.bytes_each_way[busy], axis=1)[:, 0] == 0).all()
    assert d.load.max() == pytest.approx(per_link / B / res.time, rel=1e-9)


def test_wrap_around_links_bend_and_neighbour_links_do_not(ring):
    d = ring.drawing()
    p, q, mid = d.path[:, 0], d.path[:, -1], d.path[:, d.path.shape[1] // 2]
    u, v = q - p, mid - p
    off_line = np.abs(u[:, 0] * v[:, 1] - u[:, 1] * v[:, 0]) / np.hypot(*u.T)
    long = np.hypot(*(q - p).T) > 1.01
    assert long.sum() == 8  # 4 rows + 4 columns close through a wrap-around link
    assert (off_line[long] > 0.1).all() and (off_line[~long] < 1e-12).all()


def test_a_case_too_large_to_simulate_falls_back_to_the_closed_form():
    m = CollectiveModel(system="trn3-ultraserver-gen2", parts=4, op="all_reduce",
                        algorithm="ring")  # fmt: skip
    res, why = m.result()
    assert 2 * m.topology.chips * (m.topology.chips - 1) > SIM_MESSAGES
    assert not res.simulated and "too many to simulate" in why
    assert m.drawing().load is None
    assert "Link load not drawn" in m.summary()


def test_ring_animation_follows_the_chunks_and_the_simulation():
    m = CollectiveModel(system="trn2.48xlarge", ring_chips=5, nbytes=16 * MiB, params=PURE)
    a = m.animation()
    n = 5
    assert a.steps == 8 and a.held.shape == (9, n, n)
    # Replay the sends on real data: chip i holds 10^i in every chunk; reduce-scatter adds,
    # all-gather copies. Every chip must end with the sum, and each chunk's digit count must
    # equal the model's count of chips summed into it.
    data = np.array([[10.0**i] * n for i in range(n)])
    for k, sends in enumerate(a.sends, start=1):
        new = data.copy()
        for src, dst, chunk in sends:
            assert dst == (src + 1) % n
            if k <= n - 1:
                new[dst, chunk] = data[src, chunk] + data[dst, chunk]
            else:
                new[dst, chunk] = data[src, chunk]
        data = new
        digits = np.vectorize(lambda v: sum(int(c) for c in str(int(v))))(data)
        np.testing.assert_array_equal(digits, a.held[k])
    np.testing.assert_allclose(data, sum(10.0**i for i in range(n)))
    # After reduce-scatter chip c owns chunk c + 1 complete.
    owners = a.held[n - 1] == n
    assert [int(np.flatnonzero(row)[0]) for row in owners] == [(c + 1) % n for c in range(n)]
    # Simulated step ends agree with k (alpha + S/(nB)), contention-free.
    step = ALPHA + 16 * MiB / (n * B)
    np.testing.assert_allclose(a.step_end, np.arange(9) * step, rtol=0.02)
    assert "Step" not in m.animation_summary()
    assert "Step 4 of 8 (reduce-scatter)" in m.set(step=4).animation_summary()


def test_switch_ring_hop_costs_two_link_latencies():
    m = CollectiveModel(system="trn3-ultraserver-gen1", params=PURE)
    bw, alpha = m.ring_hop()
    assert bw == 1.28e12 and alpha == pytest.approx(1.0e-6 + 2 * 0.5e-6)


def test_bisection_bandwidths_by_hand():
    # Torus: cutting an axis of 4 crosses each of its n/4 rings twice.
    assert fabric.bisection_bandwidth("trn2.48xlarge", PURE) == 2 * 4 * 128e9
    assert fabric.bisection_bandwidth("trn1.32xlarge", PURE) == 2 * 4 * 48e9
    # Trn2 UltraServer: the narrowest cut is across the 64 GB/s rings between instances.
    assert fabric.bisection_bandwidth("trn2-ultraserver", PURE) == 2 * 16 * 64e9
    # Non-blocking switch: half the chips' ports.
    assert fabric.bisection_bandwidth("trn3-ultraserver-gen2", PURE) == 72 * 1.28e12
    ring2 = fabric.ring(2, 10e9)
    assert fabric.bisection_bandwidth(ring2) == 10e9
    with pytest.raises(fabric.FabricError, match="one chip"):
        fabric.bisection_bandwidth("trn1.2xlarge")


def test_no_simulated_all_to_all_beats_the_bisection_bound():
    for system in ("trn2.48xlarge", "trn2-ultraserver", "trn3-ultraserver-gen1"):
        bound = fabric.all_to_all_bound(64 * MiB, system)
        for alg in fabric.algorithms("all_to_all", system):
            sim = fabric.collective("all_to_all", 64 * MiB, system, alg, simulate=True)
            assert sim.time >= bound, (system, alg)


def test_torus_all_to_all_is_bisection_bound_and_the_switch_is_not():
    m = CollectiveModel(nbytes=GiB, params=PURE)
    a = m.all_to_all()
    S = a.sizes[-1]
    # Trn2 UltraServer: nS/4 over 2.048 TB/s = S / 128 GB/s, which shortest-path routing meets.
    np.testing.assert_allclose(a.bound["trn2-ultraserver"], a.sizes / 128e9)
    assert (a.time["trn2-ultraserver"] >= a.bound["trn2-ultraserver"]).all()
    assert a.time["trn2-ultraserver"][-1] == pytest.approx(S / 128e9, rel=0.01)
    # Trn3 switch: each chip's port, (n-1)/n S / 1.28 TB/s, is the limit, above its bisection.
    port = 63 / 64 * S / 1.28e12
    assert a.time["trn3-ultraserver-gen1"][-1] == pytest.approx(port, rel=0.01)
    assert a.bound["trn3-ultraserver-gen1"][-1] < port
    # Per chip the switch port (1.28 TB/s) is 20x a cross-instance ring link (64 GB/s); the
    # torus's shortest paths spread the load over both directions and both cut crossings, so
    # the switch ends about 8x faster for a large all-to-all on 64 chips.
    at = m.all_to_all_at()
    assert at["trn2-ultraserver"].time / at["trn3-ultraserver-gen1"].time == pytest.approx(
        (S / 128e9) / port, rel=0.01
    )
    assert "faster" in m.all_to_all_summary()


@pytest.mark.parametrize(
    "bad",
    [
        {"system": "trn1.2xlarge"},
        {"system": "dgx"},
        {"parts": 3},
        {"op": "scatter"},
        {"algorithm": "torus", "system": "trn3-ultraserver-gen1"},
        {"algorithm": "hierarchical"},
        {"nbytes": 1000},
        {"nbytes": 16 * GiB},
        {"ring_chips": 9},
        {"step": 7},
        {"colour": "red"},
    ],
)
def test_bad_settings_raise_and_keep_state(ring, bad):
    before = tuple(getattr(ring, k) for k in ring.SETTINGS)
    with pytest.raises(ValueError):
        ring.set(**bad)
    assert tuple(getattr(ring, k) for k in ring.SETTINGS) == before


def test_a_system_change_keeps_the_algorithm_if_it_fits_else_returns_to_auto(ring):
    ring.set(system="trn3-ultraserver-gen1")
    assert ring.algorithm == "ring" and ring.note == ""
    ring.set(system="trn2-ultraserver", algorithm="torus")
    ring.set(system="trn3-ultraserver-gen2")
    assert ring.algorithm == "auto" and "went back to auto" in ring.note
    assert "went back to auto" in ring.summary()
    ring.set(op="allgather")
    assert ring.op == "all_gather" and ring.note == ""


def test_fewer_ring_chips_clamp_the_step():
    m = CollectiveModel(ring_chips=8, step=14)
    m.set(ring_chips=3)
    assert m.step == 4
    assert m.nbytes in DRAW_SIZES


# Review fixes: auto's regimes, the bidirectional ring on a switch, copies, small rates, names.


def _calibrated():
    fig = catalog.table("collectives")
    return fig["op_overhead"].value, fig["neuronlink_efficiency"].value


def test_auto_regimes_describe_the_algorithm_auto_runs_at_the_drawn_size():
    # 64 MiB all-reduce on the Trn3 Gen2 UltraServer: above the runtime's RDH band (56 MB) and
    # 144 chips (no RDH anyway), so the runtime runs a ring. Its fixed part, by hand: T_op +
    # 2 x 143 steps x 2 us (1 us software + 2 x 0.5 us switch hops); its bytes 2 x 143/144 S
    # at the port's 2.56 TB/s / 2 x the achieved share. 64 MiB is latency-bound there.
    op, eff = _calibrated()
    port = catalog.system("trn3-ultraserver-gen2").chip.figures["neuronlink_bandwidth"].value
    B3 = port / 2 * eff
    lat = op + 286 * 2e-6
    per_byte = 286 / (144 * B3)
    m = CollectiveModel(system="trn3-ultraserver-gen2")
    reg = m.regimes()
    assert reg.algorithm in ("ring", "bidirectional_ring")
    assert reg.algorithm == fabric.collective("all_reduce", 64 * MiB, m.topology).algorithm
    assert reg.latency == pytest.approx(lat, rel=1e-3)
    assert reg.per_byte == pytest.approx(per_byte, rel=1e-3)
    assert reg.crossover == pytest.approx(lat / per_byte, rel=1e-3)
    text = m.summary()
    assert "auto's pick at 64 MiB" in text and "64 MiB is latency-bound" in text
    assert m.set(algorithm="ring").regimes().latency == pytest.approx(lat, rel=1e-3)
    # trn2.48xlarge: auto runs the torus algorithm at 64 MiB, 12 steps of 1.5 us (not the
    # mesh's fixed cost at 1 byte); at 1 KiB it runs the mesh, and the regimes follow.
    t = CollectiveModel(system="trn2.48xlarge")
    assert t.regimes().algorithm == "torus"
    assert t.regimes().latency == pytest.approx(op + 12 * ALPHA, rel=1e-3)
    t.set(nbytes=1024)
    assert t.regimes().algorithm == "direct"
    assert t.regimes().latency < op + 12 * ALPHA


def test_bidirectional_ring_on_a_switch_is_the_one_way_ring():
    # Each chip has one NeuronSwitch port: both directions share it, so the sweep must show
    # no gain; on a torus each neighbour has its own link and the bytes halve.
    for key in ("trn3-ultraserver-gen1", "trn3-ultraserver-gen2"):
        sw = CollectiveModel(system=key, params=PURE).sweep()
        np.testing.assert_allclose(sw.time["bidirectional_ring"], sw.time["ring"], rtol=1e-12)
        assert sw.kind["bidirectional_ring"] == "exact"
    sw = CollectiveModel(system="trn2.48xlarge", params=PURE).sweep()
    big = 2 * (N - 1) * (ALPHA + sw.sizes[-1] / (2 * N * B))  # S/(2n) each way
    assert sw.time["bidirectional_ring"][-1] == pytest.approx(big, rel=1e-9)


def test_copies_are_offered_only_where_the_catalogue_has_efa():
    m = CollectiveModel()
    for key in ("inf2.48xlarge", "gb200-nvl72"):
        assert catalog.system(key).network_bandwidth is None
        assert m.parts_options(key) == [("alone", 1)]
        assert key not in m.joinable()
        with pytest.raises(ValueError) as err:
            CollectiveModel(system=key, parts=2)
        msg = str(err.value)
        assert "parts = 2" in msg and "EFA" in msg and "trn2-ultraserver" in msg
    # Every system offered copies can be drawn as a cluster.
    offered = [k for _, k in m.systems() if len(m.parts_options(k)) > 1]
    assert {"trn2.48xlarge", "trn3-ultraserver-gen2", "p5.48xlarge"} <= set(offered)
    for key in offered:
        c = CollectiveModel(system=key, parts=2, nbytes=1024)
        assert c.topology.kind == "cluster" and c.summary()
    # A system change that cannot keep the copies goes back to one, and says so.
    m.set(parts=4)
    m.set(system="inf2.48xlarge")
    assert m.parts == 1 and "copies went back to 1" in m.note
    assert "copies went back to 1" in m.summary()
    before = tuple(getattr(m, k) for k in m.SETTINGS)
    with pytest.raises(ValueError):
        m.set(parts=2)
    assert tuple(getattr(m, k) for k in m.SETTINGS) == before


def test_small_bus_bandwidths_keep_their_digits():
    # A 1 KiB ring all-reduce on trn2.48xlarge: 30 steps of (1.5 us + 64 B / 128 GB/s), and
    # busbw = S / t x 2(n-1)/n = 42.7 MB/s (nccl-tests), which used to print as 0.0 GB/s.
    m = CollectiveModel(algorithm="ring", nbytes=1024, params=PURE)
    t = 30 * (ALPHA + 1024 / N / B)
    busbw = 1024 / t * 30 / 16
    assert f"{busbw / 1e6:.1f} MB/s" == "42.7 MB/s"
    text = m.summary()
    assert "bus bandwidth 42.7 MB/s" in text and "0.0 GB/s" not in text
    from trnlab.widgets.collective_model import rate

    assert rate(6.25e7) == "62.5 MB/s" and rate(1.28e12) == "1.28 TB/s"
    assert rate(41.6e9) == "41.6 GB/s"


def test_systems_are_listed_by_name_with_keys_as_values():
    options = dict(CollectiveModel.systems())
    assert options["Trn2 UltraServer, 64 chips"] == "trn2-ultraserver"
    assert options["Trn3 UltraServer Gen2, 144 chips"] == "trn3-ultraserver-gen2"
    assert all(catalog.system(k).name in label for label, k in options.items())
