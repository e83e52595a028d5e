"""Lab 07 (structured sparsity): small parameters and checks on its published values."""

from __future__ import annotations

import pytest

#: Papermill parameters that make the lab small and fast in tests.
PARAMS = {"SIZE": 64}


def check(values: dict) -> None:
    assert values["patterns"] == 7  # 4:16, 4:12, 4:8, 2:8, 2:4, 1:4, 1:2
    assert values["error_4_16"] < values["error_1_4"]
    assert values["trn2_fp8_sparse_pf"] == pytest.approx(4 * 1.299, rel=1e-3)
    assert values["trn3_mxfp8_error"] < values["trn3_sparse_bf16_error"] / 5
