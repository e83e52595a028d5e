"""Stochastic rounding: only the two neighbouring grid values, unbiased, reproducible."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trnlab import formats as F

N = 200_000


def _neighbours(x: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    g = F.grid(fmt)
    hi = np.searchsorted(g, x, side="left")
    up = g[np.minimum(hi, g.size - 1)]
    down = np.where(g[np.minimum(hi, g.size - 1)] == x, x, g[np.maximum(hi - 1, 0)])
    return down, up


def _unbiased(samples: np.ndarray, x: float, down: float, up: float) -> None:
    """Mean within 5 standard errors of x; a biased rounding misses by >= 100 of them here."""
    p = (x - down) / (up - down)
    se = (up - down) * np.sqrt(p * (1 - p) / samples.size)
    assert set(np.unique(samples).tolist()) <= {down, up}
    assert abs(samples.astype(np.float64).mean() - x) < 5 * se, (samples.mean(), x, se)
    # and both neighbours occur about as often as they should
    frac_up = (samples == up).mean()
    assert abs(frac_up - p) < 5 * np.sqrt(p * (1 - p) / samples.size)


@pytest.mark.parametrize(
    ("fmt", "down", "up", "p"),
    [
        ("bf16", 1.0, 1.0078125, 0.3),
        ("bf16", 1.0, 1.0078125, 0.9),
        ("fp16", 1024.0, 1025.0, 0.5),
        ("fp8_e4m3fn", 0.001953125, 0.00390625, 0.25),  # subnormal steps of 2^-9
        ("fp8_e5m2", 40960.0, 49152.0, 0.7),
        ("fp4_e2m1", 4.0, 6.0, 0.1),
        ("tf32", 1.0, 1.0009765625, 0.6),
    ],
)
def test_unbiased_between_neighbours(fmt, down, up, p):
    x = np.float32(down + p * (up - down))
    xs = np.full(N, x, np.float32)
    q = F.quantize(xs, fmt, rounding="stochastic", seed=11)
    _unbiased(q, float(x), down, up)
    # round-to-nearest on the same input is biased: it fails the same check
    rn = F.quantize(xs, fmt)
    with pytest.raises(AssertionError):
        _unbiased(rn, float(x), down, up)


def test_unbiased_negative_values():
    xs = np.full(N, -1.0 - 0.2 * 2**-7, np.float32)
    q = F.quantize(xs, "bf16", rounding="stochastic", seed=5)
    _unbiased(-q, float(-xs[0]), 1.0, 1.0078125)


@pytest.mark.parametrize(
    ("fmt", "down", "up"),
    [
        # amax 1.0 sets shared exponent 0 - emax_elem; 0.3 / X then sits between two elements:
        ("mxfp8_e4m3", 72 / 256, 80 / 256),  # X = 2^-8: 76.8 between 72 and 80 (step 8)
        ("mxfp4", 1.0 / 4, 1.5 / 4),  # X = 2^-2: 1.2 between 1.0 and 1.5
        ("mxint8", 19 / 64, 20 / 64),  # X = 1: 19.2 / 64 between 19 and 20 sixty-fourths
    ],
)
def test_mx_elements_unbiased(fmt, down, up):
    x = np.full((N // 32, 32), 0.3, np.float32)
    x[:, 0] = 1.0
    q = F.quantize(x, fmt, rounding="stochastic", seed=3)
    assert (q[:, 0] == 1.0).all()
    _unbiased(q[:, 1:].ravel(), float(np.float32(0.3)), down, up)


def test_int8_unbiased():
    x = np.full(N, 0.37, np.float32)
    x[0] = 127.0  # scale 1.0
    q = F.quantize(x, "int8", rounding="stochastic", seed=9)
    _unbiased(q[1:], float(np.float32(0.37)), 0.0, 1.0)


@settings(max_examples=40, deadline=None)
@given(
    fmt=st.sampled_from(["bf16", "fp16", "fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fnuz", "fp6_e3m2"]),
    seed=st.integers(0, 2**32),
    x=st.lists(st.floats(-1e4, 1e4, width=32, allow_subnormal=True), min_size=1, max_size=200),
)
def test_only_the_two_neighbours(fmt, seed, x):
    xs = np.asarray(x, np.float32)
    f = F.spec(fmt)
    xs = np.clip(xs, -f.max, f.max)
    q = F.quantize(xs, fmt, rounding="stochastic", seed=seed)
    down, up = _neighbours(xs, fmt)
    assert ((q == down) | (q == up)).all()
    on_grid = down == up
    np.testing.assert_array_equal(q[on_grid], xs[on_grid])


def test_seeded_and_reproducible():
    x = np.random.default_rng(0).standard_normal(10_000).astype(np.float32)
    for fmt in ("bf16", "fp8_e4m3fn", "mxfp4", "int8"):
        a = F.quantize(x, fmt, rounding="stochastic", seed=123)
        b = F.quantize(x, fmt, rounding="stochastic", seed=123)
        c = F.quantize(x, fmt, rounding="stochastic", seed=124)
        np.testing.assert_array_equal(a, b)
        assert (a != c).any()
        enc = F.encode(x, fmt, rounding="stochastic", seed=123)
        np.testing.assert_array_equal(F.decode(enc), a)


def test_fp16_accumulation_demo():
    """1024 + 0.5, 2048 times, in fp16: stuck at 1024 with RNE, about 2048 with stochastic."""
    walkers = 500
    acc_rn = np.full(walkers, 1024.0, np.float32)
    acc_sr = acc_rn.copy()
    for step in range(2048):
        acc_rn = F.quantize(acc_rn + np.float32(0.5), "fp16")
        acc_sr = F.quantize(acc_sr + np.float32(0.5), "fp16", rounding="stochastic", seed=step)
    assert (acc_rn == 1024.0).all()  # 1024.5 ties to even: 1024
    assert abs(acc_sr.mean() - 2048.0) < 10.0
