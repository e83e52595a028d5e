"""Lab 04 (kernel puzzles in NKI): checks on the reference solutions' published figures, with
the counts and bytes derived from the shapes and the hardware rules, not from the model."""

from __future__ import annotations

#: The puzzles have fixed, small shapes: nothing to make smaller.
PARAMS: dict = {}
#: trn1: every load of a kernel on one DMA queue, which sets up one transfer at a time (0.84 us,
#: the trn2 calibration) and with static descriptors streams at most 102 GB/s (profile).
QUEUE_S, QUEUE_BPS = 0.84e-6, 102e9
F32, BF16 = 4, 2


def check(values: dict) -> None:
    p = values["puzzles"]
    assert len(p) == 10
    for name, v in p.items():
        # each reference moves exactly the bytes its limit allows: every tensor once
        assert v["hbm_bytes"] == v["limit_bytes"], name
        if v["limit_instructions"] is not None:
            assert v["instructions"] <= v["limit_instructions"], name
        if v["limit_us"] is not None:
            assert v["latency_us"] <= v["limit_us"] <= 1.3 * v["latency_us"], name
        assert sum(v["counts"].values()) == v["instructions"], name
    blocks = 256 // 128  # the 256-row puzzles go through in two blocks of 128 partitions
    assert p["vector_add"]["hbm_bytes"] == 3 * 256 * 512 * F32
    assert p["vector_add"]["counts"] == {"dma_load": 2 * blocks, "dma_store": blocks,
                                         "tensor_tensor": blocks}  # fmt: skip
    # the bias row is read from HBM once, not once per block or per partition
    assert p["bias"]["hbm_bytes"] == (2 * 256 * 512 + 512) * F32
    assert p["bias"]["counts"]["dma_load"] == blocks + 1
    assert p["row_sums"]["counts"]["reduce"] == blocks
    # 1024 fp32 sums need two PSUM banks of 512: two matmuls by the ones, no GpSimd
    assert p["column_sums"]["counts"]["matmul"] == 1024 // 512
    assert "gpsimd" not in p["column_sums"]["counts"]
    assert p["column_sums"]["hbm_bytes"] == 128 * 1024 * BF16 + 1024 * F32
    assert p["transpose"]["counts"]["transpose"] == blocks
    assert p["softmax"]["counts"]["dma_load"] == 1  # one pass over x
    assert p["rmsnorm"]["counts"]["dma_load"] == blocks + 1  # x's blocks and gamma once
    assert p["linear_silu"]["counts"] == {"dma_load": 3, "matmul": 1, "activation": 1,
                                          "dma_store": 1}  # fmt: skip
    mm = p["double_buffer"]
    assert mm["counts"]["matmul"] == 1024 // 128 and mm["counts"]["dma_load"] == 2 * 8
    # the one load queue carries all 16 transfers, one set-up at a time, and their bytes
    loaded = 1024 * (128 + 512) * BF16
    assert mm["latency_us"] * 1e-6 >= max(16 * QUEUE_S, loaded / QUEUE_BPS)
    att = p["attention"]
    assert att["counts"]["matmul"] == 1 + 512 // 128 and att["counts"]["transpose"] == 512 // 128
    assert att["hbm_bytes"] == (64 * 128 + 2 * 64 * 512) * BF16 + 128 * 64 * F32
