"""Lab 02 (inside a NeuronCore): small parameters and checks on its published values."""

from __future__ import annotations

import pytest

from trnlab import catalog

#: Papermill parameters that make the lab small and fast in tests.
PARAMS = {"FREE": 512, "MATMUL": [512, 1024, 1024]}


def _fig(core: str, name: str) -> float:
    return catalog.figure(f"{core}.{name}").value


def check(values: dict) -> None:
    # ridge = 128 x 128 PEs x 2 FLOP x Tensor clock / DMA bandwidth (published core figures)
    assert values["ridges"]["trn1"] == pytest.approx(128 * 128 * 2 * 2.8e9 / 272e9, abs=0.01)
    assert values["ridges"]["trn2"] == pytest.approx(128 * 128 * 2 * 2.4e9 / 368e9, abs=0.01)
    assert values["ridges"]["trn3"] == pytest.approx(128 * 128 * 2 * 2.4e9 / 528e9, abs=0.01)
    rt = values["ridge_table"]
    # the fastest 8-bit format: fp8 doubles the peak on trn2 (158 vs 79 TFLOPS per core), MXFP8
    # quadruples it on trn3, cFP8 runs at the bf16 rate on trn1
    assert rt["trn2"]["8bit_core"] == pytest.approx(2 * rt["trn2"]["bf16_core"], abs=0.03)
    assert rt["trn3"]["8bit_core"] == pytest.approx(4 * rt["trn3"]["bf16_core"], abs=0.05)
    assert rt["trn1"]["8bit_core"] == pytest.approx(rt["trn1"]["bf16_core"], abs=0.01)
    # trn2: 2.9 TB/s over 8 cores is below one core's 368 GB/s of DMA
    assert rt["trn2"]["bf16_chip"] > rt["trn2"]["bf16_core"]
    sbuf = values["sbuf_usable"]
    assert sbuf["trn1"] == 180224 < sbuf["trn2"] < sbuf["trn3"]
    issue, lat = values["one_of_each_issue_ns"], values["one_of_each_latency_ns"]
    # a full matmul streams max(512, 64) cycles at 2.8 GHz; its result is in PSUM the measured
    # 485-cycle pipeline latency later (perf guide: 219 ns for N = 128)
    assert issue["matmul#1"] == pytest.approx(512 / 2.8, abs=0.2)
    assert lat["matmul#1"] == pytest.approx(
        (512 + _fig("v2", "tensor_latency_cycles")) / 2.8, abs=0.2
    )
    assert issue["dma_load#0"] == issue["dma_store#6"] > issue["matmul#1"]
    assert all(lat[k] >= issue[k] for k in issue)
    assert values["independent_us"] < values["chain_us"]
    m, k, n = values["matmul"]
    # pipelined moves B once, A once per 1024-wide N block, and writes C once (bf16)
    moved = 2 * (m * k * -(-n // 1024) + k * n + m * n)
    for c in ("trn1", "trn2", "trn3"):
        assert values["matmul_intensity"][c] == pytest.approx(2 * m * k * n / moved, abs=0.01)
    # the calibration facts shown in section 5 are within 10% of their measurements
    facts = ("dma_one_engine_trn2", "dma_static_queue_trn1", "scalar_dependent_chain_trn1",
             "vector_tensor_tensor_trn1")  # fmt: skip
    for case in facts:
        assert values["trust"][case] == pytest.approx(1.0, abs=0.10)
    # and the four trn1 matmul kernels within 15% of the tutorial's times
    for v in ("tiled", "hoisted", "blocked_mn", "blocked_mnk"):
        assert values["trust"][f"matmul_{v}_trn1"] == pytest.approx(1.0, abs=0.15)
