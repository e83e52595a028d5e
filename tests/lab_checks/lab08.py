"""Lab 08 (NeuronLink and collectives): small parameters and checks on its published values.

Expected numbers are worked by hand. The alpha-beta sections use links at their stated
bandwidth: trn2 torus links 128 GB/s each way (1.024 TB/s / 4 links / 2), the Trn2
UltraServer's cross-instance rings 64 GB/s (256 GB/s / 2 links / 2), a Trn3 chip 1.28 TB/s
each way into the NeuronSwitch; alpha = 1.5 us per NeuronLink step (Neuron runtime docs: "about
1-2 us"), 1.0 us software + 0.5 us per hop. The calibrated sections add the catalogue's fixed
cost per collective and achieved link share.
"""

from __future__ import annotations

import pytest

from trnlab import catalog

#: Papermill parameters that make the lab small and fast in tests.
PARAMS = {"SIZE_MIB": 16, "RING_CHIPS": 3, "A2A_GIB": 1}

B, ALPHA, N = 128e9, 1.5e-6, 16
MiB, GiB = 1 << 20, 1 << 30


def check(values: dict) -> None:
    figs = catalog.table("collectives")
    op, eff = figs["op_overhead"].value, figs["neuronlink_efficiency"].value
    assert values["op_overhead_us"] == pytest.approx(op * 1e6, rel=1e-3)
    assert values["link_efficiency"] == pytest.approx(eff, rel=1e-3)
    S = 64 * MiB
    ring = 2 * (N - 1) * (ALPHA + S / (N * B))  # Thakur et al. 2005
    assert values["ring_time_us"] == pytest.approx(ring * 1e6, rel=1e-6)
    assert values["sim_ring_time_us"] == pytest.approx(ring * 1e6, rel=0.02)
    assert values["ring_busbw_64mib_gbs"] == pytest.approx(
        S / ring * 2 * (N - 1) / N / 1e9, rel=0.02
    )
    # Latency term = bandwidth term at S* = n alpha B.
    assert values["crossover_bytes"] == pytest.approx(N * ALPHA * B, rel=1e-3)
    # busbw of a big ring: B S / (S + n alpha B), a hair under the link.
    big = 8 * GiB
    assert values["ring_busbw_8gib_gbs"] == pytest.approx(
        B * big / (big + N * ALPHA * B) / 1e9, rel=1e-4
    )
    # Trn2 UltraServer bisection: 16 rings of 4 across instances, cut twice, 64 GB/s each way.
    assert values["bisection_trn2_ultraserver_tbs"] == pytest.approx(2 * 16 * 64e9 / 1e12)
    S2 = values["a2a_gib"] * GiB
    bound = 64 * S2 / 4 / (2 * 16 * 64e9)  # = S / 128 GB/s
    assert values["a2a_bound_trn2_ultraserver_ms"] == pytest.approx(bound * 1e3, rel=1e-3)
    # shortest paths meet the bound (plus one routed message's alpha: 1 us + 6 hops x 0.5 us)
    assert values["a2a_trn2_ultraserver_ms"] == pytest.approx((bound + 4e-6) * 1e3, rel=1e-3)
    # Switch: one exchange through each chip's port, alpha = 1.0 + 2 x 0.5 us.
    switch = 2.0e-6 + 63 / 64 * S2 / 1.28e12
    assert values["a2a_trn3_gen1_ms"] == pytest.approx(switch * 1e3, rel=1e-3)
    assert values["a2a_trn2_ultraserver_ms"] / values["a2a_trn3_gen1_ms"] == pytest.approx(
        (1.28e12 / 128e9) * 64 / 63, rel=0.01
    )
    # decode all-reduce of 128 KiB on 16 chips: mostly the fixed cost
    assert op * 1e6 < values["decode_allreduce_us"] < 4 * op * 1e6
    assert values["moe_layer_a2a_per_microbatch"] == 4
    # the tiered Gen2 reading: 64 GB/s each way across racks against 1.28 TB/s
    assert values["gen2_tiered_over_flat"] == pytest.approx(1.28e12 / 64e9, rel=0.02)
    # Animation: a ring of n chips with the calibrated trn2 hop; chip c owns chunk c + 1.
    n = values["ring_chips"]
    step = ALPHA + values["anim_size_mib"] * MiB / (n * eff * B)
    assert values["anim_step_us"] == pytest.approx(step * 1e6, rel=0.02)
    assert values["anim_owned_after_reduce_scatter"] == [(c + 1) % n for c in range(n)]
