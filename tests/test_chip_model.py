"""ChipComparison, the model behind ChipExplorer, tested without a browser."""

from __future__ import annotations

import pytest

from trnlab import catalog
from trnlab.fabric import FabricParams
from trnlab.units import si
from trnlab.widgets import METRICS, ChipComparison, SettingError
from trnlab.widgets.stepper_model import MatmulStepperModel


def test_defaults_compare_every_chip_on_bf16():
    m = ChipComparison()
    assert m.items == tuple(c.key for c in catalog.chips())
    rows = {r.key: r for r in m.rows()}
    assert rows["trn2"].value == catalog.chip("trn2").peak_flops("bf16")
    assert rows["trn4"].value is None and "announced" in rows["trn4"].reason
    assert rows["trn4"].name.endswith("(target)")


def test_summary_states_the_extremes_and_the_spread():
    m = ChipComparison(items=["trn1", "trn3"], metric="hbm_bandwidth")
    text = m.summary()
    assert "highest Trainium3 (4.90 TB/s)" in text
    assert "lowest Trainium (820 GB/s)" in text
    assert "6.0x spread" in text
    assert "Other values are on record for Trainium, Trainium3" in text


def test_every_metric_gives_values_or_reasons_at_its_level():
    for level in ChipComparison.LEVELS:
        m = ChipComparison(level=level)
        for _, key in m.metrics():
            rows = m.rows(key)
            assert len(rows) == len(m.items)
            assert any(r.value is not None for r in rows), (level, key)
            for r in rows:
                assert (r.value is None) == bool(r.reason)


def test_system_level_sums_chips():
    m = ChipComparison(level="system", items=["trn2.48xlarge"], metric="peak.fp8")
    (row,) = m.rows()
    assert row.value == pytest.approx(16 * 1299e12)
    assert row.figure.computed


def test_bad_settings_raise_and_leave_state_unchanged():
    m = ChipComparison(items=["trn2", "trn3"], metric="peak.fp8")
    before = (m.level, m.items, m.metric, m.chart)
    for bad in (
        {"metric": "chips"},  # a system-level metric on chips
        {"items": ["trn2", "trn9"]},
        {"chart": "pie"},
        {"level": "rack"},
        {"colour": "red"},
    ):
        with pytest.raises(ValueError):
            m.set(**bad)
        assert (m.level, m.items, m.metric, m.chart) == before


def test_switching_level_resets_items_and_keeps_a_valid_metric():
    m = ChipComparison(metric="sbuf_bytes")
    m.set(level="system", items=None)
    assert m.items == tuple(s.key for s in catalog.systems())
    assert m.metric in [k for _, k in m.metrics()]


def test_sources_table_shows_alternatives_of_disputed_figures():
    m = ChipComparison(items=["trn1"], metric="hbm_bandwidth")
    (entry,) = m.sources_table()
    assert entry["value"] == "820 GB/s"
    assert "glossary 1.60 TB/s" in entry["note"]
    assert "ndoc-trn1-chip" in entry["sources"]


def test_ridge_point_is_peak_over_bandwidth():
    m = ChipComparison(items=["trn2"], metric="intensity.bf16")
    (row,) = m.rows()
    assert row.value == pytest.approx(667e12 / 2.9e12)
    assert METRICS["intensity.bf16"].unit == "FLOP/B"


# --- Published system totals (review 1f) -------------------------------------------------------
def _metric_of_published(key: str) -> str | None:
    """The explorer metric a published total belongs to, read from its catalogue key."""
    if key in ("hbm_bytes", "hbm_bandwidth", "network"):
        return key
    fmt, _, kind = key.rpartition("_flops")[0].partition("_")
    return f"{'peak' if kind == 'dense' else 'peak_sparse'}.{fmt}" if kind else None


def test_every_published_system_total_is_shown_beside_its_row():
    shown = 0
    for s in catalog.systems():
        for c in s.compare():
            metric = _metric_of_published(c.figure)
            if metric not in METRICS:
                continue  # "cores": no figure of the explorer
            (row,) = ChipComparison(level="system", items=[s.key], metric=metric).rows()
            marks = [o for o in row.others if o.published and o.value == c.published]
            assert len(marks) == 1, (s.key, c.figure)
            (mark,) = marks
            assert mark.agrees == c.agrees and mark.stated == c.stated
            assert [x.key for x in mark.sources] == list(s.published[c.figure].source_keys)
            shown += 1
    assert shown >= 15


def test_trn1_32xlarge_hbm_bandwidth_shows_the_published_disagreement():
    s = catalog.system("trn1.32xlarge")
    published = s.published["hbm_bandwidth"]
    computed = s.chips * catalog.chip("trn1").hbm_bandwidth
    m = ChipComparison(
        level="system", items=["trn1.32xlarge", "trn2.48xlarge"], metric="hbm_bandwidth"
    )
    row = m.rows()[0]
    assert row.value == pytest.approx(computed)
    (mark,) = row.published
    assert mark.value == published.value and mark.agrees is False
    text = m.summary()
    assert f"'{published.extra['stated']}' against {si(computed, 'B/s')}" in text
    assert "trn2.48xlarge agree" in text  # 46.4 TB/s = 16 x 2.9 TB/s
    entry = m.sources_table()[0]
    assert f"Published total '{published.extra['stated']}' [seed-000], disagrees" in entry["note"]


def test_a_computed_total_cites_each_source_for_what_it_gives():
    for s in catalog.systems():
        m = ChipComparison(level="system", items=[s.key], metric="hbm_bandwidth")
        (row,) = m.rows()
        roles = dict(row.cited)
        assert "" not in roles, f"{s.key}: a source listed as stating a total it only feeds"
        chips = next(v for k, v in roles.items() if k.startswith(f"chip count ({s.chips})"))
        assert {x.key for x in chips} == set(s.figures["chips"].source_keys)
        per_chip = next(v for k, v in roles.items() if k.startswith("per chip"))
        assert {x.key for x in per_chip} == set(s.chip.figure("hbm_bandwidth").source_keys)
        (entry,) = m.sources_table()
        for group in entry["sources"].split(" | "):
            assert group.startswith(("chip count", "per chip")), group


def test_chip_level_sources_state_the_value_themselves():
    (row,) = ChipComparison(items=["h100"], metric="hbm_bandwidth").rows()
    assert row.cited == (("", catalog.chip("h100").figure("hbm_bandwidth").sources),)


# --- FP8, MXFP8 and Trainium3 (review 1f) -------------------------------------------------------
def test_mx_metrics_exist_at_both_levels_and_fp8_on_trn3_keeps_the_bf16_rate():
    trn3 = catalog.chip("trn3")
    for key in ("peak.mxfp8", "peak.mxfp4"):
        assert set(METRICS[key].levels) == {"chip", "system"}
    rows = {r.key: r for r in ChipComparison(items=["trn2", "trn3"], metric="peak.mxfp8").rows()}
    assert rows["trn3"].value == trn3.peak_flops("mxfp8")
    assert rows["trn2"].value is None and "MX" in rows["trn2"].reason
    (fp8,) = ChipComparison(items=["trn3"], metric="peak.fp8").rows()
    assert fp8.value == trn3.peak_flops("fp8") == trn3.peak_flops("bf16")


def test_fp8_text_says_the_fast_trn3_rate_is_for_mx_formats():
    trn3 = catalog.chip("trn3")
    rate = trn3.core.tensor_rate
    text = ChipComparison(items=["trn2", "trn3"], metric="peak.fp8").summary()
    assert f"On Trainium3 plain FP8 runs at {si(trn3.peak_flops('fp8'), 'FLOP/s')}" in text
    assert f"{si(trn3.peak_flops('mxfp8'), 'FLOP/s')} per chip" in text
    assert f"{rate['mxfp8'].value / rate['bf16'].value:g}x BF16 per NeuronCore" in text
    assert "MX formats" in text and "Dense MXFP8 peak" in text
    assert "Trainium2" not in text.split("spread.")[1].split("Other values")[0]  # no MX there


def test_trn3_systems_fp8_chart_marks_the_published_mxfp8_total():
    gen1, trn2us = catalog.system("trn3-ultraserver-gen1"), catalog.system("trn2-ultraserver")
    m = ChipComparison(level="system", items=[trn2us.key, gen1.key], metric="peak.fp8")
    rows = {r.key: r for r in m.rows()}
    assert rows[gen1.key].value == pytest.approx(gen1.chips * gen1.chip.peak_flops("fp8"))
    (mark,) = rows[gen1.key].published
    assert mark.value == gen1.published["mxfp8_dense_flops"].value
    assert "MXFP8" in mark.label and mark.agrees is None
    mx_total = gen1.chips * gen1.chip.peak_flops("mxfp8")
    text = m.summary()
    assert f"Trn3 UltraServer Gen1 {si(mx_total, 'FLOP/s')}" in text
    assert "are MX totals, not plain FP8" in text
    # On the MXFP8 chart the Trn3 UltraServer's bar is its MX rate, above the Trn2 one's FP8.
    m.set(metric="peak.mxfp8", items=[gen1.key])
    (row,) = m.rows()
    assert row.value == pytest.approx(mx_total)
    assert row.value > trn2us.peak_flops("fp8")
    assert row.published[0].agrees is True


# --- Scatter axes never equal (review 2e) -----------------------------------------------------
def _scatter_axes(text: str) -> tuple[str, str]:
    y, x = text.split("Scatter: ")[1].rsplit(", ", 1)[0].split(" against ")
    return y, x


def test_switching_level_never_leaves_a_scatter_of_a_figure_against_itself():
    m = ChipComparison(metric="power", x_metric="peak.bf16", chart="scatter")
    m.set(level="system", items=None)
    assert m.metric != m.x_metric
    assert "Power per chip is not compared at system level" in m.notice
    y, x = _scatter_axes(m.summary())
    assert y != x


def test_every_path_to_a_scatter_keeps_the_axes_apart():
    chip_metrics = [k for _, k in ChipComparison().metrics("chip")]
    for a in chip_metrics:
        for b in chip_metrics:
            m = ChipComparison(metric=a, x_metric=b)  # bars: x is unused, may equal y
            m.set(chart="scatter")
            assert m.metric == a and m.metric != m.x_metric, (a, b)
            assert (a == b) == bool(m.notice), (a, b, m.notice)
            m.set(level="system", items=None)
            assert m.metric != m.x_metric, (a, b)
            m.set(level="chip", items=None)
            m.set(metric=b)
            assert m.metric == b != m.x_metric, (a, b)


def test_moving_the_x_axis_onto_the_y_figure_swaps_the_axes():
    m = ChipComparison(metric="peak.bf16", x_metric="hbm_bandwidth", chart="scatter")
    m.set(x_metric="peak.bf16")
    assert (m.metric, m.x_metric) == ("hbm_bandwidth", "peak.bf16")
    assert "swapped" in m.notice
    m.set(items=["trn2"])
    assert m.notice == "", "a notice is about the last change only"


def test_asking_for_the_same_figure_on_both_axes_is_refused():
    m = ChipComparison(metric="peak.bf16", chart="scatter")
    before = (m.level, m.items, m.metric, m.x_metric, m.chart)
    with pytest.raises(SettingError, match="against itself"):
        m.set(metric="hbm_bytes", x_metric="HBM_bytes")
    assert (m.level, m.items, m.metric, m.x_metric, m.chart) == before


# --- Ridge, HBM units and link directions (review 3) -------------------------------------------
def test_ridge_text_names_its_roofline_and_the_matmul_steppers():
    chips = ["trn1", "trn2", "trn3"]
    m = ChipComparison(items=chips, metric="intensity.bf16")
    assert "HBM bandwidth" in METRICS["intensity.bf16"].label
    text = m.summary()
    assert "whole chip's roofline: its dense BF16 peak over its HBM bandwidth" in text
    for key in chips:  # the figure the MatmulStepper itself shows for a BF16 kernel
        run = MatmulStepperModel(chip=key, m=128, k=128, n=512, dtype="bf16").run
        ridge = run.roofline()["ridge_intensity"]
        assert f"{catalog.chip(key).name} {ridge:,.0f}" in text
    assert "per NeuronCore: core peak / the core's DMA bandwidth" in text


def test_hbm_capacity_shows_decimal_and_binary_units():
    h100, trn2 = catalog.chip("h100").hbm_bytes, catalog.chip("trn2").hbm_bytes
    m = ChipComparison(items=["h100", "trn2"], metric="hbm_bytes")
    rows = {r.key: r.text for r in m.rows()}
    assert rows["h100"] == f"{si(h100, 'B', binary_bytes=False)} ({si(h100, 'B')})"
    assert rows["trn2"] == f"{si(trn2, 'B')} ({si(trn2, 'B', binary_bytes=False)})"
    assert "decimal GB" in m.summary()


def test_link_bandwidth_text_gives_the_direction_caveat():
    both = FabricParams().counts_both_directions
    text = ChipComparison(items=["trn2", "h100", "a100"], metric="link_bandwidth").summary()
    assert "NVIDIA counts NVLink bandwidth over both directions" in text
    assert catalog.chip("a100").figure("interconnect_bandwidth").note in text
    assert "do not say whether their NeuronLink figures do" in text
    assert f"FabricParams(counts_both_directions={both})" in text
