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
    # (max(512, 64) + ceil(128 / 4)) cycles at trn1's 2.8 GHz Tensor Engine clock
    assert values["matmul_ns"] == pytest.approx(544 / 2.8, abs=0.01)
    lat = values["tile_latency_us"]
    assert min(lat, key=lat.get) == "128x128x512", "the full tile is the fastest"
    assert lat["32x32x64"] > 20 * lat["128x128x512"]
    bm, bk, bn = values["big"]
    prog = values["progression_bytes"]
    assert prog["tiled"] == _tiled_bytes(bm, bk, bn)
    minimum = 2 * (bm * bk + bk * bn + bm * bn)
    for v in ("blocked_mn", "blocked_mnk", "pipelined"):
        assert prog[v] == minimum, v
    t = values["progression_latency_us"]
    assert t["tiled"] > t["hoisted"] > max(t["blocked_mn"], t["blocked_mnk"], t["pipelined"])
    u = values["progression_utilisation"]
    assert u["pipelined"] > 3 * u["tiled"]
    assert values["progression_bound"]["tiled"] == "memory"
