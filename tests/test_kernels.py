"""trnlab.kernels: every variant equals A @ B within its format's tolerance, and the
progression behaves as on hardware (timing-only for the large shapes)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trnlab import core, formats, kernels

VARIANTS = list(kernels.VARIANTS)
# (format, chip) pairs: each generation with a format its Tensor Engine has.
FORMATS = [
    ("bf16", "trn1"),
    ("fp32", "trn1"),
    ("fp8_e4m3", "trn2"),
    ("bf16", "trn2"),
    ("mxfp8_e4m3", "trn3"),
]


def _check(c, a, b, fmt):
    """|C - A @ B| <= tol * (|A| @ |B|): each input rounded once (relative error <= eps/2 for
    element formats, so a product is off by <= ~eps), fp32 accumulation in PSUM, the result
    rounded once to C's format (bf16 unless the inputs are fp32). MX formats
    scale per block of 32, so small elements of a block lose more: compare with the block's
    largest product instead."""
    exact = a.astype(np.float64) @ b.astype(np.float64)
    spec = formats.spec(fmt)
    scale = np.abs(a) @ np.abs(b)
    k = a.shape[1]
    out_eps = formats.spec("fp32" if fmt == "fp32" else "bf16").epsilon
    tol = 1.05 * spec.epsilon + 0.55 * out_eps + 4 * k * 2.0**-24
    if spec.kind == "mx":
        bound = (
            2 * spec.epsilon * np.abs(a).max(1, keepdims=True) @ np.abs(b).max(0, keepdims=True) * k
        )
    else:
        bound = tol * scale + k * spec.min_normal
    assert np.all(np.abs(c - exact) <= bound), float(np.max(np.abs(c - exact) - bound))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    m=st.integers(1, 300),
    k=st.integers(1, 300),
    n=st.integers(1, 700),
    variant=st.sampled_from(VARIANTS),
    fmt_chip=st.sampled_from(FORMATS),
    seed=st.integers(0, 2**16),
)
def test_every_variant_equals_a_at_b(m, k, n, variant, fmt_chip, seed):
    fmt, chip = fmt_chip
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    r = kernels.matmul(a, b, variant=variant, chip=chip, dtype=fmt)
    assert r.output.shape == (m, n)
    _check(r.output, a, b, fmt)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", [(256, 256, 256), (130, 257, 513), (1, 1, 1), (384, 129, 1000)])
def test_square_and_ragged_shapes(variant, shape):
    m, k, n = shape
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    r = kernels.matmul(a, b, variant=variant, dtype="bf16")
    _check(r.output, a, b, "bf16")


def test_fp32_is_exact_to_fp32_accumulation():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((200, 300)).astype(np.float32)
    b = rng.standard_normal((300, 150)).astype(np.float32)
    r = kernels.matmul(a, b, variant="pipelined", dtype="fp32")
    np.testing.assert_allclose(r.output, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_timing_only_gives_the_same_schedule():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 400)).astype(np.float32)
    b = rng.standard_normal((400, 600)).astype(np.float32)
    full = kernels.matmul(a, b, variant="blocked_mnk")
    fast = kernels.matmul(a.shape, b.shape, variant="blocked_mnk", numerics=False)
    assert fast.output is None and full.output is not None
    assert fast.latency == full.latency and len(fast.program) == len(full.program)


def test_numerics_need_values():
    with pytest.raises(ValueError, match="numerics need values"):
        kernels.matmul((4, 4), (4, 4))
    with pytest.raises(ValueError, match=r"unknown matmul variant .fastest.*tiled, hoisted"):
        kernels.matmul((4, 4), (4, 4), variant="fastest", numerics=False)


# --- the progression, as on hardware ----------------------------------------------------------

LARGE = (2048, 8192, 4096)  # M, K, N, bf16 on trn1


@pytest.fixture(scope="module")
def progression():
    m, k, n = LARGE
    return {
        v: kernels.matmul((m, k), (k, n), variant=v, chip="trn1", numerics=False) for v in VARIANTS
    }


def test_each_variant_faster_than_the_one_before(progression):
    lat = [progression[v].latency for v in VARIANTS]
    assert all(later < earlier for earlier, later in itertools.pairwise(lat)), lat


def _paced(run) -> float:
    """The slower of the run's compute and its loads through trn1's one load queue (every load
    of an NKI kernel on one static queue, streaming at dma_static_queue_bandwidth)."""
    loaded = sum(t["loaded"] for t in core.hbm_traffic(run).values())
    return max(run.compute_bound_s, loaded / run.params.dma_static_queue_bandwidth)


def test_blocked_mnk_is_paced_by_compute_or_trn1s_one_load_queue(progression):
    r = progression["blocked_mnk"]
    # within 15% of that pace: its first loads and last stores overlap nothing
    assert _paced(r) <= r.latency <= 1.15 * _paced(r)


def test_tiled_is_dma_bound(progression):
    r = progression["tiled"]
    assert r.bound == "memory"
    assert r.busy["DMA"] > 0.9 and r.busy["Tensor"] < 0.15
    # the timeline shows it: the Tensor Engine idles most of the run, waiting for loads
    assert r.busy["DMA"] > 6 * r.busy["Tensor"]


def test_latency_never_below_roofline_and_close_when_compute_bound(progression):
    for r in progression.values():
        assert r.latency >= r.roofline_bound
    long_run = progression["pipelined"]
    assert long_run.bound == "compute"
    # the roofline takes the DMA engines' bandwidth; on trn1 one load queue is narrower
    assert long_run.latency <= 1.10 * _paced(long_run)


def test_generations_rank_as_their_peaks():
    m, k, n = 1024, 2048, 2048
    t1 = kernels.matmul((m, k), (k, n), chip="trn1", dtype="fp8_e4m3", numerics=False)
    t2 = kernels.matmul((m, k), (k, n), chip="trn2", dtype="fp8_e4m3", numerics=False)
    assert t2.compute_bound_s == pytest.approx(t1.compute_bound_s * 92e12 / 158e12, rel=0.05)
    assert t2.latency < t1.latency


# --- epilogue and transpose -------------------------------------------------------------------


@pytest.mark.parametrize("act", ["relu", "gelu", "identity"])
def test_fused_bias_activation(act):
    from trnlab.core import ACTIVATIONS

    rng = np.random.default_rng(7)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 150)).astype(np.float32)
    bias = rng.standard_normal(150).astype(np.float32)
    r = kernels.matmul_bias_act(a, b, bias, activation=act, dtype="fp32")
    want = ACTIVATIONS[act](a.astype(np.float64) @ b + bias)
    np.testing.assert_allclose(r.outputs["y"], want, rtol=1e-4, atol=1e-4)
    # the epilogue runs on the Scalar engine, straight from PSUM: no extra Vector pass
    assert r.busy["Scalar"] > 0 and r.busy["Vector"] == 0


@given(r=st.integers(1, 300), c=st.integers(1, 300))
@settings(max_examples=15, deadline=None)
def test_transpose(r, c):
    x = np.random.default_rng(r * c).standard_normal((r, c)).astype(np.float32)
    run = kernels.transpose(x)
    np.testing.assert_array_equal(run.outputs["y"], x.T)
    assert run.busy["Tensor"] > 0


def test_progression_holds_on_trainium2_too():
    m, k, n = LARGE
    lat = [
        kernels.matmul((m, k), (k, n), variant=v, chip="trn2", numerics=False).latency
        for v in VARIANTS
    ]
    assert all(later < earlier for earlier, later in itertools.pairwise(lat)), lat


@pytest.mark.parametrize("variant", ["tiled", "hoisted", "blocked_mn"])
def test_tile_sizes_are_a_choice_and_the_core_enforces_their_limits(variant):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((200, 300)).astype(np.float32)
    b = rng.standard_normal((300, 700)).astype(np.float32)
    small = kernels.matmul(a, b, variant=variant, tile_k=64, tile_m=32, tile_n=256)
    _check(small.output, a, b, "bf16")
    default = kernels.matmul(a, b, variant=variant)
    # smaller tiles, more matmuls: ceil(300/64) x ceil(200/32) x ceil(700/256) against 3 x 2 x 2
    assert small.program.counts()["matmul"] == 5 * 7 * 3
    assert default.program.counts()["matmul"] == 3 * 2 * 2
    with pytest.raises(core.PsumBankOverflowError, match="512"):
        kernels.matmul((256, 256), (256, 2048), variant=variant, numerics=False, tile_n=1024)
    with pytest.raises(core.TileTooLargeError, match="128"):
        kernels.matmul((256, 256), (256, 256), variant=variant, numerics=False, tile_k=256)
