"""FormatComparison (model) and FormatExplorer (view), without a browser."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trnlab import catalog, formats
from trnlab.widgets import FormatComparison, FormatExplorer


@pytest.fixture(scope="module")
def model():
    return FormatComparison(
        formats=("bf16", "fp8_e4m3fn", "mxfp4"), distribution="gaussian", size=64
    )


def test_bf16_error_matches_an_independent_cast(model):
    (bf16,) = [r for r in model.rows() if r.fmt == "bf16"]
    x = model.data.astype(np.float64)
    ref = x.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    assert bf16.rms_rel_error == pytest.approx(
        np.linalg.norm(ref - x) / np.linalg.norm(x), rel=1e-6
    )
    # bf16 keeps 8 significant bits: relative RMS error about 2^-9 / sqrt(3)
    assert 0.5e-3 < bf16.rms_rel_error < 3e-3
    assert bf16.bits_per_value == 16 and bf16.clipped == 0 and bf16.non_finite == 0


def test_more_bits_give_less_error_and_throughput_comes_from_the_catalogue(model):
    rows = {r.fmt: r for r in model.rows()}
    assert (
        rows["bf16"].matmul_snr_db > rows["fp8_e4m3fn"].matmul_snr_db > rows["mxfp4"].matmul_snr_db
    )
    assert rows["mxfp4"].bits_per_value == 4.25
    assert rows["mxfp4"].throughput == catalog.chip("trn3").peak_flops("mxfp4")


def test_outlier_channels_hurt_per_tensor_int8_more_than_mx_blocks():
    m = FormatComparison(formats=("int8", "mxint8"), distribution="outlier_channels", size=128)
    rows = {r.fmt: r for r in m.rows()}
    # One scale for the whole tensor flushes most small values; per-32 block scales keep them.
    assert rows["int8"].flushed_to_zero > 0.3
    assert rows["mxint8"].flushed_to_zero < 0.05
    assert rows["mxint8"].rms_rel_error < rows["int8"].rms_rel_error


def test_fp8_overflow_is_clipped_only_when_saturating_and_counted():
    x = np.zeros(64, np.float32)
    x[:4] = [300.0, 500.0, -600.0, 1.0]
    # e4m3 (IEEE-like, max 240) overflows to Inf; the dashboard counts it as Inf/NaN
    q = formats.quantize(x, "fp8_e4m3")
    assert np.isinf(q[:3]).all() and q[3] == 1.0


def test_smaller_mx_blocks_cost_bits_and_buy_accuracy():
    m = FormatComparison(formats=("mxfp4",), distribution="heavy_tailed", size=128, block_size=32)
    r32 = m.rows()[0]
    r8 = m.set(block_size=8).rows()[0]
    assert r8.bits_per_value == 4 + 8 / 8 and r32.bits_per_value == 4 + 8 / 32
    assert r8.rms_rel_error < r32.rms_rel_error


def test_a_format_the_chip_lacks_has_no_throughput_and_says_why():
    m = FormatComparison(formats=("mxfp8_e4m3",), chip="trn2", size=32)
    (r,) = m.rows()
    assert r.throughput is None and "NeuronCore-v4" in r.throughput_note
    assert "no rate on Trainium2" in m.summary()


def test_mx_blocks_take_the_scale_rule_of_the_chosen_chips_quantiser():
    # Trainium3's nisa.quantize_mx makes MXFP8 with a scale twice OCP's; its MXFP4 comes from
    # the host (OCP's rule), and a B200 has no quantiser rule in the catalogue.
    m = FormatComparison(formats=("mxfp8_e4m3", "mxfp4"), distribution="outlier_channels", size=64)
    x = m.data.astype(np.float64)

    def rms(fmt, rule):
        q = formats.quantize(m.data, m._spec(fmt), scale_rule=rule).astype(np.float64)
        return np.linalg.norm(q - x) / np.linalg.norm(x)

    on_trn3 = {r.fmt: r for r in m.rows()}
    assert on_trn3["mxfp8_e4m3"].rms_rel_error == pytest.approx(rms("mxfp8_e4m3", "trainium3"))
    assert on_trn3["mxfp4"].rms_rel_error == pytest.approx(rms("mxfp4", "ocp"))
    assert on_trn3["mxfp8_e4m3"].clipped == 0  # a block's largest value rounds, never clips
    on_b200 = {r.fmt: r for r in m.set(chip="b200").rows()}
    assert on_b200["mxfp8_e4m3"].rms_rel_error == pytest.approx(rms("mxfp8_e4m3", "ocp"))
    assert on_b200["mxfp8_e4m3"].clipped > 0  # OCP's scale leaves 448..512 above E4M3FN's max
    assert rms("mxfp8_e4m3", "ocp") != pytest.approx(rms("mxfp8_e4m3", "trainium3"))
    assert (
        "by OCP MX v1.0's sample rule (the catalogue holds no" in m.summary()
        and "quantize_mx" not in m.summary()
    )
    m.set(chip="trn3")
    assert "mxfp8_e4m3 scaled as Trainium3's quantiser does" in m.summary()
    # The ticks (at the median block scale) move up one binade under the scale twice OCP's
    g3, g_ocp = m.grid("mxfp8_e4m3"), m.set(chip="b200").grid("mxfp8_e4m3")
    inside = (g3 - 1 >= g_ocp.min()) & (g3 - 1 <= g_ocp.max())

    def on(ticks, grid):
        return np.abs(ticks[:, None] - grid[None, :]).min(axis=1) < 1e-9

    assert inside.sum() > 20 and on(g3[inside] - 1, g_ocp).all()
    assert not on(g3[inside], g_ocp).all()


def test_a_format_that_overflows_is_never_ranked_as_accurate_by_its_finite_values():
    # E3M4 tops out at 15.5: on the outlier channels 1% of values become Inf, and the RMS of
    # the rest (0.3%) would make it look seven times better than E4M3 (2.4%).
    m = FormatComparison(formats=("fp8_e3m4", "fp8_e4m3", "bf16"), chip="trn1", size=128)
    rows = {r.fmt: r for r in m.rows()}
    assert rows["fp8_e3m4"].non_finite > 0 and not np.isfinite(rows["fp8_e3m4"].matmul_snr_db)
    text = m.summary()
    assert "on the values that stayed finite" in text and "the matmul overflowed" in text
    assert "Most accurate matmul: bf16" in text
    view = FormatExplorer(formats=("fp8_e3m4", "fp8_e4m3", "bf16"), chip="trn1", size=128)
    assert "not drawn: fp8_e3m4" in view.trade.layout.title.text
    assert [t.visible for t in view.trade.data[:3]] == [False, True, True]
    assert "(finite values)" in view.table.value and "overflowed" in view.table.value


def test_tied_peaks_are_named_together_not_the_first_one():
    trn3 = catalog.chip("trn3")
    assert trn3.peak_flops("mxfp8_e4m3") == trn3.peak_flops("mxfp4")  # the tie in question
    text = FormatComparison(formats=("bf16", "mxfp8_e4m3", "mxfp4"), size=32).summary()
    assert "Fastest on Trainium3: mxfp8_e4m3 and mxfp4" in text
    text = FormatComparison(formats=("fp8_e4m3", "bf16"), chip="trn1", size=32).summary()
    assert "On Trainium every format runs at" in text


def test_grid_ticks_lie_on_the_format_grid(model):
    g = model.grid("fp8_e4m3fn")
    exact = set(np.log2(formats.grid("fp8_e4m3fn")[formats.grid("fp8_e4m3fn") > 0]).tolist())
    assert len(g) > 20 and set(g.tolist()) <= exact
    _, counts = model.histogram()
    assert counts.sum() == np.count_nonzero(model.data)


@pytest.mark.parametrize(
    "bad",
    [
        {"formats": ("fp9",)},
        {"formats": ()},
        {"formats": ("bf16",) * 7},
        {"distribution": "uniform"},
        {"rounding": "up"},
        {"block_size": 12},
        {"chip": "tpu"},
        {"size": 100},
        {"colour": 1},
    ],
)
def test_bad_settings_raise_and_keep_state(model, bad):
    before = (model.formats, model.distribution, model.block_size, model.chip, model.size)
    with pytest.raises(ValueError):
        model.set(**bad)
    assert (model.formats, model.distribution, model.block_size, model.chip, model.size) == before


def test_view_redraws_and_shows_refusals_as_messages():
    e = FormatExplorer(formats=("bf16", "mxfp4"), distribution="gaussian", size=64)
    assert e.hist.data[1].visible and e.hist.data[2].visible and not e.hist.data[3].visible
    before = list(e.trade.data[1].y)
    e.distribution.value = "outlier_channels"
    assert list(e.trade.data[1].y) != before
    e.formats.value = ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "mxfp4", "mxfp6_e2m3", "int8")
    assert "1 to 6 formats" in e.message.value
    assert e.model.formats == ("bf16", "mxfp4")
    assert e.formats.value == ("bf16", "mxfp4"), "the control returns to what is drawn"
    e.chip.value = "trn2"
    assert e.message.value == "" and not e.trade.data[1].visible  # no MXFP4 on Trainium2
    assert "Trainium2" in e.summary.value
