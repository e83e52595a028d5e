"""ChipComparison, the model behind ChipExplorer, tested without a browser."""

from __future__ import annotations

import pytest

from trnlab import catalog
from trnlab.widgets import METRICS, ChipComparison


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
