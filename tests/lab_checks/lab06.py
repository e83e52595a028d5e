"""Lab 06 (numeric formats): small parameters and checks on its published values."""

from __future__ import annotations

import pytest

#: Papermill parameters that make the lab small and fast in tests.
PARAMS = {"SIZE": 64, "N_ADD": 512, "STEPS": 300}


def check(values: dict) -> None:
    assert values["e5m2_max"] == 57344.0  # 1.75 x 2^15
    assert values["mx_scale_for_100"] == 0.25  # 2^(floor(log2 100) - 8)
    # FP16 near 1024 has a step of 1: 1024.5 ties to even 1024, every time.
    assert values["fp16_rne_final"] == 1024.0
    assert values["fp16_sr_mean_final"] == pytest.approx(1024 + 0.5 * values["n_add"], rel=0.03)
    # BF16 near 1.0 has a step of 2^-7: +0.001 is lost with round-to-nearest.
    assert values["bf16_rne_weight"] == 1.0
    assert values["bf16_sr_weight_mean"] == pytest.approx(1 + 1e-3 * values["steps"], rel=0.05)
    assert values["snr_bf16_db"] > 45 and 10 < values["snr_mxfp4_db"] < 20
