"""Lab 08 (scaling out): small parameters and checks on its published values."""

from __future__ import annotations

import math

import pytest

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
    assert values["piped_bubble_share"] == pytest.approx((p - 1) / (m + p - 1), rel=1e-4)
    assert all(0 < mfu <= 1 for mfu in values["mfu"])
    # more chips, more tokens per second
    assert values["tokens_per_s"] == sorted(values["tokens_per_s"])
    assert values["chips"] == sorted(values["chips"])
