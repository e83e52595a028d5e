"""Lab 03 (the tiled matmul): small parameters and checks on its published values."""

from __future__ import annotations

import pytest

#: Papermill parameters that make the lab small and fast in tests.
PARAMS = {"M": 256, "K": 512, "N": 1024, "BIG": [512, 1024, 1024]}


def _tiled_bytes(m: int, k: int, n: int) -> int:
    # bf16: A re-loaded once per N tile (512 wide), B once per M tile (128 tall), C stored once.
    return 2 * (m * k * -(-n // 512) + k * n * -(-m // 128) + m * n)


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
    assert values["tiled_bytes"] == _tiled_bytes(m, k, n)
    assert values["tiled_bound"] == "memory"
    # a [128 x 256] moving tile: max(256, 64) cycles at trn1's 2.8 GHz Tensor Engine clock (the
    # stationary load hides)
    assert values["matmul_ns"] == pytest.approx(256 / 2.8, abs=0.01)
    lat = values["tile_latency_us"]
    assert min(lat, key=lat.get) == "128x128x512", "the full tile is the fastest"
    assert lat["32x32x64"] > 20 * lat["128x128x512"]
    bm, bk, bn = values["big"]
    prog = values["progression_bytes"]
    c_bytes = 2 * bm * bn
    # bytes each kernel moves (bf16), from its loop structure: A x (times re-loaded) + B x ... + C
    assert prog["tiled"] == _tiled_bytes(bm, bk, bn)
    assert prog["hoisted"] == 2 * (bm * bk + bk * bn * -(-bm // 128)) + c_bytes
    assert prog["blocked_mn"] == 2 * (bm * bk + bk * bn * -(-bm // 256)) + c_bytes
    for v in ("blocked_mnk", "pipelined"):  # A once per 1024-wide N block, B once
        assert prog[v] == 2 * (bm * bk * -(-bn // 1024) + bk * bn) + c_bytes, v
    t = values["progression_latency_us"]
    # on trn1 every load shares one queue: hoisting A takes transfers and bytes off it (the
    # tutorial's trn1 times: 17% less)
    assert t["hoisted"] < 0.9 * t["tiled"]
    # blocking over M and N halves B's transfers and bytes; blocking K too makes them wide
    assert t["hoisted"] > 1.3 * t["blocked_mn"] and t["blocked_mn"] > 1.2 * t["blocked_mnk"]
    assert t["pipelined"] <= t["blocked_mnk"] * 1.001
    u = values["progression_utilisation"]
    # At the lab's default size the gain is ~4.6x. These small parameters do an eighth of the
    # work, so the pipeline's fill and drain (the first loads, which no matmul overlaps, and the
    # last stores) are a larger share of the run and the gain falls to ~2.2x.
    assert u["pipelined"] > 2.0 * u["tiled"]
    assert values["progression_bound"]["tiled"] == "memory"
    # blocked_mnk is compute-bound where its intensity passes trn1's ridge (91.75 TFLOP/s over
    # 272 GB/s = 337 FLOP/B)
    intensity = 2 * bm * bk * bn / prog["blocked_mnk"]
    expect = "compute" if intensity > 128 * 128 * 2 * 2.8e9 / 272e9 else "memory"
    assert values["progression_bound"]["blocked_mnk"] == expect
