"""Lab 02 (inside a NeuronCore): small parameters and checks on its published values."""

from __future__ import annotations

import pytest

#: Papermill parameters that make the lab small and fast in tests.
PARAMS = {"FREE": 512, "MATMUL": [512, 1024, 1024]}


def check(values: dict) -> None:
    # ridge = 128 x 128 PEs x 2 FLOP x Tensor clock / DMA bandwidth (published core figures)
    assert values["ridges"]["trn1"] == pytest.approx(128 * 128 * 2 * 2.8e9 / 272e9, abs=0.01)
    assert values["ridges"]["trn2"] == pytest.approx(128 * 128 * 2 * 2.4e9 / 368e9, abs=0.01)
    assert values["ridges"]["trn3"] == pytest.approx(128 * 128 * 2 * 2.4e9 / 528e9, abs=0.01)
    sbuf = values["sbuf_usable"]
    assert sbuf["trn1"] == 180224 < sbuf["trn2"] < sbuf["trn3"]
    ns = values["one_of_each_ns"]
    # (max(512, 64) + ceil(128 / 4)) cycles at 2.8 GHz
    assert ns["matmul#1"] == pytest.approx(544 / 2.8, abs=0.2)
    assert ns["dma_load#0"] == ns["dma_store#6"] > ns["matmul#1"]
    assert values["independent_us"] < values["chain_us"]
    m, k, n = values["matmul"]
    # pipelined moves A and B once and writes C once (bf16): intensity 2MKN / (2 (MK + KN + MN))
    for c in ("trn1", "trn2", "trn3"):
        assert values["matmul_intensity"][c] == pytest.approx(
            2 * m * k * n / (2 * (m * k + k * n + m * n)), abs=0.01
        )
