"""ChipExplorer's view without a browser: controls change the figure; errors keep the view."""

from __future__ import annotations

import pytest

from trnlab import catalog
from trnlab.widgets import ChipExplorer


@pytest.fixture
def explorer():
    return ChipExplorer(items=["trn1", "trn2", "trn3"], metric="peak.bf16")


def test_bars_show_the_model_rows_with_sources_in_hover(explorer):
    bar = explorer.fig.data[0]
    assert list(bar.x) == ["Trainium", "Trainium2", "Trainium3"]
    assert list(bar.y) == [catalog.chip(k).peak_flops("bf16") for k in ("trn1", "trn2", "trn3")]
    assert "source: Trainium2 Architecture" in bar.hovertext[1]
    # Trainium's BF16 rating is disputed (190 docs vs 210 article): a hollow marker shows 210.
    assert 210e12 in list(explorer.fig.data[1].y)
    assert "highest Trainium3" in explorer.summary.value


def test_changing_a_control_redraws(explorer):
    explorer.metric.value = "hbm_bandwidth"
    assert list(explorer.fig.data[0].y) == [820e9, 2.9e12, 4.9e12]
    assert explorer.fig.layout.yaxis.title.text == "HBM bandwidth (B/s)"
    explorer.chart.value = "scatter"
    assert explorer.fig.data[2].visible and not explorer.fig.data[0].visible
    assert explorer.fig.layout.xaxis.type == "log"
    explorer.level.value = "system"
    assert len(explorer.fig.data[2].x) == len(catalog.systems())


def test_a_failing_change_shows_a_message_and_keeps_the_last_view(explorer, monkeypatch):
    before = list(explorer.fig.data[0].y)

    def refuse(**_):
        raise ValueError("not today")

    monkeypatch.setattr(explorer.model, "set", refuse)
    explorer.metric.value = "hbm_bytes"
    assert "not today" in explorer.message.value
    assert list(explorer.fig.data[0].y) == before
    assert explorer.metric.value == "peak.bf16", "the control returns to what is drawn"


def test_code_level_set_validates(explorer):
    with pytest.raises(ValueError, match="not available for chips"):
        explorer.set(metric="price_per_hour")
    assert explorer.model.metric == "peak.bf16"
    explorer.set(items=["h100", "b200"], metric="peak.fp8")
    assert list(explorer.fig.data[0].y) == [1978.9e12, 4500e12]


def test_every_control_has_a_description_or_tooltip(explorer):
    for control in (
        explorer.level,
        explorer.items,
        explorer.metric,
        explorer.x_metric,
        explorer.chart,
    ):
        assert control.description


def test_level_switch_in_scatter_moves_an_axis_and_says_so():
    view = ChipExplorer()
    view.chart.value = "scatter"
    view.metric.value = "power"
    view.x_metric.value = "peak.bf16"
    view.level.value = "system"
    layout = view.fig.layout
    assert layout.xaxis.title.text != layout.yaxis.title.text
    assert "Power per chip is not compared at system level" in view.message.value
    assert (view.metric.value, view.x_metric.value) == (view.model.metric, view.model.x_metric)
    assert view.model.metric != view.model.x_metric


def test_x_axis_moved_onto_the_y_figure_swaps_the_controls():
    view = ChipExplorer(chart="scatter", metric="peak.bf16", x_metric="hbm_bandwidth")
    view.x_metric.value = "peak.bf16"
    assert view.metric.value == "hbm_bandwidth" and "swapped" in view.message.value
    assert view.fig.layout.yaxis.title.text.startswith("HBM bandwidth")
    view.items.value = ("trn2", "trn3")
    assert view.message.value == "", "the notice goes with the next change"


def test_every_figure_pair_in_a_scatter_draws_two_different_axes():
    view = ChipExplorer(chart="scatter")
    for level in ("chip", "system"):
        view.level.value = level
        for _, key in view.model.metrics():
            for control in (view.metric, view.x_metric):
                control.value = key
                layout = view.fig.layout
                assert layout.xaxis.title.text != layout.yaxis.title.text, (level, key)
                assert "&#9888;" not in view.message.value, view.message.value


def test_same_figure_on_both_axes_from_code_is_refused_and_the_view_stays():
    view = ChipExplorer(chart="scatter")
    before = (view.summary_text(), list(view.fig.data[2].x))
    with pytest.raises(ValueError, match="against itself"):
        view.set(metric="hbm_bytes", x_metric="hbm_bytes")
    assert (view.summary_text(), list(view.fig.data[2].x)) == before


def test_system_bars_show_published_totals_as_stars():
    trn1 = catalog.system("trn1.32xlarge")
    view = ChipExplorer(level="system", items=["trn1.32xlarge", "trn2.48xlarge"])
    view.metric.value = "hbm_bandwidth"
    stars = view.fig.data[3]
    assert stars.visible and stars.marker.symbol == "star"
    assert list(stars.x) == ["trn1.32xlarge", "trn2.48xlarge"]
    assert stars.y[0] == trn1.published["hbm_bandwidth"].value
    bar_hover = view.fig.data[0].hovertext[0]
    assert f"chip count ({trn1.chips}) from" in bar_hover and "disagrees" in bar_hover
    assert "Stars mark the totals" in view.summary.value


def test_fp8_systems_chart_marks_the_trn3_mxfp8_total():
    gen1 = catalog.system("trn3-ultraserver-gen1")
    view = ChipExplorer(level="system", items=[gen1.key], metric="peak.fp8")
    stars = view.fig.data[3]
    assert list(stars.y) == [gen1.published["mxfp8_dense_flops"].value]
    assert "MXFP8" in stars.hovertext[0]
    assert "MX formats" in view.summary.value
