"""Lab 10 (cost, energy and claims): small parameters and checks on its published values."""

from __future__ import annotations

import pytest

#: Papermill parameters that make the lab small and fast in tests.
PARAMS = {"TOKENS": 1e11, "SERVE_BATCH": 8}


def check(values: dict) -> None:
    # 144 x 2.517 PF MXFP8 over 64 x 1.299 PF FP8
    assert values["compute_ratio"] == pytest.approx(144 * 2.517 / (64 * 1.299), abs=1e-3)
    # 144 x 4.9 TB/s over 64 x 2.9 TB/s; 96 GiB over 32 GiB
    assert values["bandwidth_ratio"] == pytest.approx(144 * 4.9 / (64 * 2.9), abs=1e-3)
    assert values["capacity_ratio"] == 3.0
    # 4x peak FLOPs per watt with Trainium3 at 1,000 W: P = 4 x 1000 x 1.299 / 2.517
    assert values["implied_trn2_watts"] == pytest.approx(4 * 1000 * 1.299 / 2.517, abs=0.5)
    assert values["price_perf_at_estimates"] > 1
    # P5 on demand: $55.04/h for 8 H100; at that price Trainium2's work per dollar is more
    assert values["p5_price_per_chip_hour"] == pytest.approx(55.04 / 8)
    assert values["price_perf_vs_p5"] == pytest.approx(
        values["price_perf_at_estimates"] * 55.04 / 8 / 3.0, rel=1e-3
    )
    # tokens per MW compared at equal latency per user: both meet the target
    assert values["trn2_serve_tokens_per_user"] >= values["per_user"]
    assert values["trn3_serve_tokens_per_user"] >= values["per_user"]
    assert values["tokens_per_mw_ratio"] > 0
    # cost = days x 24 h x chips x (trn1.32xlarge $21.50/h / 16 chips)
    hours = values["trn1_days"] * 24
    assert values["trn1_cost"] == pytest.approx(hours * values["trn1_chips"] * 21.50 / 16, rel=1e-3)
    # 64 H100 at $55.04 per 8
    assert values["gpu_cost"] == pytest.approx(values["gpu_days"] * 24 * 64 * 55.04 / 8, rel=1e-3)
