"""Fabric topologies: link bandwidths from the catalogue, graph shapes, routes, ring orders.

Expected values are worked by hand from the catalogue's published figures (see comments), not
read back from trnlab.fabric.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from trnlab import catalog, fabric
from trnlab.fabric import FabricError, FabricParams

FULL = FabricParams(link_efficiency=1.0)  # links at the bandwidth the catalogue states


def test_importing_fabric_does_not_import_numba():
    code = "import sys, trnlab, trnlab.fabric; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("system", "shape", "per_link"),
    [
        # 384 GB/s per chip over 4 links, both directions counted: 384 / 4 / 2 = 48 GB/s.
        ("trn1.32xlarge", (4, 4), (48e9, 48e9)),
        # 1,024 GB/s instance share over 4 links / 2 = 128 GB/s; 256 GB/s over 2 ring links
        # across instances / 2 = 64 GB/s.
        ("trn2.48xlarge", (4, 4), (128e9, 128e9)),
        ("trn2-ultraserver", (4, 4, 4), (128e9, 128e9, 64e9)),
        # Inf2: 192 GiB/s per chip over its 2 ring links / 2 directions = 48 GiB/s.
        ("inf2.48xlarge", (12,), (48 * 2**30,)),
    ],
)
def test_tori_take_per_link_bandwidth_from_the_catalogue(system, shape, per_link):
    t = fabric.topology(system, FULL)
    eff = catalog.table("collectives")["neuronlink_efficiency"].value
    assert fabric.topology(system).axis_bandwidth == pytest.approx(
        tuple(eff * b for b in per_link)
    )  # a large collective achieves the calibrated share of each link
    assert t.kind == "torus"
    assert t.shape == shape
    assert t.axis_bandwidth == pytest.approx(per_link)
    n = int(np.prod(shape))
    assert t.chips == n
    assert t.links == 2 * len(shape) * n  # two directed links per axis per chip
    assert set(np.bincount(t.link_src, minlength=n)) == {2 * len(shape)}


@pytest.mark.parametrize(("system", "chips", "sleds"), [("trn3-ultraserver-gen1", 64, 16),
                                                        ("trn3-ultraserver-gen2", 144, 36)])  # fmt: skip
def test_trn3_ultraservers_are_switches_with_pcie_sleds(system, chips, sleds):
    t = fabric.topology(system, FULL)
    assert t.kind == "switch" and t.chips == chips and t.sled == 4
    # 2.56 TB/s per chip, both directions: 1.28 TB/s each way into the NeuronSwitch.
    assert t.axis_bandwidth[0] == pytest.approx(1.28e12)
    # 256 GB/s bidirectional per chip to the sled's PCIe switch: 128 GB/s each way.
    assert t.pcie_bandwidth == pytest.approx(128e9)
    assert t.nodes == chips + sleds + 1
    assert t.links == 4 * chips
    tiers = np.bincount(t.link_tier, minlength=3)
    assert list(tiers) == [2 * chips, 2 * chips, 0]
    # Any two chips are two hops apart (up to the NeuronSwitch, down to the peer).
    r = t.route(3, chips - 1)
    assert len(r) == 2
    assert t.link_dst[r[0]] == t.link_src[r[1]] == chips + sleds


def test_torus_routes_are_shortest_and_connected():
    t = fabric.topology("trn2-ultraserver")
    coords = np.array(np.unravel_index(np.arange(t.chips), t.shape)).T
    rng = np.random.default_rng(0)
    for a, b in rng.integers(0, t.chips, size=(200, 2)):
        r = t.route(int(a), int(b))
        delta = np.abs(coords[a] - coords[b])
        assert len(r) == int(np.minimum(delta, 4 - delta).sum())  # wrap-around distance
        node = a
        for link in r:
            assert t.link_src[link] == node
            node = t.link_dst[link]
        assert node == b


@pytest.mark.parametrize(
    "system", ["trn1.32xlarge", "trn2.48xlarge", "trn2-ultraserver", "inf2.48xlarge"]
)
def test_ring_order_visits_every_chip_over_neighbour_links(system):
    t = fabric.topology(system)
    order = t.ring_order()
    assert sorted(order) == list(range(t.chips))
    for a, b in zip(order, np.roll(order, -1), strict=True):
        assert len(t.route(int(a), int(b))) == 1


def test_cluster_adds_efa_links_and_keeps_parts():
    c = catalog.cluster("trn2.48xlarge", 4)
    t = fabric.topology(c)
    assert t.kind == "cluster" and t.chips == 64 and t.parts == 4 and t.domain == 16
    # 3.2 Tbit/s EFA per 16-chip instance: 200 Gbit/s = 25 GB/s per chip, per direction.
    assert t.efa_bandwidth == pytest.approx(25e9)
    assert t.links == 4 * 64 + 2 * 64
    assert len(t.route(0, 5)) == 2 and t.link_tier[t.route(0, 5)].tolist() == [0, 0]
    assert t.link_tier[t.route(0, 17)].tolist() == [2, 2]


def test_a_million_chip_cluster_needs_no_graph_for_its_closed_form():
    c = catalog.cluster("trn3-ultraserver-gen2", 1_000_000 // 144)
    r = fabric.collective("all_reduce", 1 << 30, c, "ring")
    assert r.chips == 999_936 and r.time > 0
    with pytest.raises(FabricError, match="200,000 chips"):
        fabric.topology(c).links  # noqa: B018


def test_params_are_assumptions_that_can_be_changed():
    slow = fabric.topology(
        "trn2.48xlarge", FabricParams(counts_both_directions=False, link_efficiency=1.0)
    )
    assert slow.axis_bandwidth[0] == pytest.approx(256e9)
    t = fabric.topology("trn2.48xlarge", FabricParams(message_overhead=0.0, neuronlink_latency=0))
    assert t.message_overhead == 0
    # a step of 1.5 us (runtime docs: 1-2 us) less a 0.5 us hop (assumption)
    assert fabric.topology("trn2.48xlarge").message_overhead == pytest.approx(1.0e-6)
    with pytest.raises(FabricError, match="neuronlink_latency"):
        FabricParams(neuronlink_latency=-1)


def test_custom_torus_and_ring_builders_validate():
    t = fabric.torus((3, 5), (10e9, 20e9))
    assert t.chips == 15 and t.axis_bandwidth == (10e9, 20e9)
    with pytest.raises(FabricError, match="at least 2 chips"):
        fabric.torus((1, 4), 1e9)
    assert fabric.ring(7, 1e9).shape == (7,)


def test_the_package_docstring_example_runs():
    import doctest

    import trnlab.fabric as pkg

    result = doctest.testmod(pkg, verbose=False)
    assert result.attempted >= 3 and result.failed == 0


@pytest.mark.parametrize(
    "system",
    ["trn1.2xlarge", "trn2.48xlarge", "trn2-ultraserver", "trn3-ultraserver-gen2",
     catalog.cluster("trn2.48xlarge", 5), catalog.cluster("trn3-ultraserver-gen1", 2)],
)  # fmt: skip
def test_layout_places_every_node_once(system):
    t = fabric.topology(system)
    pos = t.layout()
    kinds = t.node_kinds()
    assert pos.shape == (t.nodes, 2) and kinds.shape == (t.nodes,)
    assert np.isfinite(pos).all()
    assert len({tuple(p) for p in np.round(pos, 9)}) == t.nodes  # no two nodes on one spot
    assert (kinds[t.chip_nodes()] == 0).all() and (kinds == 0).sum() == t.chips
    if t.kind == "switch":
        assert fabric.NODE_KINDS[kinds[-1]] == "NeuronSwitch"
        assert np.allclose(pos[-1], 0)
    if t.kind == "cluster":
        assert fabric.NODE_KINDS[kinds[-1]] == "EFA fabric"
    if t.links:  # every link joins two placed nodes
        assert t.link_src.max() < t.nodes and t.link_dst.max() < t.nodes


def test_assumptions_are_stated_with_the_topology_and_in_summaries():
    t = fabric.topology("trn3-ultraserver-gen2", FULL)
    assert any("assumed" in n and "1.28e+03 GB/s" in n for n in t.notes)
    c = fabric.topology(catalog.cluster("trn2.48xlarge", 2))
    assert any("EFA: 25 GB/s" in n for n in c.notes)
    text = fabric.collective("all_reduce", 1 << 20, "trn2.48xlarge", "ring", params=FULL).summary()
    assert "Model:" in text and "128 GB/s per link" in text and "assumed" in text
    assert "calibrated" in text


def test_trn3_gen2_comes_in_two_readings_of_its_sources():
    # seed-001: "any-to-any ... without oversubscription" at the chip page's 2.56 TB/s; the
    # Trn3 architecture page: per chip 256 GB/s inside a server of 4, 320 GB/s across the
    # rack's 72, 128 GB/s between the two racks (all bidirectional).
    flat = fabric.topology("trn3-ultraserver-gen2", FULL)
    tiered = fabric.topology("trn3-ultraserver-gen2-tiered", FULL)
    assert flat.axis_bandwidth[0] == pytest.approx(1.28e12) and flat.levels == ()
    assert tiered.levels == ((4, 128e9), (72, 160e9), (144, 64e9))
    assert fabric.group(tiered, 4, 1).axis_bandwidth[0] == pytest.approx(128e9)
    assert fabric.group(tiered, 16, 1).axis_bandwidth[0] == pytest.approx(160e9)
    assert fabric.group(tiered, 144, 1).axis_bandwidth[0] == pytest.approx(64e9)
    assert tiered.chips == flat.chips == 144
    big = 1 << 30
    ratio = (
        fabric.collective("all_to_all", big, tiered, params=FULL).time
        / fabric.collective("all_to_all", big, flat, params=FULL).time
    )
    assert ratio == pytest.approx(1.28e12 / 64e9, rel=0.01)  # 20x apart for a large exchange
