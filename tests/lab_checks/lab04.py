"""Lab 04 (write a kernel): small parameters and checks on its published values."""

from __future__ import annotations

#: Papermill parameters that make the lab small and fast in tests.
PARAMS = {"M": 256, "K": 512, "N": 1024}


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
    # relu(2x) of linspace(-1, 1): the first values are negative (0), the last ones 2
    assert values["first_kernel_y"] == [0.0, 0.0, 0.0]
    lm, lk, ln = values["large_shape"]
    # hoisting every K tile of an A strip (128 wide) and a B strip (512 wide), bf16
    assert values["hoisted_need_bytes"] == (lk // 128) * (128 + 512) * 2
    assert values["hoisted_need_bytes"] > values["sbuf_usable_bytes"] == 180224
    assert values["large_streamed_peak_sbuf"] <= values["sbuf_usable_bytes"]
    assert values["large_tiled_us"] > 3 * values["large_streamed_us"]
    # the streamed kernel moves A and B once: at least their bytes over trn1's 272 GB/s
    assert values["large_streamed_us"] * 1e-6 >= 2 * (lm * lk + lk * ln) / 272e9
    assert values["fast_reference_utilisation"] >= 0.55 > values["fast_tiled_utilisation"]
    # the tiled kernel waits for one B tile per matmul, and a queue sets up one transfer at a
    # time (trn1: the DMA guide's ~1.3 us): at most 512 cycles at 2.8 GHz per 1.3 us; with
    # single buffers (this reference) each matmul also waits for its loads to land
    assert 0.02 < values["fast_tiled_utilisation"] <= 512 / 2.8e9 / 1.3e-6 * 1.02
