"""Shape-dependent GPU kernel rates: GEMM wave quantization and fused attention's own rate.

Expected values are worked out here from the formulas (NVIDIA's Matrix Multiplication
Background guide; the FlashAttention-3 paper's speeds), not read from the code under test.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trnlab import catalog, scale
from trnlab.scale import WorkloadError

H100_SMS = 132
A100_SMS = 108
TILES = ((256, 128), (128, 256))


def _q(m, n, sms):
    """Share of tile slots a GEMM's output fills, best tile of the two (written out here)."""
    best = 0.0
    for tm, tn in TILES:
        tiles = math.ceil(m / tm) * math.ceil(n / tn)
        waves = math.ceil(tiles / sms)
        best = max(best, m * n / (waves * sms * tm * tn))
    return best


def test_the_catalogue_holds_the_sm_counts_and_tiles_the_mechanism_uses():
    assert catalog.chip("h100").cores == H100_SMS
    assert catalog.chip("a100").cores == A100_SMS
    tiles = catalog.table("gpu_gemm")["cta_tiles"]
    assert tuple(tuple(t) for t in tiles.value) == TILES
    assert tiles.extra.get("assumption") is True  # which tile cuBLAS picks is not published


def test_full_waves_keep_the_measured_ceiling():
    # 132 tiles of 256 x 128 = one full wave on H100: 33,792 x 128 is not square, so take
    # 11 x 256 rows and 12 x 128 columns (132 tiles): 2816 x 1536
    assert scale.gemm_wave_efficiency("h100", (2816, 1536, 4096)) == 1.0
    # A100: 108 tiles of 256 x 128 = 9 x 12 tiles: 2304 x 1536
    assert scale.gemm_wave_efficiency("a100", (2304, 1536, 4096)) == 1.0


def test_one_tile_past_a_full_wave_costs_a_second_wave():
    # 133 tiles of 256 x 128 on 132 SMs: two waves, 133 of 264 slots useful (the other tile
    # orientation is no better: 1 x 256 + 1 row of tiles)
    m, n = 133 * 256, 128
    expected = _q(m, n, H100_SMS)
    assert expected == pytest.approx(133 / 264)
    # H100's ceiling (MAMF) was measured at 6144 x 17920: 3360 tiles in 26 waves
    q_ref = 3360 / (26 * H100_SMS)
    assert _q(6144, 17920, H100_SMS) == pytest.approx(q_ref)
    assert scale.gemm_wave_efficiency("h100", (m, n, 8192)) == pytest.approx(expected / q_ref)


def test_the_1792_square_of_the_guide_leaves_a100_sms_idle():
    # The guide's example: 1792 x 1792 in 256 x 128 tiles is 7 x 14 = 98 tiles on 108 SMs.
    q = scale.gemm_wave_efficiency("a100", (1792, 1792, 1792))
    assert q == pytest.approx(98 / 108)  # the A100's ceiling carries no shape: q_ref = 1


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(1, 40_000),
    n=st.integers(1, 40_000),
    k=st.integers(1, 40_000),
)
def test_wave_efficiency_is_a_share_and_ignores_k(m, n, k):
    q = scale.gemm_wave_efficiency("h100", (m, n, k))
    assert 0 < q <= 1
    assert q == scale.gemm_wave_efficiency("h100", (m, n, 1))


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 128), n=st.integers(1, 128))
def test_inside_one_tile_efficiency_falls_with_the_dimension(m, n):
    # a GEMM smaller than one tile: one wave of one tile, q = m n / (SMs x tile): shrinking
    # either side never raises it
    q = scale.gemm_wave_efficiency("a100", (m, n, 64))
    assert q == pytest.approx(m * n / (A100_SMS * 256 * 128))
    if m > 1:
        assert scale.gemm_wave_efficiency("a100", (m - 1, n, 64)) <= q


def test_wave_steps_come_at_multiples_of_the_sm_count():
    # rows of 256 x 128 tiles, one column: efficiency peaks where the tile count is a
    # multiple of 132 and drops just past it
    col = 128
    at = scale.gemm_wave_efficiency("h100", (132 * 256, col, 1024))
    past = scale.gemm_wave_efficiency("h100", (133 * 256, col, 1024))
    assert past < at == 1.0
    # one full wave is held at the ceiling; 133 tiles take 2 waves, over H100's reference
    # share (MAMF's shape: 3360 tiles in 26 waves)
    assert past == pytest.approx((133 / 264) / (3360 / (26 * H100_SMS)))


def test_gemm_rate_in_the_planner_uses_the_wave_share():
    peak = catalog.chip("h100").peak_flops("bf16")
    q_ref = 3360 / (26 * H100_SMS)
    m, n, k = 133 * 256, 128, 8192
    rate, where = scale.achieved_flops_per_chip("h100", "bf16", (m, n, k))
    roof = 2 * m * n * k / (2 * (m * k + k * n + m * n)) * 3.35e12
    assert rate == pytest.approx(min(0.801 * peak * (133 / 264) / q_ref, roof))
    assert "wave quantization" in where or "roofline" in where


def test_neuron_chips_and_gpus_without_an_sm_count_are_refused():
    with pytest.raises(WorkloadError, match="NeuronCore model"):
        scale.gemm_wave_efficiency("trn2", (4096, 4096, 4096))
    with pytest.raises(WorkloadError, match="SM count"):
        scale.gemm_wave_efficiency("h200", (4096, 4096, 4096))


@pytest.mark.parametrize("shape", [(0, 1, 1), (-1, 2, 2), (1.5, 2, 2), (1, 2), "64", [64, 64, 64]])
def test_bad_shapes_are_refused(shape):
    with pytest.raises(WorkloadError, match="GEMM"):
        scale.gemm_wave_efficiency("h100", shape)


# --- fused attention ---------------------------------------------------------------------------

# cuDNN on H100 SXM5, head dim 128, BF16 (FlashAttention-3 paper): forward with a causal mask,
# backward without one
FWD = {512: 315e12, 1024: 410e12, 2048: 484e12, 4096: 518e12, 8192: 529e12, 16384: 539e12}
BWD = {512: 305e12, 1024: 408e12, 2048: 465e12, 4096: 499e12, 8192: 518e12, 16384: 516e12}


@pytest.mark.parametrize("s", sorted(FWD))
def test_published_points_are_returned_as_published(s):
    assert scale.flash_attention_rate("h100", s)[0] == pytest.approx(FWD[s])
    assert scale.flash_attention_rate("h100", s, direction="backward")[0] == pytest.approx(BWD[s])


def test_rates_between_points_are_linear_in_log2_seq_and_held_outside():
    # 3072 = 2^11.585: 58.5% of the way from 2048 to 4096
    w = math.log2(3072) - 11
    expected = FWD[2048] + w * (FWD[4096] - FWD[2048])
    assert scale.flash_attention_rate("h100", 3072)[0] == pytest.approx(expected)
    assert scale.flash_attention_rate("h100", 128)[0] == pytest.approx(FWD[512])
    assert scale.flash_attention_rate("h100", 131072)[0] == pytest.approx(FWD[16384])


def test_fused_attention_time_goes_as_s_squared_times_heads():
    # attention forward time = (4 s^2 d heads / 2 causal) / rate(s): at equal rate (above 16k,
    # held) doubling s is 4x, doubling heads 2x
    def t(s, heads, d=128):
        return (4 * s * s * d * heads / 2) / scale.flash_attention_rate("h100", s, d)[0]

    assert t(32768, 16) / t(16384, 16) == pytest.approx(4.0)
    assert t(16384, 32) / t(16384, 16) == pytest.approx(2.0)


def test_the_planner_reruns_the_attention_forward_at_the_fused_rate():
    # Selective recomputation reruns only the attention core's forward: with FlashAttention on
    # H100 that is half of 4 s^2 d a FLOPs (the causal mask's blocks skipped) per sequence per
    # layer at cuDNN's forward rate, and nothing else in the matmul time.
    m = scale.ModelSpec("one", 1, 2048, 16, 16, 8192, 32000, 4096)
    s = 4096

    def compute(recompute):
        r = scale.plan(m, "p5.48xlarge", scale.Parallelism(dp=8, recompute=recompute),
                       global_batch=8, seq_len=s)  # fmt: skip
        assert r.feasible
        return r.step["compute"]

    work = 4 * m.heads * m.head_dim * s / 2 * s  # one sequence per chip per step
    assert compute("selective") - compute("none") == pytest.approx(work / FWD[4096])


def test_attention_rate_bad_inputs_are_refused():
    with pytest.raises(WorkloadError, match="no published fused-attention"):
        scale.flash_attention_rate("trn2", 4096)
    with pytest.raises(WorkloadError, match="head dimension 128"):
        scale.flash_attention_rate("h100", 4096, head_dim=64)
    with pytest.raises(WorkloadError, match="BF16/FP16"):
        scale.flash_attention_rate("h100", 4096, dtype="fp8")
    with pytest.raises(WorkloadError, match="forward"):
        scale.flash_attention_rate("h100", 4096, direction="sideways")
    for bad in (0, -1, 1.5, float("nan"), None, "4096"):
        with pytest.raises(WorkloadError):
            scale.flash_attention_rate("h100", bad)
    with pytest.raises(WorkloadError, match="chip"):
        scale.flash_attention_rate(None, 4096)
