"""Lab 05 (write a kernel in NKI): small parameters and checks on its published values."""

from __future__ import annotations

#: Papermill parameters that make the lab small and fast in tests.
PARAMS = {"M": 256, "K": 512, "N": 1024}
#: trn1: every load of a kernel on one DMA queue, which sets up one transfer at a time
#: (0.84 us, the trn2 calibration) and, with static descriptors, streams at most 102 GB/s
#: (profiling tutorial); the Tensor Engine streams a 512-column moving tile in 512 cycles at
#: 2.8 GHz; 272 GB/s over the 16 DMA engines.
QUEUE_S, QUEUE_BPS, MATMUL_S, DMA_BPS = 0.84e-6, 102e9, 512 / 2.8e9, 272e9


def check(values: dict) -> None:
    m, k, n = values["m"], values["k"], values["n"]
    tiles = -(-m // 128) * -(-n // 512)
    matmuls = tiles * -(-k // 128)
    assert values["tiled_counts"] == {
        "dma_load": 2 * matmuls,
        "matmul": matmuls,
        "copy": tiles,
        "dma_store": tiles,
    }
    # bf16: A is read once per N tile, B once per M tile, C written once
    assert values["tiled_a_loaded"] == -(-n // 512) * m * k * 2
    assert values["tiled_b_loaded"] == -(-m // 128) * k * n * 2
    assert values["tiled_c_stored"] == m * n * 2
    # the one load queue carries two transfers per matmul, one set-up at a time, and their bytes
    loaded = values["tiled_a_loaded"] + values["tiled_b_loaded"]
    assert values["tiled_latency_us"] * 1e-6 >= 0.95 * max(
        2 * matmuls * QUEUE_S, loaded / QUEUE_BPS
    )
    # relu(2x) of linspace(-1, 1): the first values are negative (0), the last ones 2
    assert values["first_kernel_y"] == [0.0, 0.0, 0.0]
    lm, lk, ln = values["large_shape"]
    # hoisting every K tile of an A strip (128 wide) and a B strip (512 wide), bf16
    assert values["hoisted_need_bytes"] == (lk // 128) * (128 + 512) * 2
    assert values["hoisted_need_bytes"] > values["sbuf_usable_bytes"] == 180224
    assert values["large_streamed_peak_sbuf"] <= values["sbuf_usable_bytes"]
    assert values["large_tiled_us"] > 3 * values["large_streamed_us"]
    # the streamed kernel moves A and B once: at least their bytes through the one load queue
    assert values["large_streamed_us"] * 1e-6 >= 2 * (lm * lk + lk * ln) / QUEUE_BPS
    fm, fk, fn = values["fast_shape"]
    assert 1.0 >= values["fast_reference_useful"] >= 0.50 > values["fast_tiled_useful"]
    # useful utilisation is the product's FLOPs over the latency at trn1's bf16 peak
    peak = 128 * 128 * 2 * 2.8e9
    assert abs(2 * fm * fk * fn / (values["fast_reference_us"] * 1e-6) / peak
               - values["fast_reference_useful"]) < 2e-3  # fmt: skip
    # the tiled kernel waits for two transfers per matmul on the one queue: at most one
    # matmul's streaming per two set-ups
    assert 0.02 < values["fast_tiled_useful"] <= MATMUL_S / (2 * QUEUE_S) * 1.02
