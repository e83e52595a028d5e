"""Shape-dependent GPU kernel rates: measured GEMM tables, GEMM wave quantization and fused
attention's own rate.

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


def test_gemm_rate_in_the_planner_uses_the_wave_share_on_a_gpu_without_a_measured_table():
    # The A100 has no shape-by-shape table: its 2022-stack rate (230 of 312 TFLOPS, measured at
    # no particular shape, so q_ref = 1) times the share of tile slots. 109 tiles of 256 x 128
    # on 108 SMs take two waves.
    assert "gemm_rates" not in catalog.chip("a100").figures
    m, n, k = 109 * 256, 128, 8192
    rate, where = scale.achieved_flops_per_chip("a100", "bf16", (m, n, k))
    assert rate == pytest.approx(0.737 * 312e12 * 109 / (2 * A100_SMS))
    assert "wave quantization" in where


# --- measured GEMM tables (OpenXLA) ------------------------------------------------------------

GRID_M = (256, 512, 1024, 2048, 4096, 8192, 16384)
GRID_NK = (256, 512, 1024, 2048, 4096)


def _table(name):
    """{(M, N, K): FLOP/s} of a catalogue table, batch 2 and 4 of M = 4096 read as taller M."""
    out = {}
    for b, m, n, k, flops in catalog.table("gpu_gemm")[name].value:
        if b == 1 or m == 4096:
            out[(b * m, n, k)] = flops
    return out


def _roof(m, n, k, bandwidth):
    return 2 * m * n * k / (2 * (m * k + k * n + m * n)) * bandwidth


def test_h100_and_b200_read_their_own_measured_rate_at_every_grid_point():
    for chip, name, bandwidth in (
        ("h100", "hopper_bf16", 3.35e12),
        ("b200", "blackwell_bf16", 8e12),
    ):
        assert catalog.chip(chip).figures["gemm_rates"].value == name
        table = _table(name)
        assert len(table) == 7 * 5 * 5
        for (m, n, k), flops in table.items():
            rate, where = scale.achieved_flops_per_chip(chip, "bf16", (m, n, k))
            assert rate == pytest.approx(min(flops, _roof(m, n, k, bandwidth)), rel=1e-9)
            assert "measured GEMM table" in where or "roofline" in where


def test_the_hopper_table_agrees_with_independent_h100_measurements():
    # cuBLAS through PyTorch at 4096 cubed: ~783 TFLOPS (pyptx-performance); the MAMF shape
    # search's best: 792.1 (ml-engineering-mamf). The table is a third, separate measurement.
    table = _table("hopper_bf16")
    assert table[(4096, 4096, 4096)] == pytest.approx(783e12, rel=0.01)
    assert table[(16384, 4096, 4096)] == pytest.approx(792.1e12, rel=0.01)


def test_between_grid_points_the_rate_is_geometric_in_log2_of_the_dimension():
    table = _table("hopper_bf16")
    m = 2896  # 2048 x 2^0.5, to within 0.02% in log2
    w = (math.log2(m) - 11) / 1
    rate, _ = scale.achieved_flops_per_chip("h100", "bf16", (m, 4096, 4096))
    lo, hi = table[(2048, 4096, 4096)], table[(4096, 4096, 4096)]
    assert rate == pytest.approx(lo ** (1 - w) * hi**w, rel=1e-9)


def test_beyond_the_grid_the_rate_is_held_at_its_edge():
    table = _table("hopper_bf16")
    big, _ = scale.achieved_flops_per_chip("h100", "bf16", (65536, 28672, 8192))
    assert big == pytest.approx(table[(16384, 4096, 4096)], rel=1e-9)
    # below the grid the rate is held at M = 256 (here the table binds, not the roofline:
    # extrapolating the fall from 512 to 256 rows would give less)
    rate, where = scale.achieved_flops_per_chip("h100", "bf16", (200, 4096, 4096))
    assert rate == pytest.approx(table[(256, 4096, 4096)], rel=1e-9)
    assert rate < _roof(200, 4096, 4096, 3.35e12) and "roofline" not in where


def test_no_gemm_is_quicker_than_the_tables_quickest_kernel():
    # The H100 table's quickest kernel is its smallest, 256^3 at 6.722 TFLOPS: about 5 us, the
    # floor the small rows sit on. A 64^3 GEMM takes that long too, not 1/64 of it.
    floor = 2 * 256**3 / 6.722e12
    for m, n, k in ((64, 64, 64), (128, 256, 64), (1, 128, 128)):
        rate, _ = scale.achieved_flops_per_chip("h100", "bf16", (m, n, k))
        roof = _roof(m, n, k, 3.35e12)
        assert rate == pytest.approx(min(2 * m * n * k / floor, roof), rel=1e-9)


def test_the_tables_hold_the_published_rows():
    # Rows of OpenXLA's tables as published (sm_90 and sm_100_B200, BF16): the H100 at batch 2 of
    # 4096^3 (read as 8,192 rows), the B200 at one 4096^3 and at 1024 x 2048 x 4096.
    h100 = scale.achieved_flops_per_chip("h100", "bf16", (8192, 4096, 4096))[0]
    assert h100 == pytest.approx(804.2e12, rel=1e-3)
    b200 = scale.achieved_flops_per_chip("b200", "bf16", (4096, 4096, 4096))[0]
    assert b200 == pytest.approx(1416.87e12, rel=1e-3)
    b200_small = scale.achieved_flops_per_chip("b200", "bf16", (1024, 2048, 4096))[0]
    assert b200_small == pytest.approx(1015e12, rel=2e-3)
    # FP16 runs on the same tensor cores at the same peak and reads the same table
    fp16, where = scale.achieved_flops_per_chip("h100", "fp16", (4096, 4096, 4096))
    assert fp16 == pytest.approx(780.2e12, rel=1e-3) and "measured GEMM table" in where


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=1, max_value=1 << 17),
    st.integers(min_value=1, max_value=1 << 16),
    st.integers(min_value=1, max_value=1 << 16),
)
def test_a_measured_rate_lies_between_the_grid_points_around_it(m, n, k):
    def around(x, grid):
        x = min(max(x, grid[0]), grid[-1])
        below = max(g for g in grid if g <= x)
        above = min(g for g in grid if g >= x)
        return {below, above}

    table = _table("hopper_bf16")
    corners = [table[(a, b, c)] for a in around(m, GRID_M) for b in around(n, GRID_NK)
               for c in around(k, GRID_NK)]  # fmt: skip
    rate, _ = scale.achieved_flops_per_chip("h100", "bf16", (m, n, k))
    roof = _roof(m, n, k, 3.35e12)
    quickest = min(2 * b * mm * nn * kk / f for b, mm, nn, kk, f in
                   catalog.table("gpu_gemm")["hopper_bf16"].value)  # fmt: skip
    floor = 2 * m * n * k / quickest  # the rate of a GEMM that takes the quickest kernel's time
    assert 0 < rate <= catalog.chip("h100").peak_flops("bf16")
    assert rate <= min(roof, floor) * (1 + 1e-9)
    if rate < min(roof, floor) * (1 - 1e-9):
        assert min(corners) * (1 - 1e-9) <= rate <= max(corners) * (1 + 1e-9)


def test_siblings_read_the_measured_chip_share_against_their_own_peak():
    shape = (8192, 4096, 2048)
    h100, _ = scale.achieved_flops_per_chip("h100", "bf16", shape)
    h200, where = scale.achieved_flops_per_chip("h200", "bf16", shape)
    assert h200 == pytest.approx(h100) and "H100" in where
    b200, _ = scale.achieved_flops_per_chip("b200", "bf16", shape)
    gb200, where = scale.achieved_flops_per_chip("gb200", "bf16", shape)
    ratio = catalog.chip("gb200").peak_flops("bf16") / catalog.chip("b200").peak_flops("bf16")
    assert gb200 == pytest.approx(b200 * ratio) and "B200" in where
    assert catalog.chip("h200").figures["gemm_rates"].extra.get("assumption")
    assert catalog.chip("gb200").figures["gemm_rates"].extra.get("assumption")


def test_formats_the_bf16_table_does_not_measure_keep_the_wave_model():
    rate, where = scale.achieved_flops_per_chip("h100", "fp8", (4096, 4096, 4096))
    assert "measured GEMM table" not in where and "wave quantization" in where
    # MAMF's share of the FP8 peak, times 4096^2's slot share over MAMF's shape's (26 waves)
    q_ref = 3360 / (26 * H100_SMS)
    expected = 0.801 * catalog.chip("h100").peak_flops("fp8") * _q(4096, 4096, H100_SMS) / q_ref
    assert rate == pytest.approx(expected, rel=1e-9)


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
