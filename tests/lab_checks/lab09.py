"""Lab 09 (scaling out): small parameters and checks on its published values."""

from __future__ import annotations

import math

import pytest

from trnlab import scale

#: Papermill parameters that make the lab small and fast in tests.
PARAMS = {
    "TIERS": [["trn2.48xlarge", 1, 256], ["trn3-ultraserver-gen2", 1, 576]],
}


def check(values: dict) -> None:
    assert values["state_bytes_per_param"] == 16  # 2 + 2 + 12 (ZeRO paper)
    # Llama 3 70B: 70.55B parameters x 16 B over 0.95 x 96 GiB per Trainium2
    assert values["params_b"] == pytest.approx(70.55, abs=0.01)
    assert values["min_chips"] == math.ceil(16 * 70.55e9 / (0.95 * 96 * 2**30))
    assert values["bubble_4_16"] == pytest.approx(3 / 19, abs=1e-4)
    p, m = values["piped_stages"], values["piped_micro_batches"]
    assert values["piped_feasible"] and p == 4
    assert values["piped_stages_layers"] == [20, 20, 20, 20]
    # the last stage also runs the output head (8,192 x 128,256): it sets the pace, so the
    # bubble is a little under (p-1)/(m+p-1), by about the head's share of a stage
    assert values["piped_bubble_share"] == pytest.approx((p - 1) / (m + p - 1), rel=0.1)
    assert values["piped_bubble_share"] < (p - 1) / (m + p - 1)
    # HFU / MFU with full recomputation: (8N + 16 LHQT) / (6N + 12 LHQT) = 4/3, plus the K and
    # V projections copied from 8 KV heads to tp8 x 4 logical NeuronCores = 32 ranks (NxD
    # Training's kv_size_multiplier), each computed in 4 passes (forward, backward, rerun)
    m = scale.model("llama3-70b")
    copies = 2 * (2 * 8192 * 128 * (32 - 8)) * 80 * 4
    assert values["piped_hfu_over_mfu"] == pytest.approx(
        4 / 3 + copies / m.model_flops_per_token(4096), rel=1e-6
    )
    assert all(0 < mfu <= 1 for mfu in values["mfu"])
    # more chips, more tokens per second
    assert values["tokens_per_s"] == sorted(values["tokens_per_s"])
    assert values["chips"] == sorted(values["chips"])
    # OLMoE: 6.9B parameters, 1.3B active (Muennighoff et al. 2024)
    assert values["moe_params_b"] == pytest.approx(6.9, rel=0.01)
    assert values["moe_active_b"] == pytest.approx(1.3, rel=0.02)
    # experts are 93% of the parameters: over 8 chips their weights and gradients shrink 8x
    # (ZeRO-1 already shards the optimizer state over dp), so the state falls to a third
    assert 0.2 < values["moe_state_ratio"] < 0.4
    # the Trn3 switch serves the same expert all-to-alls faster than the Trn2 torus
    assert values["moe_a2a_trn3_s"] < values["moe_a2a_trn2_s"]
