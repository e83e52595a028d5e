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
