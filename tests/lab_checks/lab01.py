"""Lab 01 (the Trainium family): small parameters and checks on its published values."""

from __future__ import annotations

import pytest

#: Papermill parameters that make the lab small and fast in tests.
PARAMS = {"CHIPS": ["trn1", "trn2", "trn3"], "COMPARE_WITH": ["h100"]}


def check(values: dict) -> None:
    # 667 TFLOPS / (8 cores x 128 x 128 PEs x 2 FLOP) = 2.544 GHz
    assert values["trn2_clock_implied_ghz"] == pytest.approx(
        667e12 / (8 * 128 * 128 * 2) / 1e9, abs=1e-4
    )
    assert abs(values["trn2_48xlarge_fp8_pf"] - 20.8) <= 0.05
    assert abs(values["trn3_gen2_mxfp8_pf"] - 362) <= 1
    # Every printed total agrees except trn1.32xlarge's 9.8 TB/s.
    assert values["totals_compared"] - values["totals_agreeing"] == 1
